"""Simulated effect of ``t_sched`` (and its ``reserve`` and ``cap``): three queries sharing 2 cores under bursts.

Every figure is *simulated* (``pacer_sim``). lr2, lr3 and cm2 with deadlines 5, 10 and 20 s on 2 cores, EDF
(non-preemptive, its default), the Controller's ``overload="keep"``. Three traffics:

- ``bench``: pacer-bench's ``multi-query`` scenario: binary bursts 200/3000 rows/s, period 30 s, 300 s, seed 7;
- ``held-out binary``: binary 300/2800 rows/s, period 40 s, mean 1500, 1200 s, seed 11;
- ``held-out random``: a Normal(1600, 800) rows/s draw per dataset, 1200 s, seed 11.

Per query the rows-weighted miss ratio (the report's ``deadline_miss_ratio``), and the queries' engine time
(``cost.engine_s``) summed, as a ratio to asap + EDF's (Spark's default trigger)::

    python strategies/pacer-zstream/results/t_sched.py            # the README's first table (~3 min)
    python strategies/pacer-zstream/results/t_sched.py schedulers # the second: FIFO, preemptive EDF, RDAS, FAIR
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

QUERIES = (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
TRAFFICS: dict[str, dict[str, Any]] = {
    "bench": {"traffic": "binary", "rate": 1600.0, "params": {"min": 200.0, "max": 3000.0, "period": 30.0},
              "duration": 300.0, "seed": 7},
    "held-out binary": {"traffic": "binary", "rate": 1500.0, "params": {"min": 300.0, "max": 2800.0, "period": 40.0},
                        "duration": 1200.0, "seed": 11},
    "held-out random": {"traffic": "random", "rate": 1600.0, "params": {"sd": 800.0}, "duration": 1200.0, "seed": 11},
}
VARIANTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("asap", "asap", {}),
    ('zstream t_sched="paper" (Eq. 3)', "zstream", {"t_sched": "paper"}),
    ('zstream t_sched="queue", no reserve, no cap', "zstream", {"reserve": False, "cap": False}),
    ('zstream t_sched="queue" + reserve', "zstream", {"cap": False}),
    ('zstream t_sched="queue" + cap', "zstream", {"reserve": False}),
    ('zstream t_sched="queue" + reserve + cap (default)', "zstream", {}),
)
SCHEDULERS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("fifo", "fifo", {}), ("edf preempt", "edf", {"preempt": True}), ("rdas", "rdas", {}), ("fair", "fair", {}),
)


def run(traffic: Mapping[str, Any], admission: str, params: Mapping[str, Any], scheduler: str = "edf",
        scheduler_params: Mapping[str, Any] | None = None) -> tuple[dict[str, float], float]:
    """One simulated run: (query -> miss ratio, summed engine seconds)."""
    from pacer_sim import Simulation

    sim = Simulation(cores=2, seed=int(traffic["seed"]), scheduler=scheduler,
                     scheduler_params=dict(scheduler_params or {}) or None)
    for workload, deadline in QUERIES:
        sim.add_query(workload, traffic=str(traffic["traffic"]), rate=float(traffic["rate"]),
                      traffic_params=dict(traffic["params"]), admission=admission, admission_params=dict(params),
                      deadline=deadline, duration=float(traffic["duration"]))
    report = sim.run(float(traffic["duration"]))
    queries = report["queries"]
    return ({q: float(queries[q]["deadline_miss_ratio"]) for q, _ in QUERIES},
            sum(float(queries[q]["cost"]["engine_s"]) for q, _ in QUERIES))


def _row(label: str, misses: Mapping[str, float], engine: float, base: float) -> str:
    cells = " | ".join(f"{100 * misses[q]:.2f} %" for q, _ in QUERIES)
    return f"| {label} | {cells} | {engine:.1f} | {engine / base:.2f} |"


def _header(first: str) -> None:
    print(f"| {first} | " + " | ".join(f"miss {q} ({d:g} s)" for q, d in QUERIES) + " | engine s | ÷ asap |")
    print("|---" * (len(QUERIES) + 3) + "|")


def main(argv: list[str]) -> int:
    """Print the README tables."""
    if argv[1:] == ["schedulers"]:
        traffic = TRAFFICS["bench"]
        _header("scheduler, admission (bench traffic)")
        for name, scheduler, sched_params in SCHEDULERS:
            base = None
            for label, admission, params in VARIANTS[:2] + VARIANTS[-1:]:
                misses, engine = run(traffic, admission, params, scheduler, sched_params)
                base = base or engine
                print(_row(f"{name}, {label}", misses, engine, base), flush=True)
        return 0
    for name, traffic in TRAFFICS.items():
        print(f"\n**{name}** (simulated, EDF)\n")
        _header("admission")
        base = None
        for label, admission, params in VARIANTS:
            misses, engine = run(traffic, admission, params)
            base = base or engine
            print(_row(label, misses, engine, base), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
