"""The bench's plots: latency CDF, figures over time, and figures against a swept rate (with error bars).

Each plot has a human caption (:data:`CAPTIONS`); a plot that would carry no information is skipped with
the reason (:func:`figures` returns both).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from pacer_bench.tables import BenchRun, Spread, judged_deadline

#: Plot key -> the caption shown under it in the HTML page.
CAPTIONS = {
    "latency_cdf": "Dataset latency CDF (median over repetitions, band: min–max)",
    "max_latency": "Max latency per monitoring interval over time (repetition 1)",
    "batch_size": "Micro-batch size over time (repetition 1)",
    "batch_interval": "Interval between batch admissions over time (repetition 1)",
    "gpu_ratio": "Share of operators that ran on a GPU over time (repetition 1)",
    "sweep_latency": "Average dataset latency against the input rate (dStream Figs. 6, 8; LMStream Fig. 6)",
    "sweep_throughput": "Throughput against the input rate (dStream Figs. 7, 9; LMStream Fig. 7)",
    "sweep_processing": "Average processing time per batch against the input rate",
    "sweep_gpu_ratio": "Share of operators on the GPU against the input rate (dStream Fig. 11)",
    "sweep_latency_cdf": "Dataset latency CDF per input rate, every placement (dStream Fig. 10)",
}


#: Line colours and, past ten series, line styles: every configuration of a plot gets its own pair.
_COLORS = tuple(f"C{i}" for i in range(10))  # matplotlib's default cycle, tab10
_LINESTYLES = ("-", "--", ":", "-.")


def line_style(index: int) -> dict[str, Any]:
    """The colour and line style of the ``index``-th series: tab10's colours, then again dashed, dotted..., so no
    two of up to 40 series look alike."""
    return {"color": _COLORS[index % len(_COLORS)], "linestyle": _LINESTYLES[(index // len(_COLORS)) % len(_LINESTYLES)]}


def query_ids(runs: Sequence[BenchRun]) -> list[str]:
    """Every query of the runs, in the order they first appear."""
    seen: list[str] = []
    for run in runs:
        seen += [q for q in run.report["queries"] if q not in seen]
    return seen


def query_deadline(runs: Sequence[BenchRun], query_id: str) -> float:
    """The deadline (s) the tables judge ``query_id`` against (:func:`pacer_bench.tables.judged_deadline`)."""
    ref = next(r for r in runs if query_id in r.report["queries"])
    return judged_deadline(ref, query_id, runs)


def _series(report: Mapping[str, Any], query_id: str, key: str) -> tuple[list[float], list[float]]:
    """The ``key`` column over time, over the intervals in which a batch completed (the others hold no value,
    and drawing them as zeros would turn every line into a saw)."""
    rows = [r for r in report["queries"][query_id].get("series", []) if r.get("batches", 1)]  # none: a Kafka baseline
    return [r["t"] for r in rows], [r.get(key, 0.0) for r in rows]


def finish(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str, *, legend: bool = True) -> Any:
    """Labels, grid, legend and layout shared by every plot."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _panels(runs: Sequence[BenchRun]) -> tuple[Any, list[tuple[str, Any]]]:
    """A figure with one panel per query (up to three across), each configuration a line in every panel."""
    queries = query_ids(runs)
    cols = min(3, len(queries))
    nrows = math.ceil(len(queries) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols + 2.8, 3.6 * nrows + 0.4), squeeze=False)
    for k in range(len(queries), nrows * cols):
        axes[k // cols][k % cols].axis("off")
    return fig, [(q, axes[i // cols][i % cols]) for i, q in enumerate(queries)]


def _by_query(runs: Sequence[BenchRun], draw: Callable[[Any, BenchRun, str, dict[str, Any]], None], xlabel: str,
              ylabel: str, title: str, *, deadline: str = "") -> Any:
    """One panel per query, ``draw(ax, run, query_id, style)`` for every configuration, the query's deadline as a
    line (``deadline``: ``"h"`` horizontal, ``"v"`` vertical, ``""`` none), one legend for the figure."""
    if len(query_ids(runs)) == 1:
        fig, ax = plt.subplots(figsize=(8, 4))
        panels = [(query_ids(runs)[0], ax)]
    else:
        fig, panels = _panels(runs)
    for query_id, ax in panels:
        for i, run in enumerate(runs):
            if query_id in run.report["queries"]:
                draw(ax, run, query_id, {"label": run.label, **line_style(i)})
        if deadline:
            d = query_deadline(runs, query_id)
            label = f"deadline {d:g} s" if len(panels) == 1 else "_deadline"  # in the panel titles otherwise
            (ax.axhline if deadline == "h" else ax.axvline)(d, color="black", linestyle="--", linewidth=1.4, label=label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.set_title(title if len(panels) == 1 else f"{query_id} (deadline {query_deadline(runs, query_id):g} s)",
                     fontsize="medium")
    if len(panels) == 1:
        return finish(fig, panels[0][1], xlabel, ylabel, title)
    handles, labels = panels[0][1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize="small")
    fig.suptitle(title, fontsize="medium")
    width = fig.get_size_inches()[0]
    fig.tight_layout(rect=(0.0, 0.0, 1.0 - 2.8 / width, 1.0))
    return fig


def _figure_over_time(runs: Sequence[BenchRun], key: str, ylabel: str, title: str, scale: float = 1.0,
                      deadline: str = "") -> Any:
    def draw(ax: Any, run: BenchRun, query_id: str, style: dict[str, Any]) -> None:
        t, y = _series(run.report, query_id, key)
        ax.plot(t, [v * scale for v in y], linewidth=1.2, marker=".", markersize=3, **style)

    return _by_query(runs, draw, "time (s)", ylabel, title, deadline=deadline)


def _cdf_on(ax: Any, run: BenchRun, query_id: str, label: str, **style: Any) -> None:
    """A run's latency CDF: the median of each percentile over repetitions, shaded between min and max."""
    curves = [r["queries"][query_id].get("latency_quantiles_ms") or [] for r in run.reports
              if query_id in r["queries"]]
    curves = [c for c in curves if c]
    if not curves:
        return
    n = min(len(c) for c in curves)
    fractions = [i / (n - 1) for i in range(n)] if n > 1 else [1.0]
    mid = [statistics.median(c[i] for c in curves) / 1000.0 for i in range(n)]
    (line,) = ax.plot(mid, fractions, label=label, **style)
    if len(curves) > 1:
        low = [min(c[i] for c in curves) / 1000.0 for i in range(n)]
        high = [max(c[i] for c in curves) / 1000.0 for i in range(n)]
        ax.fill_betweenx(fractions, low, high, color=line.get_color(), alpha=0.2, linewidth=0)


def _latency_cdf(runs: Sequence[BenchRun]) -> Any:
    def draw(ax: Any, run: BenchRun, query_id: str, style: dict[str, Any]) -> None:
        _cdf_on(ax, run, query_id, **style)

    return _by_query(runs, draw, "dataset latency (s)", "fraction of datasets", "Latency CDF", deadline="v")


def _sweep_points(runs: Sequence[BenchRun], value: Callable[[Mapping[str, Any]], float]
                  ) -> dict[str, list[tuple[float, Spread]]]:
    lines: dict[str, list[tuple[float, Spread]]] = {}
    for run in runs:
        if run.x is None:
            continue
        for query_id in run.report["queries"]:
            values = [float(value(r["queries"][query_id])) for r in run.reports if query_id in r["queries"]]
            lines.setdefault(run.series or run.label, []).append((run.x, Spread.of(values)))
    return lines


def _figure_over_sweep(runs: Sequence[BenchRun], value: Callable[[Mapping[str, Any]], float], ylabel: str,
                       title: str, *, log_y: bool = False) -> Any:
    """One line per ``series``: the median of ``value(query summary)`` over repetitions against the swept ``x``
    (log scale, as dStream Fig. 11), with min–max error bars."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, points in _sweep_points(runs, value).items():
        points.sort(key=lambda p: p[0])
        xs, mids = [p[0] for p in points], [p[1].median for p in points]
        err = [[p[1].median - p[1].low for p in points], [p[1].high - p[1].median for p in points]]
        ax.errorbar(xs, mids, yerr=err, marker="o", capsize=3, label=name)
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    return finish(fig, ax, "input rate (KB/s)", ylabel, title)


def _sweep_latency_cdf(runs: Sequence[BenchRun]) -> Any:
    """One panel per swept value (rate), one CDF per series (placement) in each, log latency axis."""
    xs = sorted({r.x for r in runs if r.x is not None})
    cols = min(3, len(xs))
    rows = math.ceil(len(xs) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    for i, x in enumerate(xs):
        ax = axes[i // cols][i % cols]
        for run in runs:
            if run.x == x:
                for query_id in run.report["queries"]:
                    _cdf_on(ax, run, query_id, run.series or run.label)
        ax.set_xscale("log")
        ax.set_title(f"{x:g} KB/s", fontsize="medium")
        ax.set_xlabel("dataset latency (s)")
        ax.set_ylabel("fraction of datasets")
        ax.grid(alpha=0.3)
    for j in range(len(xs), rows * cols):
        axes[j // cols][j % cols].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower right", fontsize="small")
    fig.suptitle("Latency CDF by input rate")
    fig.tight_layout()
    return fig


def gpu_plot_skip_reason(runs: Sequence[BenchRun]) -> str | None:
    """Why the GPU-share-over-time plot says nothing (no operator ran on a GPU in any run), or None."""
    if any(q["gpu_operator_ratio"] > 0 for run in runs for r in run.reports for q in r["queries"].values()):
        return None
    no_gpu = all(
        r.get("config", {}).get("gpus", 0) == 0 and not r.get("spark", {}).get("rapids_loaded", False)
        for run in runs for r in run.reports
    )
    why = "the runtime had no GPU" if no_gpu else "no placement chose the GPU"
    return f"GPU-share plot skipped: no operator ran on a GPU in any configuration ({why})"


def figures(runs: Sequence[BenchRun]) -> tuple[dict[str, Any], list[str]]:
    """The standard plots and the reasons for those skipped.

    Single configurations get the latency CDF and max latency, batch size, batch interval and GPU share over
    time (the GPU plot only when some operator ran on a GPU): one panel per query where runs have several, every
    configuration its own colour and line style in each, the query's deadline drawn on the latency plots. A sweep (runs with ``x``) gets, instead of the
    over-time plots (one line per run would be unreadable), latency, throughput, processing time and GPU
    share against the swept rate and a latency CDF per rate.
    """
    skipped: list[str] = []
    if any(r.x is not None for r in runs):
        return {
            "sweep_latency": _figure_over_sweep(runs, lambda q: q["latency_ms"]["avg"] / 1000.0,
                                                "avg dataset latency (s)", "Average latency by rate", log_y=True),
            "sweep_throughput": _figure_over_sweep(runs, lambda q: q["throughput_bytes_per_s"] / 1000.0,
                                                   "throughput (KB/s)", "Throughput by rate", log_y=True),
            "sweep_processing": _figure_over_sweep(runs, lambda q: q["processing_ms"]["avg"],
                                                   "avg processing time (ms)", "Processing time per batch by rate",
                                                   log_y=True),
            "sweep_gpu_ratio": _figure_over_sweep(runs, lambda q: q["gpu_operator_ratio"],
                                                  "GPU share of operators", "CPU/GPU mapping ratio by rate"),
            "sweep_latency_cdf": _sweep_latency_cdf(runs),
        }, skipped
    out = {
        "latency_cdf": _latency_cdf(runs),
        "max_latency": _figure_over_time(runs, "max_latency_ms", "max latency (s)", "Max latency per interval", 1e-3,
                                         deadline="h"),
        "batch_size": _figure_over_time(runs, "batch_bytes", "batch size (KB)", "Micro-batch size", 1e-3),
        "batch_interval": _figure_over_time(runs, "batch_interval_s", "interval (s)", "Batch interval"),
    }
    reason = gpu_plot_skip_reason(runs)
    if reason is None:
        out["gpu_ratio"] = _figure_over_time(runs, "gpu_operator_ratio", "GPU share of operators",
                                             "CPU/GPU mapping ratio")
    else:
        skipped.append(reason)
    return out, skipped
