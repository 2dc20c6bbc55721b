"""The driver loop every pacer front end on Spark decides through.

One :class:`Driver` per attached session, built first: it owns the Controller, the one lock that guards it (a
:class:`~pacer_spark.driver.locking.Guard`: the methods that need it take its :class:`~pacer_spark.driver.locking.Held`), the
Controller's clock, batch completion, the scheduling gate and the replay guard. The front ends are handed the
driver, never the session:

- :class:`pacer_spark.paced.service.PacedQueries` (``format("pacer")``: the JVM source asks over Py4J);
- :class:`pacer_spark.sources.admission.AdmissionService` (``pacer-gen``/``pacer-files``: the reader asks over RPC).

Both answer a source's ``latestOffset`` through :meth:`Driver.decide`, the one admission loop: the front end
describes the ask as an :class:`Ask` (what its trigger reported, what arrived, what the answer is), the driver
steps it under the lock (report, arrive, admit, record), then passes the admitted batch through the gate outside
it. Each front end registers as an :class:`Owner` so that the driver can ask, for a batch or a query, the front
end it belongs to: whether its query died, whether its trigger is still running, what it executed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pacer import Controller, MicroBatch, OperatorMetric
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.completion import BatchCompletion, SinkDone
from pacer_spark.driver.gate import Gate, Turn
from pacer_spark.driver.locking import Guard, Held
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.jvm.progress import TriggerProgress

if TYPE_CHECKING:
    from pacer_spark.plan.enact import Enactment

log = logging.getLogger("pacer.spark")

#: Seconds between two looks at how many task slots Spark has (a Py4J call; executors come and go in seconds).
CORES_EVERY_S = 1.0


class Owner(Protocol):
    """What a front end tells the driver about the queries it decides for."""

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is one of this front end's queries."""

    def dead(self, held: Held, query_id: str) -> bool:
        """Whether the query's current run stopped or failed (its batches no longer hold the gate)."""

    def running(self, held: Held, batch_id: str) -> bool:
        """Whether ``batch_id`` is one of its batches whose trigger has not reported yet."""

    def completed(self, held: Held, query_id: str, batch_id: str) -> None:
        """A batch of the query completed."""

    def executed_metrics(self, held: Held, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """The operator metrics of a completed batch, from the plan Spark executed for it (empty when unknown)."""


class Ask(Protocol):
    """One source's ``latestOffset``, as the one admission loop (:meth:`Driver.decide`) steps through it.

    :ivar query_id: the query asking; :ivar drain: under ``availableNow`` an empty answer ends the run, so a
        strategy's "wait" takes everything held instead; :attr:`stream_id`: the Spark streaming query's id once known
        (after :meth:`admitted` at the latest): the admitted batch's placement is enacted on its session.
    """

    query_id: str
    drain: bool

    @property
    def stream_id(self) -> str | None:
        """The Spark streaming query's id once known (read only where RAPIDS is loaded: it may cost a Py4J call)."""

    def report(self, held: Held) -> bool:
        """Take what the ask reports before any new data: complete the query's previous batch from its trigger's
        progress (its trigger ended: the source is asked for the next one), account what Spark ran without an
        answer. False: answer now, admit nothing (an unknown query, no new data, a repeated ask)."""

    def arrive(self, held: Held) -> None:
        """Hand the Controller every dataset that arrived since the last ask."""

    def admitted(self, held: Held, batch: MicroBatch) -> bool:
        """Record the batch the query's strategy admitted (its end offset, its placement); whether it passes the
        gate now (False: Spark's own trigger decides it, pacer only observes)."""

    def passed(self, held: Held, turn: Turn) -> None:
        """The admitted batch passed the gate: keep how long it waited."""


@dataclass(frozen=True)
class Admitted:
    """What :meth:`Driver.decide` admitted: the batch and its pass through the gate (None: not gated)."""

    batch: MicroBatch
    turn: Turn | None


class Driver:
    """The session's Controller and what guards, clocks, completes, orders and replays its batches.

    :param controller: the Controller, built with ``clock`` as its clock and ``replay`` in its plugin manager.
    :param concurrency: batches the gate lets run at once (FIFO/EDF); ``gate_timeout``: seconds a batch waits
        for its turn at most; ``fair``: whether the session runs ``spark.scheduler.mode=FAIR``.
    :param progress_timeout: seconds after a batch's sink when it completes without its progress event.
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
                 enactment: Enactment | None = None, cores: Callable[[], int | None] | None = None) -> None:
        self.controller = controller
        self.cores = cores
        self._cores_seen_at: float | None = None
        self.clock = clock
        self.replay = replay
        self.guard = Guard()
        self.owners: list[Owner] = []
        #: applies each admitted batch's placement (RAPIDS confs) and, in explainOnly mode, checks RAPIDS' plan
        self.enactment = enactment
        self.engine = BatchCompletion(controller, self.guard, clock, self.completed, progress_timeout,
                                      read_metrics=self.executed_metrics, before_complete=self.before_complete)
        self.gate = Gate(controller, self.guard, concurrency=concurrency, timeout_s=gate_timeout, fair=fair)

    def register(self, owner: Owner) -> None:
        """Route the driver's questions about ``owner``'s queries and batches to it."""
        self.owners.append(owner)

    def decide(self, ask: Ask) -> Admitted | None:
        """The one admission loop of every front end (takes the lock; the gate's wait is outside it).

        Under the lock: the ask's reports, its arrivals, the query's admission strategy (:meth:`admit`), the
        admitted batch recorded; then the batch waits for its turn at the gate (FIFO/EDF) or learns its pool
        (FAIR/RDAS). None: nothing admitted now.
        """
        with self.guard.held() as held:
            self.follow_cores(held)
            if not ask.report(held):
                held.notify_all()
                return None
            ask.arrive(held)
            batch = self.admit(held, ask.query_id, drain=ask.drain)
            if batch is None:
                return None
            gated = ask.admitted(held, batch)
            if self.enactment is not None:  # before Spark plans the batch: the source's answer is still to come
                self.enactment.enact(self.controller, batch, ask)
            held.notify_all()
        if not gated:
            return Admitted(batch, None)
        turn = self.gate.pass_batch(batch.id, excluded=self.excluded)
        with self.guard.held() as held:
            ask.passed(held, turn)
        return Admitted(batch, turn)

    def follow_cores(self, held: Held) -> None:
        """Plan for the task slots Spark has now: an executor lost (a SIGKILL, a node gone) takes its cores with
        it until the cluster manager replaces it, and one added brings more (dynamic allocation)."""
        held.check()
        now = self.clock()
        if self.cores is None or (self._cores_seen_at is not None and now - self._cores_seen_at < CORES_EVERY_S):
            return
        self._cores_seen_at = now
        before = self.controller.cores
        cores = self.cores()
        if cores is None:  # not readable now (a stopping JVM): keep planning for the cores last seen
            return
        if self.controller.resize(cores):
            log.info("pacer: Spark now has %d task slots (was %d); the Controller plans for them", cores, before)

    def admit(self, held: Held, query_id: str, *, drain: bool = False) -> MicroBatch | None:
        """Ask the query's admission strategy (nothing while its previous batch runs); with ``drain``
        (``availableNow``: an empty answer ends the run), take everything held when the strategy would wait."""
        held.check()
        c = self.controller
        batch = c.poll(query_id) if not c.busy(query_id) else None
        if batch is None and drain and not c.busy(query_id) and c.has_buffered(query_id):
            batch = self.force(held, query_id, len(c.buffered(query_id)))
        return batch

    def force(self, held: Held, query_id: str, count: int) -> MicroBatch | None:
        """Admit the ``count`` oldest buffered datasets of ``query_id`` as one batch, whatever its strategy says
        (a replay, a drain, an admission Spark made without an answer)."""
        return self.replay.admit(self.controller, query_id, count)

    def excluded(self, held: Held, batch_id: str) -> bool:
        """Batches the gate's order skips: their query died, or their sink returned and their trigger commits."""
        query_id = self.controller.batch(batch_id).query_id
        if any(owner.owns(query_id) and owner.dead(held, query_id) for owner in self.owners):
            return True
        return self.engine.awaiting(held, batch_id) and not any(owner.running(held, batch_id)
                                                                  for owner in self.owners)

    def completed(self, held: Held, query_id: str, batch_id: str) -> None:
        """Batch completion's callback: tell the front end the batch was its."""
        for owner in self.owners:
            if owner.owns(query_id):
                owner.completed(held, query_id, batch_id)

    def before_complete(self, held: Held, query_id: str, done: SinkDone, progress: TriggerProgress | None) -> None:
        """Batch completion, just before the Controller completes the batch: the enactment's check of it."""
        if self.enactment is not None:
            self.enactment.completed(self.controller, done.batch_id, None if progress is None else progress.batch_id)

    def executed_metrics(self, held: Held, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """Batch completion's reader of operator metrics: the owning front end's."""
        for owner in self.owners:
            if owner.owns(query_id):
                return owner.executed_metrics(held, query_id, done, progress)
        return []
