"""The ``pacer.report/1`` JSON format shared by every runtime.

Top level: ``schema``, ``runtime`` (``sim`` or ``spark``), ``config``,
``overhead`` (``admission_poll_us_p99``, ``per_batch_ms_avg``, measured or null)
and ``queries`` (query id -> latency, processing, throughput, counts,
deadline, miss ratio, GPU operator ratio, and a per-interval ``series``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pacer.controller import Controller
from pacer.metrics import (
    dataset_latencies,
    deadline_miss_ratio,
    gpu_operator_ratio,
    latency_summary_ms,
    percentile,
    quantiles,
    series,
)

SCHEMA = "pacer.report/1"
REQUIRED_QUERY_KEYS = (
    "latency_ms",
    "processing_ms",
    "throughput_rows_per_s",
    "throughput_bytes_per_s",
    "batches",
    "datasets_in",
    "datasets_processed",
    "rows_in",
    "rows_processed",
    "deadline_ms",
    "deadline_miss_ratio",
    "gpu_operator_ratio",
    "cost",
    "overload",
    "series",
)


def _clean(value: Any, digits: int = 6) -> Any:
    """Round floats so reports are stable byte for byte across runs with the same inputs."""
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, digits)
    if isinstance(value, Mapping):
        return {str(k): _clean(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v, digits) for v in value]
    return value


def overhead_summary(controller: Controller) -> dict[str, Any]:
    """pacer's own cost: admission poll p99 (µs), time per batch (ms) and its share of batch time."""
    polls = controller.overhead.poll_s
    per_batch = controller.overhead.per_batch_s
    processing = [r.processing_s for r in controller.reports()]
    measured = bool(polls)
    share = None
    if per_batch and processing and sum(processing) > 0:
        share = sum(per_batch) / sum(processing)
    return {
        "measured": measured,
        "admission_polls": len(polls),
        "admission_poll_us_p99": 1e6 * percentile(polls, 99) if measured else None,
        "admission_poll_us_avg": 1e6 * sum(polls) / len(polls) if measured else None,
        "per_batch_ms_avg": 1e3 * sum(per_batch) / len(per_batch) if per_batch else None,
        "per_batch_share_of_processing": share,
    }


def build_report(
    *,
    runtime: str,
    config: Mapping[str, Any],
    controller: Controller,
    start: float,
    end: float,
    interval: float = 1.0,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble a ``pacer.report/1`` document from a Controller after a run: its query views
    (:meth:`pacer.Controller.query`), its recorder (arrivals and completed batches), ledger and overhead.

    :param runtime: ``"sim"`` or ``"spark"``.
    :param config: the run's configuration (strategies, traffic, seed, ...).
    :param start: clock time the run started; ``end``: when it ended.
    :param interval: monitoring interval of the series, seconds.
    :param extra: more top-level keys (e.g. the machine, Spark's version).
    """
    wall = max(end - start, 1e-9)
    queries: dict[str, Any] = {}
    for query_id in controller.query_ids():
        q = controller.query(query_id)
        record = controller.recorder.record(query_id)
        reports = record.reports
        lats = dataset_latencies(reports)
        processing = [r.processing_s for r in reports]
        counts = controller.ledger.counts.get(query_id, {"arrived": 0, "processed": 0, "shed": 0})
        rows_done = sum(r.rows for r in reports)
        bytes_done = sum(r.bytes for r in reports)
        deadline = q.spec.effective_deadline
        engine_s = sum(r.cost_s for r in reports)
        overload = q.overload
        queries[query_id] = {
            "workload": q.spec.workload,
            "admission": q.admission,
            "placement": q.placement,
            "latency_ms": latency_summary_ms(lats),
            "latency_quantiles_ms": [1000.0 * v for v in quantiles(lats, range(101))] if lats else [],
            "processing_ms": {
                "avg": 1000.0 * sum(processing) / len(processing) if processing else 0.0,
                "p95": 1000.0 * percentile(processing, 95),
            },
            "throughput_rows_per_s": rows_done / wall,
            "throughput_bytes_per_s": bytes_done / wall,
            "processing_throughput_bytes_per_s": bytes_done / sum(processing) if sum(processing) > 0 else 0.0,
            "batches": len(reports),
            "datasets_in": counts["arrived"],
            "datasets_processed": counts["processed"],
            "datasets_shed": counts["shed"],
            "datasets_pending": len(controller.ledger.outstanding(query_id)),
            "rows_in": record.rows_in,
            "rows_processed": rows_done,
            "bytes_in": record.bytes_in,
            "bytes_processed": bytes_done,
            "deadline_ms": 1000.0 * deadline,
            "deadline_miss_ratio": deadline_miss_ratio(lats, deadline, counts["shed"]),
            "cost": {
                "engine_s": engine_s,
                "engine_share": engine_s / wall,
                "batches_per_min": 60.0 * len(reports) / wall,
            },
            "overload": {
                "overloaded_s": overload.until(end),
                "episodes": overload.episodes,
                "shed": counts["shed"],
            },
            "service_time": q.service_time,
            "gpu_operator_ratio": gpu_operator_ratio(reports),
            "strategy_fallbacks": q.fallbacks,
            "series": series(reports, record.arrivals, start=start, end=end, interval=interval),
        }
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "runtime": runtime,
        "config": dict(config),
        "duration_s": end - start,
        "scheduler": controller.scheduler,
        "cores": controller.cores,
        "overhead": overhead_summary(controller),
        "queries": queries,
    }
    if extra:
        doc.update(extra)
    return _clean(doc)  # type: ignore[no-any-return]


def dumps(report: Mapping[str, Any]) -> str:
    """Serialise a report deterministically (sorted keys, fixed indentation)."""
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


def write_report(report: Mapping[str, Any], path: str | Path) -> Path:
    """Write a report as JSON, creating parent folders."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(report))
    return out


def validate_report(report: Mapping[str, Any]) -> None:
    """Raise ValueError unless ``report`` has the ``pacer.report/1`` shape."""
    if report.get("schema") != SCHEMA:
        raise ValueError(f"not a {SCHEMA} report: schema={report.get('schema')!r}")
    for key in ("runtime", "config", "overhead", "queries"):
        if key not in report:
            raise ValueError(f"report lacks {key!r}")
    for query_id, q in report["queries"].items():
        missing = [k for k in REQUIRED_QUERY_KEYS if k not in q]
        if missing:
            raise ValueError(f"query {query_id!r} lacks {missing}")
        for key in ("avg", "p50", "p95", "p99", "max"):
            if key not in q["latency_ms"]:
                raise ValueError(f"query {query_id!r} latency_ms lacks {key!r}")
        for row in q["series"]:
            for key in ("t", "max_latency_ms", "batch_bytes"):
                if key not in row:
                    raise ValueError(f"query {query_id!r} series row lacks {key!r}")


def max_latency_trend_ms(report: Mapping[str, Any], query_id: str) -> tuple[float, float]:
    """Max latency (ms) over the first and over the last tenth of a query's series (drain included).

    The series is taken from the first to the last interval in which a dataset completed.

    A ratio last/first well above 1 is the papers' unbounded-latency finding: the trigger falls behind.
    """
    series = report["queries"][query_id]["series"]
    busy = [i for i, r in enumerate(series) if r["max_latency_ms"] > 0]
    if not busy:
        return 0.0, 0.0
    rows = series[busy[0]: busy[-1] + 1]
    k = max(1, len(rows) // 10)
    return max(r["max_latency_ms"] for r in rows[:k]), max(r["max_latency_ms"] for r in rows[-k:])


def summary_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of the headline figures per query."""
    header = (
        f"{'query':<10} {'batches':>7} {'avg ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9} {'rows/s':>10} "
        f"{'miss':>6} {'engine s':>9} {'in/done':>11}"
    )
    lines = [header, "-" * len(header)]
    for query_id, q in report["queries"].items():
        lat = q["latency_ms"]
        lines.append(
            f"{query_id:<10} {q['batches']:>7} {lat['avg']:>9.0f} {lat['p95']:>9.0f} {lat['p99']:>9.0f} "
            f"{lat['max']:>9.0f} {q['throughput_rows_per_s']:>10.0f} {q['deadline_miss_ratio']:>6.2f} "
            f"{q.get('cost', {}).get('engine_s', 0.0):>9.1f} {q['datasets_in']:>5}/{q['datasets_processed']:<5}"
        )
        overload = q.get("overload") or {}
        if overload.get("overloaded_s") or overload.get("shed"):
            lines.append(
                f"{'':<10} overloaded {overload['overloaded_s']:.1f} s in {overload['episodes']} episode(s), "
                f"{overload['shed']} datasets shed (offered load above what any batch size serves within the deadline)"
            )
    lines.append("engine s: time the engine spent on the query's batches; miss: share of datasets over the deadline "
                 "(shed ones count as missed); in/done: datasets arrived / processed")
    return "\n".join(lines)
