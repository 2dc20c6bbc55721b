"""What a stateful Spark query does beyond its batches: watermarks, no-data batches and state reloads.

- **Watermark.** A query with ``withWatermark`` (pacer-spark's workloads: 60 s) keeps ``max event time seen - delay``,
  moved after each batch that saw a later event. In the simulator a dataset's event time is its arrival (datasets are
  dated by the data's own time). Spark's watermark starts at 0 ms since the epoch and pacer-gen's event times are
  epoch times, so the first batch with data moves it: the simulator's starts below every event time (measured on
  Spark, LR2 under zStream for 60 s with the 60 s watermark: 10 batches, 9 no-data batches,
  ``bench-results/demo-2026-11-29``; starting at 0 s of the run, the simulator ran none before 60 s).
- **No-data batches.** After a data batch that moved the watermark, the stream's next trigger (at once under pacer's
  admission; under Spark's own processing-time trigger, a static one, at its next tick) asks the source first:
  if it offers data (pacer admits a batch) that batch runs, and evicts by the new watermark itself; if not, Spark runs
  a batch with no new data to evict state and emit what the watermark closed (``spark.sql.streaming.
  noDataMicroBatches.enabled``, on by default). It costs a batch of no bytes (:func:`pacer_sim.costs.no_data_work`),
  holds the query's stream (no admission until it ends) and queues for task slots as Spark queues its job: pacer's
  gate lets a batch it did not form through, so after the batches already running, before pacer's waiting ones. Queries with a streaming aggregation (a ``state`` operator:
  ``StateStoreSave``) run them; LR1's stream-stream join ran none in its calibration on Spark
  (``bench-results/engine-profile``: no-data batch "none"), so the join alone does not.
- **State reload.** A stateful query's state lives in state-store partitions on the executors that ran their tasks;
  when an executor leaves, its share of the partitions is loaded again from the checkpoint by the next batch's tasks
  (:func:`reload_tasks` of them, each ``state_reload_s`` longer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from pacer import Dataset, QuerySpec

#: Watermark delay of the simulated queries unless a run says otherwise: pacer-spark's workloads' (seconds).
WATERMARK_S = 60.0


def runs_no_data_batches(spec: QuerySpec) -> bool:
    """True for a query whose state a watermark evicts through no-data batches: one with a streaming aggregation."""
    return any(op.kind == "state" for op in spec.dag.operators)


def keeps_state(spec: QuerySpec) -> bool:
    """True for a query with state stores: a streaming aggregation or a stream-stream join."""
    return any(op.kind == "state" or op.name == "StreamingSymmetricHashJoin" for op in spec.dag.operators)


def reload_tasks(partitions: int, removed: int, before: int) -> int:
    """Tasks of a query's next batch that load their state again after ``removed`` of ``before`` executors left:
    the removed executors' share of its ``partitions`` state partitions, rounded up."""
    if removed <= 0 or before <= 0:
        return 0
    return min(partitions, math.ceil(partitions * removed / before))


class Watermark:
    """One query's event-time watermark: ``max event time seen - delay``, never back; the first event moves it (module
    docstring: Spark's starts at the epoch, below every event time pacer-gen writes).

    :param delay_s: the watermark delay (``withWatermark``'s), seconds.
    """

    def __init__(self, delay_s: float) -> None:
        if delay_s < 0:
            raise ValueError(f"watermark delay must be >= 0 s, got {delay_s}")
        self.delay_s = delay_s
        self.at = -math.inf

    def advance(self, datasets: Iterable[Dataset]) -> bool:
        """A data batch of ``datasets`` completed: True when it moved the watermark (a no-data batch is then due)."""
        latest = max((d.arrival for d in datasets if d.rows > 0), default=-math.inf)
        moved = latest - self.delay_s
        if moved > self.at:
            self.at = moved
            return True
        return False
