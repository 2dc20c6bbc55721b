"""Registers ``deadline`` (scaling): the deadline scaler, chosen with ``scale="deadline"`` / ``--scale deadline``.

Its name is that of the latency target it sizes the executors to meet (``deadline="10s"`` / ``--deadline``), which
it does not set: see the README's "Two things called deadline".
"""

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
            summary="The deadline scaler (scale=deadline; the target is deadline=): the fewest executors at which "
                    "every query meets its deadline at its rate: DS2's rule with the "
                    "utilization target 1 - 2 x fixed part / deadline, plus a backlog's catch-up, priced in task "
                    "waves and corrected by the misses it sees",
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
                Param("miss_share", 0.01, "a query with more than this share of its rows late since the previous "
                                          "decision (or data older than its deadline less its fixed part) is "
                                          "missing: the rule learns from it, steps up, and does not scale down"),
                Param("miss_step", 0.1, "on misses at executors the rule said were enough, it steps up to the next "
                                        "count that runs the batches faster, and its cores are multiplied by this "
                                        "much more from then on (a learned correction)"),
                Param("correction_halflife_s", 900.0, "the learned correction decays back to 1 with this half-life "
                                                      "while no query is missing"),
                Param("min_change_interval_s", 60.0, "at most one change of the executors per this many seconds; a "
                                                     "scale-up while a query is missing does not wait"),
                Param("down_step", 0.5, "a scale-down keeps at least 1 - down_step of the cores' speed (at most "
                                        "half the executors go at once)"),
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
