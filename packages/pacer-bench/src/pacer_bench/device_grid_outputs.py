"""The outputs of ``pacer bench device-sweep --grid``: ``grid.csv`` (one row per cell and placement),
``conditions.csv`` (the same per condition, its repetitions summed), ``grid.md`` (the summary per condition and per
run, each strategy's worst conditions and cells with what every placement did there, then every cell) and
``meta.json``."""

from __future__ import annotations

import csv
import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pacer_bench.device_grid import BOUND, MISS_POINTS, PLACEMENTS, STRATEGIES, Judged, conditions, worst

CSV_COLUMNS = ("workload", "traffic", "rate_x_cpu", "rate_rows_s", "gpus", "seed", "overload", "placement",
               "engine_s", "rows_in", "rows_processed", "engine_us_per_row", "miss_pct", "batches", "datasets_shed",
               "gpu_share", "drained", "better_single", "x_best", "miss_points", "holds")
#: How many of each strategy's worst cells the Markdown shows in full.
WORST_SHOWN = 10


def _cells(judged: Sequence[Judged]) -> dict[str, list[Judged]]:
    by_cell: dict[str, list[Judged]] = {}
    for j in judged:
        by_cell.setdefault(j.cell.name, []).append(j)
    return by_cell


def write_csv(path: Path, judged: Sequence[Judged]) -> None:
    """One row per cell and placement (the strategies' rows carry their ratio to the better single device)."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for group in _cells(judged).values():
            c = group[0].cell
            mine = {j.strategy: j for j in group}
            for placement in PLACEMENTS:
                o = group[0].outcomes[placement]
                j = mine.get(placement)
                seed = ",".join(map(str, c.seeds)) if c.seeds else c.seed
                w.writerow([c.workload, c.traffic, f"{c.factor:g}", f"{c.rate:.1f}", c.gpus, seed, c.overload,
                            placement, f"{o.engine_s:.6f}", o.rows_in, o.rows_processed, f"{o.per_row_us:.4f}",
                            f"{100 * o.miss_ratio:.3f}", o.batches, o.datasets_shed, f"{o.gpu_share:.3f}",
                            int(o.drained), group[0].best, f"{j.x_best:.4f}" if j else "",
                            f"{j.miss_points:.3f}" if j else "", int(j.holds) if j else ""])


def _detail(j: Judged) -> list[str]:
    """What every placement did in ``j``'s cell: the worst cell's explanation."""
    lines = [f"**{j.cell.name}** ({j.cell.rate:,.0f} rows/s): {j.strategy} {j.x_best:.3f}× the better single device "
             f"({j.best}) per row, {j.miss_points:+.1f} points of misses",
             "", "| placement | engine µs/row | misses % | batches | datasets shed | rows processed | GPU share |",
             "|---|---|---|---|---|---|---|"]
    for p in PLACEMENTS:
        o = j.outcomes[p]
        lines.append(f"| {p} | {o.per_row_us:.2f} | {100 * o.miss_ratio:.1f} | {o.batches} | {o.datasets_shed} | "
                     f"{o.rows_processed:,} | {o.gpu_share:.2f} |")
    return [*lines, ""]


def _summary(judged: Sequence[Judged], unit: str) -> list[str]:
    """Per strategy: how many ``unit`` (cells or conditions) are within both bounds, and the worst per row and in
    misses."""
    out = [f"| strategy | {unit} | within both bounds | worst × best per row (where, its miss points) | "
           "worst miss points (where, its × best) |", "|---|---|---|---|---|"]
    for s in STRATEGIES:
        mine = [j for j in judged if j.strategy == s]
        if not mine:
            continue
        by_x, by_miss = worst(judged, s)
        out.append(f"| {s} | {len(mine)} | {sum(j.holds for j in mine)} | {by_x.x_best:.3f} ({by_x.cell.name}, "
                   f"{by_x.miss_points:+.1f}) | {by_miss.miss_points:+.1f} ({by_miss.cell.name}, {by_miss.x_best:.3f}) |")
    return [*out, ""]


def _worst_shown(judged: Sequence[Judged], unit: str) -> list[str]:
    out: list[str] = []
    for s in STRATEGIES:
        mine = sorted((j for j in judged if j.strategy == s), key=lambda j: j.severity, reverse=True)
        if mine:
            out += [f"## {s}: the {min(WORST_SHOWN, len(mine))} worst {unit}", ""]
            for j in mine[:WORST_SHOWN]:
                out += _detail(j)
    return out


def _gpu_axis(judged: Sequence[Judged]) -> list[str]:
    """Whether the grid's GPU counts gave different figures, and why they cannot where they did not."""
    by_gpus: dict[int, dict[tuple[Any, ...], tuple[float, float]]] = {}
    for j in judged:
        key = (j.cell.workload, j.cell.traffic, j.cell.factor, j.cell.seed, j.cell.overload, j.strategy)
        by_gpus.setdefault(j.cell.gpus, {})[key] = (j.x_best, j.miss_points)
    if len(by_gpus) < 2:
        return []
    axes = list(by_gpus.values())
    same = all(axis == axes[0] for axis in axes[1:])
    if not same:
        return [f"GPU counts {sorted(by_gpus)}: their figures differ (see every cell).", ""]
    return [f"GPU counts {sorted(by_gpus)}: every figure is the same on each. A cell runs one query, which has at "
            "most one batch in flight; the simulator runs each batch in its GPU phase at "
            "min(1, GPUs / batches in their GPU phase) of one GPU's speed, so a lone batch runs at one GPU's speed "
            "whatever the count, and the strategies see only whether a GPU is there. A second GPU matters only "
            "where batches of several queries share the GPU phase (the multi-query scenario).", ""]


def markdown(judged: Sequence[Judged], *, title: str, notes: Sequence[str] = ()) -> str:
    """The summary per condition (its repetitions summed, :func:`pacer_bench.device_grid.conditions`) and per run,
    the worst conditions and cells in full, and a table of every cell."""
    summed = conditions(judged)
    repetitions = max(len(j.cell.seeds) for j in summed) if summed else 0
    out = [f"# {title}", "", *[f"- {n}" for n in notes], ""]
    out += [f"Bounds: engine time per row processed ≤ {BOUND}× the better single device's (the one of cpu-only and "
            f"gpu-only with the lower engine time per row), misses ≤ its + {MISS_POINTS:g} point.", "",
            f"Per condition (workload × traffic × rate × GPUs × overload policy), its {repetitions} repetition(s) "
            "summed: engine time and rows processed summed, misses weighted by rows in.", ""]
    out += _gpu_axis(judged)
    out += _summary(summed, "conditions")
    out += ["Per run (each seed alone: under overload the batch boundaries, and so the cost per row, differ from "
            "seed to seed for every placement, the single devices included).", ""]
    out += _summary(judged, "cells")
    out += _worst_shown(summed, "conditions") + _worst_shown(judged, "cells")
    out += ["## Every cell", "", "| cell | better single | " + " | ".join(
        f"{s} × best | {s} miss pts" for s in STRATEGIES) + " |", "|---|---|" + "---|---|" * len(STRATEGIES)]
    for group in _cells(judged).values():
        of = {j.strategy: j for j in group}
        ratios = " | ".join(f"{of[s].x_best:.3f} | {of[s].miss_points:+.1f}" if s in of else " | "
                            for s in STRATEGIES)
        out.append(f"| {group[0].cell.name} | {group[0].best} | {ratios} |")
    return "\n".join(out) + "\n"


def write_grid(out: str | Path, judged: Sequence[Judged], *, meta: dict[str, Any], notes: Sequence[str] = ()) -> dict[str, Path]:
    """``grid.csv``, ``grid.md`` and ``meta.json`` under ``out``; returns their paths by kind."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"csv": folder / "grid.csv", "conditions": folder / "conditions.csv", "md": folder / "grid.md",
             "meta": folder / "meta.json"}
    write_csv(paths["csv"], judged)
    write_csv(paths["conditions"], conditions(judged))
    title = "device-sweep --grid: placement per row processed against the better single device (simulated, pacer-sim)"
    paths["md"].write_text(markdown(judged, title=title, notes=notes))
    meta = {**meta, "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "notes": list(notes)}
    paths["meta"].write_text(json.dumps(meta, indent=2) + "\n")
    return paths


def run_device_grid(out: str | Path, *, quick: bool = False, duration: float | None = None, seed: int = 7,
                    repeat: int = 1, gpus: int | None = None, jobs: int | None = None,
                    progress: bool = True) -> dict[str, Path]:
    """Run the whole grid (``repeat`` seeds from ``seed``; ``gpus`` None: 1 and 2) and write its outputs.

    :param quick: :data:`pacer_bench.device_grid.QUICK_DURATION` seconds of traffic per cell instead of
        :data:`pacer_bench.device_grid.DURATION` (``duration`` overrides both).
    """
    import sys
    import time

    from pacer_bench import device_grid as g

    seconds = duration if duration is not None else (g.QUICK_DURATION if quick else g.DURATION)
    grid = g.cells(seeds=[seed + i for i in range(repeat)], gpus=g.GPUS if gpus is None else (gpus,))
    workers = jobs if jobs is not None else g.default_jobs()
    notes = [f"{len(grid)} cells × {len(g.PLACEMENTS)} placements, {seconds:g} s of traffic each (then drained), "
             f"admission {g.ADMISSION} for every placement, {g.CORES} cores, deadline = the workload's window slide",
             "rates are multiples of the workload's CPU capacity (rows/s one-second batches keep up with all on the "
             "CPU): " + ", ".join(f"{w} {g.cpu_capacity(w, g.cost_model(1)[0]):,.0f}" for w in g.WORKLOADS)]
    notes.append("placements with their defaults, except " + ", ".join(
        f"{p} inflection_profile = the cells' cost profile" for p in g.PROFILED)
        + " (its InfPT_0 the query's crossover under that profile)")
    warning = g.cost_model(1)[1]
    if warning:
        notes.append(warning.split(" [remembered")[0])
    started = time.perf_counter()

    def show(done: int, total: int) -> None:
        if progress and (done == total or done % 20 == 0):
            print(f"\rdevice-sweep --grid: {done}/{total} cells", end="\n" if done == total else "",
                  file=sys.stderr, flush=True)

    judged = g.run_grid(grid, duration=seconds, jobs=workers, progress=show)
    notes.append(f"ran in {time.perf_counter() - started:.0f} s wall on {workers} process(es)")
    meta = {"scenario": "device-sweep", "grid": True, "runtime": "sim", "seed": seed, "repeat": repeat,
            "duration": seconds, "gpus": [gpus] if gpus is not None else list(g.GPUS), "jobs": workers,
            "workloads": list(g.WORKLOADS), "traffics": list(g.TRAFFICS), "rate_factors": list(g.RATE_FACTORS),
            "overloads": list(g.OVERLOADS), "placements": list(g.PLACEMENTS)}
    return write_grid(out, judged, meta=meta, notes=notes)
