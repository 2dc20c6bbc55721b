"""What each streaming batch's tasks cost, read from pacer's ``TaskTimeListener`` on Spark's listener bus
(``jvm/src/main/java/io/pacer/spark/TaskTimeListener.java``): Spark's executor run time and CPU time of every
finished task attempt, per (query id, batch id) as Spark sets them on a stream's jobs, and per query. A batch's
figures are complete once the listener has seen its progress event (:attr:`TaskCost.reported`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("pacer_spark.jvm.task_time")

LISTENER_CLASS = "io.pacer.spark.TaskTimeListener"

#: Seconds between two looks at a batch whose progress event the listener has not seen yet.
REPORTED_POLL_S = 0.002


@dataclass(frozen=True)
class TaskCost:
    """The task attempts of a batch (or of a whole query), in core-seconds.

    :ivar tasks: task attempts that ended.
    :ivar busy_core_s: their executor run time times the cores a task holds (``spark.task.cpus``), every attempt
        counted: what the executors' cores were busy with.
    :ivar cpu_core_s: their executor CPU time (threads on a CPU; less than ``busy_core_s`` by what the tasks waited:
        I/O, shuffle fetches, the Python worker).
    :ivar failed_tasks: attempts that failed or were killed (a speculative copy that lost, a stage retried).
    :ivar failed_core_s: their run time, part of ``busy_core_s``.
    :ivar reported: the listener saw the batch's progress event, so every task of the batch is counted (always False
        for a query's totals).
    """

    tasks: int = 0
    busy_core_s: float = 0.0
    cpu_core_s: float = 0.0
    failed_tasks: int = 0
    failed_core_s: float = 0.0
    reported: bool = False

    @classmethod
    def parse(cls, figures: str) -> TaskCost:
        """Read the listener's ``tasks,run core-ms,CPU ms,failed tasks,failed run core-ms,reported``."""
        tasks, run_ms, cpu_ms, failed, failed_ms, reported = (int(v) for v in figures.split(","))
        return cls(tasks, run_ms / 1e3, cpu_ms / 1e3, failed, failed_ms / 1e3, reported == 1)

    def __add__(self, other: TaskCost) -> TaskCost:
        return TaskCost(self.tasks + other.tasks, self.busy_core_s + other.busy_core_s,
                        self.cpu_core_s + other.cpu_core_s, self.failed_tasks + other.failed_tasks,
                        self.failed_core_s + other.failed_core_s, False)

    def __sub__(self, other: TaskCost) -> TaskCost:
        """What ``self`` holds beyond ``other`` (never below 0)."""
        return TaskCost(max(0, self.tasks - other.tasks), max(0.0, self.busy_core_s - other.busy_core_s),
                        max(0.0, self.cpu_core_s - other.cpu_core_s), max(0, self.failed_tasks - other.failed_tasks),
                        max(0.0, self.failed_core_s - other.failed_core_s), False)


class TaskTime:
    """pacer's task-time listener on one SparkContext (plain values out; None where the JVM cannot be asked).

    :param listener: the JVM listener (:func:`add_task_time`).
    """

    def __init__(self, listener: Any) -> None:
        self._listener = listener

    def batch_cost(self, stream_id: str, batch_id: int, *, wait_s: float = 0.0) -> TaskCost | None:
        """What the tasks of batch ``batch_id`` of streaming query ``stream_id`` cost; up to ``wait_s`` seconds for the
        listener to see the batch's progress event (its figures are then complete: Spark posts the event after the
        batch's jobs, and the listener's queue may still be counting their last tasks). None: unreadable."""
        limit = time.monotonic() + wait_s
        while True:
            try:
                cost = TaskCost.parse(str(self._listener.batchCost(stream_id, int(batch_id))))
            except Exception:  # the SparkContext stopped under us
                log.debug("cannot read the task cost of batch %s of query %s", batch_id, stream_id, exc_info=True)
                return None
            if cost.reported or time.monotonic() >= limit:
                return cost
            time.sleep(REPORTED_POLL_S)

    def query_cost(self, stream_id: str) -> TaskCost | None:
        """What every task of streaming query ``stream_id`` cost since the listener was added, in a batch or not
        (a baseline on Spark's own trigger too); None when the JVM cannot be asked."""
        try:
            return TaskCost.parse(str(self._listener.queryCost(stream_id)))
        except Exception:  # the SparkContext stopped under us
            log.debug("cannot read the task cost of query %s", stream_id, exc_info=True)
            return None

    def query_cost_after(self, stream_id: str, batch_id: int) -> TaskCost | None:
        """What the tasks of the batches of streaming query ``stream_id`` after ``batch_id`` cost so far (those the
        listener still keeps); None when the JVM cannot be asked."""
        try:
            return TaskCost.parse(str(self._listener.queryCostAfter(stream_id, int(batch_id))))
        except Exception:  # the SparkContext stopped under us
            log.debug("cannot read the task cost of query %s after batch %s", stream_id, batch_id, exc_info=True)
            return None

    def query_total_s(self, stream_id: str) -> float | None:
        """Core-seconds the tasks of streaming query ``stream_id`` executed since the listener was added (None:
        unreadable)."""
        cost = self.query_cost(stream_id)
        return cost.busy_core_s if cost is not None else None

    def total_s(self) -> float | None:
        """Core-seconds every task of the application executed since the listener was added (None: unreadable)."""
        try:
            return int(self._listener.allCoreMs()) / 1000.0
        except Exception:
            return None


def wait_for_listeners(spark: Any, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` seconds until Spark's listener bus has handed every event posted so far to its
    listeners (pacer's progress listener included, so every batch that reported has been read); False when it did
    not within the timeout or cannot be asked. Never call it while holding a lock a listener takes."""
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(max(1, int(1000 * timeout_s)))
    except Exception:  # Spark's TimeoutException, or a stopped context
        log.debug("the listener bus did not drain within %.1f s", timeout_s, exc_info=True)
        return False
    return True


def add_task_time(spark: Any) -> TaskTime | None:
    """pacer's ``TaskTimeListener`` added to ``spark``'s listener bus; None where pacer's jar is not loaded in the
    driver (then no batch's ``busy_core_s`` is measured)."""
    sc = spark.sparkContext
    try:
        cpus = int(sc.getConf().get("spark.task.cpus", "1") or 1)
        listener = getattr(sc._jvm, LISTENER_CLASS)(cpus)
        sc._jsc.sc().addSparkListener(listener)
    except Exception as exc:  # py4j's "JavaPackage is not callable": the class is not loaded
        log.debug("pacer's task-time listener is not available: %s", exc)
        return None
    return TaskTime(listener)


def remove_task_time(spark: Any, task_time: TaskTime) -> None:
    """Take the listener off ``spark``'s listener bus (nothing when the session is gone)."""
    try:
        spark.sparkContext._jsc.sc().removeSparkListener(task_time._listener)
    except Exception:
        log.debug("cannot remove the task-time listener", exc_info=True)


__all__ = ["LISTENER_CLASS", "TaskCost", "TaskTime", "add_task_time", "remove_task_time", "wait_for_listeners"]
