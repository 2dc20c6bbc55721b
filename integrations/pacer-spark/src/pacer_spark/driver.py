"""The driver loop every pacer front end on Spark decides through.

One :class:`Driver` per attached session, built first: it owns the Controller, the one lock that guards it (and
its condition), the Controller's clock, batch completion, the scheduling gate and the replay guard. The front
ends are handed the driver, never the session:

- :class:`pacer_spark.paced.PacedQueries` (``format("pacer")``: the JVM source asks over Py4J);
- :class:`pacer_spark.admission.AdmissionService` (``pacer-gen``/``pacer-files``: the reader asks over RPC).

Both admit through :meth:`Driver.admit` (poll the query's admission strategy; under ``availableNow``, drain what is
held) and register as an :class:`Owner` so that the driver can ask, for a batch or a query, the front end it
belongs to: whether its query died, whether its trigger is still running, what it executed.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from pacer import Controller, MicroBatch, OperatorMetric
from pacer_spark.gate import Gate
from pacer_spark.replay import ReplayGuard
from pacer_spark.telemetry import BatchCompletion, PinnedClock, SinkDone, TriggerProgress


class Owner(Protocol):
    """What a front end tells the driver about the queries it decides for."""

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is one of this front end's queries."""

    def dead(self, query_id: str) -> bool:
        """Whether the query's current run stopped or failed (its batches no longer hold the gate)."""

    def running(self, batch_id: str) -> bool:
        """Whether ``batch_id`` is one of its batches whose trigger has not reported yet."""

    def completed(self, query_id: str, batch_id: str) -> None:
        """A batch of the query completed (lock held)."""

    def executed_metrics(self, query_id: str, done: SinkDone, progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """The operator metrics of a completed batch, from the plan Spark executed for it (empty when unknown)."""


class Driver:
    """The session's Controller and what guards, clocks, completes, orders and replays its batches.

    :param controller: the Controller, built with ``clock`` as its clock and ``replay`` in its plugin manager.
    :param concurrency: batches the gate lets run at once (FIFO/EDF); ``gate_timeout``: seconds a batch waits
        for its turn at most; ``fair``: whether the session runs ``spark.scheduler.mode=FAIR``.
    :param progress_timeout: seconds after a batch's sink when it completes without its progress event.
    :ivar lock: the one lock around the Controller: every call on it holds this lock (RPC threads, stream threads,
        the listener); :attr:`cond` is its condition, notified on every admission, completion and termination.
    :ivar engine: batch completion from Spark's progress; :ivar gate: the scheduling gate an admitted batch passes
        before Spark plans it; :ivar replay: re-forms a batch Spark replays from its offset log.
    """

    def __init__(self, controller: Controller, clock: PinnedClock, replay: ReplayGuard, *, concurrency: int,
                 gate_timeout: float, fair: bool, progress_timeout: float) -> None:
        self.controller = controller
        self.clock = clock
        self.replay = replay
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.owners: list[Owner] = []
        self.engine = BatchCompletion(controller, self.cond, clock, self.completed, progress_timeout,
                                      read_metrics=self.executed_metrics)
        self.gate = Gate(controller, self.cond, concurrency=concurrency, timeout_s=gate_timeout, fair=fair)

    def register(self, owner: Owner) -> None:
        """Route the driver's questions about ``owner``'s queries and batches to it."""
        self.owners.append(owner)

    def admit(self, query_id: str, *, drain: bool = False) -> MicroBatch | None:
        """The one admission step of every front end (lock held): ask the query's admission strategy (nothing while
        its previous batch runs); with ``drain`` (``availableNow``: an empty answer ends the run), take everything
        held when the strategy would wait."""
        c = self.controller
        batch = c.poll(query_id) if not c.busy(query_id) else None
        if batch is None and drain and not c.busy(query_id) and c.has_buffered(query_id):
            batch = self.force(query_id, len(c.buffered(query_id)))
        return batch

    def force(self, query_id: str, count: int) -> MicroBatch | None:
        """Admit the ``count`` oldest buffered datasets of ``query_id`` as one batch, whatever its strategy says
        (a replay, a drain, an admission Spark made without an answer) (lock held)."""
        return self.replay.admit(self.controller, query_id, count)

    def excluded(self, batch_id: str) -> bool:
        """Batches the gate's order skips: their query died, or their sink returned and their trigger commits."""
        query_id = self.controller.batch(batch_id).query_id
        if any(owner.owns(query_id) and owner.dead(query_id) for owner in self.owners):
            return True
        return self.engine.awaiting(batch_id) and not any(owner.running(batch_id) for owner in self.owners)

    def completed(self, query_id: str, batch_id: str) -> None:
        """Batch completion's callback (lock held): tell the front end the batch was its."""
        for owner in self.owners:
            if owner.owns(query_id):
                owner.completed(query_id, batch_id)

    def executed_metrics(self, query_id: str, done: SinkDone, progress: TriggerProgress) -> Sequence[OperatorMetric]:
        """Batch completion's reader of operator metrics: the owning front end's."""
        for owner in self.owners:
            if owner.owns(query_id):
                return owner.executed_metrics(query_id, done, progress)
        return []
