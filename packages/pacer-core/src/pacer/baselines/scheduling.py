"""Baseline scheduling: Spark's FIFO and FAIR schedulers."""

from __future__ import annotations

from collections.abc import Sequence

from pacer.hookspecs import hookimpl
from pacer.model import PendingBatch, ScheduleDecision, SystemView
from pacer.strategy import StrategyContext, StrategyInfo


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``fifo`` and ``fair``."""
    return [
        StrategyInfo(
            name="fifo",
            provides=frozenset({"scheduling"}),
            summary="Run batches in admission order, each taking the cores it can use (Spark FIFO)",
        ),
        StrategyInfo(
            name="fair",
            provides=frozenset({"scheduling"}),
            summary="Split the cores equally among pending batches (Spark FAIR, one pool per query)",
        ),
    ]


@hookimpl(trylast=True)
def pacer_schedule(
    ctx: StrategyContext, pending: Sequence[PendingBatch], now: float, system: SystemView
) -> ScheduleDecision | None:
    """Answer for ``fifo`` and ``fair``."""
    order = tuple(p.batch.id for p in pending)
    if ctx.chosen == "fifo":
        return ScheduleDecision(order=order)
    if ctx.chosen == "fair":
        share = system.cores / len(order)
        return ScheduleDecision(order=order, shares={b: share for b in order})
    return None
