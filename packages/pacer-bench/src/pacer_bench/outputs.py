"""Turn a set of ``pacer.report/1`` documents into JSON, CSV, Markdown, PNG plots and one HTML page."""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TABLE_COLUMNS = (
    "config", "query", "batches", "avg_ms", "p95_ms", "p99_ms", "max_ms", "proc_avg_ms",
    "rows_per_s", "deadline_miss", "gpu_ratio", "p99_vs_baseline", "throughput_vs_baseline", "proc_vs_baseline",
)


@dataclass(frozen=True)
class BenchRun:
    """One configuration of an experiment and the report it produced.

    :param label: short name shown in tables and legends (``"static 10s"``).
    :param report: its ``pacer.report/1`` document.
    :param baseline: True for the configuration the others of its group are compared with.
    :param group: runs compared with one baseline (e.g. one rate of a sweep); "" for the whole experiment.
    :param x: the swept value (e.g. the rate in KB/s); runs that have one are drawn in the sweep plots.
    :param series: the line a swept run belongs to in the sweep plots (e.g. its placement strategy).
    """

    label: str
    report: dict[str, Any]
    baseline: bool = False
    group: str = ""
    x: float | None = None
    series: str = ""


def _ratio(value: float, ref: float | None) -> float | None:
    return round(value / ref, 3) if ref else None


def _baseline_of(run: BenchRun, runs: Sequence[BenchRun]) -> BenchRun | None:
    """The baseline of ``run``'s group, else the experiment's first baseline, else the first run."""
    candidates = [r for r in runs if r.baseline and r.group == run.group] or [r for r in runs if r.baseline]
    candidates = candidates or list(runs)
    return candidates[0] if candidates else None


def table_rows(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """One row per configuration and query, with p99, throughput and average processing time as ratios to the
    baseline run of the configuration's group (measured in the same bench run)."""
    rows = []
    for run in runs:
        base = _baseline_of(run, runs)
        for query_id, q in run.report["queries"].items():
            ref = base.report["queries"].get(query_id) if base else None
            p99, thr, proc = q["latency_ms"]["p99"], q["throughput_rows_per_s"], q["processing_ms"]["avg"]
            rows.append(
                {
                    "config": run.label,
                    "query": query_id,
                    "batches": q["batches"],
                    "avg_ms": round(q["latency_ms"]["avg"], 1),
                    "p95_ms": round(q["latency_ms"]["p95"], 1),
                    "p99_ms": round(p99, 1),
                    "max_ms": round(q["latency_ms"]["max"], 1),
                    "proc_avg_ms": round(proc, 1),
                    "rows_per_s": round(thr, 1),
                    "deadline_miss": round(q["deadline_miss_ratio"], 3),
                    "gpu_ratio": round(q["gpu_operator_ratio"], 3),
                    "p99_vs_baseline": _ratio(p99, ref["latency_ms"]["p99"] if ref else None),
                    "throughput_vs_baseline": _ratio(thr, ref["throughput_rows_per_s"] if ref else None),
                    "proc_vs_baseline": _ratio(proc, ref["processing_ms"]["avg"] if ref else None),
                }
            )
    return rows


def markdown_table(rows: Sequence[dict[str, Any]]) -> str:
    """A GitHub-flavoured Markdown table of ``rows``."""
    lines = ["| " + " | ".join(TABLE_COLUMNS) + " |", "|" + "---|" * len(TABLE_COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join("" if row[c] is None else str(row[c]) for c in TABLE_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def _series(run: BenchRun, query_id: str, key: str) -> tuple[list[float], list[float]]:
    """The ``key`` column over time, over the intervals in which a batch completed (the others hold no value,
    and drawing them as zeros would turn every line into a saw)."""
    rows = [r for r in run.report["queries"][query_id]["series"] if r.get("batches", 1)]
    return [r["t"] for r in rows], [r.get(key, 0.0) for r in rows]


def _finish(fig: Any, ax: Any, xlabel: str, ylabel: str, title: str) -> Any:
    """Labels, grid, legend and layout shared by every plot."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _figure_over_time(runs: Sequence[BenchRun], key: str, ylabel: str, title: str, scale: float = 1.0) -> Any:
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        for query_id in run.report["queries"]:
            t, y = _series(run, query_id, key)
            label = run.label if len(run.report["queries"]) == 1 else f"{run.label} / {query_id}"
            ax.plot(t, [v * scale for v in y], label=label, linewidth=1.2, marker=".", markersize=3)
    return _finish(fig, ax, "time (s)", ylabel, title)


def _latency_cdf(runs: Sequence[BenchRun]) -> Any:
    fig, ax = plt.subplots(figsize=(8, 4))
    for run in runs:
        for query_id, q in run.report["queries"].items():
            values = q.get("latency_quantiles_ms") or []
            if values:
                label = run.label if len(run.report["queries"]) == 1 else f"{run.label} / {query_id}"
                ax.plot([v / 1000.0 for v in values], [i / 100.0 for i in range(len(values))], label=label)
    return _finish(fig, ax, "dataset latency (s)", "fraction of datasets", "Latency CDF")


def _figure_over_sweep(runs: Sequence[BenchRun], value: Any, ylabel: str, title: str) -> Any:
    """One line per ``series``: ``value(query summary)`` against the swept ``x`` (log scale, as dStream Fig. 11)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    lines: dict[str, list[tuple[float, float]]] = {}
    for run in runs:
        if run.x is None:
            continue
        for q in run.report["queries"].values():
            lines.setdefault(run.series or run.label, []).append((run.x, float(value(q))))
    for name, points in lines.items():
        points.sort()
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xscale("log")
    return _finish(fig, ax, "input rate (KB/s)", ylabel, title)


def figures(runs: Sequence[BenchRun]) -> dict[str, Any]:
    """The standard plots: latency CDF, max latency, batch size, batch interval and GPU ratio over time; for a
    sweep (runs with ``x``) also average processing time and GPU share against the swept value."""
    out = {
        "latency_cdf": _latency_cdf(runs),
        "max_latency": _figure_over_time(runs, "max_latency_ms", "max latency (s)", "Max latency per interval", 1e-3),
        "batch_size": _figure_over_time(runs, "batch_bytes", "batch size (KB)", "Micro-batch size", 1e-3),
        "batch_interval": _figure_over_time(runs, "batch_interval_s", "interval (s)", "Batch interval"),
        "gpu_ratio": _figure_over_time(runs, "gpu_operator_ratio", "GPU share of operators", "CPU/GPU mapping ratio"),
    }
    if any(r.x is not None for r in runs):
        out["sweep_processing"] = _figure_over_sweep(
            runs, lambda q: q["processing_ms"]["avg"], "avg processing time (ms)", "Processing time per batch by rate")
        out["sweep_gpu_ratio"] = _figure_over_sweep(
            runs, lambda q: q["gpu_operator_ratio"], "GPU share of operators", "CPU/GPU mapping ratio by rate")
    return out


def _page(title: str, summary: str, notes: Sequence[str], rows: Sequence[dict[str, Any]], images: dict[str, bytes]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in TABLE_COLUMNS)
    body = "".join(
        "<tr>" + "".join(f"<td>{'' if r[c] is None else html.escape(str(r[c]))}</td>" for c in TABLE_COLUMNS) + "</tr>"
        for r in rows
    )
    imgs = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>"
        for name, png in images.items()
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        + html.escape(title)
        + "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}img{max-width:100%}</style></head><body>"
        + f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>"
        + "".join(f"<p><em>{html.escape(n)}</em></p>" for n in notes)
        + f"<table><tr>{head}</tr>{body}</table>{imgs}"
        + "</body></html>"
    )


def write_outputs(out: str | Path, name: str, runs: Sequence[BenchRun], *, summary: str = "",
                  notes: Sequence[str] = ()) -> dict[str, Path]:
    """Write ``name``.json / .csv / .md, one PNG per plot and ``name``.html under ``out``.

    Ratios in the tables compare each run with the baseline of its group, measured in the same bench run.

    :return: the paths written, by kind.
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows = table_rows(runs)
    paths: dict[str, Path] = {}
    paths["json"] = folder / f"{name}.json"
    paths["json"].write_text(
        json.dumps({"experiment": name, "summary": summary, "notes": list(notes),
                    "runs": [{"label": r.label, "baseline": r.baseline, "group": r.group, "report": r.report}
                             for r in runs]}, indent=2, sort_keys=True)
    )
    paths["csv"] = folder / f"{name}.csv"
    with paths["csv"].open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=TABLE_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    table_md = markdown_table(rows)
    paths["md"] = folder / f"{name}.md"
    note_md = "".join(f"_{n}_\n\n" for n in notes)
    paths["md"].write_text(f"# {name}\n\n{summary}\n\n{note_md}{table_md}")
    images: dict[str, bytes] = {}
    for plot, fig in figures(runs).items():
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=90)
        plt.close(fig)
        images[plot] = buf.getvalue()
        paths[plot] = folder / f"{name}-{plot}.png"
        paths[plot].write_bytes(images[plot])
    paths["html"] = folder / f"{name}.html"
    paths["html"].write_text(_page(name, summary, notes, rows, images))
    return paths
