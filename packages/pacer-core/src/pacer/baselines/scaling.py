"""Baseline scaling: ``fixed`` (the executors stay as they are) and ``spark-dynamic`` (Spark's dynamic allocation).

``spark-dynamic`` on Spark hands the executors to Spark's own ``ExecutorAllocationManager`` (pacer then enacts
nothing and records what Spark holds); in the simulator it is that manager's rule, seen at the scaler's period:
while tasks wait for a slot, executors are added 1 (the call that first sees them wait), then 2, 4... once per
``backlog_timeout_s`` (``spark.dynamicAllocation.schedulerBacklogTimeout`` and its sustained twin, both 1 s) they
kept waiting since the previous call, never beyond what the waiting and running tasks need; an executor whose slots
no task needed for ``idle_timeout_s`` (``spark.dynamicAllocation.executorIdleTimeout``, 60 s) leaves.
``allocation_ratio`` (``spark.dynamicAllocation.executorAllocationRatio``, 1) scales what the tasks need (0.5: half
the executors, a batch's tasks in twice the waves). It starts with the executors the run starts with, as Spark
starts at ``spark.dynamicAllocation.initialExecutors`` (default: ``minExecutors``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.hookspecs import hookimpl
from pacer.model import QuerySpec
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import Param, StrategyContext, StrategyInfo


@dataclass
class DynamicState:
    """``spark-dynamic``'s memory: the executors the next backlogged call adds, whether the last call saw tasks wait,
    and the executors needed over time."""

    to_add: int = 1
    backlogged: bool = False
    since: float | None = None
    needed: deque[tuple[float, int]] = field(default_factory=deque)


def _dynamic_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> DynamicState:
    if not float(params["backlog_timeout_s"]) > 0:
        raise ValueError(f"spark-dynamic: backlog_timeout_s must be > 0, got {params['backlog_timeout_s']}")
    if not 0 < float(params["allocation_ratio"]) <= 1:
        raise ValueError(f"spark-dynamic: allocation_ratio must be in (0, 1], got {params['allocation_ratio']}")
    return DynamicState()


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``fixed`` and ``spark-dynamic``."""
    return [
        StrategyInfo(name="fixed", provides=frozenset({"scaling"}),
                     summary="Keep the executors the application started with (a fixed cluster; the default)"),
        StrategyInfo(
            name="spark-dynamic", provides=frozenset({"scaling"}),
            summary="Spark's dynamic allocation: add executors while tasks wait, remove those idle for 60 s",
            params=(Param("idle_timeout_s", 60.0, "seconds an executor's slots go unneeded before it leaves "
                                                  "(spark.dynamicAllocation.executorIdleTimeout)"),
                    Param("backlog_timeout_s", 1.0, "seconds of waiting tasks per doubling of the executors added "
                                                    "(spark.dynamicAllocation.schedulerBacklogTimeout)"),
                    Param("allocation_ratio", 1.0, "share of the executors the waiting and running tasks need that it "
                                                   "asks for (spark.dynamicAllocation.executorAllocationRatio)")),
            state=_dynamic_state,
        ),
    ]


@hookimpl(trylast=True)
def pacer_scale(ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                now: float) -> ScaleDecision | None:
    """Answer for ``fixed`` and ``spark-dynamic``."""
    if ctx.chosen == "fixed":
        return ScaleDecision(cluster.target, "fixed")
    if ctx.chosen != "spark-dynamic":
        return None
    state: DynamicState = ctx.state
    tasks = cluster.peak_tasks * float(ctx.params["allocation_ratio"])
    needed = max(cluster.min_executors, math.ceil(tasks / cluster.cores_per_executor - 1e-9))
    state.needed.append((now, needed))
    if state.since is None:
        state.since = now
    idle = float(ctx.params["idle_timeout_s"])
    while state.needed and now - state.needed[0][0] > idle:
        state.needed.popleft()
    target = cluster.target
    if needed > target:  # tasks waited for a slot: ramp up, doubling once per backlog timeout they kept waiting
        timeouts = math.floor(cluster.interval_s / float(ctx.params["backlog_timeout_s"]) + 1e-9)
        ticks = max(1, min(30, timeouts)) if state.backlogged else 1  # waiting since the last call, or only since now
        state.backlogged = True
        wanted = min(needed, target + state.to_add * (2 ** ticks - 1))
        state.to_add *= 2 ** ticks
        state.since = now  # an executor's idle clock starts when it joins
        return ScaleDecision(wanted, f"tasks waiting ({cluster.peak_tasks} for {target * cluster.cores_per_executor}"
                                     " slots)")
    state.to_add, state.backlogged = 1, False
    most = max(n for _, n in state.needed)
    if now - state.since >= idle - 1e-9 and most < target:
        state.since = now
        return ScaleDecision(most, f"executors idle for {idle:g} s")
    return ScaleDecision(target, "")
