"""Simulated events per second, as a ratio against the asap/cpu-only baseline in the same run."""

from __future__ import annotations

from typing import Any

import pytest

from pacer_sim import Simulation


def _run(admission: str, params: dict[str, Any]) -> int:
    sim = Simulation(cores=2, seed=7)
    sim.add_query("lr2", rate=2000, admission=admission, admission_params=params, duration=300)
    sim.add_query("cm2", rate=1000, admission=admission, admission_params=params, duration=300)
    sim.run(300)
    return sim.events


@pytest.mark.parametrize(("admission", "params"), [("asap", {}), ("static", {"interval": 5.0})])
def test_sim_events_per_second(benchmark: Any, admission: str, params: dict[str, Any]) -> None:
    events = benchmark.pedantic(_run, args=(admission, params), rounds=3, iterations=1)
    benchmark.extra_info["events"] = events
    benchmark.extra_info["events_per_s"] = events / benchmark.stats.stats.mean
