"""What the Controller keeps per query and per pending batch, and the errors it raises."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pacer.catch_up import CatchUp
from pacer.model import DatasetBuffer, MicroBatch, QueryHistory, QuerySpec
from pacer.overload import OverloadMonitor
from pacer.recorder import QueryRecord
from pacer.service_time import ServiceTimeModel

#: The decision each baseline falls back to when a strategy raises and fallback is on.
FALLBACK = {"admission": "asap", "scheduling": "fifo", "placement": "cpu-only"}

#: What the Controller does with a query whose offered load no batch size can serve within its deadline.
OVERLOAD_POLICIES = ("shed", "keep")


class StrategyError(RuntimeError):
    """A strategy raised, or returned an ill-formed decision. The message names it."""

    def __init__(self, strategy: str, decision: str, query_id: str | None, detail: str) -> None:
        where = f" for query {query_id!r}" if query_id else ""
        super().__init__(f"{decision} strategy {strategy!r} failed{where}: {detail}")
        self.strategy = strategy
        self.decision = decision
        self.query_id = query_id


@dataclass
class QueryState:
    """One registered query: its spec, strategies, buffer, history, service-time model, overload monitor and policy.

    Private to the Controller; others read it through :class:`pacer.views.QueryView`. ``record`` is the
    query's part of the Controller's :class:`~pacer.recorder.RunRecorder`.
    """

    spec: QuerySpec
    selected: dict[str, str]
    params: dict[str, dict[str, Any]]
    states: dict[str, Any]
    buffer: DatasetBuffer = field(default_factory=DatasetBuffer)
    history: QueryHistory = field(default_factory=QueryHistory)
    seq: int = 0
    in_flight: str | None = None
    last_admitted_at: float | None = None
    shed: int = 0
    fallbacks: int = 0
    record: QueryRecord = field(default_factory=QueryRecord)
    service: ServiceTimeModel = field(default_factory=ServiceTimeModel)
    overload: OverloadMonitor = field(default_factory=lambda: OverloadMonitor(deadline=10.0))
    max_rows: int = 0
    max_bytes: int = 0
    overload_policy: str = "keep"
    catch_up: CatchUp = field(default_factory=lambda: CatchUp(deadline=10.0))


@dataclass
class RunningBatch:
    """An admitted batch until it completes: when it started, its interval and pacer's time on it."""

    batch: MicroBatch
    started_at: float | None = None
    interval_s: float = 0.0
    overhead_s: float = 0.0
