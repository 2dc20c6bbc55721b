"""Figures of a bench run as table rows: one value per repetition, summarised as median [min-max].

Every row of a table is judged against one deadline per query (the run's ``deadline`` when the bench sets
one, else the deadline of the baseline run), so a static trigger and an adaptive strategy are never
counted against different targets. Costs are the engine seconds a query's batches took
(``queries[q]["cost"]["engine_s"]`` of ``pacer.report/1``). The miss ratio is the report's headline, the share
of rows in datasets over the deadline (:func:`miss_ratio`); the share of datasets is kept beside it
(``deadline_miss_datasets``, :func:`miss_ratio_datasets`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.metrics import deadline_miss_ratio

#: A configuration meets a deadline when at most this share of its rows miss it (median over repetitions).
MISS_LIMIT = 0.01


@dataclass(frozen=True)
class BenchRun:
    """One configuration of an experiment and the report(s) it produced.

    :param label: short name shown in tables and legends (``"static 10s"``).
    :param report: its ``pacer.report/1`` document (the first repetition).
    :param baseline: True for the configuration the others of its group are compared with.
    :param group: runs compared with one baseline (e.g. one rate of a sweep); "" for the whole experiment.
    :param x: the swept value (e.g. the rate in KB/s); runs that have one are drawn in the sweep plots.
    :param series: the line a swept run belongs to in the sweep plots (e.g. its placement strategy).
    :param repeats: the reports of the further repetitions of the same configuration (``--repeat N``).
    :param deadline: seconds every query of this run is judged against; None: the baseline's deadline.
    :param tags: what the configuration is, for scenario-specific analysis (workload, traffic, family...).
    """

    label: str
    report: dict[str, Any]
    baseline: bool = False
    group: str = ""
    x: float | None = None
    series: str = ""
    repeats: tuple[dict[str, Any], ...] = ()
    deadline: float | None = None
    tags: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reports(self) -> tuple[dict[str, Any], ...]:
        """Every repetition's report, the first one first."""
        return (self.report, *self.repeats)


@dataclass(frozen=True)
class Spread:
    """A figure over repetitions: its median, minimum and maximum."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        """The spread of ``values`` (at least one)."""
        if not values:
            raise ValueError("a spread needs at least one value")
        return cls(float(statistics.median(values)), float(min(values)), float(max(values)))

    def text(self, digits: int = 1) -> str:
        """``1234.5`` when every repetition agrees, else ``1234.5 [1200.0–1300.2]``."""
        mid = f"{self.median:.{digits}f}"
        if round(self.low, digits) == round(self.high, digits):
            return mid
        return f"{mid} [{self.low:.{digits}f}–{self.high:.{digits}f}]"


def record_latencies(report: dict[str, Any], controller: Any) -> None:
    """Keep what the tables judge a run by under ``report["bench"]``, per query: every dataset latency (s)
    (``latencies_s``, sorted), each with its rows (``latency_rows``: ``[latency, rows]``, so a run is judged exactly,
    rows-weighted, against any deadline: a static trigger ran once is judged against 5, 10 and 20 s), the rows
    shed (``shed_rows``), and every batch's ``[bytes, engine_s, started_at, completed_at]`` in completion order
    (``batches``: the service model the engine-time bound is fitted to, :mod:`pacer_bench.bound`)."""
    bench = report.setdefault("bench", {})
    latencies: dict[str, list[float]] = {}
    pairs: dict[str, list[list[float]]] = {}
    batches: dict[str, list[list[float]]] = {}
    shed: dict[str, int] = {}
    for query_id in report["queries"]:
        done = controller.reports(query_id)
        rows_of: list[list[float]] = []
        for r in done:
            exact = len(r.dataset_rows) == len(r.dataset_latencies)
            even = r.rows / len(r.dataset_latencies) if r.dataset_latencies else 0.0
            rows_of += [[round(lat, 4), r.dataset_rows[i] if exact else round(even)]
                        for i, (_, lat) in enumerate(r.dataset_latencies)]
        pairs[query_id] = sorted(rows_of)
        latencies[query_id] = [lat for lat, _ in pairs[query_id]]
        batches[query_id] = [[r.bytes, round(r.cost_s, 6), round(r.started_at, 4), round(r.completed_at, 4)]
                             for r in done]
        record = getattr(getattr(controller, "recorder", None), "record", None)
        shed[query_id] = int(getattr(record(query_id), "shed_rows", 0)) if record else 0
    bench.update(latencies_s=latencies, latency_rows=pairs, shed_rows=shed, batches=batches)


def busy_core_seconds(query: Mapping[str, Any]) -> float:
    """The core-seconds a query's tasks executed, ``cost.busy_core_s``; NaN where the run did not measure them (a
    report written before reports carried them, a Spark session without pacer's jar)."""
    value = (query.get("cost") or {}).get("busy_core_s")
    return math.nan if value is None else float(value)


def engine_seconds(query: Mapping[str, Any]) -> float:
    """The engine time a query's batches took, ``cost.engine_s``.

    :raises ValueError: for a report written before ``pacer.report/1`` carried ``cost`` (re-run it).
    """
    cost = query.get("cost")
    if cost is None:
        raise ValueError("this pacer.report/1 has no cost.engine_s (written before pacer-core 0.2 added it); "
                         "re-run the configuration to get it")
    return float(cost["engine_s"])


def shed_count(report: Mapping[str, Any], query_id: str) -> int:
    """Datasets the Controller shed as hopeless under overload (their latencies are in no miss ratio)."""
    return int(report["queries"][query_id].get("datasets_shed", 0))


def latencies_of(report: Mapping[str, Any], query_id: str) -> list[float] | None:
    """Every dataset latency (s) of a query as the bench recorded it at run time, or None."""
    stored = report.get("bench", {}).get("latencies_s", {})
    values = stored.get(query_id)
    return None if values is None else list(values)


def _percentile_miss(q: Mapping[str, Any], deadline_s: float) -> float:
    """The share of datasets over ``deadline_s`` read off a query's latency percentiles (1 % steps)."""
    points = q.get("latency_quantiles_ms") or []
    if not points:
        return 0.0
    target = 1000.0 * deadline_s
    below = sum(1 for v in points if v <= target)
    return max(0.0, 1.0 - (below - 1) / (len(points) - 1)) if below else 1.0


def miss_ratio_datasets(report: Mapping[str, Any], query_id: str, deadline_s: float) -> float:
    """Share of the query's datasets over ``deadline_s`` (shed datasets count as missed): exact from the latencies
    the bench recorded, else the report's dataset ratio when it used the same deadline, else read off its latency
    percentiles (1 % steps)."""
    exact = latencies_of(report, query_id)
    q = report["queries"][query_id]
    if exact is not None:
        return deadline_miss_ratio(exact, deadline_s, shed_count(report, query_id))
    if abs(q["deadline_ms"] - 1000.0 * deadline_s) < 1e-6:
        return float(q.get("deadline_miss_ratio_datasets", q["deadline_miss_ratio"]))
    return _percentile_miss(q, deadline_s)


def miss_ratio(report: Mapping[str, Any], query_id: str, deadline_s: float) -> float:
    """Share of the query's rows in datasets over ``deadline_s``, shed rows counted as missed: the report's
    headline ``deadline_miss_ratio``, as the rows see it. Exact from the latencies and rows the bench recorded
    (``bench.latency_rows``; the dataset share where no row was processed or shed, as the report does), else
    the report's own headline when it used the same deadline, else the dataset share
    (:func:`miss_ratio_datasets`: a report recorded before rows were)."""
    bench = report.get("bench") or {}
    pairs = (bench.get("latency_rows") or {}).get(query_id)
    q = report["queries"][query_id]
    if pairs is not None:
        shed = int((bench.get("shed_rows") or {}).get(query_id, 0))
        total = float(sum(rows for _, rows in pairs) + shed)
        if total:
            missed = float(sum(rows for lat, rows in pairs if lat > deadline_s) + shed)
            return missed / total
        return miss_ratio_datasets(report, query_id, deadline_s)
    if abs(q["deadline_ms"] - 1000.0 * deadline_s) < 1e-6:
        return float(q["deadline_miss_ratio"])
    return miss_ratio_datasets(report, query_id, deadline_s)


def judged_deadline(run: BenchRun, query_id: str, runs: Sequence[BenchRun]) -> float:
    """The deadline (s) ``run``'s ``query_id`` is judged against: the run's own when the bench set one, else
    the deadline of the first baseline that has the query (so every row of a table shares it)."""
    if run.deadline is not None:
        return run.deadline
    for ref in [r for r in runs if r.baseline] + list(runs):
        q = ref.report["queries"].get(query_id)
        if q is not None:
            return float(q["deadline_ms"]) / 1000.0
    return float(run.report["queries"][query_id]["deadline_ms"]) / 1000.0


#: Every figure a row carries, by column name: how to read it from one report's query (and judged deadline).
METRICS: dict[str, Callable[[Mapping[str, Any], str, float], float]] = {
    "batches": lambda r, q, d: float(r["queries"][q]["batches"]),
    "avg_ms": lambda r, q, d: float(r["queries"][q]["latency_ms"]["avg"]),
    "p95_ms": lambda r, q, d: float(r["queries"][q]["latency_ms"]["p95"]),
    "p99_ms": lambda r, q, d: float(r["queries"][q]["latency_ms"]["p99"]),
    "max_ms": lambda r, q, d: float(r["queries"][q]["latency_ms"]["max"]),
    "proc_avg_ms": lambda r, q, d: float(r["queries"][q]["processing_ms"]["avg"]),
    "rows_per_s": lambda r, q, d: float(r["queries"][q]["throughput_rows_per_s"]),
    "deadline_miss": lambda r, q, d: miss_ratio(r, q, d),
    "deadline_miss_datasets": lambda r, q, d: miss_ratio_datasets(r, q, d),
    "gpu_ratio": lambda r, q, d: float(r["queries"][q]["gpu_operator_ratio"]),
    "engine_s": lambda r, q, d: engine_seconds(r["queries"][q]),
    "busy_core_s": lambda r, q, d: busy_core_seconds(r["queries"][q]),
}

#: Ratios to the baseline of the row's group (medians over repetitions), by column: the figure they divide.
RATIOS = {
    "p99_vs_baseline": "p99_ms",
    "throughput_vs_baseline": "rows_per_s",
    "proc_vs_baseline": "proc_avg_ms",
    "cost_vs_baseline": "engine_s",
    "busy_vs_baseline": "busy_core_s",
}

#: CSV columns (full names); figures measured over repetitions also get ``_min`` and ``_max`` columns.
TABLE_COLUMNS = ("config", "query", "deadline_s", "reps", *METRICS, *RATIOS)

#: The compact Markdown/HTML table: column -> (header, digits).
SHORT_COLUMNS: dict[str, tuple[str, int]] = {
    "config": ("config", 0), "query": ("query", 0), "batches": ("batches", 0), "avg_ms": ("avg ms", 0),
    "p99_ms": ("p99 ms", 0), "max_ms": ("max ms", 0), "proc_avg_ms": ("proc ms", 0), "rows_per_s": ("rows/s", 0),
    "deadline_miss": ("miss", 3), "gpu_ratio": ("GPU", 2), "busy_core_s": ("busy core-s", 1),
    "engine_s": ("engine s", 1), "p99_vs_baseline": ("p99×", 3), "throughput_vs_baseline": ("thr×", 3),
    "proc_vs_baseline": ("proc×", 3), "busy_vs_baseline": ("busy×", 3), "cost_vs_baseline": ("engine×", 3),
}

LEGEND = (
    "miss: share of rows in datasets over the deadline, shed rows counted as missed (the CSV's "
    "deadline_miss_datasets: share of datasets); GPU: share of operators that ran on a GPU; busy core-s: the "
    "core-seconds the query's tasks executed (cost.busy_core_s: what a user pays); engine s: engine time the "
    "query's batches took, waits at pacer's gate included (cost.engine_s); proc ms: average processing time per "
    "batch; ×: ratio to the baseline of the row's group (p99 latency, throughput, processing time, busy "
    "core-seconds, engine time), measured in the same run"
)


def _baseline_of(run: BenchRun, runs: Sequence[BenchRun]) -> BenchRun | None:
    """The baseline of ``run``'s group, else the experiment's first baseline, else the first run."""
    candidates = [r for r in runs if r.baseline and r.group == run.group] or [r for r in runs if r.baseline]
    candidates = candidates or list(runs)
    return candidates[0] if candidates else None


def spreads(run: BenchRun, query_id: str, deadline_s: float) -> dict[str, Spread]:
    """Every metric of ``run``'s ``query_id`` over its repetitions (those that ran the query)."""
    reports = [r for r in run.reports if query_id in r["queries"]]
    return {name: Spread.of([read(r, query_id, deadline_s) for r in reports]) for name, read in METRICS.items()}


def _ratio(value: float, ref: float | None) -> float | None:
    return round(value / ref, 3) if ref else None


def table_rows(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """One row per configuration and query: medians over repetitions (``_min``/``_max`` beside them), and p99,
    throughput, processing time and engine time as ratios to the baseline run of the configuration's group
    (measured in the same bench run, judged against the same deadline)."""
    rows = []
    for run in runs:
        base = _baseline_of(run, runs)
        for query_id in run.report["queries"]:
            deadline = judged_deadline(run, query_id, runs)
            mine = spreads(run, query_id, deadline)
            ref = spreads(base, query_id, deadline) if base and query_id in base.report["queries"] else None
            row: dict[str, Any] = {"config": run.label, "query": query_id, "deadline_s": deadline,
                                   "reps": len(run.reports)}
            for name, spread in mine.items():
                if math.isnan(spread.high):  # not measured in some repetition (busy_core_s): left empty
                    row[name] = row[f"{name}_min"] = row[f"{name}_max"] = None
                    continue
                row[name] = round(spread.median, 3)
                row[f"{name}_min"], row[f"{name}_max"] = round(spread.low, 3), round(spread.high, 3)
            for name, metric in RATIOS.items():
                ref_value = ref[metric].median if ref else None
                row[name] = None if math.isnan(mine[metric].high) or ref_value is None or math.isnan(ref_value) \
                    else _ratio(mine[metric].median, ref_value)
            rows.append(row)
    return rows


def csv_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """CSV header: the table columns, then ``_min``/``_max`` of each measured figure when runs were repeated."""
    columns = list(TABLE_COLUMNS)
    if any(r["reps"] > 1 for r in rows):
        columns += [f"{m}_{end}" for m in METRICS for end in ("min", "max")]
    return columns


def spread_cell(row: Mapping[str, Any], column: str, digits: int) -> str:
    """A cell of a row whose measured figures have ``_min``/``_max`` beside them: the median with [min–max]
    where repetitions differ; any other number with ``digits`` decimals, a deadline as ``10``; text as it is;
    empty for None."""
    value = row.get(column)
    if value is None:
        return ""
    if f"{column}_min" in row:
        return Spread(value, row[f"{column}_min"], row[f"{column}_max"]).text(digits)
    if isinstance(value, float):
        return f"{value:g}" if column == "deadline_s" else f"{value:.{digits}f}"
    return str(value)


def cell(row: Mapping[str, Any], column: str, digits: int) -> str:
    """A table cell: the median with [min–max] where repetitions differ; ratios and labels as they are."""
    value = row.get(column)
    if value is None:
        return ""
    if column in METRICS:
        return Spread(value, row[f"{column}_min"], row[f"{column}_max"]).text(digits)
    return str(value)


def shown_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The compact table's columns: ``query`` only when rows hold more than one query."""
    columns = list(SHORT_COLUMNS)
    if len({r["query"] for r in rows}) <= 1:
        columns.remove("query")
    return columns


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table of ``rows`` with short headers (see :data:`LEGEND`)."""
    columns = shown_columns(rows)
    lines = ["| " + " | ".join(SHORT_COLUMNS[c][0] for c in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(cell(row, c, SHORT_COLUMNS[c][1]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def deadline_statement(rows: Sequence[dict[str, Any]]) -> str:
    """``deadline 10 s (lr2), every row judged against it`` from the rows' judged deadlines."""
    by_query: dict[str, set[float]] = {}
    for row in rows:
        by_query.setdefault(row["query"], set()).add(row["deadline_s"])
    parts = [f"{'/'.join(f'{d:g}' for d in sorted(ds))} s ({q})" for q, ds in by_query.items()]
    return "deadline " + ", ".join(parts) + ": every row of a query is judged against it"


def repetition_statement(runs: Sequence[BenchRun]) -> str | None:
    """How many repetitions each cell summarises, or None for single runs."""
    counts = {len(r.reports) for r in runs}
    if counts == {1}:
        return None
    n = "/".join(str(c) for c in sorted(counts))
    seeds = sorted({int(r["config"]["seed"]) for run in runs for r in run.reports
                    if isinstance(r.get("config"), Mapping) and r["config"].get("seed") is not None})
    each = f" (seeds {', '.join(map(str, seeds))}: repetition i has seed SEED + i − 1)" if len(seeds) > 1 else ""
    return (f"{n} repetitions per configuration{each}, interleaved; cells show the median [min–max] where they "
            "differ")
