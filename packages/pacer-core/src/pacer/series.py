"""The report's per-interval ``series``, accumulated as the run goes, in bounded memory.

A :class:`SeriesAccumulator` sums what :func:`pacer.metrics.series` computes from every arrival and every
completed batch into time buckets of ``width`` seconds (aligned on clock time 0). When the run spans more
than ``max_buckets`` buckets, the width doubles and neighbouring buckets merge, so a run of any length keeps
at most ``max_buckets`` of them; every per-bucket figure is an exact sum, count or maximum.

:meth:`SeriesAccumulator.rows` rebuilds SPBench's rows over ``[start, end)`` at the requested interval,
widened by powers of two to at most ``max_points`` rows and to at least the bucket width. Exact when
``start`` and ``interval`` fall on bucket boundaries (the simulator's ``start=0``, ``interval=1`` over a
run shorter than ``max_buckets`` seconds); otherwise each bucket counts in the row its start falls in, so
a row's boundaries are off by less than one bucket width.
"""

from __future__ import annotations

import math
from typing import Any

from pacer.model import BatchReport

#: Buckets kept, and rows a report's series has at most, by default.
MAX_POINTS = 2048

# Fields of a bucket (a list of floats): batches, bytes, rows, sum of batch intervals, max latency (s),
# latency sum (s), latencies counted, offered rows, sum of GPU-operator ratios, batches with a placement, rows that
# completed past the deadline.
_BATCHES, _BYTES, _ROWS, _INTERVAL, _MAXLAT, _LATSUM, _LATN, _OFFERED, _GPU, _PLACED, _LATE = range(11)
_FIELDS = 11


class SeriesAccumulator:
    """Per-bucket sums of a query's arrivals and completed batches (module docstring).

    :param width: initial bucket width in seconds (the monitoring interval).
    :param max_buckets: most buckets kept; beyond, the width doubles.
    """

    __slots__ = ("_buckets", "_hi", "_lo", "max_buckets", "width")

    def __init__(self, width: float = 1.0, max_buckets: int = MAX_POINTS) -> None:
        if not width > 0 or max_buckets < 2:
            raise ValueError("need width > 0 and max_buckets >= 2")
        self.width = width
        self.max_buckets = max_buckets
        self._buckets: dict[int, list[float]] = {}
        self._lo = self._hi = 0  # the lowest and highest bucket keys (when any)

    def _bucket(self, t: float) -> list[float]:
        key = math.floor(t / self.width)
        bucket = self._buckets.get(key)
        if bucket is None:
            first = not self._buckets
            bucket = self._buckets[key] = [0.0] * _FIELDS
            self._lo = key if first else min(self._lo, key)
            self._hi = key if first else max(self._hi, key)
            while self._hi - self._lo + 1 > self.max_buckets:
                self._coarsen()
                self._lo, self._hi = self._lo // 2, self._hi // 2
                bucket = self._buckets[math.floor(t / self.width)]
        return bucket

    def _coarsen(self) -> None:
        """Double the width, merging neighbouring buckets."""
        merged: dict[int, list[float]] = {}
        for key in sorted(self._buckets):
            into = merged.get(key // 2)
            row = self._buckets[key]
            if into is None:
                merged[key // 2] = row
                continue
            for i, value in enumerate(row):
                into[i] = max(into[i], value) if i == _MAXLAT else into[i] + value
        self._buckets = merged
        self.width *= 2.0

    def arrived(self, t: float, rows: int) -> None:
        """Count ``rows`` offered at ``t``."""
        self._bucket(t)[_OFFERED] += rows

    def withdrawn(self, t: float, rows: int) -> None:
        """Take back ``rows`` offered at ``t`` (their source will offer them again)."""
        bucket = self._buckets.get(math.floor(t / self.width))
        if bucket is not None:
            bucket[_OFFERED] -= rows

    def completed(self, report: BatchReport, late_rows: int = 0) -> None:
        """Count a completed batch in the bucket of its completion, ``late_rows`` of its rows past the deadline."""
        b = self._bucket(report.completed_at)
        b[_LATE] += late_rows
        b[_BATCHES] += 1
        b[_BYTES] += report.bytes
        b[_ROWS] += report.rows
        b[_INTERVAL] += report.interval_s
        b[_MAXLAT] = max(b[_MAXLAT], report.max_latency_s)
        for _, latency in report.dataset_latencies:
            b[_LATSUM] += latency
            b[_LATN] += 1
        if report.placement is not None:
            b[_GPU] += report.placement.ran_gpu_ratio
            b[_PLACED] += 1

    def __len__(self) -> int:
        return len(self._buckets)

    def rows(self, *, start: float, end: float, interval: float = 1.0,
             max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
        """The rows of :func:`pacer.metrics.series` over ``[start, end)`` (module docstring for the interval)."""
        if interval <= 0:
            raise ValueError("monitoring interval must be > 0")
        step = interval
        while step < self.width - 1e-12 or (end - start) / step > max_points:
            step *= 2.0
        count = max(1, math.ceil((end - start) / step - 1e-9))
        rows = [[0.0] * _FIELDS for _ in range(count)]
        for key, bucket in self._buckets.items():
            idx = min(count - 1, max(0, int((key * self.width - start + 1e-9 * self.width) // step)))
            into = rows[idx]
            for i, value in enumerate(bucket):
                into[i] = max(into[i], value) if i == _MAXLAT else into[i] + value
        out: list[dict[str, Any]] = []
        cum_rows = cum_lat = cum_n = 0.0
        for i, b in enumerate(rows):
            n = int(b[_BATCHES])
            cum_rows += b[_ROWS]
            cum_lat += b[_LATSUM]
            cum_n += b[_LATN]
            out.append({
                "t": i * step,
                "batches": n,
                "batch_bytes": b[_BYTES] / n if n else 0.0,
                "batch_rows": b[_ROWS] / n if n else 0.0,
                "batch_interval_s": b[_INTERVAL] / n if n else 0.0,
                "max_latency_ms": 1000.0 * b[_MAXLAT],
                "avg_latency_ms": 1000.0 * b[_LATSUM] / b[_LATN] if b[_LATN] else 0.0,
                "cum_avg_latency_ms": 1000.0 * cum_lat / cum_n if cum_n else 0.0,
                "throughput_rows_per_s": b[_ROWS] / step,
                "avg_throughput_rows_per_s": cum_rows / ((i + 1) * step),
                "input_rows_per_s": b[_OFFERED] / step,
                "gpu_operator_ratio": b[_GPU] / b[_PLACED] if b[_PLACED] else 0.0,
                "late_rows": int(b[_LATE]),
            })
        return out
