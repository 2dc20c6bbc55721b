"""Simulated effect of ``service_admission``: LMStream admission on LR2 at 2000 rows/s, 10 s deadline.

Every figure is *simulated* (``pacer_sim``): 2 cores, no GPU, cpu-only placement, 300 s of constant traffic,
seeds 3, 7 and 11. ``service_admission=False`` is Eq. 6 as printed (bytes / AvgThPut); ``True`` (the default)
takes the processing term from the Controller's service-time model (``ctx.service.predict``: fixed +
per-byte, with its safety margin)::

    python strategies/pacer-lmstream/results/service_admission.py
"""

from __future__ import annotations

import sys

from pacer import get_plugin_manager

SEEDS = (3, 7, 11)


def miss_ratio(service_admission: bool, seed: int) -> tuple[float, float]:
    """(deadline miss ratio, p99 latency in s) of one simulated run."""
    from pacer_sim import Simulation

    sim = Simulation(cores=2, gpus=0, seed=seed, plugin_manager=get_plugin_manager(allowed=["lmstream"]))
    qid = sim.add_query("lr2", rate=2000.0, admission="lmstream", admission_params={"service_admission": service_admission},
                        placement="cpu-only", deadline=10.0, duration=300.0)
    query = sim.run(300.0)["queries"][qid]
    return float(query["deadline_miss_ratio"]), float(query["latency_ms"]["p99"]) / 1e3


def main() -> int:
    """Print the README table."""
    print("| processing term | " + " | ".join(f"seed {s}: miss ratio, p99 s" for s in SEEDS) + " | mean miss ratio |")
    print("|---|" + "---|" * (len(SEEDS) + 1))
    for service in (False, True):
        runs = [miss_ratio(service, s) for s in SEEDS]
        label = "ctx.service.predict (default)" if service else "bytes / AvgThPut (Eq. 6 as printed)"
        cells = " | ".join(f"{m:.3f}, {p:.2f}" for m, p in runs)
        print(f"| {label} | {cells} | {sum(m for m, _ in runs) / len(runs):.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
