"""``pacer run``: bad arguments fail before Spark starts; a short real run writes a pacer.report/1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pacer.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--workload", "lr9"], "unknown workload 'lr9'"),
        (["--workload", "lr2", "--deadline", "0"], "--deadline must be > 0"),
        (["--workload", "lr2", "--deadline=-3s"], "--deadline must be > 0"),
        (["--workload", "lr2", "--deadline", "soon"], "10s, 500ms"),
        (["--workload", "lr2", "--admission", "no-such"], "unknown admission strategy 'no-such'"),
        (["--workload", "lr2", "--scheduler", "no-such"], "pacer strategies"),
        (["--workload", "lr2", "--input", "/no/such/dir"], "is not a directory"),
        (["--workload", "lr2", "--report", "/no/such/dir/out.json"], "does not exist"),
        (["--workload", "lr2", "--traffic", "zigzag"], "unknown traffic"),
        (["--workload", "lr2", "--param", "admission.nope=1"], "has no parameter 'nope'"),
        (["--workload", "lr2", "--rapids-jar", "/no/rapids.jar"], "Maven"),
    ],
)
def test_bad_arguments_fail_before_spark_starts(argv: list[str], message: str, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    monkeypatch.setenv("PACER_PLUGINS", "spark")
    active_before = SparkContext._active_spark_context
    assert main(["run", *argv]) == 2
    assert message in capsys.readouterr().err
    assert SparkContext._active_spark_context is active_before  # no Spark was started for a bad argument


@pytest.mark.spark
def test_pacer_run_writes_a_spark_report(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PACER_PLUGINS": "spark"}
    proc = subprocess.run(
        [sys.executable, "-m", "pacer.cli", "run", "--workload", "lr3", "--workload", "lr3", "--traffic", "wave",
         "--rate", "300", "--duration", "4", "--deadline", "10s", "--progress-every", "1", "--report", str(out)],
        capture_output=True, text=True, timeout=240, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "batches=" in proc.stdout and "p95=" in proc.stdout and "misses=" in proc.stdout  # live progress
    assert "admission poll p99" in proc.stdout
    report = json.loads(out.read_text())
    assert report["schema"] == "pacer.report/1" and report["runtime"] == "spark"
    assert set(report["queries"]) == {"lr3", "lr3-2"}
    assert all(q["datasets_in"] == q["datasets_processed"] == 4 for q in report["queries"].values())
    assert report["overhead"]["admission_poll_us_p99"] is not None
