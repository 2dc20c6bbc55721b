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

Under ``trigger(availableNow=True)`` a "wait" admits every admissible snapshot instead (Spark ends
such a query at its first empty trigger). A restarted query (a new source run) gives back the
snapshots its previous run observed but never admitted (:meth:`pacer.Controller.withdraw`): the
new run observes the same data again from the last committed offset. A batch Spark replays from its
offset log without asking the source (after a crash) is accounted once, from its progress event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pacer import Dataset, MicroBatch, OperatorMetric
from pacer_spark import spark_jvm, telemetry
from pacer_spark.locking import Held
from pacer_spark.options import parse_seconds
from pacer_spark.paced_ask import SourceAsk
from pacer_spark.paced_state import InFlight, PacedQuery, changed_options, check_options, without_engine_time
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
        self.bridge = PacerBridge(spark, timeout_s=config.decide_timeout_s)
        self.queries: dict[str, PacedQuery] = {}
        self._batch_query: dict[str, str] = {}
        self._by_spark_run: dict[str, str] = {}
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
        if admitted is None or ask.index is None:
            return Decision(None)
        return Decision(ask.index, pool=admitted.turn.pool if admitted.turn is not None else None)

    def admitted(self, held: Held, q: PacedQuery, request: DecisionRequest, batch: MicroBatch) -> int:
        """Record the admitted batch (it runs in the request's Spark batch); the index of its last snapshot."""
        index = self._end_index(q, batch, request.snapshots)
        seqs = frozenset(snap.seq for snap in request.snapshots[: index + 1])
        for seq in seqs:
            q.arrived.pop(seq, None)
        q.inflight = InFlight(batch.id, request.batch_id, seqs)
        self.driver.engine.sink_done(q.query_id, telemetry.SinkDone(batch.id, request.batch_id, time.time(),
                                                                    running=True))
        self._batch_query[batch.id] = q.query_id
        return index

    def query_for(self, held: Held, request: DecisionRequest) -> PacedQuery:
        """The query of ``request``, registered with the Controller on first sight."""
        s = self.driver
        q = self.queries.get(request.query)
        if q is None:
            options = check_options(request.options)
            self._register(held, request.query, options)
            q = self.queries[request.query] = PacedQuery(request.query, source=request.source, options=options)
            log.info("query %r: paced by pacer (source %s, admission %s, deadline %s)", request.query,
                     request.source, s.controller.query(request.query).admission,
                     s.controller.query(request.query).spec.deadline)
        if request.query_id and request.query_id != q.stream_id:
            q.stream_id = request.query_id
        if q.run != request.run:  # a new run of the query (a restart, in this session or after a crash)
            options = check_options(request.options)
            if options != q.options:  # restarted with other options: they hold from this run on
                log.info("query %r: restarted with other pacer options (%s)", q.query_id,
                         changed_options(q.options, options))
                self._register(held, q.query_id, options, again=True)
                q.options = options
            if q.run is not None:
                q.withdrawn += s.controller.withdraw(q.query_id)
                self._close_run(held, q, "restarted")
            q.run, q.arrived, q.dead, q.error, q.inflight, q.holding = request.run, {}, False, None, None, False
        if request.spark_run_id and request.spark_run_id != q.spark_run_id:
            q.spark_run_id = request.spark_run_id
            self._by_spark_run[request.spark_run_id] = q.query_id
        return q

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
                         placement_params=params["placement"], overload="keep")
        s.controller.recorder.record(query_id).dated_by("first-seen")  # until a snapshot brings its own time

    def take_reports(self, held: Held, q: PacedQuery, request: DecisionRequest) -> None:
        """What the request reports before its snapshots: the progress of finished batches, the
        admissions the source made without an answer, and batches Spark replayed from its offset log."""
        progress = [telemetry.TriggerProgress.from_json(p) for p in request.progress if "batchId" in p]
        by_batch = {p.batch_id: p for p in progress if p.run_id in (None, q.spark_run_id)}
        waiting = self.driver.engine.waiting_spark_batch(held, q.query_id)
        if waiting is not None and waiting in by_batch:
            self._complete(held, q, by_batch[waiting], event=False)
        q.failed_open_lost += request.failed_open_dropped
        for record in request.failed_open:
            self._failed_open(held, q, record, by_batch.get(record.batch_id))
        for p in by_batch.values():
            key = (p.run_id, p.batch_id)
            if p.rows > 0 and key not in q.accounted and not self.driver.controller.busy(q.query_id):
                self._replayed(held, q, p)

    def _complete(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress, *, event: bool) -> None:
        """Complete the query's waiting batch from its trigger's progress."""
        self._measured(held, q, progress)
        self.driver.engine.on_progress(held, progress, event=event, query_id=q.query_id)

    def _failed_open(self, held: Held, q: PacedQuery, record: FailedOpen,
                     progress: telemetry.TriggerProgress | None) -> None:
        """The source admitted ``record``'s snapshots without an answer: account them as one batch.

        A decision the driver made too late (the JVM had given up waiting) covers the oldest of them: that batch
        stands, the rest is admitted after it. Idempotent: the source reports a record until an answer reaches it,
        and an answer can be lost after the driver acted on it (a broken connection, a timeout).
        """
        s = self.driver
        if (q.run, record.batch_id) in q.reconciled:  # reported again: an answer the source never got
            return
        q.reconciled.add((q.run, record.batch_id))
        q.failed_open += 1
        late = q.inflight if q.inflight is not None and q.inflight.spark_batch_id == record.batch_id and \
            q.inflight.seqs <= {snap.seq for snap in record.snapshots} else None
        rest = [snap for snap in record.snapshots if late is None or snap.seq not in late.seqs]
        log.warning("query %r: Spark batch %d was admitted without pacer's decision (%s); accounted from the "
                    "source's report (%d snapshots)", q.query_id, record.batch_id, record.reason, len(record.snapshots))
        if s.controller.busy(q.query_id):  # a late decision never completed: the source moved on without it
            s.engine.give_up(held, q.query_id)
            self._forget_batches(held, q.query_id)
        if rest:
            for snap in rest:
                if snap.seq not in q.arrived:
                    dataset = self._dataset(q, snap)
                    s.controller.arrive(q.query_id, dataset)
                    q.arrived[snap.seq] = dataset.id
            ids = [q.arrived.pop(snap.seq) for snap in rest]
            oldest = [d.id for d in s.controller.buffered(q.query_id)][: len(ids)]
            if oldest != ids:
                log.error("query %r: the source's failed-open admission %s is not the oldest buffered %s",
                          q.query_id, ids, oldest)
            batch = self._force(held, q, len(ids), f"Spark batch {record.batch_id} admitted without a decision")
            if batch is not None:
                s.controller.start(batch.id)
                done = telemetry.SinkDone(batch.id, record.batch_id, time.time(), running=True)
                s.engine.sink_done(q.query_id, done)
                self._batch_query[batch.id] = q.query_id
                if progress is not None:
                    self._complete(held, q, progress if late is None else without_engine_time(progress), event=False)
        q.inflight = None
        q.accounted.add((q.spark_run_id, record.batch_id))

    def stopped(self, event: StopEvent) -> None:
        """A source run stopped (the JVM's ``stop``): account what it admitted unanswered, release its batch."""
        with self.driver.guard.held() as held:
            q = self.queries.get(event.query)
            if q is None or q.run != event.run:
                return
            for record in event.failed_open:
                self._failed_open(held, q, record, None)
            self._close_run(held, q, "stopped")
            q.dead = True
            held.notify_all()

    def _close_run(self, held: Held, q: PacedQuery, why: str) -> None:
        """The run of ``q`` ended: its batch still running completes now, without its progress."""
        done = self.driver.engine.give_up(held, q.query_id)
        if done is not None:
            q.given_up.add((None, done.spark_batch_id))
            log.debug("query %r: run %s %s; batch %s completed without its progress", q.query_id, q.run, why,
                      done.batch_id)
        self._forget_batches(held, q.query_id)
        q.inflight = None

    def _forget_batches(self, held: Held, query_id: str) -> None:
        """No batch of ``query_id`` is running any more."""
        self._batch_query = {b: qid for b, qid in self._batch_query.items() if qid != query_id}

    def arrive(self, held: Held, q: PacedQuery, request: DecisionRequest) -> None:
        """New snapshots (up to the read limit) arrive, each dated by :func:`~pacer_spark.wrapper.snapshot_spans`."""
        spans = snapshot_spans(request.snapshots, request.admissible, min(time.time(), request.now))
        for snapshot, (oldest, newest) in zip(request.snapshots, spans, strict=False):
            if snapshot.seq not in q.arrived:
                dataset = self._dataset(q, snapshot, arrival=oldest, newest=newest)
                self.driver.controller.arrive(q.query_id, dataset)
                q.arrived[snapshot.seq] = dataset.id
                if snapshot.source_time is not None and not q.source_timed:
                    q.source_timed = True  # the source dates its data: the report says so from now on
                    self.driver.controller.recorder.record(q.query_id).dated_by("source-time")

    def _dataset(self, q: PacedQuery, snapshot: OffsetSnapshot, *, arrival: float | None = None,
                 newest: float | None = None) -> Dataset:
        row_bytes = q.read_bytes / q.read_rows if q.read_rows and q.read_bytes else DEFAULT_ROW_BYTES
        nbytes = snapshot.bytes if snapshot.bytes is not None else int((snapshot.rows or 0) * row_bytes)
        rows = snapshot.rows if snapshot.rows is not None else round(nbytes / max(row_bytes, 1.0))
        return Dataset(f"{q.run}:{snapshot.seq}", snapshot.data_arrival if arrival is None else arrival,
                       max(0, nbytes), max(0, rows), handle=snapshot.offset, newest=newest)

    def _force(self, held: Held, q: PacedQuery, count: int, why: str) -> MicroBatch | None:
        batch = self.driver.force(held, q.query_id, count)
        if batch is not None:
            q.forced += 1
            log.debug("query %r: %s (%d datasets)", q.query_id, why, count)
        return batch

    @staticmethod
    def _end_index(q: PacedQuery, batch: MicroBatch, snapshots: tuple[OffsetSnapshot, ...]) -> int:
        last = batch.datasets[-1].id
        for index, snapshot in enumerate(snapshots):
            if q.arrived.get(snapshot.seq) == last:
                return index
        raise RuntimeError(f"query {q.query_id!r}: admitted dataset {last} is not among the pending snapshots")

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

        Batches Spark replays from its offset log, and admissions the source made without an answer, are
        accounted from the source's next request, which reports both (:meth:`take_reports`).
        """
        q = self.queries[query_id]
        if self.driver.engine.waiting_spark_batch(held, q.query_id) == progress.batch_id:
            self._complete(held, q, progress, event=True)
            return
        self.driver.engine.on_progress(held, progress, query_id=q.query_id)  # counts the trigger's engine time

    def _replayed(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        """Spark ran a batch from its offset log without asking the source: account it once."""
        s = self.driver
        q.accounted.add((progress.run_id, progress.batch_id))
        if (None, progress.batch_id) in q.given_up:  # completed when the run that first ran it stopped
            return
        arrival = progress.started_at or progress.delivered_at
        withdrawn = s.controller.withdraw(q.query_id)  # keeps the order: the replay came before them
        dataset = Dataset(f"replay:{q.stream_id}:{progress.batch_id}", arrival, progress.rows * DEFAULT_ROW_BYTES,
                          progress.rows)
        s.controller.arrive(q.query_id, dataset)
        batch = self._force(held, q, 1, f"Spark replayed batch {progress.batch_id} from its offset log")
        if withdrawn:
            q.arrived = {}  # the withdrawn snapshots arrive again at the next decision
        if batch is not None:
            s.controller.start(batch.id)
            s.controller.complete(batch.id, engine_s=progress.engine_s, completed_at=progress.ended_at)
            q.replays += 1
            log.info("query %r: batch %d was replayed from the checkpoint (%d rows); accounted once",
                     q.query_id, progress.batch_id, progress.rows)

    def _measured(self, held: Held, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        q.accounted.add((progress.run_id, progress.batch_id))
        if progress.source_metrics:
            q.source_metrics = dict(progress.source_metrics)
        q.inflight = None
        done_batch = next((b for b, qid in self._batch_query.items() if qid == q.query_id), None)
        if done_batch is None:
            return
        del self._batch_query[done_batch]
        try:
            q.read_bytes += self.driver.controller.batch(done_batch).batch.bytes
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
        self.bridge.close()
