"""The core-seconds each streaming query's tasks executed, read from pacer's ``TaskTimeListener`` on Spark's listener
bus (``jvm/src/main/java/io/pacer/spark/TaskTimeListener.java``): Spark's executor run time of every finished task,
summed per query by the query id Spark sets on its jobs. :class:`TaskTime` hands each batch what grew since the
query's last look, so a query's batches add up to its tasks' whole time."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pacer_spark.jvm.task_time")

LISTENER_CLASS = "io.pacer.spark.TaskTimeListener"


class TaskTime:
    """pacer's task-time listener on one SparkContext, and each query's total at its last look.

    :param listener: the JVM listener (:func:`add_task_time`).
    """

    def __init__(self, listener: Any) -> None:
        self._listener = listener
        self._seen: dict[str, int] = {}

    def since_last(self, stream_id: str) -> float | None:
        """Core-seconds the tasks of streaming query ``stream_id`` executed since the last call for it (its batch's
        share, read at the batch's completion); None when the JVM cannot be asked (a stopping session)."""
        try:
            total = int(self._listener.queryCoreMs(stream_id))
        except Exception:  # the SparkContext stopped under us
            log.debug("cannot read the task time of query %s", stream_id, exc_info=True)
            return None
        delta = total - self._seen.get(stream_id, 0)
        self._seen[stream_id] = total
        return max(0, delta) / 1000.0

    def query_total_s(self, stream_id: str) -> float | None:
        """Core-seconds the tasks of streaming query ``stream_id`` executed since the listener was added, paced or not
        (a baseline on Spark's own trigger too); None when the JVM cannot be asked."""
        try:
            return int(self._listener.queryCoreMs(stream_id)) / 1000.0
        except Exception:  # the SparkContext stopped under us
            return None

    def total_s(self) -> float | None:
        """Core-seconds every task of the application executed since the listener was added (None: unreadable)."""
        try:
            return int(self._listener.allCoreMs()) / 1000.0
        except Exception:
            return None


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


__all__ = ["LISTENER_CLASS", "TaskTime", "add_task_time", "remove_task_time"]
