"""The admission service of ``pacer-gen``/``pacer-files`` queries: their sources' driver-side state.

A source's reader asks over the RPC (:class:`~pacer_spark.sources.rpc.ControllerServer`) for the end offset of
its next batch (:meth:`AdmissionService.handle`). Here every dataset that has arrived (generated
traffic up to now, or the files the reader listed) is handed to the Controller, the query's
admission strategy polls, and the answer is the admitted batch's end and the offsets it shed. A batch
Spark replays from its offset log after a restart never asks: its ``foreachBatch`` finds no admitted
batch, and :meth:`AdmissionService.claim` admits exactly the replayed datasets (:class:`ReplayGuard`),
described from the source's plan or its manifest, less those its end offset records as shed.
A ``pacer-files`` manifest lives in the checkpoint :meth:`AdmissionService.checkpointed` learns from
``start`` before Spark starts the query; the reader asks where (``op: manifest``) before it first reads it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.query import StreamingQuery

from pacer import MicroBatch
from pacer.summary import StreamingSummary
from pacer_spark.driver.books import Books
from pacer_spark.driver.completion import SinkDone
from pacer_spark.driver.gate import Turn
from pacer_spark.driver.protocol.reader_state import SourceState
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.gen_plan import GEN_FORMAT, GenPlan
from pacer_spark.jvm import stream_query
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.manifest import FILES_FORMAT, manifest_in_checkpoint
from pacer_spark.plan.dag import operator_metrics

if TYPE_CHECKING:
    from pacer_spark.driver.loop import Driver

log = logging.getLogger("pacer_spark")


@dataclass(eq=False)
class AdmissionService:
    """Admits the batches of a session's ``pacer-gen``/``pacer-files`` queries (module docstring): the readers' side of
    the protocol, registered with the session's :class:`~pacer_spark.driver.loop.Driver` as an
    :class:`~pacer_spark.driver.loop.Owner` for their reports (their RPC calls and their ``foreachBatch``).

    :param driver: the session's driver: its Controller (every call under its lock), batch completion (a batch
        waiting for its progress is completed here first), replay guard and gate (an admitted batch waits for its
        turn there, in the reader's ``latestOffset`` before Spark plans it, as a ``format("pacer")`` batch does; its
        pool, which only the stream thread can take, is set in ``foreachBatch``).
    :param rapids: whether the RAPIDS Accelerator is loaded (placements are enacted).
    :ivar sources: query id -> its source's state.
    :ivar gated: batches that passed the gate at admission.
    :ivar rpc_s: seconds each RPC request took to handle (the gate's wait left out); ``rpc_rtt_s``: the
        readers' round trips.
    """

    driver: Driver
    rapids: bool
    #: read per-operator metrics from each batch's executed plan when its sink returns
    collect_metrics: bool = True
    gated: set[str] = field(default_factory=set, init=False)
    sources: dict[str, SourceState] = field(default_factory=dict, init=False)
    rpc_s: StreamingSummary = field(default_factory=StreamingSummary, init=False)
    rpc_rtt_s: StreamingSummary = field(default_factory=StreamingSummary, init=False)
    polls: int = field(default=0, init=False)
    #: a started query's run id (and its id) -> the query (Spark's listener names a run by its run id)
    _by_run_id: dict[str, str] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.driver.register(self, ReaderAsk, ManifestAsk, SinkStarts, SinkReturned)

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """Log ``message`` at WARNING the first time ``key`` is seen (the gate's record of warnings)."""
        self.driver.warn_once(key, message, *args)

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` reads a ``pacer-gen``/``pacer-files`` source of this session."""
        return query_id in self.sources

    def dead(self, books: Books, query_id: str) -> bool:
        """Whether the query's stream terminated."""
        source = self.sources.get(query_id)
        return source is not None and source.dead

    def running(self, books: Books, batch_id: str) -> bool:
        """Never: a pacer source's batch completes from its sink (:class:`~pacer_spark.sources.sink_gate.SinkGate`)."""
        return False

    def executed_metrics(self, books: Books, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> Sequence[Any]:
        """None here: the sink gate reads a pacer source's operator metrics in ``foreachBatch``."""
        return []

    def progress(self, books: Books, progress: TriggerProgress) -> bool:
        """A trigger of a query reading a pacer source ended: keep Spark's durations and complete its batch."""
        source = self.sources.get(progress.query)
        if source is None:
            return False
        source.durations.add(progress.durations_ms)
        try:
            books.on_progress(progress)
        except Exception as exc:  # a feedback hook raised without fallback: fail the query as foreachBatch did
            log.error("query %r: completing batch %d failed: %s", progress.query, progress.batch_id, exc)
            source.error = source.error or f"{type(exc).__name__}: {exc}"
            source.dead = True
            if source.handle is not None:
                threading.Thread(target=source.handle.stop, name="pacer-stop", daemon=True).start()
        return True

    def stream_of(self, books: Books, query_id: str) -> str | None:
        """The id of the streaming query reading the source, once started."""
        source = self.sources.get(query_id)
        return source.stream_id if source is not None else None

    def terminated(self, books: Books, run_id: str, error: str | None) -> None:
        """A run ended: when it is the current run of a query reading a pacer source, no batch waits for the query
        any more, and its batch still waiting (its trigger failed after the sink, or it was stopped) completes."""
        query_id = self._by_run_id.get(run_id)
        source = self.sources.get(query_id) if query_id else None
        if source is None or query_id is None:
            return
        if source.handle is not None and str(source.handle.runId) != run_id:
            return  # an earlier run of a query restarted since: its end is not this run's
        source.dead = True
        source.error = source.error or error
        try:
            books.give_up(query_id)
        except Exception:
            log.exception("query %r: completing its last batch at termination failed", query_id)

    def add(self, query_id: str, fmt: str, options: Mapping[str, str], *, partitions: int,
            manifest: Path) -> dict[str, str]:
        """Track a new source of ``query_id``; its options with the defaults filled in.

        :param partitions: a ``pacer-gen`` source's default ``numPartitions``.
        :param manifest: a ``pacer-files`` manifest's place while its checkpoint is unknown (see :meth:`checkpointed`).
        :raises ValueError: for an unknown format or a ``pacer-files`` source without ``path``.
        """
        opts = dict(options)
        if fmt == GEN_FORMAT:
            opts.setdefault("start", repr(time.time()))
            if opts.get("traffic.file"):  # a trace: the readers rebuild its arrivals wherever they run
                opts["traffic.file"] = str(Path(opts["traffic.file"]).expanduser().resolve())
            opts.setdefault("numPartitions", str(partitions))
            source = SourceState(query_id, fmt, opts, gen=GenPlan.from_options(opts))
        elif fmt == FILES_FORMAT:
            if "path" not in opts:
                raise ValueError("pacer-files needs path=<directory to watch>")
            source = SourceState(query_id, fmt, opts, default_manifest=manifest)
            if opts.get("manifest"):
                source.manifest = Path(opts["manifest"])
        else:
            raise ValueError(f"unknown pacer source {fmt!r}; use {GEN_FORMAT!r} or {FILES_FORMAT!r}")
        with self.driver.books() as books:
            if query_id in self.sources and query_id in books.query_ids():
                # the query restarts in this session: its new reader offers again, from the committed offset, what
                # the Controller still holds from the last run (observed, never admitted), so it is taken back; a
                # batch admitted that never began (stopped while it waited for its turn) is taken back with it
                q = books.query(query_id)
                stale = q.in_flight if q.in_flight is not None and q.in_flight != self.sources[query_id].claimed \
                    else None
                source.unanswered, source.retracted = self.sources[query_id].unanswered, \
                    self.sources[query_id].retracted
                self.sources[query_id] = source
                if stale is not None:
                    self._retract(books, query_id, stale, "its run stopped before Spark ran the batch")
                books.withdraw(query_id)
            self.sources[query_id] = source
        return opts

    def checkpointed(self, query_id: str, checkpoint: str) -> None:
        """The query of ``query_id`` starts on ``checkpoint`` (before Spark starts it): a ``pacer-files`` source
        without option ``manifest`` keeps its manifest in it, so the manifest moves with the checkpoint."""
        with self.driver.books():
            source = self.sources[query_id]
            if source.fmt == FILES_FORMAT and not source.options.get("manifest"):
                source.manifest = manifest_in_checkpoint(checkpoint, legacy=source.default_manifest)
                if source.manifest is None:
                    self.warn_once(f"manifest-{query_id}", "query %r: checkpoint %s is not a local path; pacer-files "
                                   "keeps its manifest at %s (option manifest= keeps it elsewhere)", query_id,
                                   checkpoint, source.default_manifest)

    def started(self, query_id: str, handle: StreamingQuery) -> None:
        """The query of ``query_id``'s source started as ``handle`` (its listener events are the query's from now)."""
        with self.driver.books():
            source = self.sources[query_id]
            source.handle = handle
            source.dead = False
            source.stream_id = str(handle.id)
            self._by_run_id[str(handle.runId)] = query_id
            self._by_run_id[source.stream_id] = query_id

    # ------------------------------------------------------------------ the RPC

    def step(self, report: ReaderAsk | ManifestAsk | SinkStarts | SinkReturned) -> \
            ReaderAnswer | ManifestAnswer | SinkTurn | None:
        """A reader's call or its query's ``foreachBatch`` (:meth:`pacer_spark.driver.loop.Driver.step`): where its
        manifest is, or its next batch's end once an admitted batch's turn has come (the driver's admission loop,
        :meth:`pacer_spark.driver.loop.Driver.decide`); which batch a sink runs, and in which pool; a sink returned."""
        if isinstance(report, SinkStarts):
            return self.sink_starts(report)
        if isinstance(report, SinkReturned):
            self.sink_returned(report)
            return None
        t0 = time.perf_counter()
        waited = 0.0
        try:
            if isinstance(report, ManifestAsk):
                with self.driver.books() as books:
                    return ManifestAnswer(str(self._source(books, report.query).manifest_path()))
            ask = _LatestStep(self, report)
            admitted = self.driver.decide(ask)
            if admitted is not None and admitted.turn is not None:
                waited = admitted.turn.waited_s
            return ask.reply
        finally:
            self.rpc_s.add(time.perf_counter() - t0 - waited)

    def _listed(self, books: Books, ask: _LatestStep) -> bool:
        """The reader's report before admission: what it listed, the previous batch's progress (its trigger
        ended: Spark holds it) or its expiry. False for a repeated ask (answered as before)."""
        source = self._source(books, ask.query_id)
        if ask.rtt is not None:
            self.rpc_rtt_s.add(float(ask.rtt))
        source.listed = True
        for entry in ask.new:
            source.files[int(entry["index"])] = dict(entry)
        if source.next_index is None or source.next_index < ask.start:
            source.next_index = ask.start  # datasets before ``start`` were processed by an earlier run
        self._completed_from_buffer(books, source)
        stale = books.expire(ask.query_id, time.time())  # never reported: completed as at its sink
        if stale is not None:
            self.warn_once(f"no-progress-{ask.query_id}", "query %r: no progress event %.0f s after batch %s's "
                           "sink; completed without its engine time", ask.query_id, self.driver.progress_timeout_s,
                           stale.batch_id)
        if source.admitted_end is not None and ask.start < source.admitted_end:
            # another reader of the same query (a self-join), or a repeated ask: same answer
            ask.reply = ReaderAnswer(source.admitted_end, tuple(source.shed))
            return False
        if source.handle is None:
            self._committed_unwatched(books, source)
        return True

    def _completed_from_buffer(self, books: Books, source: SourceState) -> None:
        """Complete the query's batch whose sink returned from its progress in the query's own buffer: Spark is asked
        for (or runs) a later batch, so that trigger ended and its progress is there, whether or not the listener's
        event came yet."""
        waiting = books.waiting_spark_batch(source.query_id)
        if waiting is not None and source.handle is not None:
            progress = stream_query.query_progress(source.handle, waiting)
            if progress is not None:
                books.on_progress(progress, event=False)

    def _source(self, books: Books, query_id: str) -> SourceState:
        """The source of ``query_id``; KeyError for a query this session does not know."""
        source = self.sources.get(query_id)
        if source is None or query_id not in books.query_ids():
            raise KeyError(f"query {query_id!r} is not registered with this pacer session")
        return source

    def _committed_unwatched(self, books: Books, source: SourceState) -> None:
        """Complete the in-flight batch of a query started with a plain ``writeStream``.

        Without :meth:`pacer_spark.PacerSession.start` no gate sees its batches run and no progress event
        is routed to it; but Spark asks its source for the next batch only once the last one committed,
        so that batch completed by now (its engine time unknown). Without this, the query stalled after
        its first batch.
        """
        q = books.query(source.query_id)
        if q.in_flight is None:
            return
        self.warn_once(f"unwatched-{source.query_id}",
                       "query %r reads a pacer source but was not started with PacerSession.start: a batch "
                       "completes when Spark asks for the next one (no scheduling gate, no engine time)",
                       source.query_id)
        books.start(q.in_flight)
        books.complete(q.in_flight, completed_at=time.time())
        self.completed(books, source.query_id, q.in_flight)

    def _arrive_available(self, books: Books, source: SourceState, now: float, until: int | None = None) -> None:
        """Hand the Controller every dataset that has arrived and that it has not seen (under availableNow,
        none at or past ``until``: the reader will not read them in this run)."""
        assert source.next_index is not None
        end = source.gen.available_end(now) if source.gen is not None else max(source.files, default=-1) + 1
        if until is not None:
            end = min(end, until)
        while source.next_index < end:
            dataset = source.dataset(source.next_index)
            if dataset is None:
                break
            books.arrive(source.query_id, dataset)
            source.next_index += 1

    def _admitted(self, books: Books, source: SourceState, batch: MicroBatch) -> None:
        """Record the admitted batch's offsets (the driver enacts its placement)."""
        indices = [int(d.handle) for d in batch.datasets]
        begin, end = min(indices), max(indices) + 1
        source.ranges[batch.id] = (begin, end)
        source.admitted_end = end
        books.notify_all()

    # ------------------------------------------------------------------ foreachBatch: the batch Spark runs

    def sink_starts(self, report: SinkStarts) -> SinkTurn:
        """The batch ``foreachBatch`` runs (:meth:`claim`), once its turn has come: an admitted batch passed the
        gate at admission and learns its pool; a replay, admitted here, waits for its turn here."""
        batch_id = self.claim(report.query, report.spark_batch_id)
        if batch_id is None:  # a no-data batch (watermark) or one pacer did not form
            return SinkTurn(None, None)
        source = self.sources[report.query]
        if source.observe_only:  # Spark's own trigger: pacer only observes
            with self.driver.books() as books:
                books.start(batch_id)
            return SinkTurn(batch_id, None)
        turn = self.driver.pass_turn(batch_id)  # passed at admission: its pool
        with self.driver.books():
            if batch_id not in self.gated:  # a replayed batch, admitted here: its wait counts here
                source.gate_wait_s.add(turn.waited_s)
        return SinkTurn(batch_id, turn.pool)

    def sink_returned(self, report: SinkReturned) -> None:
        """The sink returned: read the operator metrics (the next trigger replaces the executed plan), free the gate
        and leave completion to the trigger's progress event, after commitOffsets
        (:mod:`pacer_spark.driver.completion`)."""
        source = self.sources[report.query]
        metrics = []
        if self.collect_metrics and source.handle is not None:
            t0 = time.perf_counter()
            try:
                with self.driver.books() as books:
                    batch = books.batch(report.batch_id).batch
                    dag = books.query(report.query).spec.dag
                root = stream_query.executed_plan(source.handle)
                if root is None:
                    raise LookupError("the query has no executed plan yet")
                metrics = operator_metrics(root, dag, batch.placement, batch_bytes=batch.bytes, batch_rows=batch.rows)
            except Exception:
                log.debug("no operator metrics for %s", report.batch_id, exc_info=True)
            source.metrics_s.add(time.perf_counter() - t0)
        self.driver.sink_done(report.query, SinkDone(report.batch_id, report.spark_batch_id, time.time(), metrics))

    def claim(self, query_id: str, spark_batch_id: int) -> str | None:
        """The pacer batch Spark's batch ``spark_batch_id`` runs: the admitted one, or a replay admitted now.

        The offset log is the truth: an admitted batch whose range is not the one Spark logged for this batch was
        never answered to the reader (it gave up waiting and admitted what was available on its own): it is taken
        back, and the logged range is the batch, exactly (datasets already handed to the Controller included).

        :return: None for a no-data batch (a watermark's) or one pacer did not form.
        """
        source = self.sources[query_id]
        span = source.logged_range(spark_batch_id)  # a file read through Py4J: outside the lock
        with self.driver.books() as books:
            source.spark_batches += 1
            # the previous batch ended before this one began: completed now if its listener event is late, else this
            # batch (one the reader admitted on its own, as during its back-off) would look like one pacer did not form
            self._completed_from_buffer(books, source)
            q = books.query(query_id)
            if q.in_flight is not None:
                # admitted for this trigger: not started yet, or started by the gate at admission and its sink
                # not run yet (one that ran waits only for its progress: this is a batch pacer did not form)
                fresh = not q.in_flight_started or (q.in_flight in self.gated
                                                   and not books.awaiting(q.in_flight))
                if not fresh:
                    return None
                decided = source.ranges.get(q.in_flight)
                if span is None or decided is None or decided == span[:2]:
                    source.claimed = q.in_flight
                    return q.in_flight
                self._retract(books, query_id, q.in_flight, f"Spark batch {spark_batch_id} reads datasets "
                              f"{span[0]}..{span[1] - 1}, not {decided[0]}..{decided[1] - 1}: the reader admitted "
                              "without the answer")
            # No admitted batch: a replay after restart, an admission the reader made alone, or a no-data batch.
            if span is None or span[1] <= span[0]:
                return None
            begin, end, shed = span
            buffered = {int(d.handle): d.id for d in books.buffered(query_id)}
            ids: list[str] = []
            if source.next_index is None or source.next_index < begin:
                source.next_index = begin
            for index in range(begin, end):
                if index in shed:  # shed by the first attempt: the replay does not read it either
                    continue
                if index in buffered:
                    ids.append(buffered[index])
                    continue
                if index < source.next_index:  # handed over and processed before: not read twice
                    continue
                dataset = source.dataset(index)
                if dataset is None:
                    source.load_manifest()
                    dataset = source.dataset(index)
                if dataset is None:
                    log.warning("query %r: cannot describe dataset %d of Spark batch %d; not tracked",
                                query_id, index, spark_batch_id)
                    return None
                books.arrive(query_id, dataset)
                ids.append(dataset.id)
                source.next_index = index + 1
            if not ids:
                return None
            batch = books.admit_exactly(query_id, ids)
            self._admitted(books, source, batch)
            source.claimed = batch.id
            source.unanswered += 1
            if batch.placement is not None:  # Spark planned it before pacer formed it: no placement was enacted
                books.record_enactment(batch.id, False, "not enacted: Spark planned the batch before "
                                                 "pacer formed it (a replay, or an admission the reader made alone)")
            log.info("query %r: Spark batch %d reads datasets %d..%d, admitted without a decision (a replay from "
                     "the checkpoint, or the reader's own); accounted exactly", query_id, spark_batch_id, begin,
                     end - 1)
            return batch.id

    def _retract(self, books: Books, query_id: str, batch_id: str, why: str) -> None:
        """Take back an admitted batch Spark never ran: its datasets wait again (:meth:`pacer.reconcile.Reconciliation.retract`)."""
        source = self.sources[query_id]
        books.take_back(query_id, batch_id)
        self.gated.discard(batch_id)
        source.ranges.pop(batch_id, None)
        source.admitted_end = None
        source.retracted += 1
        log.warning("query %r: batch %s taken back: %s", query_id, batch_id, why)

    def completed(self, books: Books, query_id: str, batch_id: str) -> None:
        """The batch completed: forget its offsets."""
        self.gated.discard(batch_id)
        source = self.sources.get(query_id)  # None for a format("pacer") query
        if source is not None:
            source.ranges.pop(batch_id, None)

    # ------------------------------------------------------------------ reading

    def drained(self) -> bool:
        """True when every source is done: generated traffic fully processed, no file dataset waiting."""
        with self.driver.books() as books:
            for query_id, source in self.sources.items():
                if source.dead:
                    if source.error:
                        return False
                    continue
                q = books.query(query_id)
                if q.in_flight is not None or q.buffered_count or not source.drained():
                    return False
            return True

    def failed(self) -> bool:
        """Whether a source's query terminated with an error."""
        return any(s.dead and s.error for s in self.sources.values())

    def stop(self, timeout: float, query_ids: Sequence[str] | None = None) -> None:
        """Mark the sources of ``query_ids`` (default: every one) dead, so that no ask of theirs waits for an answer
        (a reader interrupted inside one fails its stream thread), and stop each query, between batches when it can."""
        stopping = [s for s in self.sources.values() if query_ids is None or s.query_id in query_ids]
        with self.driver.books() as books:
            for source in stopping:
                source.dead = True
            books.notify_all()
        for source in stopping:
            handle = source.handle
            if handle is None or not handle.isActive:
                continue
            limit = time.monotonic() + timeout
            try:
                while time.monotonic() < limit and handle.isActive and handle.status.get("isTriggerActive"):
                    time.sleep(0.05)
                handle.stop()
            except Exception:  # already failing or stopped
                log.debug("stopping %s", source.query_id, exc_info=True)


@dataclass(frozen=True)
class ReaderAsk:
    """A reader's ``latestOffset`` (RPC ``op: latest``): what it listed and how far it can read.

    :ivar query: the query; ``start``: the offset its next batch starts at; ``new``: files it listed since its last
        ask (``pacer-files``: index, name, arrival, bytes, rows); ``rtt``: its last call's round trip (s);
        ``until``: under ``availableNow``, the offset the run ends at (None: not availableNow); ``available``: one past
        the newest dataset it can read now (None: not said); nothing past either is admitted.
    """

    query: str
    start: int
    new: tuple[Mapping[str, Any], ...] = ()
    rtt: float | None = None
    until: int | None = None
    available: int | None = None


@dataclass(frozen=True)
class ReaderAnswer:
    """The answer to a :class:`ReaderAsk`: the next batch's end (``start``: none now) and the offsets it shed."""

    end: int
    shed: tuple[int, ...] = ()


@dataclass(frozen=True)
class SinkStarts:
    """A ``pacer-gen``/``pacer-files`` query's ``foreachBatch`` begins Spark batch ``spark_batch_id``."""

    query: str
    spark_batch_id: int


@dataclass(frozen=True)
class SinkTurn:
    """The answer to :class:`SinkStarts`: the pacer batch the sink runs (None: a no-data batch, or one pacer did not
    form: the sink runs as it is) and the fair-scheduler pool its jobs take (None: the default)."""

    batch_id: str | None
    pool: str | None


@dataclass(frozen=True)
class SinkReturned:
    """The sink of pacer batch ``batch_id`` (Spark batch ``spark_batch_id``) returned: its trigger commits."""

    query: str
    batch_id: str
    spark_batch_id: int


@dataclass(frozen=True)
class ManifestAsk:
    """Where a ``pacer-files`` query's manifest is (RPC ``op: manifest``), asked before the reader first reads it."""

    query: str


@dataclass(frozen=True)
class ManifestAnswer:
    """The manifest's path (in the query's checkpoint once known)."""

    path: str


class _LatestStep:
    """One :class:`ReaderAsk`, stepped by the driver's admission loop (:class:`pacer_spark.driver.loop.Ask`).

    :ivar reply: the answer: the start (wait), or the admitted batch's end and the offsets it shed.
    """

    def __init__(self, service: AdmissionService, report: ReaderAsk) -> None:
        self.service = service
        self.query_id = report.query
        self.start = report.start
        self.new = report.new
        self.rtt = report.rtt
        self.until = report.until
        #: one past the newest dataset the reader can read (it bounds the answer to it): the source's truth
        self.available = report.available
        self.drain = report.until is not None  # availableNow: nothing more will come, an empty answer ends the run
        self.whole = False  # a reader's run is never one batch of everything (availableNow drains in batches)
        self.reply = ReaderAnswer(report.start)
        self.batch_id: str | None = None

    def report(self, books: Books) -> bool:
        """What the reader listed; the previous batch completed from its progress."""
        return self.service._listed(books, self)

    def arrive(self, books: Books) -> None:
        """Every dataset that has arrived (under availableNow, none at or past ``until``)."""
        source = self.service._source(books, self.query_id)
        limits = [e for e in (self.until, self.available) if e is not None]
        self.service._arrive_available(books, source, time.time(), min(limits) if limits else None)
        self.service.polls += 1

    def admitted(self, books: Books, batch: MicroBatch) -> bool:
        """Record the batch and the offsets it shed; it passes the gate unless Spark's own trigger decides."""
        source = self.service._source(books, self.query_id)
        self.service._admitted(books, source, batch)
        self.batch_id = batch.id
        taken = {int(d.handle) for d in batch.datasets}  # the rest of [start, end) was shed: not to be read
        source.shed = [i for i in range(self.start, source.admitted_end or self.start) if i not in taken]
        self.reply = ReaderAnswer(source.admitted_end if source.admitted_end is not None else self.start,
                                  tuple(source.shed))
        return not source.observe_only

    @property
    def stream_id(self) -> str | None:
        """The reader's streaming query's id (a Py4J call); None before the query started."""
        handle = self.service.sources[self.query_id].handle
        return handle.id if handle is not None else None

    @property
    def own(self) -> tuple[str, ...]:
        """Nothing to add to a drain's batch: the reader is its query's only source, and the batch takes its oldest
        data first."""
        return ()

    def passed(self, books: Books, turn: Turn) -> None:
        """Keep the gate's wait; the batch's pool is set in its ``foreachBatch``."""
        assert self.batch_id is not None
        self.service.gated.add(self.batch_id)
        self.service.sources[self.query_id].gate_wait_s.add(turn.waited_s)


__all__ = ["AdmissionService", "ManifestAnswer", "ManifestAsk", "ReaderAnswer", "ReaderAsk", "ReplayGuard",
           "SinkReturned", "SinkStarts", "SinkTurn", "SourceState"]
