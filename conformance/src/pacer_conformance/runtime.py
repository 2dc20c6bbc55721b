"""What a runtime must offer to run the end-to-end conformance suite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pacer import Controller


@dataclass(frozen=True)
class ScenarioQuery:
    """One query of a scenario: workload, traffic and the strategies deciding for it."""

    workload: str
    query_id: str
    traffic: str = "constant"
    rate: float = 1000.0
    traffic_params: Mapping[str, float] = field(default_factory=dict)
    admission: str = "asap"
    admission_params: Mapping[str, Any] = field(default_factory=dict)
    placement: str = "cpu-only"
    placement_params: Mapping[str, Any] = field(default_factory=dict)
    deadline: float | None = None


@dataclass(frozen=True)
class Scenario:
    """A run: queries, scheduler, duration (seconds of traffic), seed and resources."""

    queries: tuple[ScenarioQuery, ...]
    scheduler: str = "fifo"
    duration: float = 30.0
    seed: int = 7
    cores: int = 2
    gpus: int = 0
    fallback: bool = False


@dataclass
class RunResult:
    """The outcome of a scenario: its ``pacer.report/1`` document and the Controller that ran it.

    ``error`` holds the exception that stopped the run, if any (the suite checks
    that it names the failing strategy).
    """

    report: dict[str, Any] | None
    controller: Controller | None
    error: BaseException | None = None


@runtime_checkable
class ConformanceRuntime(Protocol):
    """A runtime under test.

    ``capabilities`` declares optional features; a test needing one that is not
    declared is skipped with that reason: ``deterministic`` (same seed, same
    report bytes), ``multi-query``, ``gpu`` (real or modelled GPU devices).
    """

    name: str
    capabilities: frozenset[str]

    def run(self, scenario: Scenario, *, plugins: Sequence[object] = ()) -> RunResult:
        """Run ``scenario`` to completion (draining buffered data), with extra plugin objects registered."""
        ...
