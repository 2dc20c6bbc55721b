"""Turn a set of ``pacer.report/1`` documents into JSON, CSV, Markdown, PNG plots and one HTML page.

Every page and Markdown file starts with the run settings (deadline, rate, duration, runtime, machine), so a
reader knows what the misses are counted against.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacer_bench.plots import CAPTIONS, figures
from pacer_bench.runtime_traits import FIDELITY_NOTE
from pacer_bench.tables import (
    LEGEND,
    SHORT_COLUMNS,
    BenchRun,
    cell,
    csv_columns,
    deadline_statement,
    markdown_table,
    repetition_statement,
    shown_columns,
    spread_cell,
    table_rows,
)

__all__ = ["BenchRun", "Section", "markdown_rows", "markdown_table", "run_settings", "table_rows", "write_outputs"]


@dataclass(frozen=True)
class Section:
    """A scenario's own table, written before the table of every configuration and query.

    :param headers: column -> (header text, digits); cells are rendered by :func:`pacer_bench.tables.spread_cell`.
    :param text: a paragraph before the table (e.g. the winner); ``legend`` one after it.
    """

    title: str
    rows: Sequence[dict[str, Any]]
    columns: Sequence[str]
    headers: Mapping[str, tuple[str, int]]
    text: str = ""
    legend: str = ""

    def markdown(self) -> str:
        """The section as Markdown: heading, text, table, legend."""
        text = f"{self.text}\n\n" if self.text else ""
        legend = f"\n_{self.legend}._\n" if self.legend else ""
        return f"## {self.title}\n\n{text}{markdown_rows(self.rows, self.columns, self.headers)}{legend}\n"

    def html(self) -> str:
        """The section as HTML: heading, text, scrolling table, legend."""
        text = f"<p>{html.escape(self.text)}</p>" if self.text else ""
        legend = f"<p class='legend'>{html.escape(self.legend)}.</p>" if self.legend else ""
        return (f"<h2>{html.escape(self.title)}</h2>{text}"
                f"{html_table(self.rows, self.columns, self.headers, spread_cell)}{legend}")


def markdown_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Mapping[str, tuple[str, int]],
                  render: Callable[[dict[str, Any], str, int], str] = spread_cell) -> str:
    """A GitHub-flavoured Markdown table: ``headers`` maps a column to (header text, digits)."""
    lines = ["| " + " | ".join(headers[c][0] for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(render(r, c, headers[c][1]) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _distinct(values: Sequence[str]) -> str:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return "; ".join(seen)


def _query_configs(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    queries = report.get("config", {}).get("queries")
    return [q for q in queries if isinstance(q, Mapping)] if isinstance(queries, list) else []


def _rate_text(report: Mapping[str, Any], query_id: str) -> str:
    """``lr2 2000 rows/s (constant)`` from the run's configuration, else the offered rate measured."""
    q = report["queries"][query_id]
    for cfg in _query_configs(report):
        if cfg.get("query_id") in (query_id, None) and cfg.get("workload") == q.get("workload") and "rate" in cfg:
            traffic = cfg.get("traffic") or "constant"
            return f"{query_id} {float(cfg['rate']):.0f} rows/s ({traffic})"
    rate = report.get("config", {}).get("rate")
    if rate is not None:
        return f"{query_id} {float(rate):g} rows/s"
    duration = float(report.get("duration_s") or 0.0)
    offered = q.get("rows_in", 0) / duration if duration > 0 else 0.0
    return f"{query_id} ≈{offered:.0f} rows/s offered"


def local_machine() -> str:
    """``Linux x86_64, 2 cores, Python 3.11.7``: this machine."""
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def run_settings(runs: Sequence[BenchRun], rows: Sequence[dict[str, Any]], *, machine: str | None = None
                 ) -> list[tuple[str, str]]:
    """What a reader needs to read the figures: deadline, rate, duration, runtime, machine (and repetitions)."""
    reports = [run.report for run in runs]
    config = [r.get("config", {}) for r in reports]
    durations = [f"{float(c.get('duration_s', c.get('duration', r.get('duration_s', 0.0)))):g} s of traffic"
                 for c, r in zip(config, reports, strict=True)]
    runtimes = []
    for r in reports:
        text = str(r.get("runtime", "?"))
        if text == "sim":
            gpus = r.get("config", {}).get("gpus", 0)
            text = f"sim (pacer-sim, {FIDELITY_NOTE}), {r.get('cores', '?')} cores, {gpus} GPU"
        elif "spark" in r:
            spark = r["spark"]
            text = (f"spark {spark.get('spark_version', '')} {spark.get('master', '')}, RAPIDS "
                    f"{'loaded' if spark.get('rapids_loaded') else 'not loaded'}")
        runtimes.append(text)
    settings = [
        ("deadline", deadline_statement(rows)),
        ("rate", _distinct([_rate_text(r, q) for r in reports for q in r["queries"]])),
        ("duration", _distinct(durations)),
        ("runtime", _distinct(runtimes)),
        ("machine", machine or _distinct([str(r["machine"]) for r in reports if "machine" in r]) or local_machine()),
    ]
    policies = _distinct([str(c["overload"]) for c in config if c.get("overload")])
    if policies:
        settings.append(("overload", f"{policies} (keep: every dataset processed and counted; shed: datasets that "
                                     "can no longer meet the deadline dropped and counted as missed)"))
    shed = sum(int(q.get("datasets_shed", 0)) for run in runs for r in run.reports for q in r["queries"].values())
    if shed:
        settings.append(("shed", f"{shed} datasets shed over all runs (counted as missed)"))
    reps = repetition_statement(runs)
    if reps:
        settings.append(("repetitions", reps))
    return settings


def settings_markdown(settings: Sequence[tuple[str, str]]) -> str:
    """The run settings as a Markdown list."""
    return "".join(f"- **{k}**: {v}\n" for k, v in settings) + "\n"


def html_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], headers: Mapping[str, tuple[str, int]],
               render: Callable[[dict[str, Any], str, int], str] = cell) -> str:
    """An HTML table inside a horizontally scrolling container, so a wide table never widens the page.

    :param headers: column -> (header text, digits); ``render(row, column, digits)`` writes a cell.
    """
    head = "".join(f"<th>{html.escape(headers[c][0])}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(render(r, c, headers[c][1]))}</td>" for c in columns) + "</tr>"
        for r in rows
    )
    return f"<div class='table-wrap'><table><tr>{head}</tr>{body}</table></div>"


STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1400px}"
    ".table-wrap{overflow-x:auto;max-width:100%}table{border-collapse:collapse;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right;white-space:nowrap}"
    "td:first-child,th:first-child{text-align:left}img{max-width:100%}figure{margin:1em 0}"
    "dl.settings{display:grid;grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:bold}dd{margin:0}"
    ".legend{font-size:13px;color:#444}"
)


def page(title: str, summary: str, settings: Sequence[tuple[str, str]], notes: Sequence[str],
         sections: Sequence[str], images: Sequence[tuple[str, bytes]]) -> str:
    """A self-contained HTML page: run settings, notes, the given HTML sections, then the captioned plots."""
    dl = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in settings)
    imgs = "".join(
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        for caption, png in images
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title><style>"
        + STYLE + "</style></head><body>"
        + f"<h1>{html.escape(title)}</h1><p>{html.escape(summary)}</p>"
        + f"<h2>Run settings</h2><dl class='settings'>{dl}</dl>"
        + "".join(f"<p><em>{html.escape(n)}</em></p>" for n in notes)
        + "".join(sections) + imgs + "</body></html>"
    )


def png_bytes(fig: Any) -> bytes:
    """Render a matplotlib figure as PNG and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> Path:
    """Rows as CSV with the given columns (missing cells empty)."""
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


def runs_json(runs: Sequence[BenchRun], report_json: Callable[[dict[str, Any]], dict[str, Any]] | None = None
              ) -> list[dict[str, Any]]:
    """The runs as plain JSON values: label, baseline, group, deadline, tags and every repetition's report (as
    ``report_json`` writes it, e.g. less its per-dataset lists; None: whole)."""
    keep = report_json or (lambda report: report)
    return [{"label": r.label, "baseline": r.baseline, "group": r.group, "deadline": r.deadline,
             "tags": dict(r.tags), "report": keep(r.report), "repeats": [keep(x) for x in r.repeats]} for r in runs]


def write_outputs(out: str | Path, name: str, runs: Sequence[BenchRun], *, summary: str = "",
                  notes: Sequence[str] = (), machine: str | None = None, sections: Sequence[Section] = (),
                  extra: Mapping[str, Any] | None = None, plots: Mapping[str, Any] | None = None,
                  report_json: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> dict[str, Path]:
    """Write ``name``.json / .csv / .md, one PNG per plot and ``name``.html under ``out``.

    Ratios in the tables compare each run with the baseline of its group, measured in the same bench run and
    judged against the same deadline. Plots that would say nothing (the GPU share when no operator ran on a
    GPU) are skipped, and the notes say why.

    :param machine: the machine the runs ran on, for the run settings (default: this machine).
    :param sections: a scenario's own tables, written before the table of every configuration and query (the
        README's results section ends after them, ``<!-- readme:end -->``).
    :param extra: more top-level keys of the JSON (a scenario's analysis).
    :param plots: a scenario's own figures (key -> matplotlib figure), written before the common ones.
    :param report_json: how each report is written to ``name``.json (:func:`runs_json`; None: whole).
    :return: the paths written, by kind (one per plot key, e.g. ``latency_cdf``).
    """
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    rows = table_rows(runs)
    settings = run_settings(runs, rows, machine=machine)
    common, skipped = figures(runs)
    plots = {**dict(plots or {}), **common}
    notes = [*notes, *skipped]
    paths: dict[str, Path] = {"json": folder / f"{name}.json"}
    paths["json"].write_text(json.dumps({"experiment": name, "summary": summary, "notes": notes,
                                         "settings": dict(settings), **dict(extra or {}),
                                         "runs": runs_json(runs, report_json)},
                                        indent=2, sort_keys=True))
    paths["csv"] = write_csv(folder / f"{name}.csv", rows, csv_columns(rows))
    paths["md"] = folder / f"{name}.md"
    note_md = "".join(f"_{n}_\n\n" for n in notes)
    own = "".join(s.markdown() for s in sections)
    if sections:
        own += "<!-- readme:end -->\n\n## Every configuration and query\n\n"
    paths["md"].write_text(f"# {name}\n\n{summary}\n\n{settings_markdown(settings)}{note_md}{own}"
                           f"{markdown_table(rows)}\n_{LEGEND}._\n")
    images: list[tuple[str, bytes]] = []
    for plot, fig in plots.items():
        png = png_bytes(fig)
        images.append((CAPTIONS.get(plot, plot.replace("_", " ")), png))
        paths[plot] = folder / f"{name}-{plot}.png"
        paths[plot].write_bytes(png)
    table = html_table(rows, shown_columns(rows), SHORT_COLUMNS)
    title = "Every configuration and query" if sections else "Results"
    html_sections = [*(s.html() for s in sections),
                     f"<h2>{title}</h2>{table}<p class='legend'>{html.escape(LEGEND)}.</p>"]
    paths["html"] = folder / f"{name}.html"
    paths["html"].write_text(page(name, summary, settings, notes, html_sections, images))
    return paths
