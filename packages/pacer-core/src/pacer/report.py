"""The ``pacer.report/1`` JSON format shared by every runtime.

:func:`build_report` gives a :class:`pacer.report_types.Report`: a ``dict`` with typed views (``version``,
``queries``, ``to_json()``), its keys named by :class:`pacer.report_types.ReportDocument`; the ``schema`` key carries
the format's version (``pacer.report/1``: keys are only added within a version).

Top level: ``schema``, ``runtime`` (``sim`` or ``spark``), ``config``,
``overhead`` (``admission_poll_us_p99``, ``per_batch_ms_avg``, measured or null)
and ``queries`` (query id -> latency, processing, throughput, counts,
deadline, misses, GPU operator ratio, and a per-interval ``series``).

Misses, as the rows see them: a dataset is missed when its latency exceeds the deadline or when it was shed
(dropped unprocessed under overload). Per query, ``miss_datasets`` and ``miss_rows`` count the missed
datasets and their rows; ``deadline_miss_ratio_datasets`` = missed datasets / (datasets processed + shed) and
``deadline_miss_ratio_rows`` = missed rows / (rows processed + shed); the headline ``deadline_miss_ratio`` is
the rows-weighted one (the share of the data that came late), the dataset ratio where no rows were processed or
shed at all (zero-row datasets only), 0 when nothing was.

Latency runs from a dataset's arrival; ``arrival`` says how the runtime dated it: ``"source-time"`` (the data's
own time: a Kafka record's timestamp, a file's modification time, a generator's schedule) or ``"first-seen"``
(the moment the runtime first saw it, where the source has no time of its own). ``catch_up_s``,
``catch_up_rows`` and ``catch_up_episodes``: data already past its deadline when seen, drained by the Controller
(:mod:`pacer.catch_up`). ``overload.periods``: the most recent periods overloaded, from the run's start.

Built from bounded state (:mod:`pacer.recorder`), whatever the run's length: counts, sums, means, maxima
and the misses and their ratios are exact; percentiles are exact while a query has had at most
``pacer.recorder.LATENCY_WINDOW`` datasets (``RECENT`` batches for the processing p95), and within 1 %
beyond; the series has at most ``pacer.series.MAX_POINTS`` rows (longer runs get wider intervals,
``series_interval_s``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pacer.controller import Controller
from pacer.metrics import series
from pacer.recorder import QueryRecord
from pacer.report_types import SCHEMA, Report
from pacer.series import MAX_POINTS
from pacer.summary import StreamingSummary

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
    "deadline_miss_ratio_rows",
    "deadline_miss_ratio_datasets",
    "miss_rows",
    "miss_datasets",
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
    """pacer's own cost: admission poll p99 (µs), time per batch (ms) and its share of batch time.

    Counts, means and the share are exact; the p99 is exact up to the summary's window of recent polls and
    within 1 % beyond (:class:`pacer.summary.StreamingSummary`).
    """
    polls = controller.overhead.poll
    per_batch = controller.overhead.per_batch
    processing = sum(record.processing_s for record in controller.recorder.records())
    batches = sum(record.batches for record in controller.recorder.records())
    measured = polls.count > 0
    share = None
    if per_batch.count and batches and processing > 0:
        share = per_batch.total / processing
    return {
        "measured": measured,
        "admission_polls": polls.count,
        "admission_poll_us_p99": 1e6 * polls.percentile(99) if measured else None,
        "admission_poll_us_avg": 1e6 * polls.mean if measured else None,
        "per_batch_ms_avg": 1e3 * per_batch.mean if per_batch.count else None,
        "per_batch_share_of_processing": share,
    }


def _latency_ms(lats: StreamingSummary) -> dict[str, float]:
    """avg/p50/p95/p99/max in milliseconds of a latency summary (as :func:`pacer.metrics.latency_summary_ms`)."""
    if not lats.count:
        return {"avg": 0.0, "p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0}
    p50, p95, p99 = lats.percentiles((50, 95, 99))
    return {"avg": 1000.0 * lats.mean, "p50": 1000.0 * p50, "p95": 1000.0 * p95, "p99": 1000.0 * p99,
            "max": 1000.0 * lats.max}


def _series(record: QueryRecord, *, start: float, end: float, interval: float) -> list[dict[str, Any]]:
    """The query's series: computed from every arrival and batch while the record still holds them all and the
    run spans at most ``MAX_POINTS`` intervals (exact); else from the record's bounded
    per-interval sums (:class:`pacer.series.SeriesAccumulator`: at most ``MAX_POINTS`` rows, wider intervals)."""
    if interval <= 0:
        raise ValueError("monitoring interval must be > 0")
    if record.complete and (end - start) / interval <= MAX_POINTS:
        return series(list(record.reports), list(record.arrivals), start=start, end=end, interval=interval,
                      deadline=record.deadline)
    return record.series.rows(start=start, end=end, interval=interval)


def build_report(
    *,
    runtime: str,
    config: Mapping[str, Any],
    controller: Controller,
    start: float,
    end: float,
    interval: float = 1.0,
    extra: Mapping[str, Any] | None = None,
    allocated_core_s: float | None = None,
) -> Report:
    """Assemble a ``pacer.report/1`` document from a Controller after a run: its query views
    (:meth:`pacer.Controller.query`), its recorder (arrivals and completed batches), ledger and overhead.

    :param runtime: ``"sim"`` or ``"spark"``.
    :param config: the run's configuration (strategies, traffic, seed, ...).
    :param start: clock time the run started; ``end``: when it ended.
    :param interval: monitoring interval of the series, seconds.
    :param extra: more top-level keys (e.g. the machine, Spark's version).
    :param allocated_core_s: the core-seconds the run held (cores x the time they were allocated to it), where the
        runtime knows them: the report's ``cost.allocated_core_s``.

    Each query's ``cost`` holds three measures: ``busy_core_s`` (core-seconds its tasks executed; None where no batch
    measured it), ``trigger_s`` (the engine's time on its batches less ``gate_wait_s``, the time they waited for their
    turn at pacer's gate) and ``engine_s`` (the engine's time, waits included, as reports before them had); beside
    them ``cpu_core_s`` (the tasks' CPU time) and ``failed_core_s`` (the run time of failed or killed task attempts,
    part of ``busy_core_s``), None where not measured. Each total includes the engine's own no-data batches (Spark's,
    after a watermark moved), and ``no_data`` says how much of it they were: ``batches``, ``trigger_s``,
    ``busy_core_s`` and ``cpu_core_s``.
    """
    wall = max(end - start, 1e-9)
    queries: dict[str, Any] = {}
    for query_id in controller.query_ids():
        q = controller.query(query_id)
        record = controller.recorder.record(query_id)
        lats = record.latency
        counts = controller.ledger.counts.get(query_id, {"arrived": 0, "processed": 0, "shed": 0})
        rows_done, bytes_done, processing_s = record.rows_processed, record.bytes_processed, record.processing_s
        deadline = q.spec.effective_deadline
        overload = q.overload
        catch_up = q.catch_up
        rows = _series(record, start=start, end=end, interval=interval)
        miss_datasets = record.miss_datasets + counts["shed"]
        miss_rows = record.miss_rows + record.shed_rows
        all_datasets = lats.count + counts["shed"]
        all_rows = rows_done + record.shed_rows
        ratio_datasets = miss_datasets / all_datasets if all_datasets else 0.0
        ratio_rows = miss_rows / all_rows if all_rows else 0.0
        missed = ratio_rows if all_rows else ratio_datasets
        queries[query_id] = {
            "workload": q.spec.workload,
            "admission": q.admission,
            "placement": q.placement,
            "latency_ms": _latency_ms(lats),
            "latency_quantiles_ms": [1000.0 * v for v in lats.percentiles(range(101))] if lats.count else [],
            "processing_ms": {
                "avg": 1000.0 * processing_s / record.batches if record.batches else 0.0,
                "p95": 1000.0 * record.processing.percentile(95),
            },
            "throughput_rows_per_s": rows_done / wall,
            "throughput_bytes_per_s": bytes_done / wall,
            "processing_throughput_bytes_per_s": bytes_done / processing_s if processing_s > 0 else 0.0,
            "batches": record.batches,
            "datasets_in": counts["arrived"],
            "datasets_processed": counts["processed"],
            "datasets_shed": counts["shed"],
            "datasets_pending": controller.ledger.pending(query_id),
            "rows_in": record.rows_in,
            "rows_processed": rows_done,
            "bytes_in": record.bytes_in,
            "bytes_processed": bytes_done,
            "deadline_ms": 1000.0 * deadline,
            "deadline_miss_ratio": missed,
            "deadline_miss_ratio_rows": ratio_rows,
            "deadline_miss_ratio_datasets": ratio_datasets,
            "miss_rows": miss_rows,
            "miss_datasets": miss_datasets,
            "cost": {
                "busy_core_s": record.busy_core_s if record.busy_batches or record.no_data_busy_core_s is not None
                else None,
                "busy_batches": record.busy_batches,
                "cpu_core_s": record.cpu_core_s if record.cpu_measured else None,
                "failed_core_s": record.failed_core_s if record.cpu_measured else None,
                "no_data": {"batches": record.no_data_batches, "trigger_s": record.no_data_trigger_s,
                            "busy_core_s": record.no_data_busy_core_s, "cpu_core_s": record.no_data_cpu_core_s},
                "trigger_s": record.trigger_s,
                "gate_wait_s": record.gate_wait_s,
                "engine_s": record.engine_s,
                "engine_share": record.engine_s / wall,
                "batches_per_min": 60.0 * record.batches / wall,
            },
            "overload": {
                "overloaded_s": overload.until(end),
                "episodes": overload.episodes,
                "shed": counts["shed"],
                "periods": [{"from_s": a - start, "seconds": (end if b is None else b) - a}
                            for a, b in overload.periods],
            },
            "arrival": record.arrival,
            "catch_up_s": catch_up.until(end),
            "catch_up_rows": catch_up.rows,
            "catch_up_episodes": catch_up.episodes,
            "service_time": q.service_time,
            "gpu_operator_ratio": record.gpu_operator_ratio,
            "strategy_fallbacks": q.fallbacks,
            "series": rows,
            "series_interval_s": rows[1]["t"] - rows[0]["t"] if len(rows) > 1 else interval,
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
        "cost": {"allocated_core_s": allocated_core_s,
                 "busy_core_s": _total(q["cost"]["busy_core_s"] for q in queries.values()),
                 "cpu_core_s": _total(q["cost"]["cpu_core_s"] for q in queries.values()),
                 "no_data_busy_core_s": _total(q["cost"]["no_data"]["busy_core_s"] for q in queries.values())},
    }
    if extra:
        doc.update(extra)
    return Report(_clean(doc))


def _total(values: Iterable[float | None]) -> float | None:
    """The sum of the known ``values`` (None when none is known)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


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


def _cell(value: float | None, width: int) -> str:
    """``value`` with one decimal, right-aligned in ``width``; ``-`` where unknown (not measured)."""
    return f"{value:>{width}.1f}" if value is not None else f"{'-':>{width}}"


def summary_table(report: Mapping[str, Any]) -> str:
    """A plain-text table of the headline figures per query."""
    header = (
        f"{'query':<10} {'batches':>7} {'avg ms':>9} {'p95 ms':>9} {'p99 ms':>9} {'max ms':>9} {'rows/s':>10} "
        f"{'miss':>6} {'busy core-s':>11} {'engine s':>9} {'in/done':>11}"
    )
    lines = [header, "-" * len(header)]
    for query_id, q in report["queries"].items():
        lat = q["latency_ms"]
        lines.append(
            f"{query_id:<10} {q['batches']:>7} {lat['avg']:>9.0f} {lat['p95']:>9.0f} {lat['p99']:>9.0f} "
            f"{lat['max']:>9.0f} {q['throughput_rows_per_s']:>10.0f} {q['deadline_miss_ratio']:>6.2f} "
            f"{_cell(q.get('cost', {}).get('busy_core_s'), 11)} "
            f"{q.get('cost', {}).get('engine_s', 0.0):>9.1f} {q['datasets_in']:>5}/{q['datasets_processed']:<5}"
        )
        overload = q.get("overload") or {}
        if overload.get("overloaded_s") or overload.get("shed"):
            lines.append(
                f"{'':<10} overloaded {overload['overloaded_s']:.1f} s in {overload['episodes']} episode(s), "
                f"{overload['shed']} datasets shed (offered load above what any batch size serves within the deadline)"
            )
    lines.append("busy core-s: core-seconds the query's tasks executed (- where not measured); engine s: time the "
                 "engine spent on the query's batches; miss: share of rows in datasets over the "
                 "deadline (shed ones count as missed); in/done: datasets arrived / processed")
    return "\n".join(lines)


#: Printed once before the first progress line: what each field of :func:`progress_line` means.
PROGRESS_LEGEND = (
    "progress, every query together: t = seconds since the start; batches = micro-batches completed; "
    "last = datasets/rows of the newest batch; p95 = the worst query's 95th-percentile dataset latency (arrival "
    "to the end of its batch); misses = rows over the deadline / rows done (shed rows count as missed); "
    "overloaded = seconds the offered load could not be served within the deadline by any batch size; shed = "
    "datasets dropped for it; catch-up = seconds spent draining data already past its deadline when seen, and its rows"
)


def progress_line(controller: Controller, elapsed: float) -> str:
    """``t=12s batches=5 last=3 datasets/1500 rows p95=1234ms misses=0/1500 overloaded=0s shed=0 catch-up=0s/0 rows``
    over every query, from the Controller's views and its recorder's exact counters (call it under the lock that
    guards the Controller, where there is one). :data:`PROGRESS_LEGEND` explains the fields."""
    records = [controller.recorder.record(q) for q in controller.query_ids()]
    views = [controller.query(q) for q in controller.query_ids()]
    reports = controller.reports()
    last = reports[-1] if reports else None
    last_text = f"{len(last.dataset_latencies)} datasets/{last.rows} rows" if last else "-"
    p95 = max((r.latency.percentile(95) for r in records if r.latency.count), default=0.0)
    missed = sum(r.miss_rows + r.shed_rows for r in records)
    done = sum(r.rows_processed + r.shed_rows for r in records)
    now = controller.clock()
    return (f"t={elapsed:5.0f}s batches={sum(r.batches for r in records)} last={last_text} "
            f"p95={1000 * p95:.0f}ms misses={missed}/{done} "
            f"overloaded={sum(q.overload.until(now) for q in views):.0f}s "
            f"shed={sum(r.shed_datasets for r in records)} "
            f"catch-up={sum(q.catch_up.until(now) for q in views):.0f}s/{sum(q.catch_up.rows for q in views)} rows")
