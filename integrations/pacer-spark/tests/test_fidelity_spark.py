"""The calibrated simulator predicts what Spark did (issue 45, item 2; ``pacer bench fidelity`` is the full version):
LR2 is calibrated on the suite's session (a short calibration after a warm-up stream), then run on Spark under binary
traffic at another rate and trigger than the calibration's, then simulated with the profile on the same arrivals;
the batches, the rows late and the busy core-seconds are predicted within the bounds
(:data:`pacer_bench.fidelity.BOUNDS`). One short comparison, about 70 s on 2 cores. The calibration's large batches
are of two sizes (2 s and 5 s at 2000 rows/s: 4000 and 10000 rows; the run's are 1200-6000): fitted on one, the
per-row cost came out 0.036-0.097 core-ms (six runs) and the busy core-s 0.98-1.36x Spark's (seven; failed on CI);
fitted on both, 0.87-1.05x (four runs here; the per-row cost 0.011-0.032 core-ms, Spark's own busy 2.26-2.85 core-s)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pacer import QueryRun, RunConfig
from pacer.plugins import get_plugin_manager

pytestmark = [pytest.mark.spark, pytest.mark.serial]  # measures Spark's timing: alone


def test_the_calibrated_simulator_predicts_a_short_spark_run_within_the_bounds(spark: Any, tmp_path: Path) -> None:
    from pacer_bench.fidelity import BOUNDS, compare, predict
    from pacer_bench.runtime_traits import on_spark
    from pacer_bench.tables import record_latencies
    from pacer_spark.run.calibrate import measure_profile
    from pacer_spark.run.spark_runtime import run_configuration, stream_warm_up

    query = QueryRun("lr2", traffic="binary", rate=1200.0, traffic_params={"min": 400.0, "max": 2000.0, "period": 12.0},
                     admission="static", admission_params={"interval": 3.0}, deadline=10.0)
    config = RunConfig((query,), duration=18.0, seed=11, fallback=True)
    pm = get_plugin_manager()
    # as pacer bench and pacer calibrate do on a fresh session: a cold JVM's first stateful batches cost many times a
    # later one's (measured here, calibrated cold: 1.0 s fixed and 3.2 s more for a query's first batch; 2.2x busy)
    run_configuration(spark, stream_warm_up(config, str(tmp_path / "warm-up")), pm, label="warm-up")
    profile = measure_profile(spark, "lr2", rate=2000.0, intervals=[2.0, 5.0], repeats=2, tiny_batches=3,
                              checkpoint_root=str(tmp_path / "calibration"))
    path = str(profile.write(tmp_path / "lr2-spark.json"))
    run = on_spark(config, config).with_options("spark", checkpoint=str(tmp_path / "run"), drain_timeout=60.0)
    result = run_configuration(spark, run, pm)
    assert result.status == 0, result.notes
    record_latencies(result.report, result.controller)

    [row] = compare(result.report, predict(result.report, [path], plugin_manager=pm))
    figures = f"{profile.describe()}; " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                                                   for k, v in row.items())
    assert row["spark_batches"] >= 5, figures  # a 3 s trigger over 18 s of traffic
    assert abs(row["batches_ratio"] - 1.0) <= BOUNDS["batches"], figures
    assert abs(row["late_points"]) <= BOUNDS["late_points"], figures
    assert abs(row["busy_ratio"] - 1.0) <= BOUNDS["busy_core_s"], figures
