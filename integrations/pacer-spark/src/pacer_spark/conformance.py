"""Real Spark as a runtime for the shared conformance suite (``pacer_conformance``)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from pacer.plugins import get_plugin_manager


class SparkRuntime:
    """Runs a ``pacer_conformance.Scenario`` on a local SparkSession with the pacer-gen source.

    Wall-clock Spark is not deterministic, and GPUs are absent without RAPIDS: it declares
    ``multi-query`` only. ``time_scale`` shortens scenarios (a 30 s scenario runs ``30 * time_scale`` s).
    """

    name = "spark"
    capabilities = frozenset({"multi-query"})

    def __init__(self, spark: Any, *, time_scale: float = 1.0, drain_timeout: float = 90.0) -> None:
        self.spark = spark
        self.time_scale = time_scale
        self.drain_timeout = drain_timeout

    def run(self, scenario: Any, *, plugins: Sequence[object] = ()) -> Any:
        """Run ``scenario`` to completion; errors are returned in the result, not raised."""
        from pacer_conformance import RunResult
        from pacer_spark.runtime import attach

        pm = get_plugin_manager()
        for plugin in plugins:
            pm.register(plugin)
        root = tempfile.mkdtemp(prefix="pacer-conformance-")
        session = None
        duration = max(2.0, scenario.duration * self.time_scale)
        try:
            session = attach(self.spark, scheduler=scenario.scheduler, fallback=scenario.fallback, plugin_manager=pm,
                             cores=scenario.cores, gpus=scenario.gpus, checkpoint_root=root)
            for q in scenario.queries:
                session.run_workload(
                    q.workload, query_id=q.query_id, traffic=q.traffic, rate=q.rate,
                    traffic_params=dict(q.traffic_params), duration=duration, seed=scenario.seed,
                    deadline=q.deadline, admission=q.admission, admission_params=dict(q.admission_params),
                    placement=q.placement, placement_params=dict(q.placement_params),
                )
            session.await_drained(duration + self.drain_timeout)
            end = time.time()
            errors = session.errors()
            session.stop()
            if errors:
                query_id, message = next(iter(errors.items()))
                return RunResult(report=None, controller=session.controller,
                                 error=RuntimeError(f"query {query_id} failed: {message}"))
            return RunResult(report=session.report({"scenario": repr(scenario)}, end=end),
                             controller=session.controller)
        except Exception as exc:
            return RunResult(report=None, controller=session.controller if session else None, error=exc)
        finally:
            if session is not None:
                session.stop()
            shutil.rmtree(root, ignore_errors=True)
