"""Baseline scaling ``dstream-ratio``: Spark Streaming's (DStreams') dynamic allocation (SPARK-12133).

Its rule, as Spark documents its ``spark.streaming.dynamicAllocation.*`` settings: every ``scaling_interval_s``
(60 s) it averages the batches' processing time over the batch interval; a ratio of at least ``scaling_up_ratio``
(0.9) asks for ``max(1, ratio rounded half up)`` more executors, one of at most ``scaling_down_ratio`` (0.3)
removes one.

Structured Streaming has no fixed batch interval and a :class:`~pacer.scaling.QueryLoad` carries no batch times, so
both are derived from what it carries: a query's batch interval is ``interval_share`` of its deadline (a DStreams
row waits up to one interval for its batch, which must finish within the next: the deadline is two intervals), and
the processing time of an interval's data on the running cores is its fixed part plus its core-seconds per byte x
rate x interval over ``min(cores, partitions)``. The ratio is that time over the interval, summed over the queries
sharing the executors (their batches take turns), sampled at every call and averaged over the scaling interval; a
query not yet measured (no core-seconds per byte) counts nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.hookspecs import hookimpl
from pacer.model import QuerySpec
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import Param, StrategyContext, StrategyInfo


@dataclass
class RatioState:
    """The ratios sampled since the last decision, and when that was (None: before the first call)."""

    samples: list[float] = field(default_factory=list)
    since: float | None = None


def _state(spec: QuerySpec | None, params: Mapping[str, Any]) -> RatioState:
    if not 0 <= float(params["scaling_down_ratio"]) < float(params["scaling_up_ratio"]):
        raise ValueError(f"dstream-ratio: needs 0 <= scaling_down_ratio < scaling_up_ratio, got "
                         f"{params['scaling_down_ratio']} and {params['scaling_up_ratio']}")
    if not 0 < float(params["interval_share"]) <= 1:
        raise ValueError(f"dstream-ratio: interval_share must be in (0, 1], got {params['interval_share']}")
    return RatioState()


def busy_ratio(queries: Sequence[QueryLoad], cores: int, interval_share: float) -> float | None:
    """Processing time over batch interval (module docstring), summed over the measured queries (None: none is)."""
    measured = [q for q in queries if q.core_s_per_byte > 0 and q.deadline_s > 0]
    if not measured or cores < 1:
        return None
    return sum(q.fixed_s / (interval_share * q.deadline_s)
               + q.core_s_per_byte * q.rate_bytes_s / min(cores, q.partitions) for q in measured)


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``dstream-ratio``."""
    return [StrategyInfo(
        name="dstream-ratio", provides=frozenset({"scaling"}),
        summary="Spark Streaming's dynamic allocation: every 60 s, processing time / batch interval above 0.9 adds "
                "executors, below 0.3 removes one",
        params=(Param("scaling_interval_s", 60.0, "seconds between decisions "
                                                  "(spark.streaming.dynamicAllocation.scalingInterval)"),
                Param("scaling_up_ratio", 0.9, "ratio at or above which executors are added "
                                               "(spark.streaming.dynamicAllocation.scalingUpRatio)"),
                Param("scaling_down_ratio", 0.3, "ratio at or below which one executor is removed "
                                                 "(spark.streaming.dynamicAllocation.scalingDownRatio)"),
                Param("interval_share", 0.5, "a query's batch interval as a share of its deadline")),
        state=_state,
    )]


@hookimpl(trylast=True)
def pacer_scale(ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                now: float) -> ScaleDecision | None:
    """Answer for ``dstream-ratio``."""
    if ctx.chosen != "dstream-ratio":
        return None
    state: RatioState = ctx.state
    if state.since is None:
        state.since = now
    ratio = busy_ratio(queries, cluster.cores, float(ctx.params["interval_share"]))
    if ratio is not None:
        state.samples.append(ratio)
    if now - state.since < float(ctx.params["scaling_interval_s"]) - 1e-9:
        return ScaleDecision(cluster.target, "")
    state.since = now
    if not state.samples:
        return ScaleDecision(cluster.target, "")
    average = sum(state.samples) / len(state.samples)
    state.samples.clear()
    if average >= float(ctx.params["scaling_up_ratio"]):
        return ScaleDecision(cluster.target + max(1, math.floor(average + 0.5)), f"processing/interval {average:.2f}")
    if average <= float(ctx.params["scaling_down_ratio"]):
        return ScaleDecision(max(0, cluster.target - 1), f"processing/interval {average:.2f}")
    return ScaleDecision(cluster.target, "")
