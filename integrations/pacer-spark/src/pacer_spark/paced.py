"""The admission service of ``format("pacer")`` queries: the user's own query, paced by the Controller.

The JVM source (``jvm/``) calls :meth:`PacedQueries.decide` on the query's stream thread, in
``latestOffset``, before the batch is planned. Here:

1. the query is registered with the Controller on its first request, under its ``queryName``, with
   the source's ``pacer.deadline``, ``pacer.admission``, ``pacer.placement`` and
   ``pacer.param.<admission|placement>.<name>`` options over the session's defaults;
2. the previous batch of the query is completed from the query's own progress buffer (its trigger
   has ended: the stream thread is asking for the next one), or earlier by the listener's event;
3. each snapshot not seen before (up to the source's read limit, ``admissible``) arrives as one
   dataset, dated by its data's own times where the source has them (:func:`~pacer_spark.wrapper.snapshot_spans`;
   the report's ``arrival`` is then ``"source-time"``), else by the JVM's previous look (``"first-seen"``);
   bytes = file sizes or rows x the schema's row size, rows = the offset delta or bytes / bytes per row;
4. the Controller polls the query's admission strategy; its batch is the oldest snapshots, and
   the batch ends at the last one;
5. the batch passes the :class:`~pacer_spark.gate.Gate` right there: FIFO/EDF wait for their turn,
   FAIR/RDAS get their pool, which the JVM sets on the stream thread.

Under ``trigger(availableNow=True)``, or while a caller waits in ``processAllAvailable()``, a "wait" admits every
admissible snapshot instead (Spark ends both at the first trigger without new data).

The source is the truth: before each decision the query's state is rebuilt from what the asking source reports
(the protocol, its messages and the state machine of one query are in the README of pacer-spark): admissions it
made without an answer become exactly the batch Spark ran (a decided batch Spark did not run is taken back), a
batch Spark replayed from its offset log is accounted once, a request overtaken by a later one is dropped, a new
Spark run gives back what the previous one held, and several paced sources of one query (a union, a join) are
one query with one deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pacer import Dataset, MicroBatch, OperatorMetric
from pacer_spark import model_store, spark_jvm, telemetry
from pacer_spark.locking import Held
from pacer_spark.options import parse_seconds
from pacer_spark.paced_ask import SourceAsk
from pacer_spark.paced_state import (
    DEFAULT_MAX_AGE_S,
    InFlight,
    PacedQuery,
    SourceRun,
    changed_options,
    check_options,
    merged_options,
)
from pacer_spark.plan import dag_from_plan, operator_metrics
from pacer_spark.wrapper import (
    Decision,
    DecisionRequest,
    FailedOpen,
    OffsetSnapshot,
    PacerBridge,
    StopEvent,
    snapshot_spans,
)

if TYPE_CHECKING:
    from pacer_spark.config import PacerConfig
    from pacer_spark.driver import Driver

log = logging.getLogger("pacer_spark.paced")

#: Bytes per row assumed for a file source's snapshot before any batch measured it.
DEFAULT_ROW_BYTES = 64

#: Rows of the first batch of a query whose service-time model is not fitted yet (a start or restart with a
#: backlog), doubling with each batch until it is: a Kafka query started with 480 000 records waiting took them
#: all in its first batch before. The wrapped source's own read cap, when set, bounds it further.
PROBE_ROWS = 10_000


def _source_of(dataset_id: str) -> tuple[str, int]:
    """The source run and snapshot seq of a snapshot's dataset id (``<run>:<seq>``)."""
    run, _, seq = dataset_id.rpartition(":")
    return run, int(seq)


class PacedQueries:
    """Decides every ``format("pacer")`` query of one attached session: the Py4J front end of its
    :class:`~pacer_spark.driver.Driver` (an :class:`~pacer_spark.driver.Owner` registered with it).

    Creating it builds and loads the JVM source if needed and registers itself as the decider of
    every query (``"*"``) with the JVM's registry, for ``spark`` first (see
    :class:`~pacer_spark.wrapper.PacerBridge`).

    :param driver: the session's driver (Controller, lock, completion, gate, replay guard).
    :param spark: the attached SparkSession; ``config``: the session's configuration (defaults per query).
    :param register_query: registers a new query with the Controller, with the session's defaults
        (:meth:`pacer_spark.runtime.PacerSession.register_query`).
    """

    def __init__(self, driver: Driver, spark: Any, config: PacerConfig, register_query: Callable[..., Any]) -> None:
        self.driver = driver
        self.spark = spark
        self.config = config
        self.register_query = register_query
        driver.register(self)
        self.bridge: PacerBridge | None = None
        self.queries: dict[str, PacedQuery] = {}
        self._batch_query: dict[str, str] = {}
        self._by_spark_run: dict[str, str] = {}

    def connect(self) -> None:
        """Build and load the JVM source if needed and decide every query (``"*"``) of the session from now on."""
        self.bridge = PacerBridge(self.spark, timeout_s=self.config.decide_timeout_s)
        self.bridge.register_handler("*", self.decide, self.stopped)

    # ------------------------------------------------------------------ the decision

    def decide(self, request: DecisionRequest) -> Decision:
        """Answer one ``latestOffset`` of a ``format("pacer")`` source (module docstring) through the driver's
        admission loop (:meth:`pacer_spark.driver.Driver.decide`)."""
        t0 = time.perf_counter()
        ask = SourceAsk(self, request)
        admitted = self.driver.decide(ask)
        waited = admitted.turn.waited_s if admitted is not None and admitted.turn is not None else 0.0
        if ask.q is not None:
            ask.q.decide_s.add(time.perf_counter() - t0 - waited)
        if ask.error is not None:
            return Decision(None, error=ask.error)
        if admitted is None:  # nothing now, or its part of the batch another source of the query admitted
            return Decision(ask.index)
        return Decision(ask.index, pool=admitted.turn.pool if admitted.turn is not None else None)

    def admitted(self, held: Held, q: PacedQuery, request: DecisionRequest, batch: MicroBatch) -> int | None:
        """Record the admitted batch (it runs in the request's Spark batch); the index of the asking source's last
        snapshot in it (None: the batch holds none of this source's data; another source of the query reads it)."""
        parts: dict[str, set[int]] = {}
        for dataset in batch.datasets:
            run, seq = _source_of(dataset.id)
            parts.setdefault(run, set()).add(seq)
        q.inflight = InFlight(batch.id, request.batch_id, {run: frozenset(seqs) for run, seqs in parts.items()})
        self.driver.engine.sink_done(q.query_id, telemetry.SinkDone(batch.id, request.batch_id, time.time(),
                                                                    running=True))
        self._batch_query[batch.id] = q.query_id
        return self.answer(q, request)

    @staticmethod
    def first_ask(q: PacedQuery, request: DecisionRequest) -> bool:
        """Whether ``request`` is the first ask of its trigger (only then may it admit a batch, which can span every
        source of the query: a source asked before it in the trigger was answered already). Spark asks a query's
        sources in one order each trigger; a source asking again in the same Spark batch starts a new trigger (the
        last one ran nothing)."""
        if request.trigger >= 0:
            key, new_trigger = request.trigger, q.asked_trigger != request.trigger
        elif request.batch_id >= 0:  # no trigger stamp: a source asking twice in one batch starts a new trigger
            key = request.batch_id
            new_trigger = q.asked_trigger != request.batch_id or request.run in q.asked_runs
        else:
            return True
        if new_trigger:
            q.asked_trigger, q.asked_runs = key, set()
        q.asked_runs.add(request.run)
        return len(q.asked_runs) == 1

    def answer(self, q: PacedQuery, request: DecisionRequest) -> int | None:
        """The asking source's part of the batch in flight: the index of its last snapshot (None: no part)."""
        assert q.inflight is not None
        mine = q.inflight.seqs(request.run)
        if not mine:
            return None
        last = max(mine)
        for index, snapshot in enumerate(request.snapshots):
            if snapshot.seq == last:
                return index
        raise RuntimeError(f"query {q.query_id!r}: snapshot {last} of the batch in flight is not pending at source "
                           f"{request.run}")

    def stale(self, held: Held, request: DecisionRequest) -> bool:
        """Whether ``request`` reached the driver after a later one of its source, or of a later run of its query
        (its source gave up waiting and went on): nothing in it is the source's state any more."""
        q = self.queries.get(request.query)
        if q is None:
            return False
        old_run = request.spark_run_id is not None and request.spark_run_id != q.spark_run_id and \
            request.spark_run_id in self._by_spark_run
        src = q.sources.get(request.run)
        if old_run or (src is not None and 0 < request.ask <= src.last_ask):
            q.stale += 1
            log.info("query %r: a request of source %s came after a later one (ask %d); dropped", q.query_id,
                     request.run, request.ask)
            return True
        return False

    def query_for(self, held: Held, request: DecisionRequest) -> PacedQuery:
        """The query of ``request``, registered with the Controller on first sight; a new Spark run of it (a
        restart) gives back what its previous run held; a second paced source of the same run (a union, a join)
        joins it, its options merged with the others'."""
        s = self.driver
        q = self.queries.get(request.query)
        options = check_options(request.options)
        if q is None:
            self._register(held, request.query, options)
            q = self.queries[request.query] = PacedQuery(request.query, source=request.source, options=options,
                                                         seen_at=time.time())
            log.info("query %r: paced by pacer (source %s, admission %s, deadline %s)", request.query,
                     request.source, s.controller.query(request.query).admission,
                     s.controller.query(request.query).spec.deadline)
        if request.query_id and request.query_id != q.stream_id:
            q.stream_id = request.query_id
        if request.run not in q.sources:
            new_run = (request.spark_run_id is None or request.spark_run_id != q.spark_run_id) if q.sources else True
            if new_run:  # the first source of a new run of the query: a start, or a restart
                if q.runs_seen:
                    self._restart(held, q)
                if q.runs_seen and options != q.options:  # restarted with other options: they hold from now on
                    log.info("query %r: restarted with other pacer options (%s)", q.query_id,
                             changed_options(q.options, options))
                    self._register(held, q.query_id, options, again=True)
                q.options = options
                q.sources = {}
                q.dead, q.error, q.holding, q.first_batch, q.asked_trigger = False, None, False, None, None
            else:  # another paced source of the same run: one query, one deadline
                merged = merged_options(q.query_id, q.options, options)
                if merged != q.options:
                    self._register(held, q.query_id, merged, again=True)
                    q.options = merged
            q.sources[request.run] = SourceRun(request.run)
            q.runs_seen = True
            if new_run:
                self._restore_model(q, request.source_checkpoint)
        q.sources[request.run].last_ask = max(q.sources[request.run].last_ask, request.ask)
        if request.spark_run_id and request.spark_run_id != q.spark_run_id:
            q.spark_run_id = request.spark_run_id
            self._by_spark_run[request.spark_run_id] = q.query_id
        return q

    def _restore_model(self, q: PacedQuery, source_checkpoint: str | None) -> None:
        """A run starts: take over the service-time model its checkpoint keeps (:mod:`pacer_spark.model_store`)."""
        q.model_file = model_store.model_path(source_checkpoint)
        state = model_store.load(q.model_file) if q.model_file is not None else None
        if state is None:
            return
        try:
            self.driver.controller.restore_service(q.query_id, state)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("query %r: the service-time model in %s is not usable (%s); the query starts with probe "
                        "batches", q.query_id, q.model_file, exc)
            return
        q.model_restored = True
        log.info("query %r: service-time model restored from %s", q.query_id, q.model_file)

    def _save_model(self, q: PacedQuery) -> None:
        """Keep the query's fitted model with its checkpoint, at most every ``SAVE_EVERY_S``."""
        now = time.monotonic()
        if q.model_file is None or now - q.model_saved_at < model_store.SAVE_EVERY_S:
            return
        state = self.driver.controller.service_state(q.query_id)
        if not state.get("n"):
            return
        q.model_saved_at = now
        model_store.save(q.model_file, state)

    def _restart(self, held: Held, q: PacedQuery) -> None:
        """A new run of ``q`` started: its previous run's batch completes (or is taken back when it never ran), and
        what that run observed but never admitted is given back (the new run observes it again from Spark's last
        committed offset)."""
        self._close_run(held, q, "restarted")
        self._give_back(q)

    def _register(self, held: Held, query_id: str, options: dict[str, str], *, again: bool = False) -> None:
        """Register the query with the Controller under its options (``again``: give a known one new options)."""
        s = self.driver
        params = {kind: {k[len(f"pacer.param.{kind}."):]: v for k, v in options.items()
                         if k.startswith(f"pacer.param.{kind}.")} for kind in ("admission", "placement")}
        deadline = parse_seconds(options["pacer.deadline"]) if "pacer.deadline" in options else None
        if again:
            c = self.config
            spec = replace(s.controller.query(query_id).spec, deadline=deadline or c.deadline)
            s.controller.reconfigure(spec, admission=options.get("pacer.admission") or c.admission,
                                     placement=options.get("pacer.placement") or c.placement,
                                     admission_params={**c.admission_params, **params["admission"]},
                                     placement_params={**c.placement_params, **params["placement"]})
            return
        if self.config.overload == "shed":
            s.gate.warn_once(f"no-shed-{query_id}", "query %r: format('pacer') reads every offset Spark "
                                      "logged, so it is never shed: its overload is reported, not dropped "
                                      "(overload=shed applies to pacer-gen/pacer-files queries)", query_id)
        self.register_query(query_id, deadline=deadline, admission=options.get("pacer.admission"),
                         placement=options.get("pacer.placement"), admission_params=params["admission"],
                         placement_params=params["placement"], overload="keep", probe_rows=PROBE_ROWS)
        s.controller.recorder.record(query_id).dated_by("first-seen")  # until a snapshot brings its own time

    # ------------------------------------------------------------------ the source's truth

    def take_reports(self, held: Held, q: PacedQuery, request: DecisionRequest) -> bool:
        """Rebuild the query's state from what the asking source reports before any decision (the protocol in
        ``integrations/pacer-spark/README.md``): the admissions it made without an answer, the end of the batch in
        flight, batches Spark replayed from its offset log, and its pending snapshots. Whether the ask is answered
        already (another source of the query asked first in this Spark batch: its part of that batch stands)."""
        src = q.sources[request.run]
        by_batch = self._progress(q, request.progress)
        q.failed_open_lost += request.failed_open_dropped
        for record in request.failed_open:
            self._failed_open(held, q, src, record, by_batch)
        self._settle(held, q, src, request, by_batch)
        if request.first_batch_id >= 0:
            q.first_batch = request.first_batch_id
        self._replays(held, q, by_batch)
        self._unreported(held, q, src, {snap.seq for snap in request.snapshots})
        return q.inflight is not None and q.inflight.spark_batch_id == request.batch_id

    def _replays(self, held: Held, q: PacedQuery, by_batch: dict[int, telemetry.TriggerProgress]) -> None:
        """Account the batches Spark ran before the run's first ask (it re-runs the last logged batch at a start
        without asking any source), each once."""
        for p in sorted(by_batch.values(), key=lambda p: p.batch_id):
            if p.rows > 0 and (p.run_id, p.batch_id) not in q.accounted and q.inflight is None and \
                    (q.first_batch is None or p.batch_id < q.first_batch):
                self._replayed(held, q, p)

    @staticmethod
    def _progress(q: PacedQuery, entries: tuple[dict[str, Any], ...]) -> dict[int, telemetry.TriggerProgress]:
        """The progress entries of the query's current Spark run, by Spark batch id, with the batch in flight's
        progress heard before (kept while a source's report of what it admitted into that batch is awaited)."""
        progress = [telemetry.TriggerProgress.from_json(p) for p in entries if "batchId" in p]
        by_batch = {p.batch_id: p for p in progress if p.run_id in (None, q.spark_run_id)}
        if q.inflight_progress is not None:
            by_batch.setdefault(q.inflight_progress.batch_id, q.inflight_progress)
        return by_batch

    def _settle(self, held: Held, q: PacedQuery, src: SourceRun, request: DecisionRequest,
                by_batch: dict[int, telemetry.TriggerProgress]) -> None:
        """The batch in flight, against the asking source: complete it when its trigger reported; take back this
        source's part when Spark went on to a later batch while the source still holds that part pending (it never
        admitted it: the answer never reached it)."""
        inflight = q.inflight
        if inflight is None:
            return
        progress = by_batch.get(inflight.spark_batch_id)
        if progress is not None and not progress.unanswered:
            self._complete(held, q, progress, event=False)
            return
        if progress is not None:  # a source admitted otherwise: its own ask reports what, and completes it
            q.inflight_progress = progress
            return
        pending = {snap.seq for snap in request.snapshots}
        if request.batch_id != inflight.spark_batch_id and inflight.seqs(src.run) & pending:
            log.warning("query %r: Spark batch %d ran without the part pacer admitted from source %s (the answer "
                        "never reached it); that part waits again", q.query_id, inflight.spark_batch_id, src.run)
            self._rebuild(held, q, {**inflight.parts, src.run: frozenset()}, inflight.spark_batch_id)

    def _failed_open(self, held: Held, q: PacedQuery, src: SourceRun, record: FailedOpen,
                     by_batch: dict[int, telemetry.TriggerProgress]) -> None:
        """The source admitted ``record``'s snapshots in Spark batch ``record.batch_id`` without an answer: that is
        what Spark ran. A decision the driver made for that batch that never reached the source is taken back; an
        earlier batch still in flight ran (Spark went on) and completes. Idempotent: the source reports a record
        until an answer reaches it, and an answer can be lost after the driver acted on it."""
        key = (src.run, record.batch_id)
        if key in q.reconciled:
            return
        q.reconciled.add(key)
        q.failed_open += 1
        seqs = frozenset(snap.seq for snap in record.snapshots)
        log.warning("query %r: Spark batch %d was admitted without pacer's decision (%s); accounted from the "
                    "source's report (%d snapshots)", q.query_id, record.batch_id, record.reason, len(seqs))
        inflight = q.inflight
        later: InFlight | None = None
        if inflight is not None and inflight.spark_batch_id == record.batch_id:
            parts = {**inflight.parts, src.run: seqs}  # what Spark read from this source, beside the others' parts
        else:
            if inflight is not None and 0 <= record.batch_id < inflight.spark_batch_id:
                later = inflight  # decided after this record's batch ran (its source never reached the driver)
                self._retract(held, q)
            elif inflight is not None:  # an earlier batch: Spark went on to this one, so that one ran
                self._finish(held, q, by_batch.get(inflight.spark_batch_id))
            parts = {src.run: seqs}
        done = {snap.seq for snap in record.snapshots if self.driver.controller.ledger.finished(
            q.query_id, f"{src.run}:{snap.seq}")}
        if done:  # completed already as the batch decided for them (the same snapshots): accounted once
            parts[src.run] = seqs - done
        for snap in record.snapshots:
            if snap.seq not in src.arrived and snap.seq not in done:
                self._arrive(q, src, snap)
        self._rebuild(held, q, parts, record.batch_id)
        progress = by_batch.get(record.batch_id)
        if progress is not None:
            self._complete(held, q, progress, event=False)
        if later is not None:  # the batch decided after it is in flight again, less what this source read here
            if q.inflight is not None:
                self._finish(held, q, None)
            self._rebuild(held, q, {**later.parts, src.run: later.seqs(src.run) - seqs}, later.spark_batch_id)

    def _rebuild(self, held: Held, q: PacedQuery, parts: dict[str, frozenset[int]], spark_batch_id: int) -> None:
        """Make the batch in flight for ``spark_batch_id`` exactly ``parts`` (what the sources really admitted):
        the driver's own batch, if any, is taken back first; no batch when ``parts`` is empty."""
        if q.inflight is not None and q.inflight.spark_batch_id == spark_batch_id:
            self._retract(held, q)
        parts = {run: seqs for run, seqs in parts.items() if seqs}
        if not parts:
            return
        ids = [q.sources[run].arrived[seq] for run, seqs in parts.items() for seq in sorted(seqs)]
        batch = self.driver.controller.admit_exactly(q.query_id, ids)
        q.forced += 1
        self.driver.controller.start(batch.id)
        self.driver.engine.sink_done(q.query_id, telemetry.SinkDone(batch.id, spark_batch_id, time.time(),
                                                                    running=True))
        self._batch_query[batch.id] = q.query_id
        q.inflight = InFlight(batch.id, spark_batch_id, parts)

    def _retract(self, held: Held, q: PacedQuery) -> None:
        """Take back the batch in flight: Spark never ran it as admitted. Its snapshots wait again."""
        inflight = q.inflight
        assert inflight is not None
        self.driver.engine.forget(held, q.query_id)
        self.driver.controller.retract(inflight.batch_id)
        self._batch_query.pop(inflight.batch_id, None)
        for run, seqs in inflight.parts.items():  # buffered again: their sources' books hold them
            src = q.sources.get(run)
            for seq in seqs if src is not None else ():
                src.arrived[seq] = f"{run}:{seq}"  # type: ignore[union-attr]
        q.inflight, q.inflight_progress = None, None
        q.retracted += 1
        held.notify_all()

    def _finish(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress | None) -> None:
        """The batch in flight ran: complete it from its progress, or without it when none came."""
        if progress is not None:
            self._complete(held, q, progress, event=False)
            return
        done = self.driver.engine.give_up(held, q.query_id)
        if done is not None:
            q.given_up.add((None, done.spark_batch_id))
            q.accounted.add((q.spark_run_id, done.spark_batch_id))
        self._done(q)

    def _done(self, q: PacedQuery) -> None:
        """The batch in flight completed: its snapshots leave their sources' books."""
        inflight = q.inflight
        if inflight is None:
            return
        for run, seqs in inflight.parts.items():
            src = q.sources.get(run)
            for seq in seqs if src is not None else ():
                src.arrived.pop(seq, None)  # type: ignore[union-attr]
        self._batch_query.pop(inflight.batch_id, None)
        q.inflight, q.inflight_progress = None, None

    def _unreported(self, held: Held, q: PacedQuery, src: SourceRun, pending: set[int]) -> None:
        """Snapshots the driver buffers that the source no longer holds pending, outside the batch in flight: Spark
        read them in admissions whose records the source could no longer keep (``failed_open_dropped``). They ran:
        accounted as one batch, completed without its progress."""
        inflight = q.inflight.seqs(src.run) if q.inflight is not None else frozenset()
        gone = frozenset(seq for seq in src.arrived if seq not in pending and seq not in inflight)
        if not gone or q.inflight is not None:
            return
        log.warning("query %r: %d snapshots of source %s were read by Spark in admissions it could not report; "
                    "accounted as one batch", q.query_id, len(gone), src.run)
        self._rebuild(held, q, {src.run: gone}, -1)
        self._finish(held, q, None)

    def _complete(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress, *, event: bool) -> None:
        """Complete the query's batch in flight from its trigger's progress."""
        self._measured(held, q, progress)
        if self.driver.engine.on_progress(held, progress, event=event, query_id=q.query_id) is not None:
            self._done(q)
            self._save_model(q)

    def stopped(self, event: StopEvent) -> None:
        """A source run stopped (the JVM's ``stop``, after Spark's stream thread ended): a batch whose trigger
        reported completes; one whose trigger never ended is taken back (Spark replays it from its offset log at
        the next start, or the next run observes its data again); what the source held is given back."""
        with self.driver.guard.held() as held:
            if self.stale(held, event.as_request()):  # a run the query has since left behind
                return
            q = self.queries.get(event.query)
            if (q is None or event.run not in q.sources) and (event.failed_open or event.progress):
                # its asks never reached the driver, yet Spark ran batches: account them
                try:
                    q = self.query_for(held, event.as_request())
                except (ValueError, KeyError, LookupError):
                    log.warning("query %r: its source stopped after admissions pacer could not account (its pacer "
                                "options are refused)", event.query, exc_info=True)
                    return
            src = q.sources.get(event.run) if q is not None else None
            if q is None or src is None:
                return
            by_batch = self._progress(q, event.progress)
            if event.first_batch_id >= 0:
                q.first_batch = event.first_batch_id
            self._replays(held, q, {b: p for b, p in by_batch.items()
                                    if b not in {r.batch_id for r in event.failed_open}})
            for record in event.failed_open:
                if record.batch_id in by_batch:  # the trigger ended: it ran; else it never happened for Spark
                    self._failed_open(held, q, src, record, by_batch)
            inflight = q.inflight
            progress = by_batch.get(inflight.spark_batch_id) if inflight is not None else None
            if inflight is not None and progress is None:
                self._retract(held, q)
            elif progress is not None and not progress.unanswered:
                self._complete(held, q, progress, event=False)
            # else: another source of the query admitted into it unanswered; its stop event reports what
            self._give_back(q)
            q.dead = True
            held.notify_all()

    def _give_back(self, q: PacedQuery) -> int:
        """Withdraw every buffered snapshot of ``q`` (their sources offer them again: a restart re-observes them from
        the last committed offset, a source's next ask reports them pending); the batch in flight keeps its own."""
        withdrawn = self.driver.controller.withdraw(q.query_id)
        q.withdrawn += withdrawn
        for src in q.sources.values():
            keep = q.inflight.seqs(src.run) if q.inflight is not None else frozenset()
            src.arrived = {seq: dataset for seq, dataset in src.arrived.items() if seq in keep}
        return withdrawn

    def _close_run(self, held: Held, q: PacedQuery, why: str) -> None:
        """The run of ``q`` ended without telling which batch its trigger finished: its batch in flight completes
        now, without its progress (a replay of it by the next run is then not counted again)."""
        if q.inflight is not None:
            log.debug("query %r: run ended (%s); batch %s completed without its progress", q.query_id, why,
                      q.inflight.batch_id)
            self._finish(held, q, None)

    def arrive(self, held: Held, q: PacedQuery, request: DecisionRequest) -> None:
        """New snapshots (up to the read limit) arrive, each dated by :func:`~pacer_spark.wrapper.snapshot_spans`
        (after :meth:`_dated`)."""
        src = q.sources[request.run]
        now = min(time.time(), request.now)
        dated = tuple(self._dated(q, snap, now) if snap.seq not in src.arrived else snap for snap in request.snapshots)
        spans = snapshot_spans(dated, request.admissible, now)
        for snapshot, (oldest, newest) in zip(dated, spans, strict=False):
            if snapshot.seq not in src.arrived:
                self._arrive(q, src, snapshot, arrival=oldest, newest=newest)

    def _dated(self, q: PacedQuery, snapshot: OffsetSnapshot, now: float) -> OffsetSnapshot:
        """``snapshot`` as the query dates it: its source time kept where ``pacer.arrival`` is ``source`` and the time
        is believable; else dated when the JVM first saw it (zero, in the future, or older than the query's start by
        more than ``pacer.arrival.maxAge``: a producer's event time, a copy that kept old mtimes), counted and
        warned once. A source-timed query's snapshot that came without its time (reading it failed) is counted."""
        if q.options.get("pacer.arrival", "source").strip().lower() == "observed":
            return replace(snapshot, source_time=None, source_newest=None)
        if snapshot.source_time is not None and not q.source_timed:
            q.source_timed = True  # the source dates its data: the report says so from now on
            self.driver.controller.recorder.record(q.query_id).dated_by("source-time")
        if snapshot.source_time is None:
            if q.source_timed:
                q.source_time_missing += 1
                self.driver.gate.warn_once(f"undated-{q.query_id}", "query %r: a snapshot came without its data's "
                                           "own time (reading it failed); such snapshots are dated when first seen, "
                                           "counted in the report's source_time_missing", q.query_id)
            return snapshot
        max_age = parse_seconds(q.options.get("pacer.arrival.maxAge")) or DEFAULT_MAX_AGE_S
        believable = 0 < snapshot.source_time <= now + 1.0 and snapshot.source_time >= q.seen_at - max_age
        if believable:
            return snapshot
        q.source_time_clamped += 1
        self.driver.gate.warn_once(f"clamped-{q.query_id}", "query %r: a snapshot's source time %.3f is not an "
                                   "arrival (zero, in the future, or older than the query's start by more than "
                                   "pacer.arrival.maxAge, %.0f s): dated when pacer saw it. Set pacer.arrival=observed "
                                   "for a source whose times are event times", q.query_id, snapshot.source_time, max_age)
        return replace(snapshot, source_time=None, source_newest=None)

    def _arrive(self, q: PacedQuery, src: SourceRun, snapshot: OffsetSnapshot, *, arrival: float | None = None,
                newest: float | None = None) -> None:
        if arrival is None:  # an admission the source reported: dated as any other snapshot
            snapshot = self._dated(q, snapshot, time.time())
        dataset = self._dataset(q, src, snapshot, arrival=arrival, newest=newest)
        self.driver.controller.arrive(q.query_id, dataset)
        src.arrived[snapshot.seq] = dataset.id

    def _dataset(self, q: PacedQuery, src: SourceRun, snapshot: OffsetSnapshot, *, arrival: float | None = None,
                 newest: float | None = None) -> Dataset:
        row_bytes = q.read_bytes / q.read_rows if q.read_rows and q.read_bytes else DEFAULT_ROW_BYTES
        nbytes = snapshot.bytes if snapshot.bytes is not None else int((snapshot.rows or 0) * row_bytes)
        rows = snapshot.rows if snapshot.rows is not None else round(nbytes / max(row_bytes, 1.0))
        return Dataset(f"{src.run}:{snapshot.seq}", snapshot.data_arrival if arrival is None else arrival,
                       max(0, nbytes), max(0, rows), handle=snapshot.offset, newest=newest)

    def _force(self, held: Held, q: PacedQuery, count: int, why: str) -> MicroBatch | None:
        batch = self.driver.force(held, q.query_id, count)
        if batch is not None:
            q.forced += 1
            log.debug("query %r: %s (%d datasets)", q.query_id, why, count)
        return batch

    # ------------------------------------------------------------------ listener

    def owner(self, held: Held, run_id: str | None) -> str | None:
        """The pacer id of the ``format("pacer")`` query whose current Spark run is ``run_id`` (else None)."""
        query_id = self._by_spark_run.get(run_id or "")
        q = self.queries.get(query_id or "")
        return query_id if q is not None and q.spark_run_id == run_id else None

    def known_run(self, held: Held, run_id: str | None) -> bool:
        """Whether ``run_id`` is a run (current or past) of one of this session's ``format("pacer")`` queries."""
        return (run_id or "") in self._by_spark_run

    def running(self, held: Held, batch_id: str) -> bool:
        """Whether ``batch_id`` is a ``format("pacer")`` batch whose trigger has not reported yet."""
        return batch_id in self._batch_query

    def on_progress(self, held: Held, query_id: str, progress: telemetry.TriggerProgress) -> None:
        """A trigger of the current run of a paced query ended: complete its batch.

        Batches Spark replays from its offset log, and admissions the source made without an answer (its progress
        says ``pacer.unanswered``), are accounted from the source's next request, which reports both
        (:meth:`take_reports`).
        """
        q = self.queries[query_id]
        if self.driver.engine.waiting_spark_batch(held, q.query_id) == progress.batch_id and not progress.unanswered:
            self._complete(held, q, progress, event=True)
            return
        # counts the trigger's engine time; a batch a source admitted without an answer is not the one decided: it
        # completes from that source's next ask, which reports what it admitted
        if q.inflight is not None and q.inflight.spark_batch_id == progress.batch_id:
            q.inflight_progress = progress
        self.driver.engine.on_progress(held, progress, query_id=q.query_id, complete=False)

    def _replayed(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        """Spark ran a batch from its offset log without asking the source: account it once."""
        s = self.driver
        q.accounted.add((progress.run_id, progress.batch_id))
        if (None, progress.batch_id) in q.given_up:  # completed when the run that first ran it stopped
            return
        arrival = progress.started_at or progress.delivered_at
        self._give_back(q)  # keeps the order: the replay came before them
        dataset = Dataset(f"replay:{q.stream_id}:{progress.batch_id}", arrival, progress.rows * DEFAULT_ROW_BYTES,
                          progress.rows)
        s.controller.arrive(q.query_id, dataset)
        batch = self._force(held, q, 1, f"Spark replayed batch {progress.batch_id} from its offset log")
        if batch is not None:
            s.controller.start(batch.id)
            s.controller.complete(batch.id, engine_s=progress.engine_s, completed_at=progress.ended_at)
            q.replays += 1
            log.info("query %r: batch %d was replayed from the checkpoint (%d rows); accounted once",
                     q.query_id, progress.batch_id, progress.rows)

    def _measured(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        """Keep what the trigger of the batch in flight measured (bytes per row: how snapshots are sized)."""
        q.accounted.add((progress.run_id, progress.batch_id))
        if progress.source_metrics:
            q.source_metrics = dict(progress.source_metrics)
        if q.inflight is None or q.inflight.spark_batch_id != progress.batch_id:
            return
        try:
            q.read_bytes += self.driver.controller.batch(q.inflight.batch_id).batch.bytes
            q.read_rows += progress.rows
        except KeyError:
            pass

    def executed_metrics(self, held: Held, query_id: str, done: telemetry.SinkDone,
                         progress: telemetry.TriggerProgress) -> list[OperatorMetric]:
        """The batch's operator metrics from the query's executed plan (the engine's ``read_metrics``).

        Read while the plan is still the batch's own (Spark replaces ``lastExecution`` when it plans the next
        batch, so a later batch's plan is never taken for it). The first plan read also replaces the minimal
        chain the query got when first seen with the DAG it really executes (``dag_from_plan``).
        """
        s = self.driver
        q = self.queries.get(query_id)
        if q is None or q.stream_id is None or not self.config.operator_metrics:
            return []
        try:
            root = spark_jvm.stream_executed_plan(self.spark, q.stream_id, progress.batch_id)
            if root is None:  # Spark planned the next batch already: this batch's plan is gone
                return []
            if not q.plan_dag:  # registered on first sight with the minimal chain: now the real DAG
                q.plan_dag = True
                s.controller.replace_dag(query_id, dag_from_plan(root))
            batch = s.controller.batch(done.batch_id).batch
            return operator_metrics(root, s.controller.query(query_id).spec.dag, batch.placement,
                                    batch_bytes=batch.bytes, batch_rows=batch.rows)
        except Exception:  # py4j or a plan pacer cannot read: the batch completes without operator metrics
            log.debug("query %r: no operator metrics for batch %s", query_id, done.batch_id, exc_info=True)
            return []

    def on_terminated(self, held: Held, query_id: str, error: str | None) -> None:
        """The current run of the query stopped or failed (the listener, matched by run id)."""
        q = self.queries[query_id]
        q.dead, q.error = True, q.error or error
        self._close_run(held, q, "terminated")

    # ------------------------------------------------------------------ reading

    def hold(self, query_id: str) -> bool:
        """Admit no further batch of ``query_id``, so that stopping it interrupts none (Spark's ``stop()`` interrupts
        the running batch, which its next run redoes); False when it is no ``format("pacer")`` query here."""
        with self.driver.guard.held() as held:
            q = self.queries.get(query_id)
            if q is not None:
                q.holding = True
                held.notify_all()
            return q is not None

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is a ``format("pacer")`` query of this session."""
        return query_id in self.queries

    def completed(self, held: Held, query_id: str, batch_id: str) -> None:
        """A batch completed: nothing to forget (its snapshots left with its decision)."""

    def dead(self, held: Held, query_id: str) -> bool:
        """Whether the paced query ``query_id`` terminated."""
        q = self.queries.get(query_id)
        return q is not None and q.dead

    def summary(self) -> dict[str, Any]:
        """Per query: decisions, forced admissions, withdrawn and replayed datasets, gate waits, decide times."""
        return {q.query_id: q.summary() for q in self.queries.values()}

    def close(self) -> None:
        """Unregister from the JVM: a ``format("pacer")`` query still running then admits everything."""
        if self.bridge is not None:
            self.bridge.close()
