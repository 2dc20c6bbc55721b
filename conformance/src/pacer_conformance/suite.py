"""End-to-end invariants every runtime upholds with every installed strategy."""

from __future__ import annotations

import json
import traceback
from collections.abc import Sequence

import pytest

from pacer import (
    AdmissionDecision,
    Dataset,
    QueryRun,
    RunConfig,
    Runtime,
    StrategyContext,
    StrategyInfo,
    arrival_dataset,
    get_plugin_manager,
    hookimpl,
)
from pacer_conformance.runtime import RunResult, run_scenario, scenario

#: Strategy mixes run end to end: (admission, scheduling, placement), one strategy per decision.
MIXES = (
    pytest.param(("zstream", "fifo", "dstream"), id="zstream-admission+dstream-placement"),
    pytest.param(("fixed-point", "edf", "cpu-only"), id="fixed-point-admission+edf-scheduling"),
    pytest.param(("lmstream", "rdas", "dstream"), id="lmstream-admission+rdas-scheduling+dstream-placement"),
)


def _needs(runtime: Runtime, capability: str) -> None:
    if capability not in runtime.capabilities:
        pytest.skip(f"runtime {runtime.name!r} does not declare capability {capability!r}")


def _assert_lossless(result: RunResult) -> None:
    if result.error is not None:
        trace = "".join(traceback.format_exception(result.error))
        pytest.fail(f"run failed: {result.error!r}\n{trace}")
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


def _assert_planned_as_placed(runtime: Runtime, result: RunResult, query_id: str) -> None:
    """On a runtime that declares ``rapids-explain`` (Spark with the RAPIDS plugin in explainOnly mode), RAPIDS'
    own plan of every batch it compared agrees with the placement pacer enacted, operator by operator."""
    if "rapids-explain" not in runtime.capabilities:
        return
    assert result.report is not None
    checks = result.report["spark"]["rapids_explain"].get(query_id)
    assert checks is not None and checks["compared"] > 0, f"{query_id}: no batch compared with RAPIDS' plan"
    assert checks["disagreed"] == 0, f"{query_id}: RAPIDS' plan differs from pacer's placement: {checks['differing']}"


class RuntimePlacementConformance:
    """The placement invariants of the end-to-end suite, on the ``conformance_runtime`` fixture: every batch's
    placement covers its DAG, CPU-only operators on the CPU, nothing lost; where the runtime checks placements
    against the engine's own plan (``rapids-explain``), every batch agrees."""

    duration = 30.0

    def test_placement_nothing_lost(self, conformance_runtime: Runtime, placement_strategy: str) -> None:
        q = QueryRun("lr1", "lr1", rate=1000, placement=placement_strategy)
        gpus = 1 if "gpu" in conformance_runtime.capabilities else 0
        result = run_scenario(conformance_runtime, scenario(q, duration=self.duration, gpus=gpus))
        _assert_lossless(result)
        assert result.controller is not None
        dag = result.controller.query("lr1").spec.dag
        for report in result.controller.reports("lr1"):
            assert report.placement is not None
            report.placement.validate(dag)
        _assert_planned_as_placed(conformance_runtime, result, "lr1")

    @pytest.mark.parametrize("mix", MIXES)
    def test_strategy_mix_nothing_lost_or_duplicated(
        self, conformance_runtime: Runtime, mix: tuple[str, str, str]
    ) -> None:
        """Strategies of different packages deciding together for one query (skipped unless all are installed)."""
        available = {(s.name, d) for s in get_plugin_manager().strategies() for d in s.provides}
        admission, scheduler, placement = mix
        for name, decision in ((admission, "admission"), (scheduler, "scheduling"), (placement, "placement")):
            if (name, decision) not in available:
                pytest.skip(f"{decision} strategy {name!r} of this mix is not installed")
        gpus = 1 if "gpu" in conformance_runtime.capabilities else 0
        q = QueryRun("lr2", "lr2", traffic="random", rate=1500, admission=admission, placement=placement)
        result = run_scenario(conformance_runtime, scenario(q, scheduler=scheduler, duration=self.duration, gpus=gpus))
        _assert_lossless(result)
        assert result.controller is not None
        for report in result.controller.reports("lr2"):
            assert report.placement is not None and report.placement.strategy == placement
        _assert_planned_as_placed(conformance_runtime, result, "lr2")


class RuntimeConformance(RuntimePlacementConformance):
    """Runs on the ``conformance_runtime`` fixture; strategies are parametrised over what is installed."""

    duration = 30.0

    def test_admission_nothing_lost_or_duplicated(self, conformance_runtime: Runtime, admission_strategy: str) -> None:
        q = QueryRun("lr2", "lr2", rate=1000, admission=admission_strategy)
        _assert_lossless(run_scenario(conformance_runtime, scenario(q, duration=self.duration)))

    def test_scheduler_with_three_queries(self, conformance_runtime: Runtime, scheduling_strategy: str) -> None:
        _needs(conformance_runtime, "multi-query")
        queries = tuple(
            QueryRun(w, w, rate=800, deadline=d) for w, d in (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
        )
        _assert_lossless(run_scenario(conformance_runtime,
                                      scenario(*queries, scheduler=scheduling_strategy, duration=self.duration)))

    def test_zero_byte_datasets_and_idle_periods(self, conformance_runtime: Runtime, admission_strategy: str) -> None:
        q = QueryRun(
            "lr3", "lr3", traffic="binary", rate=500, traffic_params={"min": 0.0, "max": 1000.0, "period": 10.0},
            admission=admission_strategy,
        )
        _assert_lossless(run_scenario(conformance_runtime, scenario(q, duration=self.duration)))

    def test_deterministic_under_a_seed(self, conformance_runtime: Runtime) -> None:
        _needs(conformance_runtime, "deterministic")
        config = scenario(QueryRun("lr2", "lr2", traffic="random", rate=1500, admission="static"), seed=11)
        first, second = run_scenario(conformance_runtime, config), run_scenario(conformance_runtime, config)
        assert json.dumps(first.report, sort_keys=True) == json.dumps(second.report, sort_keys=True)

    def test_raising_strategy_is_reported_by_name(self, conformance_runtime: Runtime) -> None:
        q = QueryRun("lr2", "lr2", admission="conformance-raiser")
        result = run_scenario(conformance_runtime, scenario(q, duration=10.0), plugins=[RaisingAdmission()])
        assert result.error is not None, "a raising strategy must not pass silently"
        assert "conformance-raiser" in str(result.error)

    def test_raising_strategy_falls_back_when_asked(self, conformance_runtime: Runtime) -> None:
        q = QueryRun("lr2", "lr2", admission="conformance-raiser")
        result = run_scenario(conformance_runtime, scenario(q, duration=10.0, fallback=True),
                              plugins=[RaisingAdmission()])
        _assert_lossless(result)
        assert result.report is not None and result.report["queries"]["lr2"]["strategy_fallbacks"] > 0

    def test_fed_the_traffic_the_configuration_describes(self, conformance_runtime: Runtime) -> None:
        """Every runtime feeds query ``i`` the datasets of its traffic under the seed ``seed + i`` (pacer.run's rule),
        made by :func:`pacer.arrival_dataset`: one scenario is the same datasets on every runtime."""
        _needs(conformance_runtime, "multi-query")
        queries = (QueryRun("lr2", "a", traffic="random", rate=900), QueryRun("cm2", "b", traffic="wave", rate=700))
        result = run_scenario(conformance_runtime, scenario(*queries, duration=self.duration, seed=5))
        _assert_lossless(result)
        assert result.report is not None and result.controller is not None
        ran = RunConfig.from_dict(result.report)  # what the runtime ran (Spark may shorten a scenario)
        for i, (qid, q) in enumerate(zip(ran.query_ids(), ran.queries, strict=True)):
            fed = result.controller.recorder.arrivals(qid)
            expected = _expected_datasets(ran, i, q)
            assert [(rows, nbytes) for _, rows, nbytes in fed] == [(d.rows, d.bytes) for d in expected], qid
            offset = fed[0][0] - expected[0].arrival  # the runtime's clock when the traffic began (0 simulated)
            assert [round(t - offset, 3) for t, _, _ in fed] == [round(d.arrival, 3) for d in expected], qid


def _expected_datasets(config: RunConfig, index: int, q: QueryRun) -> list[Dataset]:
    from pacer_workloads import WORKLOADS, bytes_per_row, make_traffic, schedule_arrivals

    pattern = make_traffic(q.traffic, rate=q.rate, duration=config.duration, **dict(q.traffic_params))
    per_row = bytes_per_row(WORKLOADS[q.workload].stream)
    arrivals = schedule_arrivals(pattern, duration=config.duration, seed=config.query_seed(index))
    return [arrival_dataset(config.query_ids()[index], a, per_row) for a in arrivals]
