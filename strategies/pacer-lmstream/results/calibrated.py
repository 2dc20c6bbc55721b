"""Simulated evidence for ``pacer calibrate`` + ``initial_rows``: LMStream's two misses of the rate sweep.

Every figure is *simulated* (``pacer_sim``), in the setup of ``strategies/pacer-dstream/results/reproduce.py``:
one dataset (one second of constant traffic) per micro-batch (``asap`` with ``max_datasets=1``), 2 cores,
2 partitions, 1 modelled GPU, seed 3, 60 s of traffic, the first 10 batches dropped, ``async_regression=False``.
For lr1 at 256 KB/s and cm2 at 1 MB/s it runs the calibration sweep (InfPT 37.5-600 KB), then LMStream on the
paper's letter (``inflection_profile=none``) without rows (InfPT stays 150 KB) and with them, and prints average processing time per batch as a ratio to
the better of cpu-only and gpu-only, and the InfPT in force at the end::

    python strategies/pacer-lmstream/results/calibrated.py

Claim: with the rows, processing time <= 1.05 x the better single device on both.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacer import get_plugin_manager
from pacer.plugins import PluginManager

#: (workload, rate in KB/s): the two rows of the rate sweep where LMStream misses the 1.05 bound.
MISSES = (("lr1", 256.0), ("cm2", 1000.0))
SEED = 3
DURATION = 60.0
WARM_UP = 10
ONE_DATASET = {"max_datasets": 1}
BOUND = 1.05


@dataclass(frozen=True)
class Outcome:
    """One workload and rate: baselines, LMStream before and after calibration (seconds, simulated)."""

    workload: str
    kbps: float
    cpu_s: float
    gpu_s: float
    before_s: float
    after_s: float
    inflection_after: float
    rows: Path

    @property
    def best_s(self) -> float:
        """The better single device."""
        return min(self.cpu_s, self.gpu_s)


def plugins() -> PluginManager:
    """Baselines and LMStream only (whatever else is installed stays out)."""
    return get_plugin_manager(allowed=["lmstream"])


def processing_after_warm_up(workload: str, kbps: float, placement: str,
                             params: dict[str, Any] | None = None) -> tuple[float, float | None]:
    """Mean processing time per batch after warm-up, and LMStream's InfPT at the end (None for baselines)."""
    from pacer_sim import Simulation
    from pacer_workloads import WORKLOADS, bytes_per_row

    sim = Simulation(cores=2, gpus=1, seed=SEED, plugin_manager=plugins(), monitor_interval=10.0)
    rate = kbps * 1e3 / bytes_per_row(WORKLOADS[workload].stream)
    qid = sim.add_query(workload, rate=rate, admission="asap", admission_params=ONE_DATASET, placement=placement,
                        placement_params=params or {}, duration=DURATION, partitions=2)
    sim.run(DURATION)
    after = sim.controller.reports(qid)[WARM_UP:]
    state = sim.controller.queries[qid].states.get("lmstream")
    return sum(r.processing_s for r in after) / len(after), (state.flush() if state is not None else None)


def evaluate(workload: str, kbps: float, folder: Path) -> Outcome:
    """Calibrate ``workload`` at ``kbps`` into ``folder``, then compare LMStream with and without the rows."""
    from pacer_lmstream.sweep import calibrate, sweep_points
    from pacer_workloads import WORKLOADS, bytes_per_row

    rate = kbps * 1e3 / bytes_per_row(WORKLOADS[workload].stream)
    rows, _ = calibrate(
        workload, rate, sweep_points(150_000.0), folder / f"{workload}-{kbps:g}KBps-rows.json", progress=False,
        admission="asap", admission_params=ONE_DATASET, duration=DURATION, warm_up=WARM_UP, seed=SEED,
        plugin_manager=plugins(),
    )
    lm = {"async_regression": False, "inflection_profile": "none"}  # the paper's 150 KB: the misses calibration fixes
    cpu, _ = processing_after_warm_up(workload, kbps, "cpu-only")
    gpu, _ = processing_after_warm_up(workload, kbps, "gpu-only")
    before, _ = processing_after_warm_up(workload, kbps, "lmstream", lm)
    after, inflection = processing_after_warm_up(workload, kbps, "lmstream", {**lm, "initial_rows": str(rows)})
    return Outcome(workload, kbps, cpu, gpu, before, after, inflection or 0.0, rows)


def main() -> int:
    """Print the README table."""
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = [evaluate(w, kb, Path(tmp)) for w, kb in MISSES]
    print("| workload | rate | cpu-only s | gpu-only s | before s (/ best) | after s (/ best) | InfPT after | ≤ 1.05x |")
    print("|---|---|---|---|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.workload} | {o.kbps:g} KB/s | {o.cpu_s:.3f} | {o.gpu_s:.3f} | {o.before_s:.3f} "
              f"({o.before_s / o.best_s:.3f}) | {o.after_s:.3f} ({o.after_s / o.best_s:.3f}) "
              f"| {o.inflection_after / 1e3:.1f} KB | {'yes' if o.after_s <= BOUND * o.best_s else '**no**'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
