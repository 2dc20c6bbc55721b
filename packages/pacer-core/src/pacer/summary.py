"""Bounded statistics of an unbounded stream of floats: :class:`StreamingSummary`; exact percentiles of a list:
:func:`quantiles`. A leaf: it imports nothing of pacer's.

A long-running driver must not keep every measurement (a decide time per poll, a latency per
dataset) for weeks. A :class:`StreamingSummary` keeps, in memory bounded whatever the count:

- exact ``count``, ``total`` (sum), ``mean``, ``min`` and ``max``;
- the most recent ``keep_last`` values (:attr:`StreamingSummary.last`);
- a log-bucketed histogram (as DDSketch) for percentiles: a value ``x > 0`` falls in bucket
  ``i = ceil(log(x) / log(gamma))`` with ``gamma = (1 + a) / (1 - a)``, and bucket ``i`` is read back as
  ``2 gamma**i / (gamma + 1)``, within relative error ``a`` (``relative_error``) of every value in it.
  Negative values mirror that; values with ``|x| < min_magnitude`` count as 0.

Percentiles are **exact** (linear interpolation, numpy's default: :func:`quantiles`) while every value
is still among the last ``keep_last``; beyond, they come from the histogram: the order statistics
around the requested rank are each returned within relative error ``a`` and interpolated, and the
result is clamped to ``[min, max]``. Should a stream span more than ``max_buckets`` buckets (about
2 x 10**18 of dynamic range at the default 1 %), the buckets nearest 0 are merged, so the smallest
percentiles lose that guarantee first; the top ones keep it.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence

__all__ = ["StreamingSummary", "quantiles"]


def quantiles(values: Sequence[float], qs: Sequence[float]) -> list[float]:
    """Percentiles ``qs`` (0-100) with linear interpolation (numpy's default), sorting once."""
    if not values:
        return [0.0 for _ in qs]
    ordered = sorted(values)
    out = []
    for q in qs:
        pos = (len(ordered) - 1) * q / 100.0
        lo = math.floor(pos)
        hi = min(lo + 1, len(ordered) - 1)
        out.append(float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)))
    return out


class StreamingSummary:
    """Count, sum, mean, min, max, percentiles (relative error ``relative_error``) and the last values of a stream.

    >>> s = StreamingSummary(relative_error=0.01, keep_last=3)
    >>> s.extend([1.0, 2.0, 3.0, 4.0])
    >>> s.count, s.total, s.min, s.max, s.last
    (4, 10.0, 1.0, 4.0, (2.0, 3.0, 4.0))

    :param relative_error: ``a`` in (0, 1): beyond the exact window a percentile is within ``a`` of the
        true order statistics, relatively (0.01: 1 %).
    :param keep_last: how many recent values :attr:`last` keeps (and up to which count percentiles are
        exact); 0 keeps none.
    :param max_buckets: most histogram buckets kept (memory: about 100 bytes each).
    :param min_magnitude: values closer to 0 than this count as 0.
    """

    __slots__ = ("_gamma", "_head", "_log_gamma", "_max", "_min", "_neg", "_pos", "_recent", "_zero", "count",
                 "keep_last", "max_buckets", "min_magnitude", "relative_error", "total")

    def __init__(self, relative_error: float = 0.01, keep_last: int = 1024, max_buckets: int = 2048,
                 min_magnitude: float = 1e-12) -> None:
        if not 0.0 < relative_error < 1.0:
            raise ValueError(f"relative_error must be in (0, 1), got {relative_error}")
        if keep_last < 0 or max_buckets < 2 or not min_magnitude > 0:
            raise ValueError("need keep_last >= 0, max_buckets >= 2 and min_magnitude > 0")
        self.relative_error = relative_error
        self.keep_last = keep_last
        self.max_buckets = max_buckets
        self.min_magnitude = min_magnitude
        self._gamma = (1.0 + relative_error) / (1.0 - relative_error)
        self._log_gamma = math.log(self._gamma)
        self._pos: dict[int, int] = {}
        self._neg: dict[int, int] = {}
        self._zero = 0
        self._recent = array("d")  # a ring of the last keep_last values (8 bytes each); _head: the oldest
        self._head = 0
        self.count = 0
        self.total = 0.0
        self._min = math.inf
        self._max = -math.inf

    # ------------------------------------------------------------------ input

    def add(self, value: float) -> None:
        """Add one value (NaN is refused: it has no rank)."""
        value = float(value)
        if value != value:
            raise ValueError("StreamingSummary.add: NaN has no rank")
        self.count += 1
        self.total += value
        if value < self._min:
            self._min = value
        if value > self._max:
            self._max = value
        self._remember(value)
        magnitude = abs(value)
        if magnitude < self.min_magnitude:
            self._zero += 1
            return
        store = self._pos if value > 0 else self._neg
        key = math.ceil(math.log(magnitude) / self._log_gamma)
        store[key] = store.get(key, 0) + 1
        if len(self._pos) + len(self._neg) > self.max_buckets:
            self._collapse()

    def _remember(self, value: float) -> None:
        if len(self._recent) < self.keep_last:
            self._recent.append(value)
        elif self.keep_last:
            self._recent[self._head] = value
            self._head = (self._head + 1) % self.keep_last

    def extend(self, values: Iterable[float]) -> None:
        """Add every value of ``values``, in order."""
        for value in values:
            self.add(value)

    def merge(self, other: StreamingSummary) -> None:
        """Fold ``other`` (same ``relative_error``) into this summary; :attr:`last` gets ``other``'s last values."""
        if other.relative_error != self.relative_error:
            raise ValueError("can only merge summaries with the same relative_error")
        self.count += other.count
        self.total += other.total
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)
        self._zero += other._zero
        for mine, theirs in ((self._pos, other._pos), (self._neg, other._neg)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        for value in other.last:
            self._remember(value)
        while len(self._pos) + len(self._neg) > self.max_buckets:
            self._collapse()

    def _collapse(self) -> None:
        """Merge the two buckets nearest 0 (of the larger side) so the bucket count stays bounded."""
        store = self._pos if len(self._pos) >= len(self._neg) else self._neg
        low, nxt = sorted(store)[:2]
        store[nxt] += store.pop(low)

    # ------------------------------------------------------------------ output

    def __len__(self) -> int:
        return self.count

    @property
    def mean(self) -> float:
        """Exact mean (0.0 when empty)."""
        return self.total / self.count if self.count else 0.0

    @property
    def min(self) -> float:
        """Exact minimum (0.0 when empty)."""
        return self._min if self.count else 0.0

    @property
    def max(self) -> float:
        """Exact maximum (0.0 when empty)."""
        return self._max if self.count else 0.0

    @property
    def last(self) -> tuple[float, ...]:
        """The most recent values (at most ``keep_last``), oldest first."""
        ring = self._recent
        return tuple(ring[self._head:]) + tuple(ring[:self._head])

    @property
    def exact(self) -> bool:
        """True while every value is among :attr:`last`: percentiles are then exact."""
        return self.count <= self.keep_last

    def percentiles(self, ps: Sequence[float]) -> list[float]:
        """Percentiles ``ps`` (0-100); exact while :attr:`exact`, else within ``relative_error`` (module docstring).

        All 0.0 when empty.
        """
        for p in ps:
            if not 0.0 <= p <= 100.0:
                raise ValueError(f"percentile must be within 0-100, got {p}")
        if not self.count:
            return [0.0 for _ in ps]
        if self.exact:
            return quantiles(self._recent, ps)
        ordered = self._ordered_buckets()
        out = []
        for p in ps:
            pos = (self.count - 1) * p / 100.0
            lo = math.floor(pos)
            low = self._rank_value(ordered, lo)
            high = self._rank_value(ordered, min(lo + 1, self.count - 1))
            value = low + (high - low) * (pos - lo)
            out.append(min(self._max, max(self._min, value)))
        return out

    def percentile(self, p: float) -> float:
        """The ``p``-th percentile (0-100), as :meth:`percentiles`."""
        return self.percentiles((p,))[0]

    def quantile(self, q: float) -> float:
        """The ``q``-quantile (0-1), as :meth:`percentiles` with ``100 q``."""
        return self.percentile(100.0 * q)

    def _ordered_buckets(self) -> list[tuple[float, int]]:
        """``(representative value, count)`` of every non-empty bucket, ascending."""
        g = self._gamma
        out = [(-2.0 * g**k / (g + 1.0), self._neg[k]) for k in sorted(self._neg, reverse=True)]
        if self._zero:
            out.append((0.0, self._zero))
        out.extend((2.0 * g**k / (g + 1.0), self._pos[k]) for k in sorted(self._pos))
        return out

    @staticmethod
    def _rank_value(ordered: list[tuple[float, int]], rank: int) -> float:
        """The representative value of the bucket holding the ``rank``-th smallest value (0-based)."""
        seen = 0
        for value, n in ordered:
            seen += n
            if rank < seen:
                return value
        return ordered[-1][0]

    def to_dict(self) -> dict[str, float | int]:
        """``count``, ``sum``, ``mean``, ``min``, ``max``, ``p50``, ``p95``, ``p99`` (a JSON-ready summary)."""
        p50, p95, p99 = self.percentiles((50, 95, 99))
        return {"count": self.count, "sum": self.total, "mean": self.mean, "min": self.min, "max": self.max,
                "p50": p50, "p95": p95, "p99": p99}

    def __repr__(self) -> str:
        return (f"StreamingSummary(count={self.count}, mean={self.mean:.6g}, min={self.min:.6g}, "
                f"max={self.max:.6g}, relative_error={self.relative_error})")
