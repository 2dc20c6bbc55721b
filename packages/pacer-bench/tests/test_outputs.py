from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.report import build_report
from pacer_bench.outputs import BenchRun, markdown_table, table_rows, write_outputs


def _report(processing_s: float, deadline: float | None = None) -> dict[str, Any]:
    clock = ManualClock()
    dag = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink"))
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(QuerySpec("q", dag, window_range=30, window_slide=10, deadline=deadline))
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
    # engine time: 10 batches of 0.8 s against 10 of 0.2 s
    assert rows[0]["engine_s"] == 8.0 and rows[1]["engine_s"] == 2.0
    assert rows[1]["cost_vs_baseline"] == 0.25
    assert "| slow | 10 |" in markdown_table(rows)  # one query: no query column


def test_repetitions_give_the_median_and_the_range() -> None:
    runs = [BenchRun("base", _report(0.5), baseline=True),
            BenchRun("rep", _report(0.2), repeats=(_report(0.4), _report(0.3)))]
    row = table_rows(runs)[1]
    assert row["reps"] == 3
    assert (row["engine_s"], row["engine_s_min"], row["engine_s_max"]) == (3.0, 2.0, 4.0)
    assert row["cost_vs_baseline"] == 0.6  # medians: 3.0 / 5.0
    assert "| rep | 10 | " in markdown_table([row]) and "3.0 [2.0–4.0]" in markdown_table([row])


def test_every_row_is_judged_against_the_baselines_deadline() -> None:
    """A run made with another deadline is counted against the table's (the baseline's) deadline."""
    slow = _report(0.8)  # latencies 0.8 s, deadline 10 s
    strict = _report(0.8, deadline=0.5)  # the same latencies, its own deadline 0.5 s
    rows = table_rows([BenchRun("base", slow, baseline=True), BenchRun("strict", strict)])
    assert [r["deadline_s"] for r in rows] == [10.0, 10.0]
    assert [r["deadline_miss"] for r in rows] == [0.0, 0.0]
    judged = table_rows([BenchRun("base", slow, baseline=True, deadline=0.5)])
    assert judged[0]["deadline_miss"] == 1.0


def test_write_outputs_produces_every_file(tmp_path: Path) -> None:
    runs = [BenchRun("slow", _report(0.8), baseline=True), BenchRun("fast", _report(0.2))]
    paths = write_outputs(tmp_path, "demo", runs, summary="two configurations")
    for kind in ("json", "csv", "md", "html", "latency_cdf", "max_latency", "batch_size", "batch_interval"):
        assert paths[kind].exists() and paths[kind].stat().st_size > 0, kind
    assert paths["latency_cdf"].read_bytes().startswith(b"\x89PNG")
    doc = json.loads(paths["json"].read_text())
    assert [r["label"] for r in doc["runs"]] == ["slow", "fast"]
    with paths["csv"].open() as fh:
        assert len(list(csv.DictReader(fh))) == 2
    page = paths["html"].read_text()
    assert page.count("data:image/png;base64,") == 4 and "two configurations" in page


def test_no_gpu_plot_without_a_gpu_and_the_page_says_why(tmp_path: Path) -> None:
    runs = [BenchRun("slow", _report(0.8), baseline=True), BenchRun("fast", _report(0.2))]
    paths = write_outputs(tmp_path, "demo", runs)
    assert "gpu_ratio" not in paths and not (tmp_path / "demo-gpu_ratio.png").exists()
    assert "GPU-share plot skipped: no operator ran on a GPU" in paths["md"].read_text()
    assert "no operator ran on a GPU" in paths["html"].read_text()


def test_page_states_the_run_settings_with_human_captions_and_a_scrolling_table(tmp_path: Path) -> None:
    runs = [BenchRun("slow", _report(0.8), baseline=True), BenchRun("fast", _report(0.2))]
    paths = write_outputs(tmp_path, "demo", runs, machine="test box")
    page = paths["html"].read_text()
    assert "Run settings" in page and "deadline 10 s (q)" in page and "test box" in page
    assert "<figcaption>latency_cdf</figcaption>" not in page
    assert "<figcaption>Dataset latency CDF" in page
    assert "<div class='table-wrap'><table>" in page and "overflow-x:auto" in page
    md = paths["md"].read_text()
    assert "- **deadline**: deadline 10 s (q)" in md and "- **machine**: test box" in md
