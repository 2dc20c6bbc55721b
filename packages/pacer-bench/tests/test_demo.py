"""``pacer demo``: arguments checked before Spark starts, and the comparison table it prints."""

from __future__ import annotations

from typing import Any

import pytest

from pacer.cli import main
from pacer_bench.demo import closing_line, comparison


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--admission", "no-such"], "unknown admission strategy 'no-such'"),
        (["--workload", "lr9"], "unknown workload 'lr9'"),
        (["--deadline", "0"], "--deadline must be > 0"),
        (["--trigger", "never"], "--trigger"),
        (["--duration", "0"], "--duration must be > 0 seconds"),
    ],
)
def test_bad_demo_arguments_fail_before_spark_starts(argv: list[str], message: str, tmp_path: Any,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    monkeypatch.setenv("PACER_PLUGINS", "spark,bench")  # the spark runtime, and pacer-bench for its demo command
    active_before = SparkContext._active_spark_context
    assert main(["demo", "--out", str(tmp_path / "d"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert SparkContext._active_spark_context is active_before
    assert not (tmp_path / "d").exists()


def _report(batches: int, late: float, busy: float, p99: float = 9000.0) -> dict[str, Any]:
    return {"queries": {"lr2": {
        "batches": batches, "latency_ms": {"avg": p99 / 2, "p50": p99 / 2, "p95": p99, "p99": p99, "max": p99},
        "throughput_rows_per_s": 2000.0, "deadline_miss_ratio": late, "deadline_miss_ratio_rows": late,
        "deadline_ms": 10000.0, "cost": {"busy_core_s": busy, "engine_s": busy},
    }}}


def test_the_table_and_closing_line_compare_busy_core_seconds_with_both_spark_triggers() -> None:
    runs = [("Spark default trigger", _report(60, 0.0, 40.0)), ("Spark trigger 10s", _report(6, 0.12, 20.0)),
            ("pacer zstream, deadline 10s", _report(8, 0.004, 10.0))]
    lines = comparison(runs, "lr2").splitlines()
    assert len(lines) == 5 and "rows late (> 10 s)" in lines[0] and "÷ trigger at 10 s" in lines[0]
    assert lines[2] == "| Spark default trigger | 60 | 0.00% | 9000 | 40.0 | 1.00 | 2.00 | 2000 |"
    assert lines[4] == "| pacer zstream, deadline 10s | 8 | 0.40% | 9000 | 10.0 | 0.25 | 0.50 | 2000 |"
    assert closing_line(runs, "lr2") == (
        "pacer met the 10 s target (0.40% of rows late; Spark's default trigger 0.00%, its trigger at 10 s 12.00%) "
        "at 0.25x the busy core-seconds of Spark's default trigger and 0.50x its trigger at 10 s, in 8 batches "
        "against 60 and 6")
    runs[2] = ("pacer zstream, deadline 10s", _report(8, 0.03, 10.0))
    assert closing_line(runs, "lr2").startswith("pacer missed the 10 s target (3.00% of rows late;")


@pytest.mark.spark
def test_pacer_demo_runs_its_three_configurations_and_writes_the_report_folder(tmp_path: Any) -> None:
    import json
    import os
    import subprocess
    import sys

    from pacer.report import validate_report

    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # every installed plugin, as a user has
    env["PYSPARK_PYTHON"] = sys.executable
    proc = subprocess.run(
        [sys.executable, "-m", "pacer.cli", "demo", "--out", str(out), "--rate", "400", "--duration", "5",
         "--deadline", "4s", "--progress-every", "0"],
        capture_output=True, text=True, timeout=400, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("| Spark default trigger |", "| Spark trigger 4s |", "| pacer zstream, deadline 4s |"):
        assert label in proc.stdout
    assert "rows late (> 4 s)" in proc.stdout and "x the busy core-seconds of Spark's default trigger" in proc.stdout
    reports = {p.name: json.loads(p.read_text()) for p in out.glob("*.json") if p.name != "demo.json"}
    assert set(reports) == {"Spark-default-trigger.json", "Spark-trigger-4s.json", "pacer-zstream,-deadline-4s.json"}
    for report in reports.values():
        validate_report(report)
        q = report["queries"]["lr2"]
        assert q["datasets_in"] == q["datasets_processed"] == 5 and q["deadline_ms"] == 4000.0
        assert q["cost"]["busy_core_s"] > 0
    assert reports["Spark-default-trigger.json"]["config"]["mode"] == "spark-trigger"
    assert reports["Spark-default-trigger.json"]["config"]["trigger_s"] == 0
    assert reports["Spark-trigger-4s.json"]["config"]["trigger_s"] == 4
    assert reports["pacer-zstream,-deadline-4s.json"]["queries"]["lr2"]["admission"] == "zstream"
    comparison_md = (out / "comparison.md").read_text()
    assert comparison_md.count("\n") == 9 and "rows late (> 4 s)" in comparison_md
    pngs = {p.name for p in out.glob("*.png")}
    assert {"demo-promise.png", "demo-max_latency.png", "demo-latency_cdf.png"} <= pngs
    assert f"{len(pngs)} PNG plots and demo.html in" in proc.stdout  # the count of files written
