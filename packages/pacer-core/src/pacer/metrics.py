"""Metrics as the papers define them: latency percentiles, throughput, deadline misses, series.

- dataset latency = completion of its micro-batch - its arrival;
- max latency of a batch = completion - arrival of its earliest dataset;
- throughput = rows (bytes) processed / wall time of the run, and / processing time (LMStream Eq. 4);
- deadline miss ratio = share of datasets whose latency exceeds the query's deadline.

For a stream too long to keep (per-poll decide times, round trips), :class:`StreamingSummary` (defined in
:mod:`pacer.summary`) keeps bounded statistics: exact count/sum/mean/min/max, percentiles within 1 %.
:func:`quantiles` (exact percentiles, which :func:`percentile` and the summary's exact window use) lives there
too, so that :mod:`pacer.summary` stays a leaf; both are importable from here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from pacer.model import BatchReport
from pacer.summary import StreamingSummary, quantiles

__all__ = [
    "StreamingSummary",
    "dataset_latencies",
    "deadline_miss_ratio",
    "gpu_operator_ratio",
    "latency_summary_ms",
    "percentile",
    "quantiles",
    "series",
]


def check_non_negative(unit: str = "", **figures: float | None) -> None:
    """Every given figure (None: not measured) is a number >= 0, not NaN.

    :raises ValueError: naming the first that is not, with ``unit`` after the bound (e.g. ``"seconds"``).
    """
    for name, value in figures.items():
        if value is not None and (value < 0 or value != value):
            raise ValueError(f"{name} must be >= 0{' ' + unit if unit else ''}, got {value}")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100); 0.0 when empty."""
    return quantiles(values, (q,))[0]


def latency_summary_ms(latencies_s: Sequence[float]) -> dict[str, float]:
    """avg/p50/p95/p99/max in milliseconds."""
    if not latencies_s:
        return {"avg": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    p50, p95, p99 = quantiles(latencies_s, (50, 95, 99))
    return {
        "avg": 1000.0 * sum(latencies_s) / len(latencies_s),
        "p50": 1000.0 * p50,
        "p95": 1000.0 * p95,
        "p99": 1000.0 * p99,
        "max": 1000.0 * max(latencies_s),
    }


def dataset_latencies(reports: Iterable[BatchReport]) -> list[float]:
    """Every dataset's end-to-end latency in seconds."""
    return [lat for r in reports for _, lat in r.dataset_latencies]


def deadline_miss_ratio(latencies_s: Sequence[float], deadline_s: float, shed: int = 0) -> float:
    """Share of datasets whose latency exceeds ``deadline_s``; ``shed`` datasets (never completed) count as missed."""
    total = len(latencies_s) + shed
    if not total:
        return 0.0
    return (sum(1 for lat in latencies_s if lat > deadline_s) + shed) / total


def gpu_operator_ratio(reports: Iterable[BatchReport]) -> float:
    """Mean share of operators that ran on the GPU over the batches (a placement not enacted ran on the CPU)."""
    ratios = [r.placement.ran_gpu_ratio for r in reports if r.placement is not None]
    return sum(ratios) / len(ratios) if ratios else 0.0


def late_rows(rows: int, over_s: float, span_s: float) -> int:
    """Rows of a dataset whose oldest row finished ``over_s`` seconds past its deadline, its rows spread evenly
    over ``span_s`` seconds of arrivals (0: all at once, all late): those that arrived early enough to be late.

    >>> late_rows(100, 5.0, 10.0), late_rows(100, 15.0, 10.0), late_rows(100, 0.5, 0.0)
    (50, 100, 100)
    """
    if span_s <= 0.0 or over_s >= span_s:
        return rows
    return round(rows * over_s / span_s)


def batch_late(report: BatchReport, deadline: float) -> tuple[int, int]:
    """The datasets of a completed batch that finished past ``deadline``, and their rows that did (:func:`late_rows`
    where the report has each dataset's rows; else the late datasets' even share of the batch's rows, exact for a
    one-dataset batch or a batch entirely late)."""
    rows = report.dataset_rows
    exact = len(rows) == len(report.dataset_latencies)
    spans = report.dataset_spans if len(report.dataset_spans) == len(rows) else ()
    late = missed = 0
    for i, (_, latency) in enumerate(report.dataset_latencies):
        if latency > deadline:
            late += 1
            if exact:
                missed += late_rows(rows[i], latency - deadline, spans[i] if spans else 0.0)
    if late and not exact:
        n = len(report.dataset_latencies)
        missed = report.rows if late == n else round(report.rows * late / n)
    return late, missed


def series(
    reports: Sequence[BatchReport],
    arrivals: Sequence[tuple[float, int, int]],
    *,
    start: float,
    end: float,
    interval: float = 1.0,
    deadline: float = math.inf,
) -> list[dict[str, Any]]:
    """One row per monitoring interval ``[t, t + interval)`` with SPBench's columns, and ``late_rows``.

    :param reports: completed batches (assigned to the interval of their completion).
    :param arrivals: ``(time, rows, bytes)`` of each arrived dataset (the offered load).
    :return: rows with ``t`` (interval start, relative to ``start``), ``batches``,
        ``batch_bytes`` and ``batch_rows`` (mean size of batches completed),
        ``batch_interval_s`` (mean interval between admissions), ``max_latency_ms``,
        ``avg_latency_ms`` (this interval) and ``cum_avg_latency_ms`` (so far),
        ``throughput_rows_per_s`` (this interval) and ``avg_throughput_rows_per_s``
        (so far), ``input_rows_per_s`` (the offered frequency), ``gpu_operator_ratio``, ``late_rows`` (rows of
        the batches completed in it that finished past ``deadline``).
    """
    if interval <= 0:
        raise ValueError("monitoring interval must be > 0")
    count = max(1, math.ceil((end - start) / interval - 1e-9))
    buckets: list[list[BatchReport]] = [[] for _ in range(count)]
    for r in reports:
        idx = min(count - 1, max(0, int((r.completed_at - start) // interval)))
        buckets[idx].append(r)
    offered = [0] * count
    for t, rows, _ in arrivals:
        idx = min(count - 1, max(0, int((t - start) // interval)))
        offered[idx] += rows
    rows_out: list[dict[str, Any]] = []
    cum_rows = 0
    cum_lat: list[float] = []
    for i, bucket in enumerate(buckets):
        lats = dataset_latencies(bucket)
        cum_lat.extend(lats)
        rows_done = sum(r.rows for r in bucket)
        cum_rows += rows_done
        n = len(bucket)
        rows_out.append(
            {
                "t": i * interval,
                "batches": n,
                "batch_bytes": sum(r.bytes for r in bucket) / n if n else 0.0,
                "batch_rows": rows_done / n if n else 0.0,
                "batch_interval_s": sum(r.interval_s for r in bucket) / n if n else 0.0,
                "max_latency_ms": 1000.0 * max((r.max_latency_s for r in bucket), default=0.0),
                "avg_latency_ms": 1000.0 * sum(lats) / len(lats) if lats else 0.0,
                "cum_avg_latency_ms": 1000.0 * sum(cum_lat) / len(cum_lat) if cum_lat else 0.0,
                "throughput_rows_per_s": rows_done / interval,
                "avg_throughput_rows_per_s": cum_rows / ((i + 1) * interval),
                "input_rows_per_s": offered[i] / interval,
                "gpu_operator_ratio": gpu_operator_ratio(bucket),
                "late_rows": sum(batch_late(r, deadline)[1] for r in bucket),
            }
        )
    return rows_out
