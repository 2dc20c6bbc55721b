"""latency-target: what meeting a deadline costs, per workload, traffic and deadline.

Configurations that do not read the deadline (Spark's default trigger: plain Spark's, ``spark default`` from
``--static 0``, where it ran, else pacer's ``asap``; static triggers, ``pid``,
``min-rows``, ``fixed-point``, ``lmstream``) ran once per workload and traffic; each is judged here against
every deadline. ``zstream`` ran once per deadline. For each (workload, traffic, deadline):

- a configuration *meets* the deadline when its median deadline-miss ratio is at most :data:`MISS_LIMIT`;
- a configuration's *cost* is its busy core-seconds (``cost.busy_core_s``, what a user pays) where every
  configuration of the group measured them, else its engine time (``cost.engine_s``; :func:`cost_of`);
- the *oracle* is the static trigger with the least cost that meets it: the interval a user would
  have to find by hand for this workload, traffic and deadline;
- ``cost_vs_default`` and ``cost_vs_oracle`` are its cost over the default trigger's and over the oracle's;
  ``cost_vs_trigger`` over Spark's trigger at the deadline (the static trigger whose interval is the deadline,
  where one ran: the baseline of ``--source kafka``);
- the *bound* is the least engine time any batching of the run's arrivals could have spent and met the deadline,
  under the service model fitted to every batch of the workload and traffic (:mod:`pacer_bench.bound`);
  ``cost_vs_bound`` = engine time / the bound (on the same repetition's arrivals). Kafka runs have none.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from pacer_bench.bound import EngineBound, ServiceFit, pooled_fit, report_bound
from pacer_bench.outputs import (
    Section,
    html_table,
    markdown_rows,
    page,
    png_bytes,
    run_settings,
    runs_json,
    settings_markdown,
    write_csv,
)
from pacer_bench.plots import finish
from pacer_bench.runtime_traits import SPARK_DEFAULT
from pacer_bench.shared_bound import report_shared_bound
from pacer_bench.tables import MISS_LIMIT, BenchRun, Spread, busy_core_seconds, spread_cell, spreads, table_rows

ROW_COLUMNS = ("deadline_s", "workload", "traffic", "config", "met", "mark", "deadline_miss", "p99_ms", "busy_core_s",
               "engine_s", "cost_vs_default", "cost_vs_oracle", "cost_vs_trigger", "busy_vs_bound", "cost_vs_bound",
               "reps")
ROW_HEADERS: dict[str, tuple[str, int]] = {
    "deadline_s": ("deadline s", 0), "workload": ("query", 0), "traffic": ("traffic", 0), "config": ("config", 0),
    "met": ("met", 0), "mark": ("", 0), "deadline_miss": ("miss", 3), "p99_ms": ("p99 ms", 0),
    "busy_core_s": ("busy core-s", 1), "engine_s": ("engine s", 1), "cost_vs_default": ("cost×default", 3),
    "cost_vs_oracle": ("cost×oracle", 3), "cost_vs_trigger": ("cost×trigger", 3),
    "busy_vs_bound": ("busy×bound", 3), "cost_vs_bound": ("engine×bound", 3), "reps": ("reps", 0),
}
WINNER_COLUMNS = ("deadline_s", "workload", "traffic", "cost", "winner", "winner_busy_core_s", "winner_engine_s",
                  "winner_vs_default",
                  "winner_vs_oracle", "winner_vs_bound", "oracle", "default_met", "best_adaptive",
                  "adaptive_vs_default", "adaptive_vs_oracle", "adaptive_vs_bound", "bound_s")
WINNER_HEADERS: dict[str, tuple[str, int]] = {
    "deadline_s": ("deadline s", 0), "workload": ("query", 0), "traffic": ("traffic", 0),
    "cost": ("cost", 0), "winner": ("cheapest that met it", 0), "winner_busy_core_s": ("busy core-s", 1),
    "winner_engine_s": ("engine s", 1),
    "winner_vs_default": ("×default", 3), "winner_vs_oracle": ("×oracle", 3), "oracle": ("oracle static", 0),
    "default_met": ("default met", 0), "best_adaptive": ("cheapest adaptive that met it", 0),
    "adaptive_vs_default": ("×default", 3), "adaptive_vs_oracle": ("×oracle", 3),
    "winner_vs_bound": ("engine×bound", 3), "adaptive_vs_bound": ("engine×bound", 3), "bound_s": ("bound s", 1),
}
BOUND_COLUMNS = ("deadline_s", "workload", "traffic", "fixed_ms", "ms_per_mb", "fit_batches", "rms_ms",
                 "slope_error", "stable", "datasets", "min_batches", "bound_s")
BOUND_HEADERS: dict[str, tuple[str, int]] = {
    "deadline_s": ("deadline s", 0), "workload": ("query", 0), "traffic": ("traffic", 0), "fixed_ms": ("fixed ms", 1),
    "ms_per_mb": ("ms/MB", 1), "fit_batches": ("batches fitted", 0), "rms_ms": ("fit error ms", 1),
    "slope_error": ("ms/MB ±", 3), "stable": ("stable", 0), "datasets": ("datasets", 0),
    "min_batches": ("min batches", 0), "bound_s": ("bound s", 1),
}
BOUND_LEGEND = (
    "the least engine time any batching of the run's arrivals could have spent with every dataset within the "
    "deadline: fixed × min batches + per byte × every byte, under the service model fitted by least squares to "
    "the batches of the workload and traffic in this bench run (bytes → engine time, each run's first batch left "
    "out); fit error ms: the root mean square of its residuals; ms/MB ±: the per-byte slope's standard error over the "
    "slope; stable: at least 8 batches spanning at least 2× in size and ms/MB ± ≤ 0.25, else no bound is given (the "
    "split into fixed and per-byte cost is noise); min batches: the fewest batches, one engine, batches in arrival "
    "order (exact, by dynamic programming); empty where no batching meets the deadline, the fit is not stable or "
    "batch sizes were too uniform to fit"
)
LEGEND = (
    f"met: median deadline-miss ratio ≤ {MISS_LIMIT:.0%}; cost: what the configurations are compared in, busy "
    "core-s where every run measured it (cost.busy_core_s, the core-seconds the query's tasks executed: what a user "
    "pays), else engine s (cost.engine_s, the engine time its batches took, gate waits included); oracle: the "
    "static trigger with the least cost that met the deadline; default: Spark's default trigger (plain Spark's, "
    "'spark default', where it ran; else pacer's asap); miss: share of rows in datasets over the deadline; "
    "cost×default, cost×oracle: cost over the default's and the oracle's; "
    "cost×trigger: over Spark's trigger at the deadline (static trigger at the deadline's interval); busy×bound: "
    "busy core-s over the least any batching of the run's arrivals could have spent and met the deadline "
    "(pacer_bench.shared_bound, one query: exact); bound, engine×bound: the least engine time any batching could "
    "have spent and met the deadline (see Bounds), and engine time over it; cells: median [min–max] over "
    "repetitions where they differ"
)


@dataclass(frozen=True)
class Judged:
    """One configuration judged against one deadline."""

    run: BenchRun
    deadline_s: float
    miss: Spread
    p99_ms: Spread
    engine_s: Spread
    bounds: tuple[EngineBound | None, ...] = ()  # one per repetition
    busy: Spread | None = None  # busy core-seconds; None where a repetition did not measure them
    core_bounds: tuple[float | None, ...] = ()  # the least busy core-seconds, one per repetition

    @property
    def name(self) -> str:
        """The configuration's short name (``static 5s``)."""
        return str(self.run.tags.get("name", self.run.label))

    @property
    def family(self) -> str:
        """``asap``, ``static`` or the admission strategy."""
        return str(self.run.tags.get("family", ""))

    @property
    def met(self) -> bool:
        """Whether its median miss ratio is within :data:`MISS_LIMIT`."""
        return self.miss.median <= MISS_LIMIT + 1e-12

    @property
    def bound_s(self) -> Spread | None:
        """The bound over repetitions, or None where a repetition has none."""
        values = [b.engine_s for b in self.bounds if b is not None and b.engine_s is not None]
        return Spread.of(values) if values and len(values) == len(self.bounds) else None

    @property
    def vs_bound(self) -> Spread | None:
        """Engine time over the bound, per repetition, or None where a repetition has no bound."""
        engines = [float(r["queries"][self.query_id]["cost"]["engine_s"]) for r in self.run.reports]
        bounds = [b.engine_s if b is not None else None for b in self.bounds]
        ratios = [e / b for e, b in zip(engines, bounds, strict=True) if b]
        return Spread.of(ratios) if ratios and len(ratios) == len(engines) else None

    @property
    def vs_core_bound(self) -> Spread | None:
        """Busy core-seconds over the least any batching could have spent (:mod:`pacer_bench.shared_bound`, one
        query: exact), per repetition; None where a repetition lacks either."""
        busy = [busy_core_seconds(r["queries"][self.query_id]) for r in self.run.reports]
        ratios = [b / c for b, c in zip(busy, self.core_bounds, strict=True) if not math.isnan(b) and c]
        return Spread.of(ratios) if ratios and len(ratios) == len(self.run.reports) else None

    @property
    def query_id(self) -> str:
        """The run's one query."""
        return str(next(iter(self.run.report["queries"])))


def group_fits(runs: Sequence[BenchRun]) -> dict[tuple[str, str], ServiceFit | None]:
    """The service model of every (workload, traffic): fitted to the batches of all its configurations."""
    reports: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        reports.setdefault((str(run.tags["workload"]), str(run.tags["traffic"])), []).extend(run.reports)
    return {key: pooled_fit(group, next(iter(group[0]["queries"]))) for key, group in reports.items()}


def judge(runs: Sequence[BenchRun], deadlines: Sequence[float]) -> dict[tuple[str, str, float], list[Judged]]:
    """Every (workload, traffic, deadline) with the configurations judged against it: those that do not read
    the deadline, and those that ran with exactly it (each with its bound, per repetition)."""
    fits = group_fits(runs)
    out: dict[tuple[str, str, float], list[Judged]] = {}
    for deadline in deadlines:
        for run in runs:
            own = run.tags.get("deadline")
            if own is not None and abs(float(own) - deadline) > 1e-9:
                continue
            query_id = next(iter(run.report["queries"]))
            s = spreads(run, query_id, deadline)
            key = (str(run.tags["workload"]), str(run.tags["traffic"]), deadline)
            bounds = tuple(report_bound(r, query_id, deadline, fits[key[:2]]) for r in run.reports)
            cores = tuple(_core_bound(r, query_id, deadline, fits[key[:2]]) for r in run.reports)
            busy = s["busy_core_s"] if not math.isnan(s["busy_core_s"].high) else None
            out.setdefault(key, []).append(Judged(run, deadline, s["deadline_miss"], s["p99_ms"], s["engine_s"],
                                                  bounds, busy, cores))
    return out


def _core_bound(report: dict[str, Any], query_id: str, deadline: float, fit: ServiceFit | None) -> float | None:
    """The least busy core-seconds any batching of the query's arrivals could have spent and met ``deadline``."""
    bound = report_shared_bound(report, {query_id: deadline}, {query_id: fit})
    return bound.core_s if bound is not None else None


def bound_rows(judged: dict[tuple[str, str, float], list[Judged]],
               fits: dict[tuple[str, str], ServiceFit | None]) -> list[dict[str, Any]]:
    """One row per (workload, traffic, deadline): the fitted model, the fewest batches and the bound (of the
    first configuration's repetitions: every configuration of a repetition saw the same arrivals)."""
    rows = []
    for (workload, traffic, deadline), items in judged.items():
        fit = fits.get((workload, traffic))
        first = items[0]
        row: dict[str, Any] = {"deadline_s": deadline, "workload": workload, "traffic": traffic,
                               **({"fixed_ms": round(1000.0 * fit.fixed_s, 1),
                                   "ms_per_mb": round(1000.0 * fit.per_byte_s * 1e6, 1),
                                   "fit_batches": fit.batches, "rms_ms": round(1000.0 * fit.rms_s, 1),
                                   "slope_error": fit.as_dict()["slope_error"],
                                   "stable": "yes" if fit.stable else "no"} if fit else {})}
        known = [b for b in first.bounds if b is not None and b.batches is not None]
        if known and len(known) == len(first.bounds):
            row["datasets"] = known[0].datasets
            for key, values in (("min_batches", [float(b.batches or 0) for b in known]),
                                ("bound_s", [float(b.engine_s or 0.0) for b in known])):
                spread = Spread.of(values)
                row[key], row[f"{key}_min"], row[f"{key}_max"] = (round(spread.median, 3), round(spread.low, 3),
                                                                  round(spread.high, 3))
        rows.append(row)
    return rows


def cost_of(judged: Sequence[Judged]) -> tuple[str, Callable[[Judged], Spread]]:
    """What a group of configurations is compared in: busy core-seconds where every one measured them, else engine
    time (reports without them)."""
    if judged and all(j.busy is not None for j in judged):
        return "busy core-s", lambda j: j.busy if j.busy is not None else j.engine_s
    return "engine s", lambda j: j.engine_s


def _ratio(value: float, ref: Judged | None, cost: Callable[[Judged], Spread]) -> float | None:
    return round(value / cost(ref).median, 3) if ref is not None and cost(ref).median > 0 else None


def _median(spread: Spread | None) -> float | None:
    return round(spread.median, 3) if spread is not None else None


def oracle_of(judged: Sequence[Judged]) -> Judged | None:
    """The static trigger with the least cost (:func:`cost_of`) that meets the deadline, or None when none does."""
    _, cost = cost_of(judged)
    met = [j for j in judged if j.family == "static" and j.met]
    return min(met, key=lambda j: cost(j).median) if met else None


def trigger_at(judged: Sequence[Judged], deadline: float) -> Judged | None:
    """The static trigger whose interval is the deadline (Spark's trigger at the deadline), or None."""
    return next((j for j in judged if j.family == "static"
                 and abs(float(j.run.tags.get("interval", -1.0)) - deadline) < 1e-9), None)


def analyse(runs: Sequence[BenchRun], deadlines: Sequence[float]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The full table (one row per deadline, workload, traffic and configuration) and the winners table (one
    row per deadline, workload and traffic)."""
    rows: list[dict[str, Any]] = []
    winners: list[dict[str, Any]] = []
    for (workload, traffic, deadline), judged in judge(runs, deadlines).items():
        default = next((j for j in judged if j.name == SPARK_DEFAULT), None) or \
            next((j for j in judged if j.family == "asap"), None)  # plain Spark's, where it ran; else pacer's asap
        basis, cost = cost_of(judged)
        oracle = oracle_of(judged)
        trigger = trigger_at(judged, deadline)
        for j in judged:
            mark = " ".join(m for m, hit in (("oracle", j is oracle), ("default", j is default)) if hit)
            row: dict[str, Any] = {"deadline_s": deadline, "workload": workload, "traffic": traffic,
                                   "config": j.name, "met": "✓" if j.met else "✗", "mark": mark,
                                   "reps": len(j.run.reports),
                                   "cost_vs_default": _ratio(cost(j).median, default, cost),
                                   "cost_vs_oracle": _ratio(cost(j).median, oracle, cost),
                                   "cost_vs_trigger": _ratio(cost(j).median, trigger, cost)}
            vs_core = j.vs_core_bound
            if vs_core is not None:
                row["busy_vs_bound"], row["busy_vs_bound_min"], row["busy_vs_bound_max"] = (
                    round(vs_core.median, 3), round(vs_core.low, 3), round(vs_core.high, 3))
            vs_bound = j.vs_bound
            if vs_bound is not None:
                row["cost_vs_bound"], row["cost_vs_bound_min"], row["cost_vs_bound_max"] = (
                    round(vs_bound.median, 3), round(vs_bound.low, 3), round(vs_bound.high, 3))
            row["bound_s"] = _median(j.bound_s)
            for key, measured in (("deadline_miss", j.miss), ("p99_ms", j.p99_ms), ("engine_s", j.engine_s),
                                  ("busy_core_s", j.busy)):
                if measured is not None:
                    row[key], row[f"{key}_min"], row[f"{key}_max"] = (
                        round(measured.median, 4), round(measured.low, 4), round(measured.high, 4))
            rows.append(row)
        met = sorted((j for j in judged if j.met), key=lambda j: cost(j).median)
        adaptive = [j for j in met if j.family not in ("static", "asap")]
        winner = met[0] if met else None
        best = adaptive[0] if adaptive else None
        winners.append({
            "deadline_s": deadline, "workload": workload, "traffic": traffic, "cost": basis,
            "winner": winner.name if winner else "none met it",
            "winner_busy_core_s": _median(winner.busy) if winner else None,
            "winner_engine_s": round(winner.engine_s.median, 3) if winner else None,
            "winner_vs_default": _ratio(cost(winner).median, default, cost) if winner else None,
            "winner_vs_oracle": _ratio(cost(winner).median, oracle, cost) if winner else None,
            "oracle": oracle.name if oracle else "none met it",
            "default_met": ("yes" if default.met else "no") if default else "?",
            "best_adaptive": best.name if best else "none met it",
            "adaptive_vs_default": _ratio(cost(best).median, default, cost) if best else None,
            "adaptive_vs_oracle": _ratio(cost(best).median, oracle, cost) if best else None,
            "winner_vs_bound": _median(winner.vs_bound) if winner else None,
            "adaptive_vs_bound": _median(best.vs_bound) if best else None,
            "bound_s": _median(judged[0].bound_s) if judged else None,
        })
    return rows, winners


#: The single-query goals the summary restates: zStream's late rows, its cost over the default trigger's, over the bound.
GOAL_MISS, GOAL_VS_DEFAULT, GOAL_VS_BOUND = 0.01, 0.3, 1.2


def goal_lines(rows: Sequence[dict[str, Any]], winners: Sequence[dict[str, Any]]) -> list[str]:
    """One line per (workload, traffic, deadline) with a ``zstream`` configuration: the goal, what it reached, and
    by how much it missed each part (its cost as the group compares it, :func:`cost_of`; the bound in engine time)."""
    basis = {(w["workload"], w["traffic"], w["deadline_s"]): w["cost"] for w in winners}
    lines = []
    for row in rows:
        if not str(row["config"]).startswith("zstream"):
            continue
        key = (row["workload"], row["traffic"], row["deadline_s"])
        parts = [("late rows", row.get("deadline_miss"), GOAL_MISS, "{:.2%}"),
                 (f"{basis.get(key, 'cost')} × the default trigger's", row.get("cost_vs_default"), GOAL_VS_DEFAULT,
                  "{:.3f}"),
                 ("busy core-s × the bound", row.get("busy_vs_bound"), GOAL_VS_BOUND, "{:.3f}")
                 if row.get("busy_vs_bound") is not None else
                 ("engine s × the bound", row.get("cost_vs_bound"), GOAL_VS_BOUND, "{:.3f}")]
        reached = [f"{name} {fmt.format(value)} (goal ≤ {fmt.format(goal)})" if value is not None
                   else f"{name} unknown (goal ≤ {fmt.format(goal)})" for name, value, goal, fmt in parts]
        missed = [f"{name} by {fmt.format(value - goal)}" for name, value, goal, fmt in parts
                  if value is not None and value > goal + 1e-12]
        verdict = "met" if not missed and all(v is not None for _, v, _, _ in parts) else (
            "missed: " + ", ".join(missed) if missed else "not judged: a figure is unknown")
        lines.append(f"{row['workload']} {row['traffic']} at {row['deadline_s']:g} s, {row['config']}: "
                     f"{'; '.join(reached)}: {verdict}")
    return lines


_STYLE = {"asap": ("s", "tab:red"), "static": ("o", "tab:gray")}
_ADAPTIVE_STYLE = ("D", "tab:blue")


def _labels_by_point(items: Sequence[Judged]) -> list[tuple[float, float, str]]:
    """One label per distinct point: configurations within 1 % of each other on both axes share it."""
    placed: list[tuple[float, float, list[str]]] = []
    for j in items:
        x, y = cost_of(items)[1](j).median, j.p99_ms.median / 1000.0
        for px, py, names in placed:
            if abs(px - x) <= 0.01 * max(abs(px), 1e-9) and abs(py - y) <= 0.01 * max(abs(py), 1e-9):
                names.append(j.name)
                break
        else:
            placed.append((x, y, [j.name]))
    return [(x, y, ", ".join(names)) for x, y, names in placed]


def _legend_handles(deadline: float) -> list[Any]:
    from matplotlib.lines import Line2D

    def marker(shape: str, color: str, label: str, filled: bool = True) -> Any:
        return Line2D([], [], marker=shape, color=color, mfc=color if filled else "white", linestyle="none",
                      label=label)

    return [marker("s", "tab:red", "default trigger (asap)"), marker("o", "tab:gray", "static trigger"),
            marker("D", "tab:blue", "adaptive admission"), marker("o", "black", "missed the deadline", False),
            Line2D([], [], marker="*", markersize=14, color="gold", mec="black", linestyle="none",
                   label="oracle static"),
            Line2D([], [], color="tab:red", linestyle="--", label=f"deadline {deadline:g} s")]


def pareto_figure(runs: Sequence[BenchRun], deadline: float) -> Any:
    """p99 latency against cost (:func:`cost_of`), one point per configuration (error bars: min–max over repetitions),
    one panel per workload and traffic; the deadline as a line, the oracle and the default trigger marked,
    configurations that missed the deadline hollow."""
    judged = {k[:2]: v for k, v in judge(runs, [deadline]).items()}
    cols = min(4, len(judged))
    nrows = -(-len(judged) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.6 * cols + 2.6, 3.8 * nrows + 0.4), squeeze=False)
    for i, ((workload, traffic), items) in enumerate(judged.items()):
        ax = axes[i // cols][i % cols]
        oracle = oracle_of(items)
        basis, cost = cost_of(items)
        for j in items:
            spent = cost(j)
            x, y = spent.median, j.p99_ms.median / 1000.0
            shape, color = _STYLE.get(j.family, _ADAPTIVE_STYLE)
            ax.errorbar(x, y, xerr=[[x - spent.low], [spent.high - x]],
                        yerr=[[y - j.p99_ms.low / 1000.0], [j.p99_ms.high / 1000.0 - y]], fmt=shape,
                        color=color, mfc=color if j.met else "white", capsize=2, markersize=6,
                        zorder=4 if j.family == "asap" else 2)  # the default stays visible under equal points
            if j is oracle:
                ax.plot(x, y, marker="*", markersize=16, color="gold", markeredgecolor="black", linestyle="none")
        for x, y, text in _labels_by_point(items):
            ax.annotate(text, (x, y), fontsize=6.5, xytext=(4, 4), textcoords="offset points")
        ax.axhline(deadline, color="tab:red", linestyle="--", linewidth=1)
        ax.set_yscale("log")
        ax.margins(x=0.15)
        finish(fig, ax, "busy core-seconds" if basis == "busy core-s" else "engine time (s)", "p99 latency (s)",
               f"{workload} {traffic}", legend=False)
    for k in range(len(judged), nrows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.legend(handles=_legend_handles(deadline), loc="center right", fontsize="small")
    fig.suptitle(f"Deadline {deadline:g} s: p99 latency against cost", fontsize="medium")
    fig.tight_layout(rect=(0.0, 0.0, 1.0 - 2.4 / (4.6 * cols + 2.6), 1.0))
    return fig


def write_latency_target(out: str | Path, runs: Sequence[BenchRun], deadlines: Sequence[float], *, summary: str,
                         notes: Sequence[str] = (), machine: str | None = None) -> dict[str, Path]:
    """Write latency-target.json / .csv / .md / .html, the winners CSV and one Pareto PNG per deadline."""
    name = "latency-target"
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows, winners = analyse(runs, deadlines)
    goals = goal_lines(rows, winners)
    bounds = Section("Bounds", bound_rows(judge(runs, deadlines), group_fits(runs)), BOUND_COLUMNS, BOUND_HEADERS,
                     legend=BOUND_LEGEND)
    settings = run_settings(runs, table_rows(runs), machine=machine)
    settings[0] = ("deadline", f"{', '.join(f'{d:g}' for d in deadlines)} s: every configuration judged against "
                               f"each; met = miss ≤ {MISS_LIMIT:.0%} of rows")
    paths: dict[str, Path] = {"json": folder / f"{name}.json"}
    paths["json"].write_text(json.dumps({"experiment": name, "summary": summary, "notes": list(notes),
                                         "settings": dict(settings), "deadlines": list(deadlines), "rows": rows,
                                         "winners": winners, "goals": goals, "bounds": list(bounds.rows),
                                         "runs": runs_json(runs)},
                                        indent=2, sort_keys=True))
    paths["csv"] = write_csv(folder / f"{name}.csv", rows, [c for c in rows[0] if c != "mark"] + ["mark"])
    paths["winners"] = write_csv(folder / f"{name}-winners.csv", winners, WINNER_COLUMNS)
    note_md = "".join(f"_{n}_\n\n" for n in notes)
    goals_md = "".join(f"- {line}\n" for line in goals)
    sections_md = [(f"## Goals\n\nSingle query: zStream ≤ {GOAL_MISS:.0%} of rows late at ≤ {GOAL_VS_DEFAULT:g}× the "
                    f"default trigger's cost and ≤ {GOAL_VS_BOUND:g}× the bound.\n\n{goals_md}\n" if goals else ""),
                   f"## Winners\n\n{markdown_rows(winners, WINNER_COLUMNS, WINNER_HEADERS)}\n_{LEGEND}._\n\n"
                   f"<!-- readme:end -->\n\n{bounds.markdown()}"]
    for deadline in deadlines:
        part = [r for r in rows if r["deadline_s"] == deadline]
        sections_md.append(f"\n## Deadline {deadline:g} s\n\n{markdown_rows(part, ROW_COLUMNS[1:], ROW_HEADERS)}")
    paths["md"] = folder / f"{name}.md"
    paths["md"].write_text(f"# {name}\n\n{summary}\n\n{settings_markdown(settings)}{note_md}{''.join(sections_md)}")
    images = []
    for deadline in deadlines:
        png = png_bytes(pareto_figure(runs, deadline))
        key = f"pareto_{deadline:g}s"
        paths[key] = folder / f"{name}-{key}.png"
        paths[key].write_bytes(png)
        images.append((f"Deadline {deadline:g} s: p99 latency against cost, one point per configuration",
                       png))
    sections = [f"<h2>Goals</h2><ul>{''.join(f'<li>{html.escape(g)}</li>' for g in goals)}</ul>"] if goals else []
    sections += [f"<h2>Winners</h2>{html_table(winners, WINNER_COLUMNS, WINNER_HEADERS, spread_cell)}"
                f"<p class='legend'>{html.escape(LEGEND)}.</p>", bounds.html()]
    sections += [f"<h2>Deadline {d:g} s</h2>"
                 + html_table([r for r in rows if r["deadline_s"] == d], ROW_COLUMNS[1:], ROW_HEADERS, spread_cell)
                 for d in deadlines]
    paths["html"] = folder / f"{name}.html"
    paths["html"].write_text(page(name, summary, settings, notes, sections, images))
    return paths
