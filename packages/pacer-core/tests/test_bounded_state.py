"""Bounded driver state: StreamingSummary, the bounded exactly-once ledger, the recorder and the report, and
the per-query overload policy."""

from __future__ import annotations

import math
import random
import tracemalloc

import pytest

from pacer import Controller, Dataset, ExactlyOnceLedger, LedgerViolation, Operator, OperatorDAG, StreamingSummary
from pacer.clock import ManualClock
from pacer.metrics import StreamingSummary as FromMetrics
from pacer.metrics import latency_summary_ms, quantiles
from pacer.model import QuerySpec
from pacer.recorder import RECENT
from pacer.report import _clean, build_report, validate_report
from pacer.series import MAX_POINTS


def _spec(query_id: str = "q", deadline: float = 10.0) -> QuerySpec:
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("agg#1", "aggregate"), Operator("sink#2", "sink"))
    return QuerySpec(id=query_id, dag=dag, deadline=deadline)


# ------------------------------------------------------------------ StreamingSummary


def test_summary_is_exported_from_metrics_and_the_package() -> None:
    assert FromMetrics is StreamingSummary


def test_summary_is_exact_while_every_value_is_in_its_window() -> None:
    values = [random.Random(3).lognormvariate(0, 1) for _ in range(500)]
    s = StreamingSummary(keep_last=500)
    s.extend(values)
    assert s.exact and s.count == 500 and s.min == min(values) and s.max == max(values)
    assert s.total == sum(values) and s.mean == sum(values) / 500
    assert s.percentiles((0, 50, 95, 99, 100)) == quantiles(values, (0, 50, 95, 99, 100))
    assert s.last == tuple(values)


@pytest.mark.parametrize("alpha", [0.01, 0.05])
def test_summary_percentiles_stay_within_the_relative_error_beyond_its_window(alpha: float) -> None:
    rng = random.Random(11)
    values = [rng.lognormvariate(-7, 2) for _ in range(50_000)] + [-rng.random() for _ in range(5_000)] + [0.0] * 100
    rng.shuffle(values)
    s = StreamingSummary(relative_error=alpha, keep_last=64)
    s.extend(values)
    assert not s.exact and s.count == len(values) and math.isclose(s.total, sum(values))
    assert s.min == min(values) and s.max == max(values)
    ordered = sorted(values)
    for p in (1, 5, 10, 25, 50, 75, 90, 95, 99, 99.9):
        true = quantiles(ordered, (p,))[0]
        low = ordered[math.floor((len(values) - 1) * p / 100)]
        high = ordered[min(len(values) - 1, math.floor((len(values) - 1) * p / 100) + 1)]
        got = s.percentile(p)
        bound = alpha * max(abs(low), abs(high)) + 1e-12
        assert min(low, high) - bound <= got <= max(low, high) + bound, (p, got, true)
    assert s.last == tuple(values[-64:])


def test_summary_memory_does_not_grow_with_the_count() -> None:
    s = StreamingSummary(keep_last=256)
    rng = random.Random(5)
    s.extend(rng.expovariate(1000.0) for _ in range(20_000))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        s.extend(rng.expovariate(1000.0) for _ in range(50_000))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 20_000, f"{grown} bytes for 50000 more values"
    assert len(s._pos) <= s.max_buckets


def test_summary_collapses_buckets_beyond_its_limit_and_merges() -> None:
    s = StreamingSummary(keep_last=0, max_buckets=16)
    s.extend(10.0 ** k for k in range(-9, 10))
    assert len(s._pos) <= 16 and s.count == 19 and s.max == 1e9
    assert math.isclose(s.percentile(100), 1e9) and math.isclose(s.percentile(50), 1.0, rel_tol=0.011)
    assert s.percentile(0) > 1e-9  # the buckets nearest 0 merged: the lowest percentiles lose their guarantee first
    other = StreamingSummary(keep_last=0, max_buckets=16)
    other.extend([2.0, 3.0])
    s.merge(other)
    assert s.count == 21 and s.min == 1e-9
    with pytest.raises(ValueError):
        s.merge(StreamingSummary(relative_error=0.05))
    with pytest.raises(ValueError):
        s.add(float("nan"))
    assert StreamingSummary().percentile(50) == 0.0 and StreamingSummary().to_dict()["count"] == 0


# ------------------------------------------------------------------ ledger


def test_ledger_detects_duplicates_of_numbered_ids_long_after_they_finished() -> None:
    ledger = ExactlyOnceLedger(recent_ids=8)
    for i in range(10_000):
        ledger.arrived("q", f"q-{i}")
        if i % 7 == 0:
            ledger.shed("q", [f"q-{i}"])
            continue
        ledger.admitted("q", [f"q-{i}"])
        ledger.processed("q", [f"q-{i}"])
    assert len(ledger._queries["q"].recent) == 8 and len(ledger._queries["q"].ranges["q-"]) == 1
    with pytest.raises(LedgerViolation, match="'q-3' of query 'q' arrived twice"):
        ledger.arrived("q", "q-3")
    with pytest.raises(LedgerViolation, match="is processed or shed"):
        ledger.processed("q", ["q-5"])
    ledger.arrived("q", "q-03")  # not the number 3: leading zeros make another id
    ledger.arrived("q", "other")
    assert ledger.pending("q") == 2
    ledger.check_balance("q")


def test_ledger_counts_stay_exact_and_balanced_out_of_order() -> None:
    ledger = ExactlyOnceLedger(recent_ids=4)
    ids = [f"run:{i}" for i in range(2000)]
    for i in ids:
        ledger.arrived("q", i)
    ledger.admitted("q", ids[:1500])
    ledger.processed("q", ids[1000:1500])  # completion out of order leaves a gap below
    ledger.processed("q", ids[:1000:2])
    ledger.check_balance("q")
    ledger.processed("q", ids[1:1000:2])
    ledger.shed("q", ids[1500:1600])
    ledger.withdrawn("q", ids[1600:])
    assert ledger.counts["q"] == {"arrived": 1600, "admitted": 1500, "processed": 1500, "shed": 100}
    assert len(ledger._queries["q"].ranges["run:"]) == 1 and ledger.pending("q") == 0
    ledger.check_balance("q")
    ledger.check_complete()
    ledger.arrived("q", "run:1999")  # withdrawn: offered again, not a duplicate
    with pytest.raises(LedgerViolation, match="arrived twice"):
        ledger.arrived("q", "run:1200")


def test_ledger_remembers_only_recent_unnumbered_ids() -> None:
    ledger = ExactlyOnceLedger(recent_ids=3)
    for name in "abcde":
        ledger.arrived("q", name)
        ledger.admitted("q", [name])
        ledger.processed("q", [name])
    with pytest.raises(LedgerViolation, match="'e' of query 'q' was reported processed but it is processed"):
        ledger.processed("q", ["e"])
    ledger.arrived("q", "a")  # documented: beyond the window of recent ids an unnumbered id is forgotten


# ------------------------------------------------------------------ controller, recorder, report


def _run(c: Controller, clock: ManualClock, seconds: int, query_ids: tuple[str, ...] = ("q",)) -> None:
    for n in range(seconds):
        for qid in query_ids:
            c.arrive(qid, Dataset(f"{qid}-{n}", clock.now, 100, 1000))
            batch = c.poll(qid)
            if batch is not None:
                c.start(batch.id)
                clock.now += 0.25
                c.complete(batch.id)
        clock.now = float(n + 1)


def test_controller_state_and_report_stay_bounded_and_exact_over_a_long_run() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    seconds = 3 * RECENT
    _run(c, clock, seconds)
    assert len(c.reports("q")) == RECENT and len(c.recorder.arrivals("q")) == RECENT
    assert c.recorder.arrivals("q")[-1][0] == seconds - 1
    assert len(c._state.query("q").history) == RECENT
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=float(seconds))
    validate_report(report)
    q = report["queries"]["q"]
    assert q["datasets_in"] == q["datasets_processed"] == seconds and q["batches"] == seconds
    assert q["rows_in"] == q["rows_processed"] == 1000 * seconds and q["bytes_processed"] == 100 * seconds
    assert q["latency_ms"] == latency_summary_ms([0.25] * seconds)
    assert q["deadline_miss_ratio"] == 0.0 and q["datasets_pending"] == 0
    assert len(q["series"]) <= MAX_POINTS and sum(r["batches"] for r in q["series"]) == seconds
    step = q["series_interval_s"]
    assert step == 2.0 and math.isclose(sum(r["input_rows_per_s"] * step for r in q["series"]), 1000 * seconds)


def test_report_series_is_unchanged_for_a_run_the_record_still_holds() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    _run(c, clock, 50)
    exact = build_report(runtime="sim", config={}, controller=c, start=0.0, end=50.0)["queries"]["q"]["series"]
    record = c.recorder.record("q")
    assert record.complete
    summed = _clean(record.series.rows(start=0.0, end=50.0, interval=1.0))
    assert summed == exact


def test_overhead_is_summarised_in_bounded_memory() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2)
    c.add_query(_spec())
    _run(c, clock, 2000)
    assert c.overhead.poll.count == 2000 and len(c.overhead.poll_s) == c.overhead.poll.keep_last
    doc = build_report(runtime="spark", config={}, controller=c, start=0.0, end=2000.0)
    assert doc["overhead"]["admission_polls"] == 2000 and doc["overhead"]["admission_poll_us_p99"] > 0


# ------------------------------------------------------------------ per-query overload policy


def _overloaded(c: Controller, clock: ManualClock) -> None:
    """Two queries, each fed 1 MB per second that costs 2 s to process: no batch size keeps up."""
    done_at: dict[str, tuple[str, float]] = {}
    n = 0
    while clock.now < 200:
        for qid in ("keep", "shed"):
            c.arrive(qid, Dataset(f"{qid}-{n}", clock.now, 1_000_000, 100))
            running = done_at.get(qid)
            if running is not None and running[1] <= clock.now:
                c.complete(running[0], completed_at=running[1])
                del done_at[qid]
            batch = c.poll(qid)
            if batch is not None:
                c.start(batch.id)
                done_at[qid] = (batch.id, clock.now + 0.1 + 2.0 * batch.bytes / 1e6)
        n += 1
        clock.now += 1.0


def test_a_query_can_keep_its_data_under_a_shedding_controller() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None, overload="shed")
    c.add_query(_spec("keep"), overload="keep")
    c.add_query(_spec("shed"))
    _overloaded(c, clock)
    keep, shed = c.query("keep"), c.query("shed")
    assert keep.overload.episodes >= 1 and shed.overload.episodes >= 1
    assert keep.shed == 0 and c.ledger.counts["keep"]["shed"] == 0
    assert shed.shed > 0 and c.ledger.counts["shed"]["shed"] == shed.shed
    with pytest.raises(ValueError, match="overload policy must be one of"):
        c.add_query(_spec("bad"), overload="drop")


def test_a_query_can_shed_under_a_keeping_controller() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec("keep"))
    c.add_query(_spec("shed"), overload="shed")
    _overloaded(c, clock)
    assert c.query("keep").shed == 0 and c.query("shed").shed > 0
