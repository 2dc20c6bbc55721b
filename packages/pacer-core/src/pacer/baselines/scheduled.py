"""Baseline scaling ``scheduled``: executors by a timetable known in advance, each rise asked for ahead of time.

What a cluster's scheduled scaling does (a cron-like rule: so many executors from this time): ``timetable`` is
``T:N,T:N,...`` (``N`` executors from second ``T`` of the run until the next entry). At each call it holds the most
any entry in force before the next call's executors could be running asks for: from now to now + the executors'
start-up + ``lead_s`` (the scaler's period, so the next call is not too late). A rise is therefore asked for, and
billed, a start-up ahead; a fall comes once no entry within that horizon needs more. Given the run's future traffic
(pacer-bench's ``oracle`` computes such a timetable) it is a perfect-foresight scaler.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pacer.hookspecs import hookimpl
from pacer.model import QuerySpec
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import Param, StrategyContext, StrategyInfo


def parse_timetable(text: str) -> tuple[tuple[float, int], ...]:
    """``"T:N,T:N"`` -> ``((T, N), ...)`` sorted by time (empty text: no entry).

    :raises ValueError: naming the entry that is not ``SECONDS:EXECUTORS`` with seconds >= 0 and executors >= 0.
    """
    out = []
    for entry in filter(None, (e.strip() for e in str(text).split(","))):
        at, _, count = entry.partition(":")
        try:
            pair = (float(at), int(count))
        except ValueError:
            raise ValueError(f"scheduled: timetable entries are SECONDS:EXECUTORS (e.g. 0:4,300:8), got {entry!r}") \
                from None
        if pair[0] < 0 or pair[1] < 0:
            raise ValueError(f"scheduled: a timetable entry needs seconds >= 0 and executors >= 0, got {entry!r}")
        out.append(pair)
    return tuple(sorted(out))


def _state(spec: QuerySpec | None, params: Mapping[str, Any]) -> tuple[tuple[float, int], ...]:
    return parse_timetable(params["timetable"])


def wanted(timetable: Sequence[tuple[float, int]], start: float, end: float) -> int | None:
    """The most executors any entry in force during ``[start, end)`` asks for (None: none is)."""
    counts = [n for i, (at, n) in enumerate(timetable)
              if at < end and (i + 1 == len(timetable) or timetable[i + 1][0] > start)]
    return max(counts) if counts else None


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``scheduled``."""
    return [StrategyInfo(
        name="scheduled", provides=frozenset({"scaling"}),
        summary="Executors by a timetable (T:N,...), each rise asked for an executor's start-up ahead",
        params=(Param("timetable", "", "SECONDS:EXECUTORS entries, e.g. 0:4,300:8 (empty: hold the executors)"),
                Param("lead_s", 5.0, "seconds beyond an executor's start-up a rise is asked for early (the "
                                     "scaler's period)")),
        state=_state,
    )]


@hookimpl(trylast=True)
def pacer_scale(ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                now: float) -> ScaleDecision | None:
    """Answer for ``scheduled``."""
    if ctx.chosen != "scheduled":
        return None
    horizon = now + cluster.startup_s + float(ctx.params["lead_s"])
    count = wanted(ctx.state, now, horizon)
    if count is None:
        return ScaleDecision(cluster.target, "")
    return ScaleDecision(count, f"timetable: {count} executors")
