"""What a scaling strategy sees and answers (the fourth decision: how many executors the application holds).

A scaling strategy (``pacer_scale``) gets one :class:`QueryLoad` per query, built by :class:`pacer.scaler.Scaler`
from what the Controller measured, and a :class:`ClusterView` of the executors; it answers a
:class:`ScaleDecision` (the executors wanted) or None. The runtime enacts the answer: the simulator adds executors
after their start-up delay and removes them between batches; Spark asks its cluster manager.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QueryLoad:
    """One query's load, as a scaling strategy sees it.

    :param query_id: the query.
    :param deadline_s: its deadline.
    :param fixed_s: the fixed part of its batches' service time (its service-time model; 0 before a fit): the part
        more cores do not shorten (planning, the commit, the sink).
    :param core_s_per_byte: core-seconds its tasks executed per byte processed, measured (``busy_core_s``), recent
        batches weighing more; 0 before its first measured batch.
    :param partitions: the most cores one of its batches can use.
    :param rate_bytes_s: its input rate over the scaler's recent window (bytes per second).
    :param trend_bytes_s2: how fast that rate changes (bytes per second, per second; > 0 rising).
    :param backlog_bytes: bytes arrived and not yet completed (buffered and in flight).
    :param backlog_age_s: age of its oldest buffered data (0: none waits).
    :param miss_rows: rows that completed past the deadline so far.
    :param rows_in: rows arrived so far.
    :param recent_miss_rows: rows late (completed past the deadline, or shed) since the previous decision: what a
        strategy learns its misses from (the totals above never forget).
    :param recent_rows: rows completed or shed since the previous decision.
    :param reload_s: seconds longer the query's next batch takes after an executor leaves (reloading the state it
        held; 0: not measured, or stateless).
    """

    query_id: str
    deadline_s: float
    fixed_s: float
    core_s_per_byte: float
    partitions: int
    rate_bytes_s: float
    trend_bytes_s2: float = 0.0
    backlog_bytes: int = 0
    backlog_age_s: float = 0.0
    miss_rows: int = 0
    rows_in: int = 0
    recent_miss_rows: int = 0
    recent_rows: int = 0
    reload_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The application's executors, as a scaling strategy sees them.

    :param executors: executors running (their cores take tasks).
    :param pending: executors asked for and not yet running (starting up).
    :param removing: executors asked to leave and not yet gone.
    :param cores_per_executor: task slots of one executor.
    :param min_executors: the fewest the user allows.
    :param max_executors: the most the user allows.
    :param since_change_s: seconds since the executors wanted last changed (inf: never).
    :param startup_s: seconds an executor takes from request to running (the last one observed, else the
        runtime's estimate).
    :param peak_tasks: the most tasks running or waiting at one moment since the previous call.
    :param interval_s: seconds since the previous call (0 on the first).
    """

    executors: int
    cores_per_executor: int
    min_executors: int
    max_executors: int
    pending: int = 0
    removing: int = 0
    since_change_s: float = math.inf
    startup_s: float = 0.0
    peak_tasks: int = 0
    interval_s: float = 0.0

    @property
    def target(self) -> int:
        """Executors the application holds once what is asked is done: running, plus starting, less leaving."""
        return self.executors + self.pending - self.removing

    @property
    def cores(self) -> int:
        """Task slots of the running executors."""
        return self.executors * self.cores_per_executor


@dataclass(frozen=True, slots=True)
class ScaleDecision:
    """A scaling strategy's answer.

    :param executors: executors wanted (the runtime clamps to ``[min_executors, max_executors]``).
    :param reason: why, in a few words (kept with each change in the report).
    """

    executors: int
    reason: str = ""

    def __post_init__(self) -> None:
        if self.executors < 0:
            raise ValueError(f"a scaling decision wants >= 0 executors, got {self.executors}")
