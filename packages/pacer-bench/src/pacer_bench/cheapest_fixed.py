"""The cheapest fixed executor count that keeps every seed's rows within a late limit, found by bisection.

A count is *feasible* when, on every seed, every query completes at most the limit's share of its rows past its
deadline. Feasibility grows with the count in practice (more cores never make a batch slower), which the bisection
assumes; its answer ``n`` comes with ``n - 1`` probed and found infeasible (:attr:`Bisection.late` holds every
probe).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: The most executors the search doubles its upper bound to before it gives up.
MOST = 4096


def worst_late(report: Mapping[str, Any]) -> float:
    """The worst query's share of rows late against its own deadline (shed rows count)."""
    return max((float(v.get("deadline_miss_ratio_rows", v.get("deadline_miss_ratio", 0.0)))
                for v in report["queries"].values()), default=0.0)


@dataclass
class Bisection:
    """What the search found: the count, each probed count's worst late share per seed, and the reports of every
    seed at the count found."""

    count: int
    late: dict[int, list[float]] = field(default_factory=dict)
    reports: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The count and every probe, for autoscale.json."""
        return {"count": self.count, "probes": {str(n): shares for n, shares in sorted(self.late.items())}}


def cheapest_fixed(probe: Callable[[int], Sequence[dict[str, Any]]], *, limit: float, start: int) -> Bisection:
    """The smallest count ``n >= 1`` whose ``probe(n)`` (every seed's report on ``n`` executors) is feasible (module
    docstring), searched from ``start``: doubled until feasible, then bisected down to ``n - 1`` infeasible.

    :raises ValueError: no count up to :data:`MOST` is feasible.
    """
    found = Bisection(count=0)
    kept: dict[int, list[dict[str, Any]]] = {}

    def feasible(n: int) -> bool:
        if n not in found.late:
            reports = list(probe(n))
            found.late[n] = [worst_late(r) for r in reports]
            if all(s <= limit for s in found.late[n]):  # each feasible count probed is below the last one:
                kept.clear()  # only its reports are kept
                kept[n] = reports
        return all(s <= limit for s in found.late[n])

    low, high = 0, max(1, start)  # low: infeasible (0 executors never are), high: to be feasible
    while not feasible(high):
        if high >= MOST:
            raise ValueError(f"no fixed count up to {MOST} executors keeps every seed within {limit:.0%} late")
        low, high = high, min(MOST, high * 2)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if feasible(middle) else (middle, high)
    assert high == 1 or not feasible(high - 1)  # the count below the answer was probed, and is not feasible
    found.count, found.reports = high, kept[high]
    return found
