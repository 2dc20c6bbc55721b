"""Batch completion: a batch completes in the Controller when its trigger ends, with the engine time Spark measured.

A pacer batch on Spark is one trigger of the query: ``latestOffset`` (the admission decision),
``walCommit``, ``queryPlanning``, ``addBatch`` (the scheduling gate and the user's sink, in
``foreachBatch``) and ``commitOffsets``. The sink's end is therefore not the batch's end: Spark
still writes the commit log before it starts the next trigger, and that time (more with state) is
part of what every batch costs and of the latency of its datasets. Spark reports the trigger's span as ``durationMs.triggerExecution`` in the progress
event it posts after ``commitOffsets``.

So the Spark runtime completes a batch in the Controller when that progress event arrives, not at
the end of ``foreachBatch``:

- ``foreachBatch`` marks the batch *sink done* (:meth:`BatchCompletion.sink_done`) with the operator
  metrics read from the executed plan (they must be read on the stream's thread, before the next
  trigger replaces ``lastExecution``), and releases the gate for other queries' batches;
- the listener matches the progress event's ``batchId`` to that mark and the session completes the
  batch with ``engine_s = triggerExecution / 1000`` and ``completed_at`` the trigger's end
  (``timestamp + triggerExecution``, passed to ``Controller.complete``), so every dataset's latency
  includes ``commitOffsets``.

Why not complete at the sink's end and amend later: the Controller feeds the batch to every
strategy and to its service-time model when it completes; a later amendment would leave them
trained on the shorter span. Completing on progress keeps "a query has at most one batch in
flight" without extra locking: until the batch completes, the query is busy in the Controller and
the next ``latestOffset`` of the same query admits nothing. That call proves the trigger ended, and
Spark put the trigger's progress in the query's own buffer (``recentProgress``) before starting
the next trigger, so the session reads it from there (:func:`pacer_spark.jvm.stream_query.query_progress`) rather than wait
for the listener bus: Spark posts the event to an asynchronous queue that a thread of its own drains, and
PySpark's listener gets it over Py4J, so under load it comes late (how late was measured once, in pacer-spark's
README, "Batch time"; a run's own figure is its report's ``progress_delivery_ms_*``). Either way the batch
completes with the same figures.

Each completed batch carries what its own tasks cost, read from pacer's task-time listener by its Spark batch id
(:mod:`pacer_spark.driver.batch_costs`): ``busy_core_s``, ``cpu_core_s``, ``failed_core_s``. A trigger that ran no
new data (Spark's no-data batch after a watermark moved, :attr:`TriggerProgress.no_data`) completes no pacer batch,
but its trigger time and tasks count in its query's record, as no-data (:meth:`pacer.recorder.QueryRecord.no_data_batch`).

Should no progress ever come (the listener removed, a trigger that failed after its sink), the
batch is completed without ``engine_s`` at its sink's end after ``timeout_s``, at termination or at
:meth:`PacerSession.stop`: exactly as before this change, so nothing stalls and the ledger stays
exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer import Controller, OperatorMetric
from pacer.summary import StreamingSummary
from pacer_spark.config import DEFAULT_PROGRESS_TIMEOUT_S
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.locking import Guard, Held
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.jvm.task_time import TaskCost


@dataclass
class SinkDone:
    """A batch whose ``foreachBatch`` finished and whose trigger has not reported yet."""

    batch_id: str
    spark_batch_id: int
    at: float
    operator_metrics: Sequence[OperatorMetric] = field(default_factory=list)
    #: True for a ``format("pacer")`` batch, registered when admitted: its trigger is still running, so
    #: without a progress event it completes when given up on, not at ``at``.
    running: bool = False


class BatchCompletion:
    """Completes the Spark runtime's batches in the Controller when their trigger reports (module docstring).

    Holds the sink-done batches waiting for their progress event (at most one per query) and what was
    measured. Methods that take a :class:`~pacer_spark.driver.locking.Held` expect the caller to hold ``guard``'s lock;
    the others take it.

    :param controller: the session's Controller, built with ``clock`` as its clock.
    :param guard: the session's lock (it guards every Controller call) and condition (notified on completion).
    :param clock: the Controller's :class:`PinnedClock`.
    :param completed: called with ``(held, query_id, batch_id)`` after a batch completed.
    :param timeout_s: seconds after the sink's end when a batch without a progress event is given up on.
    :param read_metrics: reads a ``format("pacer")`` batch's operator metrics from its executed plan, where no
        ``foreachBatch`` read them: ``(held, query_id, done, progress) -> metrics`` (empty: none).
    :param waited: ``(held, batch_id) -> seconds`` the batch waited for its turn at the gate inside its trigger.
    :param cost: ``(held, query_id, spark_batch_id, stream_id) -> what the tasks of that Spark batch cost`` (None:
        not measured; ``stream_id``: the streaming query's id where the progress names it).
    """

    def __init__(self, controller: Controller, guard: Guard, clock: PinnedClock,
                 completed: Callable[[Held, str, str], None], timeout_s: float = DEFAULT_PROGRESS_TIMEOUT_S, *,
                 read_metrics: Callable[[Held, str, SinkDone, TriggerProgress], Sequence[OperatorMetric]] | None
                 = None,
                 before_complete: Callable[[Held, str, SinkDone, TriggerProgress | None], None] | None = None,
                 waited: Callable[[Held, str], float] | None = None,
                 cost: Callable[[Held, str, int, str | None], TaskCost | None] | None = None) -> None:
        if not timeout_s > 0:
            raise ValueError(f"progress timeout must be > 0 seconds, got {timeout_s}")
        self.controller = controller
        self.guard = guard
        self.clock = clock
        self.completed = completed
        self.timeout_s = timeout_s
        self._waiting: dict[str, SinkDone] = {}
        self.lags_s = StreamingSummary()  # bounded, however long the run
        self.from_progress = 0
        self.from_buffer = 0
        self.without_progress = 0
        self.trigger_s: dict[str, float] = {}
        self.triggers: dict[str, int] = {}
        #: Reads a ``format("pacer")`` batch's operator metrics from its executed plan, where no
        #: ``foreachBatch`` read them: ``(held, query_id, done, progress) -> metrics``.
        self.read_metrics = read_metrics
        #: called with ``(held, query_id, done, progress)`` just before a batch completes (the placement check).
        self.before_complete = before_complete
        self.waited = waited
        self.cost = cost

    def sink_done(self, query_id: str, done: SinkDone) -> None:
        """``foreachBatch`` of ``done.batch_id`` returned; its trigger is committing (frees the gate)."""
        with self.guard.held() as held:
            self._waiting[query_id] = done
            held.notify_all()

    def waiting_spark_batch(self, held: Held, query_id: str) -> int | None:
        """Spark's batch id of the query's sink-done batch, None when none waits."""
        done = self._waiting.get(query_id)
        return done.spark_batch_id if done is not None else None

    def awaiting(self, held: Held, batch_id: str) -> bool:
        """True while ``batch_id``'s sink is done and its progress event has not come."""
        return any(d.batch_id == batch_id for d in self._waiting.values())

    def waiting(self) -> int:
        """How many batches wait for their progress event."""
        with self.guard.held():
            return len(self._waiting)

    def on_progress(self, held: Held, progress: TriggerProgress, *, event: bool = True,
                    query_id: str | None = None, complete: bool = True) -> SinkDone | None:
        """Complete the batch this progress reports, at the trigger's end with its engine time.

        Every listener event (``event``) counts towards the query's total trigger time, pacer's batches
        or not (no-data batches that advance a watermark are Spark's own: each is recorded, with its cost, in the
        query's record); a progress read from the query's buffer
        (:func:`pacer_spark.jvm.stream_query.query_progress`, ``event=False``) only completes.

        :param query_id: pacer's id of the query (default: the progress's name; a ``format("pacer")``
            query is matched by its run id instead, whatever its name).
        :param complete: False: only count the trigger (its batch completes later, from what its source reports).

        :return: the completed batch; None for a no-data trigger or an event without a waiting batch.
        :raises StrategyError: when a feedback hook raised and fallback is off (the batch is completed).
        """
        query_id = progress.query if query_id is None else query_id
        if event and progress.engine_s is not None:
            self.trigger_s[query_id] = self.trigger_s.get(query_id, 0.0) + progress.engine_s
            self.triggers[query_id] = self.triggers.get(query_id, 0) + 1
        if event and progress.ended_at is not None:
            self.lags_s.add(max(0.0, progress.delivered_at - progress.ended_at))
        done = self._waiting.get(query_id)
        mine = done is not None and done.spark_batch_id == progress.batch_id
        if event and progress.no_data and not mine:
            self._no_data(held, query_id, progress)
        if not complete or done is None or not mine:
            return None
        del self._waiting[query_id]
        self.from_progress += 1
        self.from_buffer += 0 if event else 1
        self._complete(held, query_id, done, progress)
        return done

    def _no_data(self, held: Held, query_id: str, progress: TriggerProgress) -> None:
        """Record a no-data trigger of a registered query with its trigger time and its tasks' cost."""
        if query_id not in self.controller.query_ids():
            return
        cost = (self.cost(held, query_id, progress.batch_id, progress.stream_id) if self.cost is not None
                else None)
        self.controller.record_no_data_batch(
            query_id, progress.engine_s or 0.0, busy_core_s=cost.busy_core_s if cost is not None else None,
            cpu_core_s=cost.cpu_core_s if cost is not None else None,
            failed_core_s=cost.failed_core_s if cost is not None else None)

    def _complete(self, held: Held, query_id: str, done: SinkDone, progress: TriggerProgress | None) -> None:
        """At the trigger's end with ``triggerExecution`` as engine time; without an event, at the sink's end. A
        ``format("pacer")`` batch's rows are Spark's count (its snapshots' were read off offsets or estimated from
        bytes); pacer's own sources count theirs, a quarantined malformed row included."""
        now = time.time()
        end = progress.ended_at if progress is not None else (now if done.running else done.at)
        at = now if end is None else min(max(end, done.at), now)
        metrics = done.operator_metrics
        if not metrics and progress is not None and done.running and self.read_metrics is not None:
            metrics = self.read_metrics(held, query_id, done, progress)
        try:
            if self.before_complete is not None:
                self.before_complete(held, query_id, done, progress)
            waited = self.waited(held, done.batch_id) if self.waited is not None else 0.0
            engine_s = progress.engine_s if progress is not None else None
            cost = (self.cost(held, query_id, done.spark_batch_id, progress.stream_id if progress is not None else None)
                    if self.cost is not None else None)
            if cost is not None:
                self.controller.reconcile.task_costs(done.batch_id, cpu_core_s=cost.cpu_core_s,
                                                     failed_core_s=cost.failed_core_s, tasks=cost.tasks)
            self.controller.complete(done.batch_id, operator_metrics=metrics, engine_s=engine_s, completed_at=at,
                                     rows=progress.source_rows if progress is not None and done.running else None,
                                     gate_wait_s=min(waited, engine_s) if engine_s is not None else 0.0,
                                     busy_core_s=cost.busy_core_s if cost is not None else None)
        finally:
            self.completed(held, query_id, done.batch_id)
            held.notify_all()

    def expire(self, held: Held, query_id: str, now: float) -> SinkDone | None:
        """Complete the query's sink-done batch without engine time if it waited over ``timeout_s``."""
        done = self._waiting.get(query_id)
        if done is None or now - done.at < self.timeout_s:
            return None
        return self.give_up(held, query_id)

    def give_up(self, held: Held, query_id: str) -> SinkDone | None:
        """Complete the query's sink-done batch without a progress event, at its sink's end."""
        done = self._waiting.pop(query_id, None)
        if done is not None:
            self.without_progress += 1
            self._complete(held, query_id, done, None)
        return done

    def forget(self, held: Held, query_id: str) -> SinkDone | None:
        """Drop the query's waiting batch without completing it: the Controller took it back (it never ran)."""
        return self._waiting.pop(query_id, None)

    def settle(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for the progress events on their way, then give up on the rest."""
        limit = time.monotonic() + timeout
        while self.waiting() and time.monotonic() < limit:
            time.sleep(0.02)
        with self.guard.held() as held:
            for query_id in list(self._waiting):
                self.give_up(held, query_id)

    def summary(self) -> dict[str, Any]:
        """For the report's ``spark`` section: how batches were completed and the listener's delay.

        ``progress_read_at_next_poll``: batches completed from the query's progress buffer by the next
        ``latestOffset`` because the listener event had not arrived yet; ``progress_delivery_ms_*``: how
        long after a trigger's end its listener event arrived.
        """
        with self.guard.held():
            lags = self.lags_s
            return {
                "batches_completed_on_progress": self.from_progress,
                "batches_completed_without_progress": self.without_progress,
                "progress_read_at_next_poll": self.from_buffer,
                "progress_delivery_ms_avg": 1e3 * lags.mean if lags.count else None,
                "progress_delivery_ms_max": 1e3 * lags.max if lags.count else None,
                "trigger_execution_s_total": dict(sorted(self.trigger_s.items())),
                "triggers_reported": dict(sorted(self.triggers.items())),
            }


__all__ = ["BatchCompletion", "SinkDone"]
