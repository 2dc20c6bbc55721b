"""``pacer bench latency-target --grid``: does any pacer strategy run away? zStream against Spark's default trigger
(``asap``) on every workload and traffic pattern at rates up to 90 % of what the CPU keeps up with, simulated.

A strategy that waits to form larger batches trades latency for fewer batches; where its service-time model is
wrong (a cost that grows faster than the rows, a split of fixed and per-byte cost that follows noise) or a burst
comes while it waits, the backlog can grow with every batch. The grid judges each cell by the rows late:
zStream's may exceed the default trigger's by at most :data:`MISS_POINTS` points. Rates are multiples of
:func:`pacer_bench.device_grid.cpu_capacity` (what one-second batches keep up with on the CPU), the mean rate of
bursty traffic included: its bursts go above it.

Writes ``grid.csv`` (one row per cell and strategy), ``grid.md`` (per condition, the seeds' spread, then the cells
that fail), ``readme-section.md`` (the summary and the cells that fail, for the docs' results page) and
``meta.json``.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import io
import json
import logging
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pacer_bench.device_grid import cost_model, cpu_capacity, default_jobs

WORKLOADS = ("lr1", "lr1t", "lr2", "lr3", "cm1", "cm2")
#: Every traffic pattern but ``trace`` (a user's file).
TRAFFICS = ("constant", "random", "sinusoidal", "wave", "binary", "spike", "increasing", "decreasing")
RATE_FACTORS = (0.3, 0.6, 0.9)
STRATEGIES = ("asap", "zstream")
DEADLINE_S = 10.0
#: Points of rows late zStream may add to the default trigger's in a cell.
MISS_POINTS = 1.0
CORES = 2
CSV_COLUMNS = ("workload", "traffic", "rate_x_cpu", "rate_rows_s", "seed", "admission", "miss_pct", "busy_core_s",
               "batches", "holds")


@dataclass(frozen=True)
class Cell:
    """One run of the grid: a workload under a traffic pattern at ``factor`` × its CPU capacity (``rate`` rows/s)."""

    workload: str
    traffic: str
    factor: float
    rate: float
    seed: int

    @property
    def condition(self) -> tuple[str, str, float]:
        """The cell without its seed."""
        return self.workload, self.traffic, self.factor


@dataclass(frozen=True)
class Outcome:
    """What one admission strategy did in a cell."""

    miss_ratio: float
    busy_core_s: float
    batches: int


def cells(*, seeds: Sequence[int], workloads: Sequence[str] = WORKLOADS, traffics: Sequence[str] = TRAFFICS,
          factors: Sequence[float] = RATE_FACTORS) -> list[Cell]:
    """Every cell, rates from each workload's CPU capacity."""
    model, _ = cost_model(0)
    capacity = {w: cpu_capacity(w, model, CORES) for w in workloads}
    return [Cell(w, t, f, round(f * capacity[w], 1), s) for w in workloads for t in traffics for f in factors
            for s in seeds]


def run_cell(cell: Cell, duration: float) -> dict[str, Outcome]:
    """Every strategy of :data:`STRATEGIES` in ``cell`` (simulated, in this process; overload kept, so every row is
    processed and counted)."""
    from pacer import QueryRun, RunConfig
    from pacer.plugins import get_plugin_manager
    from pacer_sim import SIM_RUNTIME

    pm = get_plugin_manager()
    out: dict[str, Outcome] = {}
    for admission in STRATEGIES:
        query = QueryRun(cell.workload, traffic=cell.traffic, rate=cell.rate, admission=admission,
                         deadline=DEADLINE_S)
        config = RunConfig((query,), duration=duration, seed=cell.seed, cores=CORES, gpus=0, overload="keep")
        logger = logging.getLogger("pacer")
        level = logger.level
        logger.setLevel(logging.ERROR)  # a grid of runs would drown in their overload warnings
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                report = SIM_RUNTIME.run(config, plugin_manager=pm).report
        finally:
            logger.setLevel(level)
        q = next(iter(report["queries"].values()))
        out[admission] = Outcome(float(q["deadline_miss_ratio"]), float(q["cost"]["busy_core_s"] or 0.0),
                                 int(q["batches"]))
    return out


def holds(outcomes: dict[str, Outcome]) -> bool:
    """zStream's rows late are within :data:`MISS_POINTS` of the default trigger's."""
    return 100.0 * (outcomes["zstream"].miss_ratio - outcomes["asap"].miss_ratio) <= MISS_POINTS + 1e-9


def _run_one(work: tuple[Cell, float]) -> tuple[Cell, dict[str, Outcome]]:
    return work[0], run_cell(*work)


def run_grid(grid: Sequence[Cell], *, duration: float, jobs: int = 1) -> list[tuple[Cell, dict[str, Outcome]]]:
    """Run every cell (``jobs`` processes; 1: in this process)."""
    work = [(c, duration) for c in grid]
    if jobs <= 1:
        return [_run_one(w) for w in work]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_one, work, chunksize=4))


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    return f"{ordered[len(ordered) // 2]:.2f} [{ordered[0]:.2f}–{ordered[-1]:.2f}]" if len(ordered) > 1 \
        else f"{ordered[0]:.2f}"


def write_grid(out: str | Path, results: Sequence[tuple[Cell, dict[str, Outcome]]], *,
               meta: dict[str, object]) -> dict[str, Path]:
    """``grid.csv``, ``grid.md``, ``readme-section.md`` and ``meta.json`` in ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"csv": folder / "grid.csv", "md": folder / "grid.md", "meta": folder / "meta.json"}
    with paths["csv"].open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for cell, outcomes in results:
            for admission, o in outcomes.items():
                w.writerow([cell.workload, cell.traffic, f"{cell.factor:g}", f"{cell.rate:.1f}", cell.seed, admission,
                            f"{100 * o.miss_ratio:.3f}", f"{o.busy_core_s:.3f}", o.batches, int(holds(outcomes))])
    failed = [(c, o) for c, o in results if not holds(o)]
    conditions: dict[tuple[str, str, float], list[dict[str, Outcome]]] = {}
    for cell, outcomes in results:
        conditions.setdefault(cell.condition, []).append(outcomes)
    seeds = sorted({c.seed for c, _ in results})
    lines = [
        "# Does a pacer strategy run away? zStream against Spark's default trigger (simulated)",
        "",
        f"Every workload and traffic pattern at {', '.join(f'{f:g}' for f in sorted({c.factor for c, _ in results}))}"
        f" × the CPU's capacity, deadline {DEADLINE_S:g} s, {CORES} cores, overload kept, seeds "
        f"{', '.join(map(str, seeds))}, {meta.get('duration')} s each. A cell holds when zStream's rows late exceed "
        f"the default trigger's (`asap`) by at most {MISS_POINTS:g} point.",
        "",
        f"**{len(results) - len(failed)} of {len(results)} cells hold.**",
        "",
        "| workload | traffic | × capacity | asap: rows late % | zstream: rows late % | zstream ÷ asap busy core-s "
        "| cells holding |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (workload, traffic, factor), runs in conditions.items():
        ratio = [o["zstream"].busy_core_s / o["asap"].busy_core_s for o in runs if o["asap"].busy_core_s > 0]
        lines.append(f"| {workload} | {traffic} | {factor:g} | {_spread([100 * o['asap'].miss_ratio for o in runs])} | "
                     f"{_spread([100 * o['zstream'].miss_ratio for o in runs])} | "
                     f"{_spread(ratio) if ratio else '–'} | {sum(holds(o) for o in runs)}/{len(runs)} |")
    lines += ["", "## Cells that fail", ""]
    lines += [f"- {c.workload} {c.traffic} {c.factor:g}× ({c.rate:,.0f} rows/s) seed {c.seed}: zstream "
              f"{100 * o['zstream'].miss_ratio:.1f} % late against asap's {100 * o['asap'].miss_ratio:.1f} %"
              for c, o in failed] or ["None."]
    paths["md"].write_text("\n".join(lines) + "\n")
    # the docs' results page shows a grid by its section: the summary and the cells that fail, not every condition
    table = lines.index("## Cells that fail")
    summary = [line for line in lines[:table] if not line.startswith("|")]
    paths["section"] = folder / "readme-section.md"
    paths["section"].write_text("\n".join(["# latency-target --grid: does a strategy run away? (simulated)",
                                           *summary[1:], *lines[table:]]).rstrip() + "\n")
    paths["meta"].write_text(json.dumps({"scenario": "latency-target", "grid": True, **meta, "cells": len(results),
                                         "holding": len(results) - len(failed)}, indent=2) + "\n")
    return paths


def run_runaway_grid(out: str | Path, *, quick: bool = False, duration: float | None = None, seed: int = 7,
                     repeat: int = 1, gpus: int | None = None, jobs: int | None = None) -> dict[str, Path]:
    """The whole grid (``--quick``: lr1 and lr3 under random and spike traffic at 0.9×, 120 s) over seeds
    ``seed`` … ``seed + repeat - 1``; ``gpus`` is not used (the grid is the CPU's)."""
    seeds = [seed + i for i in range(repeat)]
    if quick:
        grid = cells(seeds=seeds, workloads=("lr1", "lr3"), traffics=("random", "spike"), factors=(0.9,))
    else:
        grid = cells(seeds=seeds)
    run_s = duration if duration is not None else (120.0 if quick else 600.0)
    results = run_grid(grid, duration=run_s, jobs=jobs if jobs is not None else default_jobs())
    meta = {"runtime": "sim", "duration": run_s, "seeds": seeds, "deadline_s": DEADLINE_S, "cores": CORES,
            "date": _dt.date.today().isoformat()}
    return write_grid(out, results, meta=meta)
