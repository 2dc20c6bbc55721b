"""Simulated events per second (``sim.run`` only; building the Simulation and loading plugins is excluded).

Run with ``pytest packages/pacer-sim/benchmarks``; ``extra_info.events_per_s`` is the figure.
"""

from __future__ import annotations

from typing import Any

import pytest

from pacer_sim import Simulation

DURATION = 300.0


def _build(admission: str, params: dict[str, Any]) -> tuple[tuple[Simulation], dict[str, Any]]:
    sim = Simulation(cores=2, seed=7)
    sim.add_query("lr2", rate=2000, admission=admission, admission_params=params, duration=DURATION)
    sim.add_query("cm2", rate=1000, admission=admission, admission_params=params, duration=DURATION)
    return (sim,), {}


@pytest.mark.parametrize(("admission", "params"), [("asap", {}), ("static", {"interval": 5.0})])
def test_sim_events_per_second(benchmark: Any, admission: str, params: dict[str, Any]) -> None:
    sims: list[Simulation] = []

    def setup() -> tuple[tuple[Simulation], dict[str, Any]]:
        args, kwargs = _build(admission, params)
        sims.append(args[0])
        return args, kwargs

    report = benchmark.pedantic(lambda sim: sim.run(DURATION), setup=setup, rounds=5, iterations=1)
    events = sims[-1].events
    assert all(q["datasets_in"] == q["datasets_processed"] for q in report["queries"].values())
    benchmark.extra_info["events"] = events
    benchmark.extra_info["events_per_s"] = events / benchmark.stats.stats.mean
