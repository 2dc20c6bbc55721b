"""multi-query: several queries share the cores; which configuration meets every query's deadline at the least
total engine time, and how close is that to the limit?

Per configuration (medians over repetitions, [min–max] where they differ):

- each query's deadline-miss ratio, rows-weighted (:func:`pacer_bench.tables.miss_ratio`), against its own deadline;
- *met*: every query's median miss ratio is at most :data:`pacer_bench.tables.MISS_LIMIT` (1 %);
- *engine s*: the queries' ``cost.engine_s`` summed (the winner's criterion); *busy s* beside it, the wall time
  during which at least one batch ran: batches that share the cores (FAIR, RDAS) are each stretched, and their
  engine times count the overlap once per batch;
- the *cheapest static* per scheduler: the static trigger with the least engine time that met every deadline;
  ``cost_vs_static`` = engine s / the cheapest static of either scheduler (the oracle a user would search for);
- the *winner*: the least engine time among the configurations that met every deadline;
- ``cost_vs_asap`` = engine s / ``edf + asap``'s (Spark's default trigger under EDF): asap starts a batch whenever
  the cores fall free and data waits, so under sustained traffic its engine time is the run's wall time. The bound
  over the same (``floor_vs_asap``) is the least any configuration that meets every deadline could reach;
- *bound*: per query, the least engine time any batching of its arrivals could have spent and met its deadline
  (:mod:`pacer_bench.bound`), under a service model fitted to that query's batches over every configuration,
  summed over the queries. Each query's bound takes the engine as its own; sharing the cores only adds waiting
  before a batch starts, so the sum is a lower bound of the total under those models (not a tight one);
  ``cost_vs_bound`` = engine s / the bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer_bench.bound import ServiceFit, pooled_fit, report_bound
from pacer_bench.outputs import Section, write_outputs
from pacer_bench.plots import query_ids
from pacer_bench.tables import MISS_LIMIT, BenchRun, Spread, engine_seconds, judged_deadline, miss_ratio

LEGEND = (
    f"miss QUERY: share of the query's rows in datasets over its deadline (median [min–max] over repetitions); "
    f"met: every query's miss ≤ {MISS_LIMIT:.0%}; engine s: the queries' engine time (cost.engine_s) summed; busy "
    "s: wall time during which at least one batch ran (where batches run side by side, as under FAIR and RDAS, "
    "each is stretched and engine s counts the overlap once per batch); "
    "×static: engine s over the cheapest static trigger that met every deadline; bound: the least engine time "
    "any batching of each query's arrivals could have spent and met its deadline, under the query's fitted "
    "service model, summed over the queries (a lower bound: each query as if it had the engine to itself); "
    "×bound: engine s over it; ×asap: engine s over edf + asap's (asap starts a batch whenever the cores fall free "
    "and data waits: under sustained traffic its engine time is the run's wall time), the bound's own ×asap the "
    "least any configuration meeting every deadline could reach"
)
BOUND_LEGEND = (
    "fixed ms, ms/MB: the service model fitted by least squares to the query's batches over every configuration "
    "(bytes → engine time; batches during which no other query's batch ran, each run's first left out); batches "
    "fitted: how many; min batches: the fewest "
    "batches in which every dataset meets the deadline, one engine, batches in arrival order (exact, by dynamic "
    "programming); bound s: fixed × min batches + per byte × every byte"
)


def _spread_row(row: dict[str, Any], key: str, spread: Spread | None, digits: int = 4) -> None:
    if spread is None:
        row[key] = None
        return
    row[key], row[f"{key}_min"], row[f"{key}_max"] = (round(spread.median, digits), round(spread.low, digits),
                                                      round(spread.high, digits))


def fits_of(runs: Sequence[BenchRun]) -> dict[str, ServiceFit | None]:
    """Each query's service model, fitted to its batches over every configuration and repetition."""
    reports = [r for run in runs for r in run.reports]
    return {q: pooled_fit(reports, q) for q in query_ids(runs)}


def _bound_total(report: Mapping[str, Any], deadlines: Mapping[str, float],
                 fits: Mapping[str, ServiceFit | None]) -> float | None:
    """The queries' bounds summed on ``report``'s arrivals; None when one query has none."""
    total = 0.0
    for query_id in report["queries"]:
        bound = report_bound(report, query_id, deadlines[query_id], fits.get(query_id))
        if bound is None or bound.engine_s is None:
            return None
        total += bound.engine_s
    return total


def busy_seconds(report: Mapping[str, Any]) -> float | None:
    """Wall time during which at least one batch of any query ran (the union of the batches' start-to-completion
    spans the bench recorded), or None where it recorded no spans."""
    spans = sorted((float(b[2]), float(b[3])) for batches in ((report.get("bench") or {}).get("batches") or {}).values()
                   for b in batches if len(b) >= 4)
    if not spans:
        return None
    busy, start, end = 0.0, spans[0][0], spans[0][1]
    for s, e in spans[1:]:
        if s > end:
            busy += end - start
            start, end = s, e
        else:
            end = max(end, e)
    return busy + end - start


def analyse(runs: Sequence[BenchRun]) -> dict[str, Any]:
    """The summary rows (one per configuration, marked), the bound rows (one per query), the fitted models and the
    winner's name (None when no configuration met every deadline)."""
    queries = query_ids(runs)
    fits = fits_of(runs)
    rows: list[dict[str, Any]] = []
    for run in runs:
        deadlines = {q: judged_deadline(run, q, runs) for q in run.report["queries"]}
        row: dict[str, Any] = {"config": run.label, "scheduler": run.tags.get("scheduler", ""),
                               "admission": run.tags.get("admission", ""), "family": run.tags.get("family", ""),
                               "reps": len(run.reports), "mark": ""}
        met = True
        for q in queries:
            reports = [r for r in run.reports if q in r["queries"]]
            miss = Spread.of([miss_ratio(r, q, deadlines[q]) for r in reports]) if reports else None
            _spread_row(row, f"miss_{q}", miss)
            met = met and miss is not None and miss.median <= MISS_LIMIT + 1e-12
        row["met"] = "✓" if met else "✗"
        totals = [sum(engine_seconds(q) for q in r["queries"].values()) for r in run.reports]
        bounds = [_bound_total(r, deadlines, fits) for r in run.reports]
        _spread_row(row, "engine_s", Spread.of(totals), 3)
        busy = [busy_seconds(r) for r in run.reports]
        _spread_row(row, "busy_s", Spread.of([b for b in busy if b is not None]) if None not in busy else None, 3)
        known = [b for b in bounds if b]
        _spread_row(row, "bound_s", Spread.of(known) if len(known) == len(bounds) else None, 3)
        ratios = [t / b for t, b in zip(totals, bounds, strict=True) if b]
        _spread_row(row, "cost_vs_bound", Spread.of(ratios) if len(ratios) == len(totals) else None, 3)
        rows.append(row)
    met_rows = sorted((r for r in rows if r["met"] == "✓"), key=lambda r: r["engine_s"])
    statics = [r for r in met_rows if r["family"] == "static"]
    oracle = statics[0] if statics else None
    marks: dict[str, list[str]] = {}
    for scheduler in dict.fromkeys(r["scheduler"] for r in statics):
        cheapest = next(r for r in statics if r["scheduler"] == scheduler)
        marks.setdefault(cheapest["config"], []).append(f"cheapest {scheduler} static")
    winner = met_rows[0] if met_rows else None
    if winner is not None:
        marks.setdefault(winner["config"], []).insert(0, "winner")
    asap = _asap(rows)
    for row in rows:
        row["mark"] = ", ".join(marks.get(row["config"], []))
        row["cost_vs_static"] = round(row["engine_s"] / oracle["engine_s"], 3) if oracle and oracle["engine_s"] else None
        row["cost_vs_asap"] = round(row["engine_s"] / asap["engine_s"], 3) if asap and asap["engine_s"] else None
    per_query = bound_rows(runs, fits)
    floor = per_query[-1]["bound_s"] if per_query else None
    return {"rows": rows, "bounds": per_query, "fits": {q: f.as_dict() if f else None for q, f in fits.items()},
            "winner": winner["config"] if winner else None, "cheapest_static": oracle["config"] if oracle else None,
            "asap": asap["config"] if asap else None,
            "floor_vs_asap": round(floor / asap["engine_s"], 3) if floor and asap and asap["engine_s"] else None}


def _asap(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The row ×asap compares with: asap admission under EDF, else under any scheduler; None without one."""
    asap = [r for r in rows if r["admission"] == "asap" and r["engine_s"] is not None]
    return next((r for r in asap if r["scheduler"] == "edf"), asap[0] if asap else None)


def bound_rows(runs: Sequence[BenchRun], fits: Mapping[str, ServiceFit | None]) -> list[dict[str, Any]]:
    """One row per query: its deadline, fitted model, fewest batches and bound (over the first configuration's
    repetitions: every configuration of a repetition has the same arrivals), and a total row."""
    rows: list[dict[str, Any]] = []
    first = runs[0]
    per_rep: list[list[float | None]] = [[] for _ in first.reports]
    for q in query_ids(runs):
        deadline = judged_deadline(first, q, runs)
        fit = fits.get(q)
        bounds = [report_bound(r, q, deadline, fit) for r in first.reports]
        row: dict[str, Any] = {"query": q, "deadline_s": deadline, "reps": len(bounds),
                               **({"fixed_ms": round(1000.0 * fit.fixed_s, 1),
                                   "ms_per_mb": round(1000.0 * fit.per_byte_s * 1e6, 1),
                                   "fit_batches": fit.batches} if fit else {})}
        for k, b in enumerate(bounds):
            per_rep[k].append(b.engine_s if b is not None else None)
        batches = [float(b.batches) for b in bounds if b is not None and b.batches is not None]
        engines = [b.engine_s for b in bounds if b is not None and b.engine_s is not None]
        complete = len(engines) == len(bounds)
        _spread_row(row, "min_batches", Spread.of(batches) if complete else None, 1)
        _spread_row(row, "bound_s", Spread.of(engines) if complete else None, 3)
        if not complete:
            row["note"] = "no fit (batch sizes too uniform)" if fit is None else "no batching meets the deadline"
        rows.append(row)
    totals = [sum(v for v in rep if v is not None) for rep in per_rep if all(v is not None for v in rep)]
    total: dict[str, Any] = {"query": "all (sum)", "deadline_s": None}
    _spread_row(total, "bound_s", Spread.of(totals) if totals and len(totals) == len(per_rep) else None, 3)
    return [*rows, total]


def sections(analysis: Mapping[str, Any], queries: Sequence[str], deadlines: Mapping[str, float]) -> list[Section]:
    """The summary and bound tables as :class:`pacer_bench.outputs.Section`."""
    rows = analysis["rows"]
    headers: dict[str, tuple[str, int]] = {"config": ("config", 0)}
    headers.update({f"miss_{q}": (f"miss {q} ({deadlines[q]:g} s)", 3) for q in queries})
    headers.update({"met": ("met", 0), "engine_s": ("engine s", 1), "busy_s": ("busy s", 1),
                    "cost_vs_static": ("×static", 3), "cost_vs_asap": ("×asap", 3),
                    "bound_s": ("bound s", 1), "cost_vs_bound": ("×bound", 3), "mark": ("", 0)})
    winner = next((r for r in rows if r["config"] == analysis["winner"]), None)
    floor = analysis.get("floor_vs_asap")
    if winner is None:
        text = f"No configuration kept every query's misses within {MISS_LIMIT:.0%}"
        text += f"; the bound is {floor:.3f}× {analysis['asap']}." if floor is not None else "."
    else:
        parts = [f"Winner: {winner['config']}, {winner['engine_s']:.1f} engine s with every query's misses "
                 f"within {MISS_LIMIT:.0%}"]
        if winner.get("cost_vs_static") is not None:
            parts.append(f"{winner['cost_vs_static']:.3f}× the cheapest static that met every deadline "
                         f"({analysis['cheapest_static']})")
        if winner.get("cost_vs_bound") is not None:
            parts.append(f"{winner['cost_vs_bound']:.3f}× the bound ({winner['bound_s']:.1f} s)")
        if winner.get("cost_vs_asap") is not None:
            parts.append(f"{winner['cost_vs_asap']:.3f}× {analysis['asap']}"
                         + (f", where the bound is {floor:.3f}×" if floor is not None else ""))
        text = "; ".join(parts) + "."
    bound_headers: dict[str, tuple[str, int]] = {
        "query": ("query", 0), "deadline_s": ("deadline s", 0), "fixed_ms": ("fixed ms", 1),
        "ms_per_mb": ("ms/MB", 1), "fit_batches": ("batches fitted", 0), "min_batches": ("min batches", 0),
        "bound_s": ("bound s", 1), "note": ("", 0)}
    return [Section("Every deadline, least engine time", rows, list(headers), headers, text=text, legend=LEGEND),
            Section("The bound, per query", analysis["bounds"], list(bound_headers), bound_headers,
                    legend=BOUND_LEGEND)]


def write_multi_query(out: str | Path, runs: Sequence[BenchRun], *, summary: str, notes: Sequence[str] = (),
                      machine: str | None = None) -> dict[str, Path]:
    """multi-query's outputs: :func:`pacer_bench.outputs.write_outputs` with the summary and bound tables first
    and the analysis under ``analysis`` in the JSON."""
    analysis = analyse(runs)
    queries = query_ids(runs)
    deadlines = {q: judged_deadline(next(r for r in runs if q in r.report["queries"]), q, runs) for q in queries}
    return write_outputs(out, "multi-query", runs, summary=summary, notes=notes, machine=machine,
                         sections=sections(analysis, queries, deadlines), extra={"analysis": analysis})
