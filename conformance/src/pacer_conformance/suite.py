"""End-to-end invariants every runtime upholds with every installed strategy."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from pacer import AdmissionDecision, StrategyContext, StrategyInfo, get_plugin_manager, hookimpl
from pacer_conformance.runtime import ConformanceRuntime, RunResult, Scenario, ScenarioQuery

#: Strategy mixes run end to end: (admission, scheduling, placement), one strategy per decision.
MIXES = (
    pytest.param(("zstream", "fifo", "dstream"), id="zstream-admission+dstream-placement"),
    pytest.param(("fixed-point", "edf", "cpu-only"), id="fixed-point-admission+edf-scheduling"),
    pytest.param(("lmstream", "rdas", "dstream"), id="lmstream-admission+rdas-scheduling+dstream-placement"),
)


def _needs(runtime: ConformanceRuntime, capability: str) -> None:
    if capability not in runtime.capabilities:
        pytest.skip(f"runtime {runtime.name!r} does not declare capability {capability!r}")


def _assert_lossless(result: RunResult) -> None:
    assert result.error is None, f"run failed: {result.error!r}"
    assert result.report is not None and result.controller is not None
    result.controller.ledger.check_complete()
    for query_id, q in result.report["queries"].items():
        assert q["datasets_in"] > 0, f"{query_id}: no data arrived"
        assert q["datasets_in"] == q["datasets_processed"] + q.get("datasets_shed", 0), query_id
        if not q.get("datasets_shed"):
            assert q["rows_in"] == q["rows_processed"], query_id


class RaisingAdmission:
    """A plugin whose admission strategy ``conformance-raiser`` always raises."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("conformance-raiser", frozenset({"admission"}), "raises on every poll")]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext) -> AdmissionDecision | None:
        if ctx.chosen != "conformance-raiser":
            return None
        raise RuntimeError("deliberate failure")


class RuntimeConformance:
    """Runs on the ``conformance_runtime`` fixture; strategies are parametrised over what is installed."""

    duration = 30.0

    def test_admission_nothing_lost_or_duplicated(self, conformance_runtime: ConformanceRuntime, admission_strategy: str) -> None:
        q = ScenarioQuery("lr2", "lr2", rate=1000, admission=admission_strategy)
        _assert_lossless(conformance_runtime.run(Scenario((q,), duration=self.duration)))

    def test_scheduler_with_three_queries(self, conformance_runtime: ConformanceRuntime, scheduling_strategy: str) -> None:
        _needs(conformance_runtime, "multi-query")
        queries = tuple(
            ScenarioQuery(w, w, rate=800, deadline=d) for w, d in (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
        )
        _assert_lossless(conformance_runtime.run(Scenario(queries, scheduler=scheduling_strategy, duration=self.duration)))

    def test_placement_nothing_lost(self, conformance_runtime: ConformanceRuntime, placement_strategy: str) -> None:
        q = ScenarioQuery("lr1", "lr1", rate=1000, placement=placement_strategy)
        gpus = 1 if "gpu" in conformance_runtime.capabilities else 0
        result = conformance_runtime.run(Scenario((q,), duration=self.duration, gpus=gpus))
        _assert_lossless(result)
        assert result.controller is not None
        dag = result.controller.queries["lr1"].spec.dag
        for report in result.controller.reports("lr1"):
            assert report.placement is not None
            report.placement.validate(dag)

    @pytest.mark.parametrize("mix", MIXES)
    def test_strategy_mix_nothing_lost_or_duplicated(
        self, conformance_runtime: ConformanceRuntime, mix: tuple[str, str, str]
    ) -> None:
        """Strategies of different packages deciding together for one query (skipped unless all are installed)."""
        available = {(s.name, d) for s in get_plugin_manager().strategies() for d in s.provides}
        admission, scheduler, placement = mix
        for name, decision in ((admission, "admission"), (scheduler, "scheduling"), (placement, "placement")):
            if (name, decision) not in available:
                pytest.skip(f"{decision} strategy {name!r} of this mix is not installed")
        gpus = 1 if "gpu" in conformance_runtime.capabilities else 0
        q = ScenarioQuery("lr2", "lr2", traffic="random", rate=1500, admission=admission, placement=placement)
        result = conformance_runtime.run(Scenario((q,), scheduler=scheduler, duration=self.duration, gpus=gpus))
        _assert_lossless(result)
        assert result.controller is not None
        for report in result.controller.reports("lr2"):
            assert report.placement is not None and report.placement.strategy == placement

    def test_zero_byte_datasets_and_idle_periods(self, conformance_runtime: ConformanceRuntime, admission_strategy: str) -> None:
        q = ScenarioQuery(
            "lr3", "lr3", traffic="binary", rate=500, traffic_params={"min": 0.0, "max": 1000.0, "period": 10.0},
            admission=admission_strategy,
        )
        _assert_lossless(conformance_runtime.run(Scenario((q,), duration=self.duration)))

    def test_deterministic_under_a_seed(self, conformance_runtime: ConformanceRuntime) -> None:
        _needs(conformance_runtime, "deterministic")
        scenario = Scenario((ScenarioQuery("lr2", "lr2", traffic="random", rate=1500, admission="static"),), seed=11)
        first, second = conformance_runtime.run(scenario), conformance_runtime.run(scenario)
        assert json.dumps(first.report, sort_keys=True) == json.dumps(second.report, sort_keys=True)

    def test_raising_strategy_is_reported_by_name(self, conformance_runtime: ConformanceRuntime) -> None:
        q = ScenarioQuery("lr2", "lr2", admission="conformance-raiser")
        result = conformance_runtime.run(Scenario((q,), duration=10.0), plugins=[RaisingAdmission()])
        assert result.error is not None, "a raising strategy must not pass silently"
        assert "conformance-raiser" in str(result.error)

    def test_raising_strategy_falls_back_when_asked(self, conformance_runtime: ConformanceRuntime) -> None:
        q = ScenarioQuery("lr2", "lr2", admission="conformance-raiser")
        result = conformance_runtime.run(Scenario((q,), duration=10.0, fallback=True), plugins=[RaisingAdmission()])
        _assert_lossless(result)
        assert result.report is not None and result.report["queries"]["lr2"]["strategy_fallbacks"] > 0
