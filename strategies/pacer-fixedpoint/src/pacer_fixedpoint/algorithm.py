"""Das et al., "Adaptive Stream Processing using Dynamic Batch Sizing", Algorithm 1.

The next batch interval is the fixed point of ``x = ω(x) / ρ`` (ω: processing
time of a batch of interval x), found by iterating ``x_next = p_last / ρ``,
except near a Type-II intersection of a superlinear workload, where
``x_next = (1 - r) · x_small``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Observation:
    """A completed batch: the interval it covered and its processing time (seconds)."""

    interval: float
    processing: float


def next_interval(last: Observation, second_last: Observation, *, rho: float, backoff: float) -> tuple[float, str]:
    """Algorithm 1 (CalculateNextBatchInterval).

    :return: the next interval and which branch chose it: ``"type-ii"`` (back off by
        ``r``), ``"fixed-point"``, or ``"equal-intervals"`` (the corner case where
        the last two intervals are equal: Type-II detection is inconclusive, so
        the fixed-point iteration applies).
    """
    if math.isclose(last.interval, second_last.interval, rel_tol=0.0, abs_tol=1e-9):
        return last.processing / rho, "equal-intervals"
    small, large = (last, second_last) if last.interval < second_last.interval else (second_last, last)
    if large.processing / large.interval > small.processing / small.interval and last.processing > rho * last.interval:
        return (1.0 - backoff) * small.interval, "type-ii"
    return last.processing / rho, "fixed-point"


def round_to_granule(interval: float, granule: float) -> float:
    """Round to a multiple of ``granule`` (Das rounds to 100 ms), never below one granule."""
    if granule <= 0:
        return interval
    return max(granule, round(interval / granule) * granule)
