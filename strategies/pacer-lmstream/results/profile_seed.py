"""Simulated evidence for which cost profile LMStream's ``inflection_profile=auto`` seeds InfPT_0 from.

Every figure is *simulated* (``pacer_sim``). It prints each workload's crossover (bytes per partition where its
GPU-capable operators on the GPU cost what all on the CPU costs) under pacer-sim's built-in curves and under
``pacer_sim.DEFAULT_GPU_PROFILE``, then runs dStream's rate sweep (``strategies/pacer-dstream/results/reproduce.py``:
64 KB/s to 16 MB/s, one dataset per batch, 2 cores, 2 partitions, 1 modelled GPU, seed 3, 60 s, 10 warm-up
batches dropped) on each of the two cost models with LMStream's InfPT_0 from each profile and from the paper's
150 KB, and lists the rows over 1.05x the better single device::

    python strategies/pacer-lmstream/results/profile_seed.py

(~25 s.) The default profile needs NVIDIA's tools jar (as ``pacer sim --gpu-profile`` does); without it the
script says so and keeps to the built-in curves.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

SWEEP = Path(__file__).resolve().parents[2] / "pacer-dstream" / "results" / "reproduce.py"


def _sweep_module() -> Any:
    spec = importlib.util.spec_from_file_location("pacer_lmstream_profile_seed_sweep", SWEEP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main() -> int:
    """Print the crossovers and the sweep's rows over the bound, per cost model and seed."""
    import pacer_sim
    from pacer_lmstream.profile import crossover_bytes, profile_cost_model
    from pacer_workloads import make_query

    if not SWEEP.exists():
        print(f"the sweep script {SWEEP} is not in this checkout", file=sys.stderr)
        return 1
    profiles = [pacer_sim.BUILTIN_PROFILE]
    try:
        profile_cost_model(pacer_sim.DEFAULT_GPU_PROFILE)
        profiles.append(pacer_sim.DEFAULT_GPU_PROFILE)
    except ValueError as exc:
        print(f"{pacer_sim.DEFAULT_GPU_PROFILE} not had ({exc}); the built-in curves only", file=sys.stderr)
    sweep = _sweep_module()
    print("crossover, KB per partition (2 partitions):")
    for profile in profiles:
        model = profile_cost_model(profile)
        found = {w: crossover_bytes(model, make_query(w, query_id=w, partitions=2)) / 1e3 for w in sweep.WORKLOADS}
        print(f"  {profile}: " + ", ".join(f"{w} {kb:,.0f}" for w, kb in found.items()))
    simulation = pacer_sim.Simulation
    print("\nrate sweep rows over 1.05x the better single device:")
    for runs_on in profiles:
        model = replace(profile_cost_model(runs_on), noise=pacer_sim.CostModel().noise)
        # the sweep imports Simulation from pacer_sim when it runs, and gives it no cost model
        pacer_sim.Simulation = functools.partial(simulation, cost_model=model)
        try:
            for seed in (*profiles, "none"):
                sweep.STRATEGY_PARAMS["lmstream"] = {"async_regression": False, "inflection_profile": seed}
                points = sweep.sweep(write=False, strategies=("lmstream",))
                over = [f for f in sweep.failures(points, "lmstream") if "GPU share" not in f]
                print(f"  runs on {runs_on}, InfPT_0 from {seed}: {'; '.join(over) or 'none'}")
        finally:
            pacer_sim.Simulation = simulation
    return 0


if __name__ == "__main__":
    sys.exit(main())
