"""Registers ``zstream`` (admission), ``edf`` and ``rdas`` (scheduling)."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import (
    AdmissionDecision,
    DatasetBuffer,
    Param,
    PendingBatch,
    ScheduleDecision,
    StrategyContext,
    StrategyInfo,
    SystemView,
    hookimpl,
)
from pacer_zstream.admission import ZStreamAdmission, build_state
from pacer_zstream.scheduling import edf, rdas


@hookimpl
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare the three zStream strategies."""
    return [
        StrategyInfo(
            name="zstream",
            provides=frozenset({"admission"}),
            summary="zStream: admit when T_buff + T_sched + T_anal reaches the query's deadline (Eqs. 1-4), "
                    "taking the datasets that still meet it",
            params=(
                Param("partial", True, "admit the largest prefix that meets the deadline (Fig. 5); False: the whole buffer"),
                Param("service", "model", "T_anal from core's service-time model ('model') or bytes / AvgThPut "
                                          "('throughput', Eq. 4's letter)"),
                Param("slack", 0.01, "admit this many seconds before MaxLat reaches the deadline (one poll)"),
                Param("t_sched", "queue", "T_sched: the predicted wait behind the batches the scheduler runs first "
                                          "and the core share under FAIR/RDAS ('queue'), or every other query's "
                                          "pending batch in full ('paper', Eq. 3's letter)"),
                Param("reserve", True, "with t_sched='queue' under FIFO/EDF: while waiting, keep room for the longest "
                                       "recent batch of another query starting ahead"),
                Param("cap", True, "with t_sched='queue' under FIFO/EDF: keep each batch short enough for the queries "
                                   "with earlier deadlines to absorb being blocked by it"),
            ),
            state=build_state,
        ),
        StrategyInfo(
            name="edf",
            provides=frozenset({"scheduling"}),
            summary="zStream EDF: earliest deadline (Eq. 5) first, re-sorted on every arrival",
            params=(Param("preempt", False, "also re-sort running batches (task-level EDF); default: they keep their place"),),
        ),
        StrategyInfo(
            name="rdas",
            provides=frozenset({"scheduling"}),
            summary="zStream RDAS: min-max normalised deadline priority turned into core shares",
            params=(Param("spread", 2.0, "the most urgent batch weighs 1 + spread, the least urgent 1 "
                                         "(2: Fig. 6's 1/2/3 cores of 6)"),),
        ),
    ]


@hookimpl
def pacer_admit(ctx: StrategyContext, buffer: DatasetBuffer, now: float, system: SystemView) -> AdmissionDecision | None:
    """zStream Algorithm 1."""
    if ctx.chosen != "zstream" or ctx.query is None:
        return None
    state: ZStreamAdmission = ctx.state
    return state.admit(ctx.query.id, buffer, now, system, ctx.history, ctx.service)


@hookimpl
def pacer_schedule(
    ctx: StrategyContext, pending: Sequence[PendingBatch], now: float, system: SystemView
) -> ScheduleDecision | None:
    """zStream Algorithm 2."""
    if ctx.chosen == "edf":
        return edf(pending, now, preempt=bool(ctx.params.get("preempt", False)))
    if ctx.chosen == "rdas":
        spread = float(ctx.params.get("spread", 2.0))
        if spread < 0:
            raise ValueError(f"rdas: spread must be >= 0, got {spread}")
        return rdas(pending, now, system.cores, spread)
    return None
