"""Registers ``deadline`` (scaling)."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import ClusterView, Param, QueryLoad, ScaleDecision, StrategyContext, StrategyInfo, hookimpl
from pacer_scaler.rule import DeadlineScaler, build_state


@hookimpl
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare the deadline scaler."""
    return [
        StrategyInfo(
            name="deadline",
            provides=frozenset({"scaling"}),
            summary="The fewest executors at which every query meets its deadline at its rate: DS2's rule with the "
                    "utilization target 1 - 2 x fixed part / deadline, plus a backlog's catch-up",
            params=(
                Param("headroom", 0.15, "extra share of cores for noise in the rate and the cost"),
                Param("catch_up_s", 60.0, "seconds to drain a backlog beyond one deadline's arrivals (DS2's "
                                          "catch-up, Flink's job.autoscaler.catch-up.duration)"),
                Param("down_hold_s", 60.0, "scale down only to the most needed over this many seconds, and only "
                                           "once the executors have not changed for as long"),
                Param("trend_cap", 0.5, "the rate is projected along its rising trend over an executor's start-up "
                                        "by at most this share of the rate"),
                Param("down_band", 0.1, "scale down only when that saves at least this share of the executors "
                                        "(noise in the rate does not flap them)"),
            ),
            state=build_state,
        ),
    ]


@hookimpl
def pacer_scale(ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                now: float) -> ScaleDecision | None:
    """Answer for ``deadline``."""
    if ctx.chosen != "deadline":
        return None
    scaler: DeadlineScaler = ctx.state
    return scaler.decide(queries, cluster, now, ctx.params)
