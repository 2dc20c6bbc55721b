"""What each batch's tasks cost, by Spark's batch id, and what no batch took.

Spark sets a stream's query id and batch id on every job it runs for a batch; pacer's task-time listener
(:mod:`pacer_spark.jvm.task_time`) sums each finished task's run time, CPU time and failed attempts per (query id,
batch id). A completed batch, pacer's or one of Spark's no-data batches, takes its own batch id's figures, read when
its trigger reported (:meth:`BatchCosts.batch`); nothing of the batch before or after it lands in it. What a query's
tasks executed that no batch took (a job outside any batch, a task the listener counted after its batch was read,
a batch completed without its Spark batch id) is settled into the query's totals before a report
(:meth:`BatchCosts.settle`), so a query's cost is all its tasks' time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pacer_spark.driver.locking import Held
from pacer_spark.jvm.task_time import TaskCost, TaskTime

#: Seconds a batch's read waits, at most, for the listener to have seen the batch's progress event (then every task
#: of it is counted). The listener sees it right after the batch's last task ends, well before pacer's own listener,
#: a Python callback, hears of it; the wait only covers a listener queue running behind.
REPORTED_WAIT_S = 0.05


class BatchCosts:
    """Reads each batch's task cost from the listener, and keeps per streaming query what its batches took.

    :param task_time: pacer's task-time listener (None: not measured; every read is None).
    :param stream_of: ``(held, query_id) -> streaming query id`` (None while unknown): whose tasks a query's are.
    :param wait_s: how long a read waits for a batch's figures to be complete (:data:`REPORTED_WAIT_S`).
    """

    def __init__(self, task_time: TaskTime | None, stream_of: Callable[[Held, str], str | None], *,
                 wait_s: float = REPORTED_WAIT_S) -> None:
        self.task_time = task_time
        self.stream_of = stream_of
        self.wait_s = wait_s
        self._taken: dict[str, TaskCost] = {}  # streaming query id -> what its batches (and settles) took
        self._last: dict[str, int] = {}  # streaming query id -> the highest batch id read
        self.read = 0
        self.read_before_reported = 0

    def batch(self, held: Held, query_id: str, spark_batch_id: int, stream_id: str | None = None) -> TaskCost | None:
        """What the tasks of Spark's batch ``spark_batch_id`` of the query cost (``stream_id``: its streaming query
        id where the caller knows it); None where not measured or the batch id is unknown (below 0)."""
        held.check()
        stream = stream_id or self.stream_of(held, query_id)
        if self.task_time is None or stream is None or spark_batch_id < 0:
            return None
        cost = self.task_time.batch_cost(stream, spark_batch_id, wait_s=self.wait_s)
        if cost is None:
            return None
        self._taken[stream] = self._taken.get(stream, TaskCost()) + cost
        self._last[stream] = max(spark_batch_id, self._last.get(stream, -1))
        self.read += 1
        self.read_before_reported += 0 if cost.reported else 1
        return cost

    def settle(self, held: Held, query_id: str, *, final: bool = False) -> TaskCost | None:
        """What the query's tasks executed that no batch took since the last settle (None: not measured). Unless
        ``final`` (the queries stopped), the batches after the last one read are left to their own read (a batch
        still running, a no-data batch whose progress is on its way)."""
        held.check()
        stream = self.stream_of(held, query_id)
        if self.task_time is None or stream is None:
            return None
        total = self.task_time.query_cost(stream)
        later = TaskCost() if final else self.task_time.query_cost_after(stream, self._last.get(stream, -1))
        if total is None or later is None:
            return None
        taken = self._taken.get(stream, TaskCost())
        rest = total - taken - later
        self._taken[stream] = taken + rest
        return rest

    def summary(self) -> dict[str, Any]:
        """For the report's ``spark`` section: batches read, and how many before the listener had all their tasks
        (their late tasks count in their query's total, not in the batch)."""
        return {"measured": self.task_time is not None, "batches_read": self.read,
                "batches_read_before_reported": self.read_before_reported}


__all__ = ["REPORTED_WAIT_S", "BatchCosts"]
