"""The suite must fail for a strategy that breaks its contract: it is not a test that cannot fail."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pacer import (
    AdmissionDecision,
    ClusterView,
    Controller,
    DatasetBuffer,
    LedgerViolation,
    QueryLoad,
    ScaleDecision,
    StrategyContext,
    StrategyError,
    StrategyInfo,
    hookimpl,
)
from pacer.clock import ManualClock
from pacer.scaler import ScalingError
from pacer_conformance import ScalingConformance, scaling
from pacer_conformance.harness import drive, steady_arrivals
from pacer_workloads import make_query


class NeverAdmits:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("never", frozenset({"admission"}))]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext, buffer: DatasetBuffer) -> AdmissionDecision | None:
        return AdmissionDecision.wait("starves") if ctx.chosen == "never" else None


class OverAdmits:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("greedy", frozenset({"admission"}))]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext, buffer: DatasetBuffer) -> AdmissionDecision | None:
        return AdmissionDecision(len(buffer) + 1) if ctx.chosen == "greedy" else None


def _controller(plugin: object, name: str) -> tuple[Controller, ManualClock]:
    from pacer import get_plugin_manager

    pm = get_plugin_manager(entry_points=False)
    pm.register(plugin)
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, plugin_manager=pm, timer=None, catch_up=False)  # judge the strategy alone
    c.add_query(make_query("lr2", query_id="q"), admission=name)
    return c, clock


def test_a_starving_strategy_fails_the_lossless_check() -> None:
    c, clock = _controller(NeverAdmits(), "never")
    drive(c, clock, {"q": steady_arrivals("q", start=0, end=5)}, until=50)
    with pytest.raises(LedgerViolation, match="5 datasets arrived but were never processed"):
        c.ledger.check_complete()


def test_an_over_admitting_strategy_is_named() -> None:
    c, clock = _controller(OverAdmits(), "greedy")
    with pytest.raises(StrategyError, match="admission strategy 'greedy'.*admits 2"):
        drive(c, clock, {"q": steady_arrivals("q", start=0, end=5)}, until=50)


class Flapping:
    """Wants 1 and 8 executors by turns."""

    def __init__(self) -> None:
        self.turns = 0

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("flapping", frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "flapping":
            return None
        self.turns += 1
        return ScaleDecision(1 if self.turns % 2 else 8)


class RaisesOnBacklog:
    """Fails once a query holds a backlog."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("fragile", frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "fragile":
            return None
        if any(q.backlog_bytes > 10_000_000 for q in queries):
            raise ZeroDivisionError("no room")
        return ScaleDecision(cluster.target)


def test_the_scaling_suite_fails_a_flapping_and_a_fragile_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    from pacer import plugins

    flapping, fragile = Flapping(), RaisesOnBacklog()
    real = plugins.get_plugin_manager

    def with_bad(*args: object, **kwargs: object) -> object:
        pm = real(*args, **kwargs)  # type: ignore[arg-type]
        pm.register(flapping)
        pm.register(fragile)
        return pm

    monkeypatch.setattr(scaling, "get_plugin_manager", with_bad)
    suite = ScalingConformance()
    with pytest.raises(AssertionError):
        suite.test_keeps_still_on_steady_traffic("flapping")
    with pytest.raises(ScalingError, match="scaling strategy 'fragile' failed: ZeroDivisionError"):
        suite.test_answers_on_any_load("fragile")
    suite.test_keeps_still_on_steady_traffic("fragile")  # steady traffic holds no backlog: it passes that one
