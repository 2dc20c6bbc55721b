from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.report import build_report
from pacer_bench.outputs import BenchRun, markdown_table, table_rows, write_outputs


def _report(processing_s: float) -> dict[str, Any]:
    clock = ManualClock()
    dag = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink"))
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(QuerySpec("q", dag, window_range=30, window_slide=10))
    for i in range(10):
        clock.now = float(i)
        c.arrive("q", Dataset(f"d{i}", clock.now, 1000, 100))
        batch = c.poll("q")
        assert batch is not None
        c.start(batch.id)
        clock.now += processing_s
        c.complete(batch.id)
    return build_report(runtime="sim", config={}, controller=c, start=0.0, end=10.0 + processing_s)


def test_rows_compare_with_the_baseline() -> None:
    runs = [BenchRun("slow", _report(0.8), baseline=True), BenchRun("fast", _report(0.2))]
    rows = table_rows(runs)
    assert [r["config"] for r in rows] == ["slow", "fast"]
    assert rows[0]["p99_vs_baseline"] == 1.0
    assert rows[1]["p99_vs_baseline"] == 0.25
    assert "| slow | q | 10 |" in markdown_table(rows)


def test_write_outputs_produces_every_file(tmp_path: Path) -> None:
    runs = [BenchRun("slow", _report(0.8), baseline=True), BenchRun("fast", _report(0.2))]
    paths = write_outputs(tmp_path, "demo", runs, summary="two configurations")
    for kind in ("json", "csv", "md", "html", "latency_cdf", "max_latency", "batch_size", "batch_interval", "gpu_ratio"):
        assert paths[kind].exists() and paths[kind].stat().st_size > 0, kind
    assert paths["latency_cdf"].read_bytes().startswith(b"\x89PNG")
    doc = json.loads(paths["json"].read_text())
    assert [r["label"] for r in doc["runs"]] == ["slow", "fast"]
    with paths["csv"].open() as fh:
        assert len(list(csv.DictReader(fh))) == 2
    page = paths["html"].read_text()
    assert page.count("data:image/png;base64,") == 5 and "two configurations" in page
