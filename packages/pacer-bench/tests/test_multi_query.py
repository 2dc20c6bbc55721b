"""multi-query's analysis (rows-weighted misses per query, summed engine time, the winner, the cheapest
statics), its outputs end to end on the simulator, and its plots (a panel per query, deadlines drawn)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.report import build_report
from pacer_bench.multi_query import analyse, busy_seconds
from pacer_bench.plots import figures
from pacer_bench.runner import record_latencies, run_scenario
from pacer_bench.tables import BenchRun, miss_ratio, miss_ratio_datasets, repetition_statement, table_rows

DEADLINES = {"q1": 5.0, "q2": 10.0}


def _report(engine: dict[str, float], latency_rows: dict[str, list[list[float]]]) -> dict[str, Any]:
    """A minimal report: each query's engine time and deadline, and the bench's (latency, rows) per dataset."""
    return {"queries": {q: {"cost": {"engine_s": e}, "deadline_ms": 1000.0 * DEADLINES[q]} for q, e in engine.items()},
            "bench": {"latency_rows": latency_rows}}


OK = {"q1": [[1.0, 100], [4.0, 900]], "q2": [[2.0, 500]]}


def _run(label: str, family: str, scheduler: str, engine: tuple[float, float],
         rows: dict[str, list[list[float]]] | None = None) -> BenchRun:
    return BenchRun(label, _report({"q1": engine[0], "q2": engine[1]}, rows or OK),
                    baseline=label == "fifo + static 2s",
                    tags={"scheduler": scheduler, "admission": family, "family": family})


RUNS = [
    # q1: 900 of 1000 rows late, but only one of two datasets: missed as the rows see it
    _run("fifo + static 2s", "static", "fifo", (10.0, 10.0), {"q1": [[1.0, 100], [6.0, 900]], "q2": [[2.0, 500]]}),
    _run("fifo + static 1s", "static", "fifo", (15.0, 15.0)),
    _run("fair + static 1s", "static", "fair", (20.0, 20.0)),
    _run("edf + zstream", "zstream", "edf", (12.0, 12.0)),
    # q2: 2 % of its rows late: over the 1 % limit
    _run("edf + asap", "asap", "edf", (9.0, 9.0), {"q1": OK["q1"], "q2": [[2.0, 490], [11.0, 10]]}),
]


def test_the_winner_meets_every_deadline_at_the_least_summed_engine_time() -> None:
    analysis = analyse(RUNS)
    rows = {r["config"]: r for r in analysis["rows"]}
    first = rows["fifo + static 2s"]
    assert (first["miss_q1"], first["miss_q2"], first["met"]) == (0.9, 0.0, "✗")
    assert rows["edf + asap"]["miss_q2"] == 0.02 and rows["edf + asap"]["met"] == "✗"
    assert analysis["winner"] == "edf + zstream" and analysis["cheapest_static"] == "fifo + static 1s"
    assert rows["edf + zstream"]["engine_s"] == 24.0 and rows["edf + zstream"]["cost_vs_static"] == 0.8
    assert rows["edf + zstream"]["mark"] == "winner"
    assert rows["fifo + static 1s"]["mark"] == "cheapest fifo static"
    assert rows["fair + static 1s"]["mark"] == "cheapest fair static"
    assert first["mark"] == "" and first["cost_vs_static"] == pytest.approx(20.0 / 30.0, abs=1e-3)
    # no run configuration to regenerate arrivals from, no busy core-seconds measured: no bound, no ×bound
    assert rows["edf + zstream"]["bound_core_s"] is None and rows["edf + zstream"]["busy_vs_bound"] is None
    # the issue's yardstick: engine time over asap + EDF's (which missed here: the ratio is shown all the same)
    assert analysis["asap"] == "edf + asap" and rows["edf + zstream"]["cost_vs_asap"] == pytest.approx(24.0 / 18.0,
                                                                                                      abs=1e-3)
    assert rows["edf + asap"]["cost_vs_asap"] == 1.0 and analysis["bound_vs_asap"] is None
    assert analysis["bounds"][-1]["query"] == "all (shared engine)" and analysis["bounds"][-1]["bound_core_s"] is None


def test_the_repetitions_line_names_the_seeds_when_they_vary() -> None:
    """--vary-seed runs are held-out draws, not the same traffic again: the tables say which seeds."""
    def run(*seeds: int) -> BenchRun:
        first, *more = ({"queries": {}, "config": {"seed": s}} for s in seeds)
        return BenchRun("edf + zstream", first, repeats=tuple(more))

    assert repetition_statement([run(7)]) is None
    assert repetition_statement([run(7, 7, 7)]) == (
        "3 repetitions per configuration, interleaved; cells show the median [min–max] where they differ")
    assert repetition_statement([run(11, 12, 13)]).startswith(  # type: ignore[union-attr]
        "3 repetitions per configuration (seeds 11, 12, 13: repetition i has seed SEED + i − 1), interleaved")


def test_busy_time_counts_overlapping_batches_once() -> None:
    report = {"bench": {"batches": {"a": [[1, 1.0, 0.0, 1.0], [1, 1.0, 3.0, 4.0]], "b": [[1, 1.5, 0.5, 2.0]]}}}
    assert busy_seconds(report) == 3.0
    assert busy_seconds({"bench": {}}) is None


def _sized_report() -> dict[str, Any]:
    """Two datasets of 100 and 900 rows, latencies 1 s and 6 s, deadline 5 s."""
    clock = ManualClock()
    dag = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink"))
    c = Controller(clock=clock, cores=2, timer=None, overload="keep")
    c.add_query(QuerySpec("q", dag, window_range=30, window_slide=10, deadline=5.0))
    for i, (rows, wait) in enumerate(((100, 0.5), (900, 5.5))):
        clock.now = 10.0 * i
        c.arrive("q", Dataset(f"d{i}", clock.now, 10 * rows, rows))
        clock.now += wait
        batch = c.poll("q")
        assert batch is not None
        c.start(batch.id)
        clock.now += 0.5
        c.complete(batch.id)
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=20.0)
    record_latencies(report, c)
    return report


def test_tables_count_misses_by_rows_and_keep_the_dataset_share() -> None:
    report = _sized_report()
    assert report["bench"]["latency_rows"]["q"] == [[1.0, 100], [6.0, 900]]
    assert miss_ratio(report, "q", 5.0) == 0.9 == report["queries"]["q"]["deadline_miss_ratio"]
    assert miss_ratio_datasets(report, "q", 5.0) == 0.5
    assert miss_ratio(report, "q", 7.0) == 0.0
    row = table_rows([BenchRun("only", report, baseline=True)])[0]
    assert (row["deadline_miss"], row["deadline_miss_datasets"]) == (0.9, 0.5)
    bare = {**report, "bench": {}}  # no recorded latencies: the report's own (rows-weighted) ratio
    assert miss_ratio(bare, "q", 5.0) == 0.9 and miss_ratio_datasets(bare, "q", 5.0) == 0.5


def test_multi_query_quick_on_the_simulator(tmp_path: Path) -> None:
    paths = run_scenario("multi-query", runtime="sim", out=tmp_path, quick=True, duration=20.0, progress=False)
    doc = json.loads(paths["json"].read_text())
    labels = [r["label"] for r in doc["runs"]]
    assert labels == ["fifo + static 2s", "fifo + static 10s", "fair + static 2s", "fair + static 10s", "edf + asap",
                      "edf + zstream", "rdas + zstream", "edf + lmstream"]
    analysis = doc["analysis"]
    assert [r["config"] for r in analysis["rows"]] == labels
    assert [b["query"] for b in analysis["bounds"]] == ["lr2", "lr3", "cm2", "all (shared engine)"]
    for bound in analysis["bounds"][:3]:  # the simulator's own model: the driver's 262.5 ms of the 0.3 s fixed part
        # without cores, then the tasks: each its 37.5 ms of it (fixed_task_share 0.125) and its CPU work
        assert bound["model"] == "known" and bound["wall_ms"] == 262.5 and bound["core_ms"] > 2 * 37.5
        assert bound["shared_batches"] >= bound["alone_batches"] >= 1 and bound["bound_core_s"] > 0
    total = analysis["bounds"][-1]
    bound = total["bound_core_s"]
    assert bound == pytest.approx(sum(b["bound_core_s"] for b in analysis["bounds"][:3]), rel=1e-3)
    assert total["alone_core_s"] <= bound <= total["attained_core_s"]
    asap = next(r for r in analysis["rows"] if r["config"] == "edf + asap")
    assert analysis["bound_vs_asap"] == pytest.approx(bound / asap["busy_core_s"], abs=1e-3)
    for row in analysis["rows"]:
        # compared in what a user pays: every configuration measured its busy core-seconds
        assert row["cost_vs_asap"] == pytest.approx(row["busy_core_s"] / asap["busy_core_s"], abs=1e-3)
        assert row["bound_core_s"] == pytest.approx(bound, rel=1e-3)
        assert row["busy_vs_bound"] == pytest.approx(row["busy_core_s"] / bound, rel=1e-2)
        if row["met"] == "✓":  # every deadline met: at least the bound
            assert row["busy_core_s"] >= bound
        assert row["busy_s"] <= row["engine_s"] + 1e-6
    assert analysis["cost"] == "busy core-s"
    winner = next((r for r in analysis["rows"] if r["config"] == analysis["winner"]), None)
    met = [r for r in analysis["rows"] if r["met"] == "✓"]
    assert winner is None or winner["busy_core_s"] == min(r["busy_core_s"] for r in met)
    assert analysis["goal"].startswith("Goal (several queries): every query ≤ 1% of rows late at ≤ 1.2× the "
                                       "shared-engine bound (busy core-s): ")
    md = paths["md"].read_text()
    assert "## Every deadline, least busy core-s" in md and "miss lr2 (5 s)" in md and analysis["goal"] in md
    assert "## The bound on a shared engine, busy core-seconds" in md
    assert "| ×asap (busy core-s) | busy core-s | bound core-s | ×bound (core-s) |" in md
    assert md.index("<!-- readme:end -->") < md.index("## Every configuration and query")
    with paths["csv"].open() as fh:
        assert "deadline_miss_datasets" in next(csv.reader(fh))

    runs = [BenchRun(r["label"], r["report"], baseline=r["baseline"]) for r in doc["runs"]]
    plots, _ = figures(runs)
    for key, deadline_axis in (("max_latency", "y"), ("latency_cdf", "x")):
        panels = sorted((ax for ax in plots[key].axes if ax.get_title()), key=lambda ax: ax.get_title())
        assert [ax.get_title() for ax in panels] == ["cm2 (deadline 20 s)", "lr2 (deadline 5 s)",
                                                     "lr3 (deadline 10 s)"]  # the JSON sorted the queries
        for ax, deadline in zip(panels, (20.0, 5.0, 10.0), strict=True):
            lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--" and ln.get_color() == "black"]
            data = [ln.get_ydata() if deadline_axis == "y" else ln.get_xdata() for ln in lines]
            assert any(list(d) == [deadline, deadline] for d in data), (key, ax.get_title())
            styles = {(ln.get_color(), ln.get_linestyle()) for ln in ax.get_lines() if ln not in lines}
            assert len(styles) == len(runs)  # every configuration its own colour and line style


def test_the_goal_line_says_by_how_much_the_nearest_configuration_missed() -> None:
    from pacer_bench.multi_query import goal_line

    met = {"config": "edf + zstream", "miss_lr2": 0.004, "miss_lr2_min": 0.0, "busy_vs_bound": 1.15}
    assert goal_line(met, [met]).endswith("edf + zstream, 1.150× the bound: met.")
    costly = {**met, "busy_vs_bound": 1.5}
    assert goal_line(costly, [costly]).endswith("1.500× the bound: missed: 1.500× the bound (by 0.300).")
    late = {"config": "fair + static 2s", "miss_lr2": 0.03, "miss_cm2": 0.0, "busy_vs_bound": 1.1}
    assert goal_line(None, [late, {**late, "config": "edf + asap", "busy_vs_bound": 2.0}]).endswith(
        "fair + static 2s, 1.100× the bound: missed: lr2 late 3.00% (by 2.00%).")
