"""The protocol between ``format("pacer")`` sources and the driver, as a state machine, without Spark.

The driver's side is the real one (:class:`~pacer_spark.paced.service.PacedQueries` on a real Driver and Controller); the
JVM side is a model of ``PacedStream`` and of Spark's trigger loop, written from the protocol in the README of
pacer-spark: each source observes snapshots, asks, and admits exactly what the answer names, or every pending
snapshot when no answer came (the decider raised, answered past the timeout, or the stream thread was interrupted
by ``stop()``), recording each such admission until an answer reaches it. Spark runs a batch of what the sources
admitted, reports its progress through the listener or only in the next ask, and restarts from the last committed
offsets. Hypothesis draws every interleaving of those events; the property is the issue's: every snapshot is read
by Spark exactly once and accounted by the Controller exactly once, and the query is never left busy without a
batch Spark is running.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacer import AdmissionDecision, Controller, QuerySpec, StrategyInfo, hookimpl
from pacer.dag import Operator, OperatorDAG
from pacer.engine_profile import CostPoint, EngineProfile, fit_profile
from pacer.plugins import get_plugin_manager
from pacer_spark.config import PacerConfig
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.jvm.decider import DecisionRequest, FailedOpen, OffsetSnapshot, StopEvent
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.paced.service import PacedQueries

ROWS = 10  # rows per snapshot


class Scripted:
    """An admission strategy that admits the next drawn count of oldest datasets (0: wait)."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.counts = itertools.cycle(counts or [1])

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="scripted", provides=frozenset({"admission"}), summary="drawn counts")]

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> AdmissionDecision | None:
        if ctx.chosen != "scripted":
            return None
        return AdmissionDecision(min(next(self.counts), len(buffer)), 0, "scripted")


@dataclass
class ModelSource:
    """A model of one JVM ``PacedStream`` run: pending snapshots and unanswered admissions (``failed_open``)."""

    run: str
    query: str
    spark_run: str
    options: dict[str, str]
    pending: list[tuple[int, frozenset[int]]] = field(default_factory=list)  # (seq, units)
    next_seq: int = 0
    failed_open: list[FailedOpen] = field(default_factory=list)
    unsent: list[dict[str, Any]] = field(default_factory=list)  # progress not sent by this source yet
    caller_waiting: bool = False  # processAllAvailable() waits: the driver drains what it holds
    first_batch: int = -1  # the Spark batch id of the source's first ask in its run (-1: none yet)
    trigger: int = -1  # the trigger asking (its start on Spark's clock)
    delayed: list[DecisionRequest] = field(default_factory=list)  # calls still on their way to the driver
    asks: int = 0  # requests sent

    def deliver_late(self, paced: PacedQueries) -> None:
        """The calls that timed out and were overtaken by a later ask reach the driver now; their answers go
        nowhere."""
        late = [r for r in self.delayed if r.ask < self.asks]
        for request in late:
            paced.decide(request)
        self.delayed = [r for r in self.delayed if r not in late]

    def observe(self, units: frozenset[int]) -> None:
        self.pending.append((self.next_seq, units))
        self.next_seq += 1

    def request(self, batch_id: int) -> DecisionRequest:
        self.asks += 1
        snaps = tuple(OffsetSnapshot(seq=seq, offset=str(max(units)), arrival=1.0, rows=ROWS * len(units),
                                     files=None, bytes=64 * ROWS * len(units), bytes_estimated=True)
                      for seq, units in self.pending)
        return DecisionRequest(query=self.query, query_id="stream-1", run=self.run, batch_id=batch_id,
                               options=self.options, source="model", start=None, limit="ReadAllAvailable",
                               available_now=False, admissible=len(snaps), now=2.0, snapshots=snaps,
                               spark_run_id=self.spark_run, progress=tuple(self.unsent),
                               failed_open=tuple(self.failed_open), caller_waiting=self.caller_waiting,
                               first_batch_id=self.first_batch, trigger=self.trigger, ask=self.asks)

    def ask(self, paced: PacedQueries, batch_id: int, outcome: str,
            trigger: int = -1) -> list[tuple[int, frozenset[int]]]:
        """One ``latestOffset``: what the source admits into Spark batch ``batch_id`` (empty: nothing)."""
        self.trigger = trigger
        if self.first_batch < 0:  # Spark's first latestOffset of the run, whether or not the source asks
            self.first_batch = batch_id
        if not self.pending and not self.failed_open and not self.unsent:
            return []
        request = self.request(batch_id)
        if outcome == "raise":  # the decider raised before it did anything
            answer = None
        elif outcome == "stale":  # the call reaches the driver only after the source gave up and went on
            self.delayed.append(request)
            answer = None
        else:
            decision = paced.decide(request)
            answer = None if outcome == "late" else decision
        if answer is None:  # fail open: everything pending, recorded until an answer reaches the driver
            taken, self.pending = self.pending, []
            if taken:
                self.failed_open.append(FailedOpen(batch_id, outcome, tuple(
                    s for s in request.snapshots if s.seq in {seq for seq, _ in taken})))
            return taken
        assert answer.error is None, answer.error
        self.failed_open, self.unsent = [], []  # delivered with an answer
        if answer.index is None:
            return []
        end = request.snapshots[answer.index].seq
        taken = [p for p in self.pending if p[0] <= end]
        self.pending = [p for p in self.pending if p[0] > end]
        return taken


def _paced(counts: Sequence[int]) -> tuple[PacedQueries, Controller]:
    clock = PinnedClock()
    replay = ReplayGuard()
    pm = get_plugin_manager(allowed=[])
    pm.register(replay)
    pm.register(Scripted(counts))
    controller = Controller(clock=clock, cores=2, plugin_manager=pm)
    driver = Driver(controller, clock, replay, concurrency=1, gate_timeout=5.0, fair=False, progress_timeout=600.0)
    dag = OperatorDAG.chain(Operator("scan#0", "scan", "Scan"), Operator("sink#1", "sink", "Sink"))

    def register(query_id: str, *, deadline: float | None = None, engine_profile: EngineProfile | None = None,
                 **_: Any) -> None:
        controller.add_query(QuerySpec(id=query_id, dag=dag, deadline=deadline or 30.0), admission="scripted",
                             engine_profile=engine_profile)

    return PacedQueries(driver, None, PacerConfig(admission="scripted", operator_metrics=False), register), controller


def _progress(spark_run: str, batch_id: int, rows_per_source: Sequence[int],
              unanswered: Sequence[bool] = ()) -> dict[str, Any]:
    """A progress entry as Spark writes it; each source's metrics say whether it admitted without an answer."""
    flags = list(unanswered) or [False] * len(rows_per_source)
    return {"id": "stream-1", "runId": spark_run, "name": "q", "batchId": batch_id,
            "timestamp": "2026-11-27T10:00:00.000Z", "numInputRows": sum(rows_per_source),
            "durationMs": {"triggerExecution": 100},
            "sources": [{"numInputRows": r, "metrics": {"pacer.unanswered": str(f).lower()}}
                        for r, f in zip(rows_per_source, flags, strict=True)]}


EVENTS = st.one_of(
    st.tuples(st.just("observe"), st.integers(0, 1), st.integers(1, 3)),
    st.tuples(st.just("trigger"), st.lists(st.sampled_from(["answer", "answer", "raise", "late", "stale"]), min_size=2,
                                           max_size=2), st.booleans()),
    st.tuples(st.just("restart"), st.booleans(), st.booleans()),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources=st.integers(1, 2), counts=st.lists(st.integers(0, 4), min_size=1, max_size=6),
       events=st.lists(EVENTS, max_size=40))
def test_every_interleaving_reads_and_accounts_each_snapshot_once_and_never_stalls(
    sources: int, counts: list[int], events: list[tuple[Any, ...]]
) -> None:
    paced, controller = _paced(counts)
    units = itertools.count()
    triggers = itertools.count()
    observed: set[int] = set()
    committed: list[int] = []  # units of every batch whose trigger ended (a unit twice: Spark committed it twice)
    spark_run = str(uuid.uuid4())
    batch_id = 0
    options = {"pacer.deadline": "30s"}

    def start(carried: list[frozenset[int]]) -> list[ModelSource]:
        srcs = [ModelSource(str(uuid.uuid4()), "q", spark_run, dict(options)) for _ in range(sources)]
        for i, u in enumerate(carried):  # a new run observes again what was not committed, from the last offset
            if u:
                srcs[i].observe(u)
        return srcs

    srcs = start([])

    def ended(read: list[list[int]], unanswered: list[bool], listener: bool) -> None:
        """Spark batch ``batch_id`` ran ``read`` (per source) and its trigger ended: progress to listener/sources."""
        nonlocal batch_id
        committed.extend(u for part in read for u in part)
        entry = _progress(spark_run, batch_id, [ROWS * len(part) for part in read], unanswered)
        batch_id += 1
        if listener:
            paced.driver.on_progress(TriggerProgress.from_json(entry))  # the listener's thread
        for src in srcs:
            src.unsent.append(entry)

    def trigger(outcomes: Sequence[str]) -> list[list[int]]:
        """Every source's latestOffset, in order; what each admitted (by unit)."""
        stamp = next(triggers)
        admitted = [src.ask(paced, batch_id, outcome, stamp) for src, outcome in zip(srcs, outcomes, strict=False)]
        return [sorted(u for _, us in taken for u in us) for taken in admitted]

    for event in events:
        for src in srcs:
            src.deliver_late(paced)
        if event[0] == "observe":
            fresh = frozenset(next(units) for _ in range(event[2]))
            observed.update(fresh)
            srcs[event[1] % sources].observe(fresh)
        elif event[0] == "trigger":
            outcomes = event[1]
            read = trigger(outcomes)
            if any(read):
                ended(read, [bool(r) and o != "answer" for r, o in zip(read, outcomes, strict=False)], event[2])
        else:  # stop, then a new run of the query
            interrupted, mid_batch = event[1], event[2]
            replay: list[list[int]] = []
            if interrupted and any(s.pending for s in srcs):  # stop() while the answer was on its way (the gate)
                asking = next(s for s in srcs if s.pending)
                asking.trigger = next(triggers)
                paced.decide(asking.request(batch_id))
            elif mid_batch:  # stop() while the batch ran: logged in the offset log, its trigger never ended
                replay = trigger(["answer"] * sources)
            stopped = list(srcs)
            for src in srcs:
                paced.stopped(StopEvent("q", src.run, spark_run, "stream-1", tuple(src.failed_open),
                                        tuple(src.unsent), dict(src.options), "model", src.first_batch))
            carried = [frozenset(u for _, us in src.pending for u in us) for src in srcs]
            spark_run = str(uuid.uuid4())
            if any(replay):  # the new run re-runs the logged batch first, asking no source
                srcs = start([])
                ended(replay, [False] * sources, False)
            srcs = srcs if any(replay) else start([])
            for src, u in zip(srcs, carried, strict=True):
                if u:
                    src.observe(u)
            for src in stopped:  # a call of the stopped run still on its way
                src.deliver_late(paced)

    for src in srcs:  # quiesce as processAllAvailable() would: answers reach the sources, what is held drains
        src.caller_waiting = True
    for _ in range(8):
        read = trigger(["answer"] * sources)
        if any(read):
            ended(read, [False] * sources, True)
        elif not any(s.pending or s.failed_open for s in srcs):
            break
    for src in srcs:  # the last batch's progress reaches the driver with the next ask
        if src.unsent:
            src.ask(paced, batch_id, "answer")

    assert len(committed) == len(set(committed)), "Spark committed a unit twice"
    assert set(committed) == observed, f"never committed: {sorted(observed - set(committed))}"
    if "q" not in paced.queries:
        assert not committed
        return
    controller.ledger.check_balance("q")
    done_rows = sum(r.rows for r in controller.reports("q"))
    assert done_rows == ROWS * len(committed), f"accounted {done_rows} rows, Spark read {ROWS * len(committed)}"
    assert not controller.busy("q") and paced.queries["q"].inflight is None, "left busy without a batch running"
    assert not controller.has_buffered("q"), "pacer holds data no source has pending"


def test_a_late_answer_is_taken_back_and_the_source_s_admission_accounted_once() -> None:
    """The issue's case: the driver admits 1 of 20 held snapshots, the answer comes past the timeout, the source
    admits all 20: the driver's batch is taken back, the 20 are one batch, completed once (no LedgerViolation), and
    the next ask is decided again (the query is not left busy)."""
    paced, controller = _paced([1])
    src = ModelSource(str(uuid.uuid4()), "q", "run-1", {"pacer.deadline": "30s"})
    for i in range(20):
        src.observe(frozenset({i}))
    taken = src.ask(paced, 0, "late")
    assert len(taken) == 20 and len(src.failed_open) == 1
    src.unsent.append(_progress("run-1", 0, [ROWS * 20]))
    src.observe(frozenset({20}))
    assert src.ask(paced, 1, "answer") == [(20, frozenset({20}))]  # decided again: the query was not left busy
    q = paced.queries["q"]
    assert (q.failed_open, q.retracted) == (1, 1)
    assert [r.rows for r in controller.reports("q")] == [ROWS * 20]
    controller.ledger.check_balance("q")


def test_two_sources_of_one_query_share_one_batch_and_conflicting_deadlines_are_refused() -> None:
    """A union: both sources' snapshots are one query's; the second source's ask in the same Spark batch gets its
    part of the batch the first ask admitted, and withdraws nothing. A second source with another deadline is
    refused, naming both values."""
    paced, controller = _paced([4])
    a = ModelSource(str(uuid.uuid4()), "q", "run-1", {"pacer.deadline": "30s"})
    b = ModelSource(str(uuid.uuid4()), "q", "run-1", {"pacer.deadline": "30s"})
    b.observe(frozenset({0}))
    b.ask(paced, 0, "answer")  # b's snapshot arrives (the strategy admits it alone)
    b.unsent.append(_progress("run-1", 0, [ROWS]))
    a.unsent.append(_progress("run-1", 0, [ROWS]))
    a.observe(frozenset({1}))
    b.observe(frozenset({2}))
    b.ask(paced, 1, "raise")  # b admits {2} without an answer into batch 1
    assert a.ask(paced, 1, "answer") == [(0, frozenset({1}))]
    q = paced.queries["q"]
    assert len(q.sources) == 2 and q.withdrawn == 0
    refused = ModelSource(str(uuid.uuid4()), "q", "run-1", {"pacer.deadline": "5s"})
    refused.observe(frozenset({3}))
    decision = paced.decide(refused.request(1))
    assert decision.error is not None and "'30s'" in decision.error and "'5s'" in decision.error
    controller.ledger.check_balance("q")


def _timed(seq: int, source_time: float | None) -> OffsetSnapshot:
    return OffsetSnapshot(seq=seq, offset=str(seq), arrival=time.time() - 1.0, rows=ROWS, files=None, bytes=640,
                          bytes_estimated=True, source_time=source_time)


def test_source_times_that_are_no_arrivals_are_dated_when_seen_counted_and_the_option_chooses() -> None:
    """Zero, in the future, or older than the query's start by more than ``pacer.arrival.maxAge``: a producer's event
    time or a copy that kept old mtimes, not an arrival (before: every row late, an epoch-0 time collapsed the
    report's series into 12-day buckets); a snapshot that lost its time is counted; ``pacer.arrival=observed``
    ignores source times altogether; a bad option is refused naming it."""
    paced, controller = _paced([0])
    now = time.time()
    snaps = (_timed(0, now - 5.0), _timed(1, 0.0), _timed(2, now + 3600.0), _timed(3, now - 30 * 86400.0),
             _timed(4, None))
    request = DecisionRequest(query="q", query_id="s", run="r", batch_id=0, options={"pacer.deadline": "30s"},
                              source="kafka", start=None, limit="", available_now=False, admissible=5, now=now,
                              snapshots=snaps, spark_run_id="run-1")
    paced.decide(request)
    summary = paced.summary()["q"]
    assert (summary["source_time_clamped"], summary["source_time_missing"], summary["arrival"]) == (3, 1, "source-time")
    arrivals = [d.arrival for d in controller.buffered("q")]
    assert abs(arrivals[0] - (now - 5.0)) < 1e-6 and all(now - 2.0 <= a <= now for a in arrivals[1:]), arrivals

    observed, other = _paced([0])
    paced_request = replace(request, query="o", options={"pacer.deadline": "30s", "pacer.arrival": "observed"})
    observed.decide(paced_request)
    assert all(now - 2.0 <= d.arrival <= now for d in other.buffered("o"))
    assert observed.summary()["o"]["arrival"] == "first-seen"
    refused = observed.decide(replace(request, query="bad", options={"pacer.arrival": "event"}))
    assert refused.error is not None and "pacer.arrival must be one of source, observed" in refused.error


def test_an_engine_profile_named_by_the_source_is_the_query_s_prior_in_its_source_s_bytes(tmp_path: Path) -> None:
    """``pacer.engineProfile`` (spelled in any case: Spark hands a V2 source its options lowercased, as it does
    ``pacer.arrival.maxAge``) gives the query the calibration as its prior, rescaled to the bytes its snapshots
    measure a row in (a calibration at 50 bytes a row, Kafka records of 64: the largest size measured grows by
    64/50), once a snapshot is measured (a first one without rows, as a source's first can be, says nothing: before,
    the profile was taken unscaled and a 4× smaller probe limit turned into a ceiling on Spark); a file that is no
    profile is refused naming the option."""
    tiny = [CostPoint("tiny", 20, 1_000, 0.5, 0.2) for _ in range(3)]
    large = [CostPoint("large", 20_000 * k, 1_000_000 * k, 0.5 + k, 0.2 + 2 * k) for k in (1, 2, 4)]
    path = fit_profile(tiny + large, runtime="spark", workload="lr2", partitions=2, slots=2).write(tmp_path / "p.json")
    paced, controller = _paced([0])
    unmeasured = replace(_timed(0, None), rows=None, bytes=None)
    snapshot = replace(_timed(1, None), bytes=ROWS * 64)  # estimated from the schema, as Kafka's are
    request = DecisionRequest(query="q", query_id="s", run="r", batch_id=0, spark_run_id="run-1",
                              options={"pacer.deadline": "30s", "pacer.engineprofile": str(path),
                                       "pacer.arrival.maxage": "1h"},
                              source="kafka", start=None, limit="", available_now=False, admissible=1,
                              now=time.time(), snapshots=(unmeasured,))
    assert paced.decide(request).error is None
    assert controller.query("q").engine_profile is None and paced.queries["q"].engine_profile is not None
    request = replace(request, admissible=2, snapshots=(unmeasured, snapshot))
    assert paced.decide(request).error is None
    view = controller.query("q")
    assert view.engine_profile is not None and view.service_time["prior_batches"] > 0
    assert view.engine_profile.largest_bytes == 4_000_000 * 64 // 50
    assert paced.queries["q"].options["pacer.arrival.maxAge"] == "1h"

    (tmp_path / "bad.json").write_text("{}")
    bad = replace(request, query="b", options={"pacer.engineProfile": str(tmp_path / "bad.json")})
    refused = paced.decide(bad)
    assert refused.error is not None and refused.error.startswith("query 'b': pacer.engineProfile: engine profile ")
    assert "bad.json' is not a pacer.engine-profile/1 document" in refused.error
    assert "write one with `pacer calibrate --runtime spark`" in refused.error


def test_the_fitted_service_model_is_kept_with_the_checkpoint_and_restored_by_the_next_run(tmp_path: Path) -> None:
    """A run saves its fitted model beside Spark's logs; a new session's run on the same checkpoint starts from it
    (no probe batches); a model file that cannot be read is ignored with a warning (probes then)."""
    from pacer_spark.paced import model_store
    checkpoint = tmp_path / "ck"
    source_folder = str(checkpoint / "sources" / "0")
    paced, controller = _paced([1])
    src = ModelSource("run-a", "q", "spark-1", {"pacer.deadline": "30s"})
    for batch in range(4):
        src.observe(frozenset(range(batch * 10, batch * 10 + 1 + batch)))
        request = replace(src.request(batch), source_checkpoint=source_folder)
        assert paced.decide(request).index is not None
        src.pending.clear()
        src.unsent = [_progress("spark-1", batch, [ROWS * (1 + batch)])]
        paced.queries["q"].model_saved_at = float("-inf")  # save at every completion here
    paced.decide(replace(src.request(4), source_checkpoint=source_folder))
    saved = checkpoint / "pacer" / "service-model.json"
    assert saved.is_file() and model_store.load(saved) == controller.reconcile.service_state("q")
    assert controller.query("q").service_time["observations"] > 0

    again, fresh = _paced([1])
    restarted = ModelSource("run-b", "q", "spark-2", {"pacer.deadline": "30s"})
    restarted.observe(frozenset({99}))
    again.decide(replace(restarted.request(5), source_checkpoint=source_folder))
    assert again.summary()["q"]["model_restored"] and fresh.query("q").service_time["observations"] > 0
    assert fresh.reconcile.service_state("q") == controller.reconcile.service_state("q")

    saved.write_text("{not json")
    broken, cold = _paced([1])
    broken.decide(replace(ModelSource("run-c", "q", "spark-3", {}).request(0), source_checkpoint=source_folder))
    assert not broken.summary()["q"]["model_restored"] and cold.query("q").service_time["observations"] == 0
    assert model_store.model_path("hdfs://nn/ck/sources/0") is None and model_store.model_path(None) is None
