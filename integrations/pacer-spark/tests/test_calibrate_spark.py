"""``pacer calibrate --runtime spark`` measures what a workload's batches cost Spark, and a session starts from it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pacer.engine_profile import load

pytestmark = [pytest.mark.spark, pytest.mark.serial]  # measures Spark's timing: alone


def test_pacer_calibrate_measures_spark_and_a_session_starts_its_workload_from_the_profile(
        spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    out = tmp_path / "lr2-spark.json"
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # calibrate is pacer-lmstream's command
    env |= {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    command = [str(Path(sys.executable).with_name("pacer")), "calibrate", "--runtime", "spark", "--workload", "lr2",
               "--rate", "2000", "--intervals", "1", "2", "--batches", "2", "--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert done.returncode == 0, f"pacer calibrate failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert f"--engine-profile {out}" in done.stdout
    assert "executor start-up: not measured (local[2]: local mode starts no executor)" in done.stderr
    assert "Exception in thread" not in done.stderr  # each step's query stopped between batches, not inside an ask

    profile = load(out)
    assert (profile.runtime, profile.workload, profile.partitions, profile.slots) == ("spark", "lr2", 2, 2)
    kinds = Counter(p.kind for p in profile.points)
    assert kinds["tiny"] >= 3 and kinds["large"] >= 4, kinds
    large = sorted({round(p.rows, -3) for p in profile.points if p.kind == "large"})
    assert large == [2000, 4000], large  # 2 000 rows/s under 1 s and 2 s triggers
    assert all(p.rows <= 60 for p in profile.points if p.kind == "tiny")  # one or two 20-row datasets
    assert all(p.busy_core_s is not None and p.busy_core_s > 0 for p in profile.points)  # by Spark's batch id
    assert profile.fixed_s > 0 and 0 < profile.fixed_core_s
    assert profile.no_data_s is not None and profile.no_data_s > 0  # lr2 is watermarked: Spark ran no-data batches
    assert profile.executor_startup_s is None and profile.largest_bytes == max(p.bytes for p in profile.points)
    assert [p.kind for p in profile.points][-kinds["tiny"]:] == ["tiny"] * kinds["tiny"]  # on a warmed JVM, last
    # what the simulator reads (pacer run --runtime sim --calibrated): the tasks' share of the fixed part, measured;
    # warm-up and state reload not measurable in local mode, and the profile says so
    assert profile.fixed_task_share == pytest.approx(profile.fixed_core_s / (2 * profile.fixed_s))
    assert profile.executor_warmup_s is None and profile.state_reload_s is None
    assert "local mode adds and removes no executor" in profile.not_measured["state_reload_s"]

    # the conf a user sets: every lr2 query of the session starts from the profile; another workload does not
    spark.conf.set("spark.pacer.engineProfile", str(out))
    try:
        session = pacer_spark.attach(spark, paced=False, checkpoint_root=str(tmp_path / "ck"))
    finally:
        spark.conf.unset("spark.pacer.engineProfile")
    try:
        session.register_query("lr2", workload="lr2", deadline=10.0)
        session.register_query("cm1", workload="cm1", deadline=10.0)
        measured = session.controller.query("lr2")
        assert measured.engine_profile == profile and measured.service_time["prior_batches"] > 0
        assert measured.service_time["fixed_ms"] == pytest.approx(1000.0 * profile.fixed_s, rel=0.05)
        assert session.controller.query("cm1").engine_profile is None
    finally:
        session.stop()
