"""The driver loop every pacer front end on Spark decides through.

One :class:`Driver` per attached session, built first: it owns the Controller, the one lock that guards it (a
:class:`~pacer_spark.driver.locking.Guard`), the Controller's clock, batch completion, the scheduling gate and the
replay guard. Only the driver calls the Controller. The sources' protocol is one room,
:mod:`pacer_spark.driver.protocol`, entered only through :meth:`Driver.step` (a source's report, a plain value,
in; its answer out), where two front ends register for the reports they decide; they get
:class:`~pacer_spark.driver.books.Books`, open while the lock is held, inside the driver's steps or from
:meth:`Driver.books`, and are handed the driver, never the session:

- :class:`pacer_spark.driver.protocol.paced.PacedQueries` (``format("pacer")``: the JVM source's asks and stop
  events, over Py4J through :mod:`pacer_spark.paced.service`);
- :class:`pacer_spark.driver.protocol.readers.AdmissionService` (``pacer-gen``/``pacer-files``: the readers' calls
  over RPC through :mod:`pacer_spark.sources.reader_calls`, their ``foreachBatch`` through
  :mod:`pacer_spark.sources.sink_gate`).

Both answer a source's ``latestOffset`` through :meth:`Driver.decide`, the one admission loop: the front end
describes the ask as an :class:`Ask` (what its trigger reported, what arrived, what the answer is), the driver
steps it under the lock (report, arrive, admit, record), then passes the admitted batch through the gate outside
it. Each front end registers as an :class:`Owner` so that the driver can ask, for a batch or a query, the front
end it belongs to: whether its query died, whether its trigger is still running, what it executed; Spark's
listener events reach the owners through :meth:`Driver.on_progress` and :meth:`Driver.on_terminated`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pacer import BatchReport, Controller, MicroBatch, OperatorMetric, QuerySpec
from pacer.report import build_report
from pacer.report_types import Report
from pacer.scaler import ScalingError
from pacer_spark.driver.batch_costs import BatchCosts
from pacer_spark.driver.books import Books
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.completion import BatchCompletion, SinkDone
from pacer_spark.driver.gate import Gate, Turn
from pacer_spark.driver.locking import Guard, Held
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.jvm.progress import TriggerProgress

if TYPE_CHECKING:
    from pacer_spark.driver.scaling import ExecutorScaling
    from pacer_spark.jvm.task_time import TaskCost, TaskTime
    from pacer_spark.plan.enact import Enacted, Enactment

log = logging.getLogger("pacer.spark")

#: Seconds between two looks at how many task slots Spark has (a Py4J call; executors come and go in seconds).
CORES_EVERY_S = 1.0


class Owner(Protocol):
    """What a front end tells the driver about the queries it decides for."""

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is one of this front end's queries."""

    def dead(self, books: Books, query_id: str) -> bool:
        """Whether the query's current run stopped or failed (its batches no longer hold the gate)."""

    def running(self, books: Books, batch_id: str) -> bool:
        """Whether ``batch_id`` is one of its batches whose trigger has not reported yet."""

    def completed(self, books: Books, query_id: str, batch_id: str) -> None:
        """A batch of the query completed."""

    def executed_metrics(self, books: Books, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """The operator metrics of a completed batch, from the plan Spark executed for it (empty when unknown)."""

    def progress(self, books: Books, progress: TriggerProgress) -> bool:
        """A trigger of a streaming query ended (Spark's listener): whether the trigger is this front end's (then
        it has completed the batch it ran, or kept what it reports for the query's next ask)."""

    def stream_of(self, books: Books, query_id: str) -> str | None:
        """The id of the Spark streaming query running ``query_id`` now (None while unknown): its tasks' time is the
        query's (:class:`~pacer_spark.jvm.task_time.TaskTime`)."""

    def terminated(self, books: Books, run_id: str, error: str | None) -> None:
        """A run of a streaming query ended (``run_id``: its run id), with Spark's error text if it failed: a run
        of this front end's queries no longer holds the gate, and its batch still waiting completes."""

    def step(self, report: Any) -> Any:
        """Decide one report of the kinds it registered for (:meth:`Driver.step`): the answer to send back."""


class Ask(Protocol):
    """One source's ``latestOffset``, as the one admission loop (:meth:`Driver.decide`) steps through it.

    :ivar query_id: the query asking; :ivar drain: under ``availableNow`` an empty answer ends the run, so a
        strategy's "wait" takes everything held instead; :attr:`stream_id`: the Spark streaming query's id once known
        (after :meth:`admitted` at the latest): the admitted batch's placement is enacted on its session.
    """

    query_id: str
    drain: bool
    #: the run is one batch (``trigger(once=True)``): it takes everything held, whatever the strategy and the
    #: Controller's caps (plain Spark reads all that is available in it)
    whole: bool

    @property
    def stream_id(self) -> str | None:
        """The Spark streaming query's id once known (read only where RAPIDS is loaded: it may cost a Py4J call)."""

    @property
    def own(self) -> Sequence[str]:
        """The datasets the asking source itself holds, once arrived: a drain's batch takes them whatever the caps
        (were older data of another source to fill them, this source would be told to wait and the drain end with
        its data unread)."""

    def report(self, books: Books) -> bool:
        """Take what the ask reports before any new data: complete the query's previous batch from its trigger's
        progress (its trigger ended: the source is asked for the next one), account what Spark ran without an
        answer. False: answer now, admit nothing (an unknown query, no new data, a repeated ask)."""

    def arrive(self, books: Books) -> None:
        """Hand the Controller every dataset that arrived since the last ask."""

    def admitted(self, books: Books, batch: MicroBatch) -> bool:
        """Record the batch the query's strategy admitted (its end offset, its placement); whether it passes the
        gate now (False: Spark's own trigger decides it, pacer only observes)."""

    def passed(self, books: Books, turn: Turn) -> None:
        """The admitted batch passed the gate: keep how long it waited."""


@dataclass(frozen=True)
class Admitted:
    """What :meth:`Driver.decide` admitted: the batch and its pass through the gate (None: not gated)."""

    batch: MicroBatch
    turn: Turn | None
    #: the batch takes everything held because the ask drains: its strategy would have waited (:meth:`Driver.drain`),
    #: or the run is one batch (:meth:`Driver.take_all`)
    drained: bool = False


class Driver:
    """The session's Controller and what guards, clocks, completes, orders and replays its batches.

    :param controller: the Controller, built with ``clock`` as its clock and ``replay`` in its plugin manager.
    :param concurrency: batches the gate lets run at once (FIFO/EDF); ``gate_timeout``: seconds a batch waits
        for its turn at most; ``fair``: whether the session runs ``spark.scheduler.mode=FAIR``.
    :param progress_timeout: seconds after a batch's sink when it completes without its progress event.
    :param task_time: what each streaming batch's tasks cost (None: not measured; no batch then has
        ``busy_core_s``), read through :attr:`costs`.
    :param cores: reads how many task slots Spark has now (the live executors' cores; None: unreadable now); the
        Controller follows it, looked at most every :data:`CORES_EVERY_S` seconds at an ask. None:
        the cores are fixed (the user set ``cores``).
    :ivar guard: the one lock around the Controller (RPC threads, stream threads, the listener all take it);
        its condition is notified on every admission, completion and termination.
    :ivar engine: batch completion from Spark's progress; :ivar gate: the scheduling gate an admitted batch passes
        before Spark plans it; :ivar replay: re-forms a batch Spark replays from its offset log.
    """

    def __init__(self, controller: Controller, clock: PinnedClock, replay: ReplayGuard, *, concurrency: int,
                 gate_timeout: float, fair: bool, progress_timeout: float,
                 enactment: Enactment | None = None, cores: Callable[[], int | None] | None = None,
                 task_time: TaskTime | None = None, scaling: ExecutorScaling | None = None) -> None:
        self.controller = controller
        #: the executors' scaler (None: the executors are the cluster manager's alone)
        self.scaling = scaling
        self.cores = cores
        self._cores_seen_at: float | None = None
        self._scaling_seen = -1  # the scaling's revision the task slots were last read at
        #: the scaling strategy failed on the scaler's own clock with fallback off: the next ask raises it
        self.scaling_error: ScalingError | None = None
        self.clock = clock
        self.replay = replay
        self.guard = Guard()
        self.owners: list[Owner] = []
        #: report type -> the front end that decides it (:meth:`step`)
        self._steps: dict[type, Owner] = {}
        self._open: Books | None = None
        #: applies each admitted batch's placement (RAPIDS confs) and, in explainOnly mode, checks RAPIDS' plan
        self.enactment = enactment
        self.task_time = task_time
        #: each batch's task cost by Spark's batch id, and what no batch took (:mod:`pacer_spark.driver.batch_costs`)
        self.costs = BatchCosts(task_time, self.stream_of)
        self.gate = Gate(controller, self.guard, concurrency=concurrency, timeout_s=gate_timeout, fair=fair)
        self.engine = BatchCompletion(controller, self.guard, clock, self.completed, progress_timeout,
                                      read_metrics=self.executed_metrics, before_complete=self.before_complete,
                                      waited=self.gate.take_wait, cost=self.costs.batch)

    # ------------------------------------------------------------------ what the front ends and the session use

    @property
    def lock(self) -> Any:
        """The driver's lock itself (a re-entrant lock): a test or report that reads the Controller takes it."""
        return self.guard.lock

    @property
    def gate_timeout_s(self) -> float:
        """Seconds a batch waits for its turn at the gate at most (a reader's RPC timeout must outlast it)."""
        return self.gate.timeout_s

    @property
    def progress_timeout_s(self) -> float:
        """Seconds after a batch's sink when it completes without its progress event."""
        return self.engine.timeout_s

    def sink_done(self, query_id: str, done: SinkDone) -> None:
        """A batch's sink returned, or a ``format("pacer")`` batch was admitted (``done.running``): it completes
        from its trigger's progress (:meth:`pacer_spark.driver.completion.BatchCompletion.sink_done`)."""
        self.engine.sink_done(query_id, done)

    def pass_turn(self, batch_id: str) -> Turn:
        """Wait for ``batch_id``'s turn at the gate (or learn its pool); a batch that passed at admission passes at
        once (:meth:`pacer_spark.driver.gate.Gate.pass_batch`)."""
        return self.gate.pass_batch(batch_id, excluded=self.excluded)

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """Log ``message`` at WARNING the first time ``key`` is seen in this session."""
        self.gate.warn_once(key, message, *args)

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the progress events on their way, then complete the rest without them."""
        self.engine.settle(timeout)

    def summary(self) -> dict[str, Any]:
        """For the report's ``spark`` section: how batches completed (``engine``) and what their tasks cost
        (``task_costs``)."""
        return {"engine": self.engine.summary(), "task_costs": self.costs.summary()}

    def reports(self, query_id: str | None = None) -> list[BatchReport]:
        """The recent completed batches' reports: of ``query_id``, or of every query in completion order."""
        with self.guard.held():
            return self.controller.reports(query_id)

    def report(self, extra_of: Callable[[list[BatchReport]], dict[str, Any]], **fields: Any) -> Report:
        """The run as a ``pacer.report/1`` document (:func:`pacer.report.build_report`'s keywords), its ``extra``
        part read by ``extra_of`` from the completed batches' reports under the same lock (one consistent view)."""
        with self.guard.held():
            extra = extra_of(self.controller.reports())
            return build_report(controller=self.controller, extra=extra, **fields)

    def register(self, owner: Owner, *reports: type) -> None:
        """Route the driver's questions about ``owner``'s queries and batches to it, and the ``reports`` (the plain
        values its transport delivers: a JVM source's ask, a reader's call) through :meth:`step`."""
        self.owners.append(owner)
        for kind in reports:
            self._steps[kind] = owner

    def step(self, report: Any) -> Any:
        """The only way into the protocol: a source's report (:class:`~pacer_spark.jvm.decider.DecisionRequest`,
        :class:`~pacer_spark.jvm.decider.StopEvent`, a reader's :class:`~pacer_spark.driver.protocol.readers.ReaderAsk`
        ...) in, its answer out, as the front end registered for that kind of report decides it
        (:mod:`pacer_spark.driver.protocol`).

        :raises TypeError: for a report no front end of this session takes.
        """
        owner = self._steps.get(type(report))
        if owner is None:
            raise TypeError(f"pacer: no front end of this session takes a {type(report).__name__} report")
        return owner.step(report)

    def decide(self, ask: Ask) -> Admitted | None:
        """The one admission loop of every front end (takes the lock; the gate's wait is outside it).

        Under the lock: the ask's reports, the executors' scaling and task slots, its arrivals, the query's admission
        strategy (:meth:`admit`; none while a removal of executors is due, :mod:`pacer_spark.driver.scaling`), the
        admitted batch recorded; then the batch waits for its turn at the gate (FIFO/EDF) or learns its pool
        (FAIR/RDAS). None: nothing admitted now.
        """
        with self.guard.held() as held:
            if self.scaling_error is not None:
                raise self.scaling_error
            books = self._books(held)
            reported = ask.report(books)
            # after the ask completed its previous batch (a removal waits for none then), and the slots after the
            # scaler (a batch is sized for the executors that will run it)
            self.follow_scale(held)
            self.follow_cores(held)
            if not reported:
                held.notify_all()
                return None
            ask.arrive(books)
            if self.scaling is not None and not (ask.whole or ask.drain) and self.scaling.holding():
                return None  # a removal is due: no batch until the running ones complete (a drain never waits)
            if ask.whole:
                batch = self.take_all(held, ask.query_id)
                drained = batch is not None
            else:
                batch = self.admit(held, ask.query_id)
                drained = batch is None and ask.drain
                if drained:
                    batch = self.drain(held, ask.query_id)
                if batch is not None and ask.drain:
                    batch = self.with_own(held, batch, ask.own)
            if batch is None:
                return None
            gated = ask.admitted(books, batch)
            if self.enactment is not None:  # before Spark plans the batch: the source's answer is still to come
                self._record(batch.id, self.enactment.enact(batch, self.controller.query(batch.query_id).spec.dag,
                                                            ask))
            held.notify_all()
        if not gated:
            return Admitted(batch, None, drained)
        turn = self.gate.pass_batch(batch.id, excluded=self.excluded)
        with self.guard.held() as held:
            ask.passed(self._books(held), turn)
        return Admitted(batch, turn, drained)

    @contextmanager
    def books(self) -> Iterator[Books]:
        """Hold the driver's lock for the ``with`` block and hand out its :class:`Books` (module docstring)."""
        with self.guard.held() as held:
            yield self._books(held)

    def _books(self, held: Held) -> Books:
        """The books, open while ``held`` (one per lock: the guard hands out one proof)."""
        if self._open is None or not self._open.opened_by(held):
            self._open = Books(self.controller, self.engine, held)
        return self._open

    # ------------------------------------------------------------------ Spark's listener

    def on_progress(self, progress: TriggerProgress) -> None:
        """A trigger ended (the listener's thread): the first front end that owns its run completes its batch."""
        with self.guard.held() as held:
            books = self._books(held)
            for owner in self.owners:
                if owner.progress(books, progress):
                    return

    def on_terminated(self, run_id: str, exception: str | None) -> None:
        """A run of a streaming query stopped or failed (the listener's thread): no batch waits for it any more."""
        with self.guard.held() as held:
            books = self._books(held)
            for owner in self.owners:
                owner.terminated(books, run_id, exception)
            held.notify_all()

    # ------------------------------------------------------------------ the queries' registry

    def add_query(self, spec: QuerySpec, **strategies: Any) -> None:
        """Register a query with the Controller (:meth:`pacer.Controller.add_query`'s keywords)."""
        with self.guard.held():
            self.controller.add_query(spec, **strategies)

    def knows(self, query_id: str) -> bool:
        """Whether ``query_id`` is registered."""
        with self.guard.held():
            return query_id in self.controller.query_ids()

    def spec(self, query_id: str) -> QuerySpec:
        """A registered query's spec (KeyError for an unknown one)."""
        with self.guard.held():
            return self.controller.query(query_id).spec

    def follow_cores(self, held: Held) -> None:
        """Plan for the task slots Spark has now: an executor lost (a SIGKILL, a node gone) takes its cores with
        it until the cluster manager replaces it, and one added brings more (dynamic allocation)."""
        held.check()
        now = self.clock()
        changed = self.scaling is not None and self.scaling.revision != self._scaling_seen
        if self.cores is None or (not changed and self._cores_seen_at is not None
                                  and now - self._cores_seen_at < CORES_EVERY_S):
            return
        if self.scaling is not None:
            self._scaling_seen = self.scaling.revision
        self._cores_seen_at = now
        before = self.controller.cores
        cores = self.cores()
        if cores is None:  # not readable now (a stopping JVM): keep planning for the cores last seen
            return
        if self.controller.resize(cores):
            log.info("pacer: Spark now has %d task slots (was %d); the Controller plans for them", cores, before)

    def follow_scale(self, held: Held) -> None:
        """The scaling strategy's turn, between admissions (:mod:`pacer_spark.driver.scaling`): executors are
        removed only while no admitted batch is running, and none is admitted while they are."""
        held.check()
        if self.scaling is None:
            return
        try:
            self.scaling.follow(self.controller, batches_running=bool(self.controller.pending()))
        except ScalingError:
            raise
        except Exception as exc:  # the cluster manager refused or the JVM is stopping: the executors stay
            log.warning("pacer: scaling the executors failed (%s: %s); they stay as they are", type(exc).__name__, exc)

    def scaling_turn(self) -> None:
        """The executors' own clock's turn (:class:`pacer_spark.driver.scaling.ScalingClock`): the scaling follows
        the load and the Controller the task slots while no source asks."""
        with self.guard.held() as held:
            try:
                self.follow_scale(held)
            except ScalingError as exc:  # the next ask fails with it, as it would have at the ask
                self.scaling_error = exc
            self.follow_cores(held)
            held.notify_all()

    def admit(self, held: Held, query_id: str) -> MicroBatch | None:
        """Ask the query's admission strategy (nothing while its previous batch runs)."""
        held.check()
        c = self.controller
        return c.poll(query_id) if not c.busy(query_id) else None

    def drain(self, held: Held, query_id: str) -> MicroBatch | None:
        """Everything ``query_id`` holds as one batch where its strategy would wait, within the Controller's caps:
        Spark ends ``availableNow`` and ``processAllAvailable()`` at a trigger without data (None: a batch of it runs,
        or nothing is held)."""
        c = self.controller
        if c.busy(query_id) or not c.has_buffered(query_id):
            return None
        return self.force(held, query_id, len(c.buffered(query_id)))

    def with_own(self, held: Held, batch: MicroBatch, own: Sequence[str]) -> MicroBatch:
        """A drain's batch with every dataset ``own`` of the asking source in it, whatever the strategy's count and
        the caps (it is re-formed with them, as a source joining it is): where older data of another source filled
        the batch, the asking source would be told to wait, and another source's part may be what it admitted
        without an answer already, so that the trigger reads nothing and the drain ends with data held."""
        taken = [d.id for d in batch.datasets]
        in_batch = set(taken)
        missing = [dataset_id for dataset_id in own if dataset_id not in in_batch]
        if not missing:
            return batch
        self._books(held).take_back(batch.query_id, batch.id)
        return self.controller.reconcile.admit_exactly(batch.query_id, taken + missing)

    def take_all(self, held: Held, query_id: str) -> MicroBatch | None:
        """Everything ``query_id`` holds as one batch, exactly: no strategy, no read cap, no probe limit (a
        ``trigger(once=True)`` run reads all that is available in its one batch). None: a batch of it runs, or nothing
        is held."""
        held.check()
        c = self.controller
        if c.busy(query_id) or not c.has_buffered(query_id):
            return None
        return c.reconcile.admit_exactly(query_id, [d.id for d in c.buffered(query_id)])

    def force(self, held: Held, query_id: str, count: int) -> MicroBatch | None:
        """Admit the ``count`` oldest buffered datasets of ``query_id`` as one batch, whatever its strategy says
        (a replay, a drain, an admission Spark made without an answer)."""
        return self.replay.admit(self.controller, query_id, count)

    def excluded(self, held: Held, batch_id: str) -> bool:
        """Batches the gate's order skips: their query died, or their sink returned and their trigger commits."""
        query_id = self.controller.batch(batch_id).query_id
        books = self._books(held)
        if any(owner.owns(query_id) and owner.dead(books, query_id) for owner in self.owners):
            return True
        return self.engine.awaiting(held, batch_id) and not any(owner.running(books, batch_id)
                                                                  for owner in self.owners)

    def completed(self, held: Held, query_id: str, batch_id: str) -> None:
        """Batch completion's callback: tell the front end the batch was its."""
        for owner in self.owners:
            if owner.owns(query_id):
                owner.completed(self._books(held), query_id, batch_id)

    def before_complete(self, held: Held, query_id: str, done: SinkDone, progress: TriggerProgress | None) -> None:
        """Batch completion, just before the Controller completes the batch: the enactment's check of it."""
        if self.enactment is not None:
            batch = self.controller.batch(done.batch_id).batch
            self._record(batch.id, self.enactment.completed(batch, self.controller.query(query_id).spec.dag,
                                                            None if progress is None else progress.batch_id))

    def _record(self, batch_id: str, enacted: Enacted | None) -> None:
        """Record with the Controller what enacting the batch's placement came to (lock held)."""
        if enacted is not None:
            self.controller.record_enactment(batch_id, enacted.enacted, enacted.note, ran=enacted.ran)

    def settle_busy(self, *, final: bool = False) -> None:
        """Count, in each query's busy, CPU and failed core-seconds, what its tasks executed that no batch took (a job
        outside any batch, a task counted after its batch was read): before a report; ``final``: the queries
        stopped, so a batch that never reported (stopped in its trigger) counts too."""
        if self.task_time is None:
            return
        with self.guard.held() as held:
            for query_id in self.controller.query_ids():
                rest: TaskCost | None = self.costs.settle(held, query_id, final=final)
                if rest is not None and (rest.busy_core_s or rest.cpu_core_s or rest.failed_core_s):
                    self.controller.record_busy(query_id, rest.busy_core_s, cpu_core_s=rest.cpu_core_s,
                                                failed_core_s=rest.failed_core_s)

    def stream_of(self, held: Held, query_id: str) -> str | None:
        """The id of the Spark streaming query running ``query_id`` (None while unknown), as its front end knows it."""
        for owner in self.owners:
            if owner.owns(query_id):
                return owner.stream_of(self._books(held), query_id)
        return None

    def executed_metrics(self, held: Held, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """Batch completion's reader of operator metrics: the owning front end's."""
        for owner in self.owners:
            if owner.owns(query_id):
                return owner.executed_metrics(self._books(held), query_id, done, progress)
        return []
