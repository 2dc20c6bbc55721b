"""Simulated events per second (``Simulation.run`` only; building it and loading plugins are excluded).

The ratio printed at the end is seconds per event against the ``asap`` run; ``extra_info.events_per_s``
is the absolute figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from pacer_sim import Simulation

DURATION = 300.0
ADMISSIONS = (("asap", {}), ("static", {"interval": 5.0}), ("fixed-point", {}), ("zstream", {}))


@pytest.mark.parametrize(("admission", "params"), ADMISSIONS, ids=[a for a, _ in ADMISSIONS])
def test_sim_events_per_second(ratio_bench: Any, admission: str, params: dict[str, Any]) -> None:
    sims: list[Simulation] = []

    def setup() -> tuple[tuple[Simulation], dict[str, Any]]:
        sim = Simulation(cores=2, seed=7)
        sim.add_query("lr2", rate=2000, admission=admission, admission_params=params, duration=DURATION)
        sim.add_query("cm2", rate=1000, admission=admission, admission_params=params, duration=DURATION)
        sims.append(sim)
        return (sim,), {}

    bench = ratio_bench("simulator", baseline=admission == "asap", per=lambda: sims[-1].events)
    report = bench.pedantic(lambda sim: sim.run(DURATION), setup=setup, rounds=5, iterations=1)
    assert all(q["datasets_in"] == q["datasets_processed"] for q in report["queries"].values())
    bench.extra_info["events"] = sims[-1].events
    bench.extra_info["events_per_s"] = sims[-1].events / bench.stats.stats.mean
