"""Simulated evidence for LMStream's InfPT_0 on pacer-bench's placement grid: its default against the paper's 150 KB.

Every figure is *simulated* (``pacer_sim``). The cells are ``pacer bench device-sweep --grid``'s
(``pacer_bench.device_grid``): lr1, lr3, cm1, cm2 x constant, wave, random, binary traffic (random under each
seed: Poisson rows, drawn burst onsets) x 0.1-3x the workload's CPU capacity x seeds 7, 8, 9 x ``keep`` and
``shed``, 120 s of traffic, asap admission, 2 cores, the cells' cost profile (``pacer sim``'s default
``--gpu-profile``, as the grid runs it). One modelled GPU only: the grid's 2-GPU cells repeat its 1-GPU cells
figure for figure (one query runs one batch at a time, and a batch runs on one GPU; see the README). In every
cell LMStream runs three ways, each judged as the grid judges (per row processed against the better of cpu-only
and gpu-only; conditions sum their three seeds):

- ``default``: LMStream's parameters as they are (``inflection_profile=auto``: the profile the simulator runs on
  when a run names none, its built-in curves, which is not the cells' profile);
- ``cells' profile``: ``inflection_profile`` = the cells' profile (what ``pacer bench device-sweep --grid`` runs);
- ``paper (150 KB)``: ``inflection_profile=none``, the paper's fixed InfPT_0.

::

    python strategies/pacer-lmstream/results/placement_grid.py [--jobs 2] [--quick]

(~3 min on 2 cores; ``--quick``: seed 7 only.) Prints the README's table.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

#: The LMStream variants (name, placement parameters); ``None`` stands for the cells' own profile.
VARIANTS: tuple[tuple[str, dict[str, Any] | None], ...] = (
    ("default", {}),
    ("cells' profile", None),
    ("paper (150 KB)", {"inflection_profile": "none"}),
)
SEEDS = (7, 8, 9)
BASELINES = ("cpu-only", "gpu-only")


def _profile(gpus: int) -> str:
    """The profile the grid's cells run on: ``pacer sim``'s default, its built-in curves where that is not had."""
    from pacer_bench import device_grid as g
    from pacer_sim import BUILTIN_PROFILE

    return g.default_gpu_profile() if g.cost_model(gpus)[1] is None else BUILTIN_PROFILE


def run_cell(cell: Any) -> tuple[Any, dict[str, Any]]:
    """The baselines and every LMStream variant in ``cell``: placement or variant name -> the grid's Outcome."""
    from pacer import QueryRun, RunConfig
    from pacer.plugins import get_plugin_manager
    from pacer_bench import device_grid as g
    from pacer_sim import SIM_RUNTIME

    pm = get_plugin_manager()
    runs: list[tuple[str, str, dict[str, Any]]] = [(b, b, {}) for b in BASELINES]
    runs += [(name, "lmstream", {"inflection_profile": _profile(cell.gpus)} if params is None else params)
             for name, params in VARIANTS]
    out: dict[str, Any] = {}
    for name, placement, params in runs:
        query = QueryRun(cell.workload, traffic=cell.traffic, rate=cell.rate, admission=g.ADMISSION,
                         placement=placement, placement_params=params)
        config = RunConfig((query,), duration=g.DURATION, seed=cell.seed, cores=g.CORES, gpus=cell.gpus,
                           overload=cell.overload).with_options(SIM_RUNTIME.name, gpu_profile=g.default_gpu_profile())
        with g.quiet():
            report = SIM_RUNTIME.run(config, plugin_manager=pm).report
        q = next(iter(report["queries"].values()))
        out[name] = g.Outcome(name, float(q["cost"]["engine_s"]), int(q["rows_processed"]), int(q["rows_in"]),
                              float(q["deadline_miss_ratio"]), int(q["batches"]), int(q["datasets_shed"]),
                              float(q["gpu_operator_ratio"]), bool(report.get("drained", True)))
    return cell, out


def _judge(outcomes: dict[str, Any], variant: str) -> tuple[float, float]:
    """(× the better single device per row, miss points above it) of ``variant``."""
    best = min(BASELINES, key=lambda b: outcomes[b].per_row_us)
    return (outcomes[variant].per_row_us / outcomes[best].per_row_us,
            100.0 * (outcomes[variant].miss_ratio - outcomes[best].miss_ratio))


def _summed(runs: Sequence[Any]) -> Any:
    """A condition's runs of one placement as one: times, rows summed; misses weighted by rows in."""
    from pacer_bench import device_grid as g

    rows_in = sum(o.rows_in for o in runs)
    misses = sum(o.miss_ratio * o.rows_in for o in runs) / rows_in if rows_in else 0.0
    return g.Outcome(runs[0].placement, sum(o.engine_s for o in runs), sum(o.rows_processed for o in runs), rows_in,
                     misses, sum(o.batches for o in runs), sum(o.datasets_shed for o in runs),
                     sum(o.gpu_share for o in runs) / len(runs), all(o.drained for o in runs))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid's 1-GPU cells with every variant and print the table."""
    from pacer_bench import device_grid as g

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--quick", action="store_true", help="seed 7 only")
    args = parser.parse_args(argv)
    seeds = SEEDS[:1] if args.quick else SEEDS
    grid = g.cells(seeds=seeds, gpus=(1,))
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = list(pool.map(run_cell, grid, chunksize=4))
    conditions: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for cell, outcomes in done:
        conditions.setdefault((cell.workload, cell.traffic, cell.factor, cell.overload), []).append(outcomes)
    print(f"{len(done)} cells (1 GPU, seeds {', '.join(map(str, seeds))}), {len(conditions)} conditions; "
          f"bounds {g.BOUND}x per row and +{g.MISS_POINTS:g} miss points (simulated)\n")
    print("| LMStream InfPT_0 | conditions within both bounds | worst × per row | worst miss points "
          "| runs within both bounds |")
    print("|---|---|---|---|---|")
    outside: dict[str, list[str]] = {}
    for variant, _ in VARIANTS:
        per_run = [(_judge(o, variant), c) for c, o in done]
        per_condition = []
        for key, runs in conditions.items():
            summed = {name: _summed([r[name] for r in runs]) for name in runs[0]}
            per_condition.append((_judge(summed, variant), key))
        within = sum(x <= g.BOUND and m <= g.MISS_POINTS for (x, m), _ in per_condition)
        (wx, wxm), wxk = max(per_condition, key=lambda j: j[0])
        (wmx, wm), wmk = max(per_condition, key=lambda j: (j[0][1], j[0][0]))
        runs_within = sum(x <= g.BOUND and m <= g.MISS_POINTS for (x, m), _ in per_run)

        def where(key: tuple[Any, ...]) -> str:
            return f"{key[0]} {key[1]} {key[2]:g}× {key[3]}"

        print(f"| {variant} | {within} / {len(per_condition)} | {wx:.3f} ({where(wxk)}, {wxm:+.1f}) "
              f"| {wm:+.1f} ({where(wmk)}, {wmx:.3f}) | {runs_within} / {len(per_run)} |")
        outside[variant] = [f"{where(k)} ({x:.3f}, {m:+.1f})" for (x, m), k in per_condition
                            if not (x <= g.BOUND and m <= g.MISS_POINTS)]
    print()
    for variant, lines in outside.items():
        print(f"{variant}: outside: {'; '.join(lines) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
