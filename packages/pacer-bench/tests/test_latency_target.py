"""latency-target's analysis: configurations judged against every deadline, the oracle static, the winners."""

from __future__ import annotations

from typing import Any

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.report import build_report
from pacer_bench.latency_target import analyse, goal_lines, judge
from pacer_bench.runner import record_latencies
from pacer_bench.tables import BenchRun


def _report(wait_s: float, processing_s: float, n: int = 10, busy_s: float | None = None) -> dict[str, Any]:
    """n datasets, one a second, each admitted ``wait_s`` after it arrived and processed in ``processing_s``:
    every latency is wait + processing, the engine time n x processing (``busy_s``: each batch's core-seconds)."""
    clock = ManualClock()
    dag = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink"))
    c = Controller(clock=clock, cores=2, timer=None, overload="keep")
    c.add_query(QuerySpec("lr2", dag, window_range=30, window_slide=10))
    for i in range(n):
        clock.now = float(i)
        c.arrive("lr2", Dataset(f"d{i}", clock.now, 1000, 100))
        clock.now = i + wait_s
        batch = c.poll("lr2")
        assert batch is not None
        c.start(batch.id)
        clock.now += processing_s
        c.complete(batch.id, busy_core_s=busy_s)
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=n + wait_s + processing_s)
    record_latencies(report, c)
    return report


def _run(name: str, family: str, wait_s: float, processing_s: float, deadline: float | None = None) -> BenchRun:
    tags = {"workload": "lr2", "traffic": "binary", "name": name, "family": family, "deadline": deadline}
    return BenchRun(f"lr2 binary / {name}", _report(wait_s, processing_s), baseline=family == "asap",
                    group="lr2 binary", tags=tags)


RUNS = [
    _run("asap", "asap", 0.0, 1.0),  # latency 1.0 s, engine 10 s
    _run("static 2s", "static", 1.0, 0.6),  # 1.6 s, 6 s
    _run("static 5s", "static", 4.0, 0.4),  # 4.4 s, 4 s
    _run("static 10s", "static", 9.0, 0.3),  # 9.3 s, 3 s
    _run("fixed-point", "fixed-point", 3.0, 0.35),  # 3.35 s, 3.5 s
    _run("zstream @5s", "zstream", 4.5, 0.32, deadline=5.0),  # 4.82 s, 3.2 s
    _run("zstream @10s", "zstream", 9.5, 0.2, deadline=10.0),  # 9.7 s, 2 s
]


def test_deadline_free_runs_are_judged_against_every_deadline_and_deadline_runs_only_their_own() -> None:
    judged = judge(RUNS, [5.0, 10.0])
    at5 = {j.name: j for j in judged[("lr2", "binary", 5.0)]}
    at10 = {j.name: j for j in judged[("lr2", "binary", 10.0)]}
    assert set(at5) == {"asap", "static 2s", "static 5s", "static 10s", "fixed-point", "zstream @5s"}
    assert set(at10) == {"asap", "static 2s", "static 5s", "static 10s", "fixed-point", "zstream @10s"}
    assert at5["static 10s"].miss.median == 1.0 and not at5["static 10s"].met
    assert at10["static 10s"].miss.median == 0.0 and at10["static 10s"].met


def test_oracle_is_the_cheapest_static_that_meets_the_deadline_and_the_winner_beats_it() -> None:
    rows, winners = analyse(RUNS, [5.0, 10.0])
    by_deadline = {w["deadline_s"]: w for w in winners}
    five, ten = by_deadline[5.0], by_deadline[10.0]
    assert five["oracle"] == "static 5s" and ten["oracle"] == "static 10s"
    assert five["winner"] == five["best_adaptive"] == "zstream @5s"
    assert (five["winner_engine_s"], five["winner_vs_default"], five["winner_vs_oracle"]) == (3.2, 0.32, 0.8)
    assert ten["winner"] == "zstream @10s"
    assert (ten["winner_vs_default"], ten["winner_vs_oracle"]) == (0.2, 0.667)
    assert five["default_met"] == "yes"
    row = next(r for r in rows if r["deadline_s"] == 5.0 and r["config"] == "static 5s")
    assert row["mark"] == "oracle" and row["met"] == "✓" and row["cost_vs_default"] == 0.4
    assert row["cost_vs_oracle"] == 1.0
    missed = next(r for r in rows if r["deadline_s"] == 5.0 and r["config"] == "static 10s")
    assert missed["met"] == "✗" and missed["cost_vs_oracle"] == 0.75


def test_no_static_meeting_the_deadline_means_no_oracle() -> None:
    _, winners = analyse([RUNS[0], RUNS[3]], [5.0])
    assert winners[0]["oracle"] == "none met it" and winners[0]["winner"] == "asap"
    assert winners[0]["winner_vs_oracle"] is None


def test_configurations_are_compared_in_busy_core_seconds_where_every_run_measured_them() -> None:
    """What a user pays: the static that met the deadline with the fewest busy core-seconds is the oracle, though
    another took less engine time (its batches waited, or held fewer cores)."""
    def run(name: str, family: str, processing_s: float, busy_s: float | None, interval: float = 0.0) -> BenchRun:
        tags = {"workload": "lr2", "traffic": "binary", "name": name, "family": family, "deadline": None,
                "interval": interval}
        return BenchRun(f"lr2 binary / {name}", _report(0.1, processing_s, busy_s=busy_s), baseline=family == "asap",
                        group="lr2 binary", tags=tags)

    runs = [run("asap", "asap", 1.0, 0.4), run("static 2s", "static", 0.6, 0.5, 2.0),
            run("static 3s", "static", 0.8, 0.3, 3.0)]
    rows, (winner,) = analyse(runs, [5.0])
    by_name = {r["config"]: r for r in rows}
    assert winner["cost"] == "busy core-s" and winner["oracle"] == "static 3s" and winner["winner"] == "static 3s"
    assert by_name["static 3s"]["mark"] == "oracle" and by_name["static 3s"]["cost_vs_default"] == 0.75
    assert by_name["static 3s"]["busy_core_s"] == 3.0 and by_name["static 3s"]["engine_s"] == 8.0
    assert (winner["winner_busy_core_s"], winner["winner_engine_s"]) == (3.0, 8.0)
    # one configuration without them: every configuration of the group is compared in engine time
    rows, (winner,) = analyse([*runs[:2], run("static 3s", "static", 0.8, None, 3.0)], [5.0])
    assert winner["cost"] == "engine s" and winner["oracle"] == "static 2s"


def test_the_summary_restates_the_single_query_goal_and_says_by_how_much_it_was_missed() -> None:
    rows, winners = analyse(RUNS, [5.0, 10.0])
    bounded = [{**r, "cost_vs_bound": 1.1 if r["deadline_s"] == 10.0 else 1.5} for r in rows]
    five, ten = goal_lines(bounded, winners)
    # @5s: 0.32x the default's engine time (over 0.3 by 0.02), 1.5x the bound (over 1.2 by 0.3); no row late
    assert five.startswith("lr2 binary at 5 s, zstream @5s: late rows 0.00% (goal ≤ 1.00%)")
    assert five.endswith("missed: engine s × the default trigger's by 0.020, engine s × the bound by 0.300")
    assert ten.endswith("engine s × the bound 1.100 (goal ≤ 1.200): met")
    (unknown,) = goal_lines([{**rows[5], "cost_vs_bound": None}], winners[:1])
    assert unknown.endswith("missed: engine s × the default trigger's by 0.020")
