"""``pacer demo``: arguments checked before Spark starts, and the comparison table it prints."""

from __future__ import annotations

from typing import Any

import pytest

from pacer.cli import main
from pacer_bench.demo import comparison


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--admission", "no-such"], "unknown admission strategy 'no-such'"),
        (["--scheduler", "no-such"], "pacer strategies"),
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


def _report(p99: float, rows_per_s: float, series_max: list[float], engine_s: float) -> dict[str, Any]:
    return {"queries": {"lr1": {
        "batches": 4, "latency_ms": {"avg": p99 / 2, "p50": p99 / 2, "p95": p99, "p99": p99, "max": p99},
        "throughput_rows_per_s": rows_per_s, "deadline_miss_ratio": 0.5, "deadline_ms": 10000.0,
        "cost": {"engine_s": engine_s, "engine_share": engine_s / 90, "batches_per_min": 2.7},
        "series": [{"t": float(i), "max_latency_ms": v, "batch_bytes": 1.0} for i, v in enumerate(series_max)],
    }}}


def test_comparison_gives_ratios_to_the_fixed_trigger_the_latency_trend_and_the_engine_cost() -> None:
    static = _report(80000.0, 800.0, [10000.0] * 10 + [50000.0] * 10 + [80000.0] * 10, engine_s=2.8)
    pacer = _report(8000.0, 1400.0, [6000.0] * 30, engine_s=23.1)
    table = comparison([("spark trigger 10s", static), ("pacer fixed-point + edf", pacer)], "lr1")
    lines = table.splitlines()
    assert len(lines) == 4
    assert "deadline miss (> 10 s)" in lines[0]  # the deadline the misses count against
    assert "| spark trigger 10s | 4 |" in lines[2] and "10000 → 80000 | 2.8 | 1.00 | 1.00 | 1.00 |" in lines[2]
    assert "6000 → 6000 | 23.1 | 0.10 | 1.75 | 8.25 |" in lines[3]


@pytest.mark.spark
def test_pacer_demo_runs_both_configurations_and_writes_the_report_folder(tmp_path: Any) -> None:
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
         "--trigger", "2s", "--progress-every", "0"],
        capture_output=True, text=True, timeout=400, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| spark trigger 2s |" in proc.stdout and "| pacer fixed-point + edf |" in proc.stdout
    assert "deadline misses count datasets over 10 s" in proc.stdout  # LR2's window slide
    reports = {p.name: json.loads(p.read_text()) for p in out.glob("*.json") if p.name != "demo.json"}
    assert set(reports) == {"spark-trigger-2s.json", "pacer-fixed-point-edf.json"}
    for report in reports.values():
        validate_report(report)
        q = report["queries"]["lr2"]
        assert q["datasets_in"] == q["datasets_processed"] == 5
    assert reports["spark-trigger-2s.json"]["config"]["mode"] == "spark-trigger"
    assert reports["pacer-fixed-point-edf.json"]["queries"]["lr2"]["admission"] == "fixed-point"
    comparison_md = (out / "comparison.md").read_text()
    assert comparison_md.count("\n") == 6 and "deadline miss (> 10 s)" in comparison_md
    for report in reports.values():
        assert report["queries"]["lr2"]["cost"]["engine_s"] > 0
    pytest.importorskip("pacer_bench")
    pngs = {p.name for p in out.glob("*.png")}
    assert {"demo-max_latency.png", "demo-batch_size.png", "demo-latency_cdf.png"} <= pngs
    assert f"{len(pngs)} PNG plots and demo.html in" in proc.stdout  # the count of files written
