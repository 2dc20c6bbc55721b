"""The admission service of ``format("pacer")`` queries: the user's own query, paced by the Controller.

The JVM source (``jvm/``) calls :meth:`PacedQueries.decide` on the query's stream thread, in
``latestOffset``, before the batch is planned. Here:

1. the query is registered with the Controller on its first request, under its ``queryName``, with
   the source's ``pacer.deadline``, ``pacer.admission``, ``pacer.placement`` and
   ``pacer.param.<admission|placement>.<name>`` options over the session's defaults;
2. the previous batch of the query is completed from the query's own progress buffer (its trigger
   has ended: the stream thread is asking for the next one), or earlier by the listener's event;
3. each snapshot not seen before (up to the source's read limit, ``admissible``) arrives as one
   dataset: arrival = the JVM's previous look at the delegate (the earliest its data can have
   come; Spark looks only between batches), bytes = file sizes (file sources) or rows x the
   schema's row size (Kafka), rows = the offset delta or bytes / the bytes per row measured so far;
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pacer import Dataset, MicroBatch, OperatorMetric
from pacer_spark import telemetry
from pacer_spark.options import parse_seconds
from pacer_spark.plan import dag_from_plan, operator_metrics, read_plan
from pacer_spark.wrapper import Decision, DecisionRequest, OffsetSnapshot, PacerBridge

if TYPE_CHECKING:
    from pacer_spark.runtime import PacerSession

log = logging.getLogger("pacer_spark.paced")

#: Bytes per row assumed for a file source's snapshot before any batch measured it.
DEFAULT_ROW_BYTES = 64


@dataclass
class PacedQuery:
    """Driver-side state of one ``format("pacer")`` query.

    :ivar query_id: pacer's id: the stream's ``queryName`` (or ``pacer.query``, or its id).
    :ivar run: the JVM source run whose snapshots the Controller holds.
    :ivar arrived: snapshot seq (of ``run``) -> dataset id, for every snapshot handed to the Controller.
    :ivar stream_id: the streaming query's id (UUID).
    """

    query_id: str
    run: str | None = None
    arrived: dict[int, str] = field(default_factory=dict)
    stream_id: str | None = None
    source: str = ""
    decisions: int = 0
    forced: int = 0
    withdrawn: int = 0
    replays: int = 0
    gate_wait_s: list[float] = field(default_factory=list)
    decide_s: list[float] = field(default_factory=list)
    read_rows: int = 0
    read_bytes: int = 0
    accounted: set[int] = field(default_factory=set)  # Spark batch ids already completed from their progress
    dead: bool = False
    error: str | None = None
    plan_dag: bool = False  # its DAG was read from Spark's executed plan


class PacedQueries:
    """Decides every ``format("pacer")`` query of one :class:`~pacer_spark.runtime.PacerSession`.

    Creating it builds and loads the JVM source if needed and registers itself as the decider of
    every query (``"*"``) with the JVM's registry.
    """

    def __init__(self, session: PacerSession) -> None:
        self.session = session
        self.bridge = PacerBridge(session.spark)
        self.queries: dict[str, PacedQuery] = {}
        self._batch_query: dict[str, str] = {}
        self.bridge.register_handler("*", self.decide)

    # ------------------------------------------------------------------ the decision

    def decide(self, request: DecisionRequest) -> Decision:
        """Answer one ``latestOffset`` of a ``format("pacer")`` source (module docstring)."""
        t0 = time.perf_counter()
        s = self.session
        with s.cond:
            try:
                q = self._query(request)
            except (ValueError, KeyError, LookupError) as exc:
                return Decision(None, error=f"query {request.query!r}: {exc}")
            q.decisions += 1
            self._complete_previous(q)
            self._arrive(q, request)
            batch = s.controller.poll(q.query_id) if not s.controller.busy(q.query_id) else None
            if batch is None and request.available_now and s.controller.has_buffered(q.query_id):
                batch = self._force(q, len(s.controller.buffered(q.query_id)), "availableNow drains the backlog")
            if batch is None:
                q.decide_s.append(time.perf_counter() - t0)
                return Decision(None)
            index = self._end_index(q, batch, request.snapshots)
            s.engine.sink_done(q.query_id, telemetry.SinkDone(batch.id, request.batch_id, time.time(), running=True))
            self._batch_query[batch.id] = q.query_id
            s.cond.notify_all()
        q.decide_s.append(time.perf_counter() - t0)
        turn = s.schedule_gate.pass_batch(batch.id, excluded=s.excluded)
        q.gate_wait_s.append(turn.waited_s)
        return Decision(index, pool=turn.pool)

    def _query(self, request: DecisionRequest) -> PacedQuery:
        """The query of ``request``, registered with the Controller on first sight (lock held)."""
        s = self.session
        q = self.queries.get(request.query)
        if q is None:
            options = request.options
            params = {kind: {k[len(f"pacer.param.{kind}."):]: v for k, v in options.items()
                             if k.startswith(f"pacer.param.{kind}.")} for kind in ("admission", "placement")}
            unknown = sorted(k for k in options if k not in KNOWN_OPTIONS and not k.startswith("pacer.param."))
            if unknown:
                raise ValueError(f"unknown option(s) {', '.join(unknown)}; format('pacer') reads "
                                 f"{', '.join(sorted(KNOWN_OPTIONS))} and pacer.param.<admission|placement>.<name>")
            deadline = parse_seconds(options["pacer.deadline"]) if "pacer.deadline" in options else None
            if deadline is not None and not deadline > 0:
                raise ValueError(f"pacer.deadline must be > 0 seconds, got {options['pacer.deadline']!r}")
            s.register_query(request.query, deadline=deadline, admission=options.get("pacer.admission"),
                             placement=options.get("pacer.placement"), admission_params=params["admission"],
                             placement_params=params["placement"])
            q = self.queries[request.query] = PacedQuery(request.query, source=request.source)
            log.info("query %r: paced by pacer (source %s, admission %s, deadline %s)", request.query,
                     request.source, s.controller.query(request.query).admission,
                     s.controller.query(request.query).spec.deadline)
        if request.query_id and request.query_id != q.stream_id:
            q.stream_id = request.query_id
            s.map_stream(request.query_id, q.query_id)
        if q.run != request.run:
            if q.run is not None:
                q.withdrawn += s.controller.withdraw(q.query_id)
            q.run, q.arrived, q.dead, q.error = request.run, {}, False, None
        return q

    def _complete_previous(self, q: PacedQuery) -> None:
        """The stream thread asks for a new batch: the previous trigger ended, its progress is buffered."""
        s = self.session
        waiting = s.engine.waiting_spark_batch(q.query_id)
        if waiting is None or q.stream_id is None:
            return
        progress = telemetry.recent_progress(s.spark._jsparkSession.streams().get(q.stream_id), waiting)
        if progress is not None:
            self._measured(q, progress)
            s.engine.on_progress(progress, event=False)

    def _arrive(self, q: PacedQuery, request: DecisionRequest) -> None:
        for snapshot in request.snapshots[: request.admissible]:
            if snapshot.seq not in q.arrived:
                dataset = self._dataset(q, snapshot)
                self.session.controller.arrive(q.query_id, dataset)
                q.arrived[snapshot.seq] = dataset.id

    def _dataset(self, q: PacedQuery, snapshot: OffsetSnapshot) -> Dataset:
        row_bytes = q.read_bytes / q.read_rows if q.read_rows and q.read_bytes else DEFAULT_ROW_BYTES
        nbytes = snapshot.bytes if snapshot.bytes is not None else int((snapshot.rows or 0) * row_bytes)
        rows = snapshot.rows if snapshot.rows is not None else round(nbytes / max(row_bytes, 1.0))
        return Dataset(f"{q.run}:{snapshot.seq}", snapshot.arrival, max(0, nbytes), max(0, rows),
                       handle=snapshot.offset)

    def _force(self, q: PacedQuery, count: int, why: str) -> MicroBatch | None:
        s = self.session
        batch = s.replay.admit(s.controller, q.query_id, count)
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

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is a ``format("pacer")`` query of this session."""
        return query_id in self.queries

    def running(self, batch_id: str) -> bool:
        """Whether ``batch_id`` is a ``format("pacer")`` batch whose trigger has not reported yet."""
        return batch_id in self._batch_query

    def on_progress(self, progress: telemetry.TriggerProgress) -> None:
        """A trigger of a paced query ended: complete its batch, or account a replayed one (lock held)."""
        s = self.session
        q = self.queries[progress.query]
        if s.engine.waiting_spark_batch(q.query_id) == progress.batch_id:
            self._measured(q, progress)
            s.engine.on_progress(progress)
            return
        s.engine.on_progress(progress)  # counts the trigger's engine time
        if progress.batch_id in q.accounted:  # completed from Spark's progress buffer before this event came
            return
        if progress.rows > 0 and not s.controller.busy(q.query_id):
            self._replayed(q, progress)

    def _replayed(self, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        """Spark ran a batch from its offset log without asking the source: account it once."""
        s = self.session
        q.accounted.add(progress.batch_id)
        arrival = progress.started_at or progress.delivered_at
        held = s.controller.withdraw(q.query_id)  # keeps the order: the replay came before them
        dataset = Dataset(f"replay:{q.stream_id}:{progress.batch_id}", arrival, progress.rows * DEFAULT_ROW_BYTES,
                          progress.rows)
        s.controller.arrive(q.query_id, dataset)
        batch = self._force(q, 1, f"Spark replayed batch {progress.batch_id} from its offset log")
        if held:
            q.arrived = {}  # the withdrawn snapshots arrive again at the next decision
        if batch is not None:
            s.controller.start(batch.id)
            s.controller.complete(batch.id, engine_s=progress.engine_s, completed_at=progress.ended_at)
            q.replays += 1
            log.info("query %r: batch %d was replayed from the checkpoint (%d rows); accounted once",
                     q.query_id, progress.batch_id, progress.rows)

    def _measured(self, q: PacedQuery, progress: telemetry.TriggerProgress) -> None:
        q.accounted.add(progress.batch_id)
        done_batch = next((b for b, qid in self._batch_query.items() if qid == q.query_id), None)
        if done_batch is None:
            return
        del self._batch_query[done_batch]
        try:
            q.read_bytes += self.session.controller.batch(done_batch).batch.bytes
            q.read_rows += progress.rows
        except KeyError:
            pass

    def executed_metrics(self, query_id: str, done: telemetry.SinkDone,
                         progress: telemetry.TriggerProgress) -> list[OperatorMetric]:
        """The batch's operator metrics from the query's executed plan (lock held; the engine's ``read_metrics``).

        Read while the plan is still the batch's own (Spark replaces ``lastExecution`` when it plans the next
        batch, so a later batch's plan is never taken for it). The first plan read also replaces the minimal
        chain the query got when first seen with the DAG it really executes (``dag_from_plan``).
        """
        s = self.session
        q = self.queries.get(query_id)
        if q is None or q.stream_id is None or not s.config.operator_metrics:
            return []
        try:
            execution = s.spark._jsparkSession.streams().get(q.stream_id).streamingQuery().lastExecution()
            if execution is None or int(execution.currentBatchId()) != progress.batch_id:
                return []
            root = read_plan(execution.executedPlan())
            if not q.plan_dag:  # registered on first sight with the minimal chain: now the real DAG
                q.plan_dag = True
                s.controller.replace_dag(query_id, dag_from_plan(root))
            batch = s.controller.batch(done.batch_id).batch
            return operator_metrics(root, s.controller.query(query_id).spec.dag, batch.placement,
                                    batch_bytes=batch.bytes, batch_rows=batch.rows)
        except Exception:  # py4j or a plan pacer cannot read: the batch completes without operator metrics
            log.debug("query %r: no operator metrics for batch %s", query_id, done.batch_id, exc_info=True)
            return []

    def on_terminated(self, query_id: str, error: str | None) -> None:
        """The query stopped or failed (lock held)."""
        q = self.queries[query_id]
        q.dead, q.error = True, q.error or error
        if self.session.engine.give_up(query_id) is not None:
            self._batch_query = {b: qid for b, qid in self._batch_query.items() if qid != query_id}

    # ------------------------------------------------------------------ reading

    def dead(self, query_id: str) -> bool:
        """Whether the paced query ``query_id`` terminated."""
        q = self.queries.get(query_id)
        return q is not None and q.dead

    def summary(self) -> dict[str, Any]:
        """Per query: decisions, forced admissions, withdrawn and replayed datasets, gate waits, decide times."""
        def ms(values: list[float]) -> float | None:
            return 1e3 * sum(values) / len(values) if values else None

        return {q.query_id: {"source": q.source, "decisions": q.decisions, "forced": q.forced,
                             "withdrawn": q.withdrawn, "replays": q.replays, "gate_wait_ms_avg": ms(q.gate_wait_s),
                             "decide_ms_avg": ms(q.decide_s), "error": q.error}
                for q in self.queries.values()}

    def close(self) -> None:
        """Unregister from the JVM: a ``format("pacer")`` query still running then admits everything."""
        self.bridge.close()


#: The ``pacer.*`` source options the service reads (besides ``pacer.param.*``); ``pacer.source`` and
#: ``pacer.query`` are the JVM's.
KNOWN_OPTIONS = frozenset({"pacer.deadline", "pacer.admission", "pacer.placement", "pacer.query"})
