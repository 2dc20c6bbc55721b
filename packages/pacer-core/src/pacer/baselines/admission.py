"""Baseline admission: Spark's fixed ``processingTime`` trigger and its default trigger."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pacer.hookspecs import hookimpl
from pacer.model import AdmissionDecision, DatasetBuffer, QuerySpec, SystemView
from pacer.strategy import Param, StrategyContext, StrategyInfo


@dataclass
class StaticTrigger:
    """Spark's ``trigger(processingTime=interval)``.

    Ticks fall on multiples of ``interval``. A batch forms at the first tick
    after its data arrived; when the previous batch overran a tick, the next one
    starts as soon as it completes (what Spark's ``ProcessingTimeExecutor`` does).
    """

    interval: float
    next_tick: float = -math.inf

    def admit(self, ctx: StrategyContext, buffer: DatasetBuffer, now: float) -> AdmissionDecision:
        """Admit everything buffered when a tick has passed since the data arrived."""
        if now < self.next_tick:
            return AdmissionDecision.wait("before next trigger tick")
        last_tick = math.floor(now / self.interval + 1e-9) * self.interval
        earliest = buffer.earliest_arrival
        last = ctx.history.last
        overran = last is not None and last.completed_at > last_tick
        if self.next_tick > -math.inf and earliest is not None and earliest > last_tick and not overran:
            return AdmissionDecision.wait("data arrived after the last tick")
        self.next_tick = last_tick + self.interval
        return AdmissionDecision.admit_all(buffer, "trigger tick")


def _asap_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> int:
    """The read limit of ``asap``: at most this many datasets per batch (0: no limit)."""
    limit = int(params["max_datasets"])
    if limit < 0:
        raise ValueError(f"asap max_datasets must be >= 0 (0: no limit), got {limit}")
    return limit


def _static_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> StaticTrigger:
    interval = float(params["interval"])
    if interval <= 0:
        raise ValueError(f"static trigger interval must be > 0 seconds, got {interval}")
    return StaticTrigger(interval=interval)


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``static`` and ``asap``."""
    return [
        StrategyInfo(
            name="static",
            provides=frozenset({"admission"}),
            summary="Fixed trigger interval: Spark's processingTime trigger",
            params=(Param("interval", 10.0, "trigger interval in seconds"),),
            state=_static_state,
        ),
        StrategyInfo(
            name="asap",
            provides=frozenset({"admission"}),
            summary="Admit everything available whenever the query is idle: Spark's default trigger",
            params=(
                Param("max_datasets", 0, "at most this many datasets per batch, oldest first (0: all; "
                                         "Spark's maxFilesPerTrigger)"),
            ),
            state=_asap_state,
        ),
    ]


@hookimpl(trylast=True)
def pacer_admit(
    ctx: StrategyContext, buffer: DatasetBuffer, now: float, system: SystemView
) -> AdmissionDecision | None:
    """Answer for ``static`` and ``asap``."""
    if ctx.chosen == "asap":
        limit: int = ctx.state
        if limit and len(buffer) > limit:
            return AdmissionDecision(limit, reason=f"query idle, read limit {limit}")
        return AdmissionDecision.admit_all(buffer, "query idle")
    if ctx.chosen == "static":
        trigger: StaticTrigger = ctx.state
        return trigger.admit(ctx, buffer, now)
    return None
