"""``pacer bench fidelity``'s comparison: predicted beside measured per query, judged against the bounds (the Spark
side is tested on Spark, integrations/pacer-spark/tests/test_fidelity_spark.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from pacer import QueryRun, RunConfig, get_plugin_manager
from pacer.engine_profile import EngineProfile
from pacer_bench.fidelity import BOUNDS, compare, predict, rewrite, write_fidelity
from pacer_bench.outputs import run_settings
from pacer_bench.runtime_traits import FIDELITY_MEASURED
from pacer_bench.tables import BenchRun, record_latencies

ROOT = Path(__file__).resolve().parents[3]
PROFILE = EngineProfile(runtime="spark", workload="lr2", partitions=2, slots=2, fixed_s=0.4, fixed_core_s=0.2,
                        engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=1e-4, largest_bytes=10**6,
                        no_data_s=0.3, no_data_core_s=0.1)


def _measured(path: str) -> dict:  # type: ignore[type-arg]
    """A run to stand for Spark's: the simulator's with the same profile (so the prediction must match it)."""
    pm = get_plugin_manager()
    run = RunConfig((QueryRun("lr2", traffic="binary", rate=1500.0, admission="static",
                              admission_params={"interval": 4.0}, deadline=3.0),), duration=40.0, seed=3,
                    options={"sim": {"calibrated": [path]}})
    result = pm.find_runtime("sim").run(run, plugin_manager=pm)
    record_latencies(result.report, result.controller)
    return result.report


def test_the_same_run_predicted_is_within_every_bound_and_a_dearer_one_is_not(tmp_path: Path) -> None:
    path = str(PROFILE.write(tmp_path / "lr2.json"))
    measured = _measured(path)
    [row] = compare(measured, predict(measured, [path]), "lr2 binary")
    assert (row["batches_ratio"], row["busy_ratio"], row["late_points"]) == (1.0, 1.0, 0.0)
    assert row["batches_ok"] and row["late_ok"] and row["busy_ok"] and row["spark_late_pct"] > 0  # 3 s < 4 s ticks
    dearer = copy.deepcopy(measured)
    dearer["queries"]["lr2"]["cost"]["busy_core_s"] /= 1 - BOUNDS["busy_core_s"] - 0.01  # predicted 0.79x
    dearer["queries"]["lr2"]["batches"] = round(dearer["queries"]["lr2"]["batches"] * 1.2)
    [off] = compare(dearer, predict(measured, [path]))
    assert not off["busy_ok"] and not off["batches_ok"] and off["late_ok"]
    assert off["busy_ratio"] == pytest.approx(0.79, rel=1e-3)


def test_the_outputs_keep_both_sides_and_rewrite_predicts_them_again(tmp_path: Path) -> None:
    path = str(PROFILE.write(tmp_path / "lr2.json"))
    run = BenchRun("lr2 binary", _measured(path), baseline=True)
    paths = write_fidelity(tmp_path / "out", [run], [path], summary="test")
    text = paths["md"].read_text()
    assert "1 of 1 queries within all three" in text and f"--calibrated {path}" in text
    again = rewrite(tmp_path / "out")
    assert again["md"].read_text() == text


def test_every_simulated_figure_says_how_well_the_simulator_predicted_spark_where_measured() -> None:
    """:data:`FIDELITY_MEASURED` is the count over the committed fidelity runs, and a simulated run's settings say it."""
    rows = [row for path in sorted((ROOT / "bench-results").glob("fidelity-spark*/fidelity.json"))
            for row in json.loads(path.read_text())["fidelity"]["rows"]]
    within = sum(bool(r["batches_ok"] and r["late_ok"] and r["busy_ok"]) for r in rows)
    assert FIDELITY_MEASURED == (within, len(rows))
    settings = dict(run_settings([BenchRun("x", {"queries": {}, "runtime": "sim", "cores": 2})], []))
    assert f"in {within} of {len(rows)} query runs measured on Spark" in settings["runtime"]
