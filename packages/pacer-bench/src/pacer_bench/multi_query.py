"""multi-query: several queries share the cores; which configuration meets every query's deadline at the least
total engine time, what that costs in busy core-seconds, and how close is that to the limit?

Per configuration (medians over repetitions, [min–max] where they differ):

- each query's deadline-miss ratio, rows-weighted (:func:`pacer_bench.tables.miss_ratio`), against its own deadline;
- *met*: every query's median miss ratio is at most :data:`pacer_bench.tables.MISS_LIMIT` (1 %);
- *engine s*: the queries' ``cost.engine_s`` summed (the winner's criterion); *busy wall s* beside it, the wall time
  during which at least one batch ran: batches that share the cores (FAIR, RDAS) are each stretched, and their
  engine times count the overlap once per batch;
- the *cheapest static* per scheduler: the static trigger with the least engine time that met every deadline;
  ``cost_vs_static`` = engine s / the cheapest static of either scheduler (the oracle a user would search for);
- the *winner*: the least engine time among the configurations that met every deadline;
- ``cost_vs_asap`` = engine s / ``edf + asap``'s (Spark's default trigger under EDF): asap starts a batch whenever
  the cores fall free and data waits, so under sustained traffic its engine time is the run's wall time;
- *busy core-s*: the queries' ``cost.busy_core_s`` summed, the core-seconds their tasks executed;
- *bound core-s*: the least busy core-seconds any batching and non-preemptive schedule of every query's arrivals on
  the run's cores could have spent with every dataset within its query's deadline
  (:mod:`pacer_bench.shared_bound`: each query's model, the simulator's own or fitted to its batches over every
  configuration); ``busy_vs_bound`` = busy core-s / the bound, on the same repetition's arrivals;
  ``bound_vs_asap`` = the bound / ``edf + asap``'s busy core-s, the least busy core-s ×asap any configuration
  meeting every deadline could reach.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer_bench.bound import ServiceFit, pooled_fit
from pacer_bench.outputs import Section, write_outputs
from pacer_bench.plots import query_ids
from pacer_bench.shared_bound import SharedBound, report_shared_bound, why_no_model
from pacer_bench.tables import MISS_LIMIT, BenchRun, Spread, engine_seconds, judged_deadline, miss_ratio
from pacer_bench.tables import busy_core_seconds as query_busy_core_seconds

LEGEND = (
    f"miss QUERY: share of the query's rows in datasets over its deadline (median [min–max] over repetitions); "
    f"met: every query's miss ≤ {MISS_LIMIT:.0%}; engine s: the queries' engine time (cost.engine_s) summed; busy "
    "wall s: wall time during which at least one batch ran (where batches run side by side, as under FAIR and RDAS, "
    "each is stretched and engine s counts the overlap once per batch); "
    "×static (engine s): engine s over the cheapest static trigger that met every deadline; ×asap (engine s): "
    "engine s over edf + asap's (asap starts a batch whenever the cores fall free and data waits: under sustained "
    "traffic its engine time is the run's wall time); busy core-s: the core-seconds the queries' tasks executed "
    "(cost.busy_core_s summed); bound core-s: the least busy core-seconds any batching and non-preemptive schedule of "
    "every query's arrivals on the run's cores could have spent with every dataset within its query's deadline "
    "(shared engine; see the next table); ×bound (core-s): busy core-s over it"
)
BOUND_LEGEND = (
    "model: known (the simulator's own cost model, without noise) or fitted (from the engine-time fit to the query's "
    "batches over every configuration: no-core part = its fixed part, per-byte work on all the cores a batch can "
    "use); no-core ms: a batch's time holding no cores (planning, commits); core ms: its tasks' work whatever its "
    "size; core-s/MB: their work per MB; cores: the most a batch holds; min batches alone: the fewest batches in "
    "which every dataset meets the deadline with the engine to itself (exact, dynamic programming); shared: the "
    "fewest that pass the shared engine's test beside the other queries' datasets' work (a lower bound of the "
    "batches of any schedule meeting every deadline); bound core-s: core ms × shared + core-s/MB × every byte; the "
    "last row sums them: the bound (alone core-s: with each query's batches alone), and the least busy core-s of a "
    "schedule found that meets every deadline (smaller batches leaving the other queries room), so that the least "
    "lies between the two; exact where they meet"
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


def _bound(report: Mapping[str, Any], deadlines: Mapping[str, float],
           fits: Mapping[str, ServiceFit | None]) -> SharedBound | None:
    """The shared-engine bound on ``report``'s arrivals and cores (None where a query has no model or arrivals)."""
    return report_shared_bound(report, deadlines, fits)


def busy_core_seconds(report: Mapping[str, Any]) -> float | None:
    """The queries' ``cost.busy_core_s`` summed; None where one of them has none (not measured)."""
    values = [query_busy_core_seconds(q) for q in report["queries"].values()]
    return sum(values) if values and not any(math.isnan(v) for v in values) else None


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
        _spread_row(row, "engine_s", Spread.of(totals), 3)
        busy = [busy_seconds(r) for r in run.reports]
        _spread_row(row, "busy_s", Spread.of([b for b in busy if b is not None]) if None not in busy else None, 3)
        cores = [busy_core_seconds(r) for r in run.reports]
        bounds = [b.core_s if b is not None else None for b in (_bound(r, deadlines, fits) for r in run.reports)]
        _spread_row(row, "busy_core_s", _all(cores), 3)
        _spread_row(row, "bound_core_s", _all(bounds), 3)
        _spread_row(row, "busy_vs_bound", _all([c / b if c is not None and b else None
                                                for c, b in zip(cores, bounds, strict=True)]), 3)
        rows.append(row)
    # what the configurations are compared in: busy core-seconds where every one measured them, else engine time
    key = "busy_core_s" if rows and all(r.get("busy_core_s") is not None for r in rows) else "engine_s"
    met_rows = sorted((r for r in rows if r["met"] == "✓"), key=lambda r: r[key])
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
        row["cost_vs_static"] = round(row[key] / oracle[key], 3) if oracle and oracle[key] else None
        row["cost_vs_asap"] = round(row[key] / asap[key], 3) if asap and asap[key] else None
    per_query = bound_rows(runs, fits)
    floor = per_query[-1].get("bound_core_s") if per_query else None
    asap_busy = asap.get("busy_core_s") if asap else None
    return {"rows": rows, "bounds": per_query, "fits": {q: f.as_dict() if f else None for q, f in fits.items()},
            "cost": "busy core-s" if key == "busy_core_s" else "engine s",
            "goal": goal_line(winner, rows),
            "winner": winner["config"] if winner else None, "cheapest_static": oracle["config"] if oracle else None,
            "asap": asap["config"] if asap else None,
            "bound_vs_asap": round(floor / asap_busy, 3) if floor and asap_busy else None,
            "bound_note": per_query[-1].get("note") if per_query else None}


#: The several-queries goal the summary restates: every query's late rows, its busy core-seconds over the bound.
GOAL_MISS, GOAL_VS_BOUND = 0.01, 1.2


def goal_line(winner: Mapping[str, Any] | None, rows: Sequence[Mapping[str, Any]]) -> str:
    """The goal, and what came nearest it: the winner (the cheapest that kept every query within the misses), or,
    where none did, the configuration nearest the bound; by how much each part was missed."""
    goal = (f"Goal (several queries): every query ≤ {GOAL_MISS:.0%} of rows late at ≤ {GOAL_VS_BOUND:g}× the "
            "shared-engine bound (busy core-s)")
    best = winner or min((r for r in rows if r.get("busy_vs_bound") is not None),
                         key=lambda r: r["busy_vs_bound"], default=None)
    if best is None:
        return f"{goal}: not judged (no configuration has a bound)."
    misses = {k[len("miss_"):]: v for k, v in best.items() if k.startswith("miss_") and not k.endswith(("_min", "_max"))}
    over = [f"{q} late {v:.2%} (by {v - GOAL_MISS:.2%})" for q, v in misses.items() if v > GOAL_MISS + 1e-12]
    ratio = best.get("busy_vs_bound")
    if ratio is None:
        return f"{goal}: {best['config']} has no bound; not judged."
    if ratio > GOAL_VS_BOUND + 1e-12:
        over.append(f"{ratio:.3f}× the bound (by {ratio - GOAL_VS_BOUND:.3f})")
    verdict = "met" if not over else "missed: " + ", ".join(over)
    return f"{goal}: {best['config']}, {ratio:.3f}× the bound: {verdict}."


def _all(values: Sequence[float | None]) -> Spread | None:
    """The spread of ``values`` over repetitions; None where one is unknown."""
    return Spread.of([v for v in values if v is not None]) if values and None not in values else None


def _asap(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The row ×asap compares with: asap admission under EDF, else under any scheduler; None without one."""
    asap = [r for r in rows if r["admission"] == "asap" and r["engine_s"] is not None]
    return next((r for r in asap if r["scheduler"] == "edf"), asap[0] if asap else None)


def bound_rows(runs: Sequence[BenchRun], fits: Mapping[str, ServiceFit | None]) -> list[dict[str, Any]]:
    """One row per query: its deadline, model, fewest batches alone and beside the others, and its part of the
    shared-engine bound (over the first configuration's repetitions: every configuration of a repetition has the
    same arrivals), then the bound's row."""
    first = runs[0]
    queries = query_ids(runs)
    deadlines = {q: judged_deadline(first, q, runs) for q in queries}
    bounds = [_bound(r, deadlines, fits) for r in first.reports]
    rows: list[dict[str, Any]] = []
    for q in queries:
        shares = [s for b in bounds if b is not None for s in b.queries if s.query_id == q]
        row: dict[str, Any] = {"query": q, "deadline_s": deadlines[q], "reps": len(bounds)}
        if len(shares) == len(bounds) and shares:
            model = shares[0].model
            row.update(model=model.source, wall_ms=round(1000.0 * model.wall_s, 1),
                       core_ms=round(1000.0 * model.core_s, 1), core_s_per_mb=round(model.core_per_byte * 1e6, 3),
                       cores=model.cores(bounds[0].cores) if bounds[0] is not None else None)
            _spread_row(row, "alone_batches", _all([float(s.alone) if s.alone is not None else None
                                                    for s in shares]), 1)
            _spread_row(row, "shared_batches", _all([float(s.batches) if s.batches is not None else None
                                                     for s in shares]), 1)
            _spread_row(row, "bound_core_s", _all([s.core_s for s in shares]), 3)
        else:
            why = sorted({str(w) for r in first.reports if (w := why_no_model(r, q, fits.get(q))) is not None})
            row["note"] = "; ".join(why) or "no bound on every repetition"
        rows.append(row)
    total: dict[str, Any] = {"query": "all (shared engine)", "deadline_s": None, "reps": len(bounds),
                             "bound_core_s": None}
    known = [b for b in bounds if b is not None]
    if len(known) != len(bounds) or not known:
        total["note"] = "no bound: a query has no model or its arrivals cannot be regenerated"
    else:
        _spread_row(total, "bound_core_s", _all([b.core_s for b in known]), 3)
        _spread_row(total, "alone_core_s", _all([b.alone_core_s for b in known]), 3)
        reasons = [b.reason for b in known if b.reason]
        if reasons:
            total["note"] = f"no schedule on {known[0].cores} cores meets every deadline: {reasons[0]}"
        else:
            total["exact"] = all(b.exact for b in known)
            found = [b.attained_core_s for b in known]
            _spread_row(total, "attained_core_s", _all(found), 3)
            total["note"] = ("exact: a schedule meeting every deadline spends it" if total["exact"] else
                             "the least lies between the bound and a schedule found" if None not in found else
                             "a lower bound (no schedule meeting every deadline found)")
    rows.append(total)
    return rows


def sections(analysis: Mapping[str, Any], queries: Sequence[str], deadlines: Mapping[str, float]) -> list[Section]:
    """The summary and bound tables as :class:`pacer_bench.outputs.Section`."""
    rows = analysis["rows"]
    headers: dict[str, tuple[str, int]] = {"config": ("config", 0)}
    headers.update({f"miss_{q}": (f"miss {q} ({deadlines[q]:g} s)", 3) for q in queries})
    basis = analysis.get("cost", "engine s")
    headers.update({"met": ("met", 0), "engine_s": ("engine s", 1), "busy_s": ("busy wall s", 1),
                    "cost_vs_static": (f"×static ({basis})", 3), "cost_vs_asap": (f"×asap ({basis})", 3),
                    "busy_core_s": ("busy core-s", 1), "bound_core_s": ("bound core-s", 1),
                    "busy_vs_bound": ("×bound (core-s)", 3), "mark": ("", 0)})
    winner = next((r for r in rows if r["config"] == analysis["winner"]), None)
    floor = analysis.get("bound_vs_asap")
    total = analysis["bounds"][-1] if analysis["bounds"] else {}
    bound = total.get("bound_core_s")
    found = total.get("attained_core_s")
    if bound is None:
        about = f"no bound: {total['note']}" if total.get("note") else "no bound (a query has no model)"
    else:
        about = (f"the shared-engine bound is {bound:.1f} busy core-s ("
                 + ("exact" if total.get("exact") else
                    f"a schedule meeting every deadline found at {found:.1f}" if found is not None else
                    "no schedule meeting every deadline found")
                 + (f"; {floor:.3f}× {analysis['asap']}'s busy core-s)" if floor is not None else ")"))
    if winner is None:
        text = f"No configuration kept every query's misses within {MISS_LIMIT:.0%}; {about}."
    else:
        parts = [f"Winner (least {basis}): {winner['config']}, {winner['engine_s']:.1f} engine s with every query's "
                 f"misses within {MISS_LIMIT:.0%}"]
        if winner.get("cost_vs_static") is not None:
            parts.append(f"{winner['cost_vs_static']:.3f}× the cheapest static that met every deadline "
                         f"({analysis['cheapest_static']}), {basis}")
        if winner.get("cost_vs_asap") is not None:
            parts.append(f"{winner['cost_vs_asap']:.3f}× {analysis['asap']}, {basis}")
        if winner.get("busy_core_s") is not None:
            parts.append(f"{winner['busy_core_s']:.1f} busy core-s"
                         + (f", {winner['busy_vs_bound']:.3f}× the bound" if winner.get("busy_vs_bound") else ""))
        text = "; ".join(parts) + f"; {about}."
    text += f" {analysis['goal']}" if analysis.get("goal") else ""
    bound_headers: dict[str, tuple[str, int]] = {
        "query": ("query", 0), "deadline_s": ("deadline s", 0), "model": ("model", 0), "wall_ms": ("no-core ms", 1),
        "core_ms": ("core ms", 1), "core_s_per_mb": ("core-s/MB", 3), "cores": ("cores", 0),
        "alone_batches": ("min batches alone", 0), "shared_batches": ("shared", 0),
        "alone_core_s": ("alone core-s", 1), "bound_core_s": ("bound core-s", 1),
        "attained_core_s": ("schedule found core-s", 1), "note": ("", 0)}
    return [Section(f"Every deadline, least {basis}", rows, list(headers), headers, text=text, legend=LEGEND),
            Section("The bound on a shared engine, busy core-seconds", analysis["bounds"], list(bound_headers),
                    bound_headers, legend=BOUND_LEGEND)]


def write_multi_query(out: str | Path, runs: Sequence[BenchRun], *, summary: str, notes: Sequence[str] = (),
                      machine: str | None = None) -> dict[str, Path]:
    """multi-query's outputs: :func:`pacer_bench.outputs.write_outputs` with the summary and bound tables first
    and the analysis under ``analysis`` in the JSON."""
    analysis = analyse(runs)
    queries = query_ids(runs)
    deadlines = {q: judged_deadline(next(r for r in runs if q in r.report["queries"]), q, runs) for q in queries}
    return write_outputs(out, "multi-query", runs, summary=summary, notes=notes, machine=machine,
                         sections=sections(analysis, queries, deadlines), extra={"analysis": analysis})
