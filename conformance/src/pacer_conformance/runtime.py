"""How the end-to-end suite runs a configuration on a runtime, and what it gets back.

A runtime is any :class:`pacer.Runtime` (found through the ``pacer_runtimes`` hook); a scenario is
a :class:`pacer.RunConfig`. :func:`run_scenario` runs one with extra plugin objects registered and
returns a :class:`RunResult` holding the error instead of raising it, so a test can check that the
error names the failing strategy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pacer import Controller, QueryRun, RunConfig, Runtime, get_plugin_manager


def scenario(*queries: QueryRun, duration: float = 30.0, **settings: Any) -> RunConfig:
    """A conformance scenario: ``queries`` for ``duration`` seconds of traffic on 2 cores and no GPU unless
    ``settings`` (any :class:`pacer.RunConfig` field) say otherwise."""
    return RunConfig(tuple(queries), duration=duration, **{"cores": 2, "gpus": 0, **settings})


@dataclass
class RunResult:
    """The outcome of a scenario: its ``pacer.report/1`` document and the Controller that ran it.

    ``error`` holds the exception that stopped the run, or a :class:`RuntimeError` with the runtime's
    notes when it reported a failure (a query failed, the backlog did not drain).
    """

    report: dict[str, Any] | None
    controller: Controller | None
    error: BaseException | None = None


def run_scenario(runtime: Runtime, config: RunConfig, *, plugins: Sequence[object] = ()) -> RunResult:
    """Run ``config`` on ``runtime`` with every installed plugin and ``plugins`` registered; errors are returned."""
    pm = get_plugin_manager()
    for plugin in plugins:
        pm.register(plugin)
    try:
        result = runtime.run(config, plugin_manager=pm)
    except Exception as exc:  # the suite inspects the error: it must name the failing strategy
        return RunResult(report=None, controller=None, error=exc)
    if result.status:
        return RunResult(report=None, controller=result.controller,
                         error=RuntimeError("; ".join(result.notes) or f"runtime {runtime.name!r} failed"))
    return RunResult(report=result.report, controller=result.controller)
