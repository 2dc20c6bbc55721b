"""The simulator as a runtime for the shared conformance suite (``pacer_conformance``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pacer.plugins import get_plugin_manager
from pacer_sim.engine import Simulation


class SimRuntime:
    """Runs a ``pacer_conformance.Scenario`` on :class:`Simulation`: deterministic, multi-query, modelled GPUs."""

    name = "sim"
    capabilities = frozenset({"deterministic", "multi-query", "gpu"})

    def run(self, scenario: Any, *, plugins: Sequence[object] = ()) -> Any:
        """Run ``scenario`` with the extra ``plugins`` registered; errors are returned, not raised."""
        from pacer_conformance import RunResult

        pm = get_plugin_manager()
        for plugin in plugins:
            pm.register(plugin)
        sim = None
        try:
            sim = Simulation(
                cores=scenario.cores, gpus=scenario.gpus, scheduler=scenario.scheduler, seed=scenario.seed,
                plugin_manager=pm, fallback=scenario.fallback,
            )
            for q in scenario.queries:
                sim.add_query(
                    q.workload, query_id=q.query_id, traffic=q.traffic, rate=q.rate, traffic_params=q.traffic_params,
                    admission=q.admission, admission_params=q.admission_params, placement=q.placement,
                    placement_params=q.placement_params, deadline=q.deadline, duration=scenario.duration,
                )
            report = sim.run(scenario.duration)
            return RunResult(report=report, controller=sim.controller)
        except Exception as exc:  # the suite inspects the error: it must name the failing strategy
            return RunResult(report=None, controller=sim.controller if sim else None, error=exc)
