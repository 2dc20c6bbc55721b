"""The scaling baselines beside ``fixed``: ``scheduled`` (a timetable, each rise asked for a start-up ahead),
``dstream-ratio`` (Spark Streaming's processing/interval rule) and ``spark-dynamic``'s backlog doubling and
allocation ratio; each answer checked against what the rule's description says it must be."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from pacer import ClusterView, QueryLoad, ScaleDecision, StrategyContext
from pacer.baselines import dstream_ratio, scaling, scheduled
from pacer.cli import main
from pacer.model import QueryHistory
from pacer.plugins import get_plugin_manager


def _ctx(name: str, params: dict[str, Any] | None = None) -> StrategyContext:
    info = get_plugin_manager(entry_points=False).find(name, "scaling")
    resolved = info.resolve_params(params)
    assert info.state is not None
    return StrategyContext(decision="scaling", chosen=name, query=None, params=resolved,
                           state=info.state(None, resolved), history=QueryHistory())


def _cluster(executors: int, **kw: Any) -> ClusterView:
    return ClusterView(executors=executors, cores_per_executor=1, min_executors=1, max_executors=512, **kw)


def _load(rate: float, *, k: float = 1e-6, fixed: float = 0.0, deadline: float = 10.0,
          partitions: int = 64) -> QueryLoad:
    return QueryLoad("q", deadline, fixed, k, partitions, rate)


def test_scheduled_asks_for_a_rise_a_start_up_and_its_lead_ahead_and_falls_when_the_entry_ends() -> None:
    ctx = _ctx("scheduled", {"timetable": "200:3, 0:2,100:8", "lead_s": 5.0})
    assert ctx.state == ((0.0, 2), (100.0, 8), (200.0, 3))

    def ask(now: float) -> int:
        decision = scheduled.pacer_scale(ctx, [], _cluster(4, startup_s=30.0), now)
        assert decision is not None
        return decision.executors

    assert [ask(t) for t in (0.0, 64.0, 65.5, 150.0, 199.0, 200.0, 500.0)] == [2, 2, 8, 8, 8, 3, 3]
    assert scheduled.pacer_scale(_ctx("scheduled"), [], _cluster(4), 0.0) == ScaleDecision(4, "")  # none: hold


@pytest.mark.parametrize("text", ["5", "a:3", "10:-1", "-5:2", "10:2.5"])
def test_a_timetable_entry_that_is_not_seconds_colon_executors_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="scheduled: .*" + text.replace(".", r"\.")):
        scheduled.parse_timetable(f"0:1,{text}")


def test_dstream_ratio_derives_processing_over_interval_from_the_load() -> None:
    # fixed 1 s over an interval of half the 10 s deadline (0.2), plus 1e-6 core-s/byte x 16e6 bytes/s over 16 cores
    assert dstream_ratio.busy_ratio([_load(16e6, fixed=1.0)], 16, 0.5) == pytest.approx(0.2 + 1.0)
    # batches use at most their partitions; two queries sharing the executors add up; an unmeasured one counts nothing
    loads = [_load(8e6, partitions=8), _load(4e6), QueryLoad("new", 10.0, 0.0, 0.0, 64, 1e9)]
    assert dstream_ratio.busy_ratio(loads, 16, 0.5) == pytest.approx(1.0 + 0.25)
    assert dstream_ratio.busy_ratio(loads[2:], 16, 0.5) is None


def _run_ratio(rates: Sequence[float], *, executors: int = 10) -> list[int]:
    """dstream-ratio called every 5 s at each rate (bytes/s) on ``executors`` of one core; what it wants each time."""
    ctx = _ctx("dstream-ratio")
    out = []
    for i, rate in enumerate(rates):
        decision = dstream_ratio.pacer_scale(ctx, [_load(rate)], _cluster(executors), 5.0 * i)
        assert decision is not None
        out.append(decision.executors)
    return out


def test_dstream_ratio_decides_once_a_scaling_interval_on_the_average_ratio() -> None:
    # ratio 2.5 (25e6 bytes/s x 1e-6 over 10 cores): nothing before 60 s, then 2.5 rounded half up (as Spark): 3 more
    assert _run_ratio([25e6] * 13) == [10] * 12 + [13]
    # the average over the interval decides: 0.5 for 30 s and 1.5 for 30 s (and the call at 60 s) average 1.04 >= 0.9
    assert _run_ratio([5e6] * 6 + [15e6] * 7)[-1] == 11
    assert _run_ratio([2e6] * 13)[-1] == 9  # ratio 0.2 <= 0.3: one leaves
    assert _run_ratio([5e6] * 13)[-1] == 10  # 0.5: between the ratios, hold
    assert _run_ratio([0.0] * 13, executors=10)[-1] == 9  # an idle measured query: 0 <= 0.3


def test_dstream_ratio_refuses_a_down_ratio_not_below_the_up_ratio() -> None:
    with pytest.raises(ValueError, match="scaling_down_ratio < scaling_up_ratio"):
        _ctx("dstream-ratio", {"scaling_down_ratio": 0.9})


def test_spark_dynamic_adds_one_then_doubles_once_per_backlog_timeout_the_tasks_kept_waiting() -> None:
    ctx = _ctx("spark-dynamic")
    first = scaling.pacer_scale(ctx, [], _cluster(2, peak_tasks=64, interval_s=5.0), 5.0)  # first seen waiting: +1
    later = scaling.pacer_scale(ctx, [], _cluster(3, peak_tasks=64, interval_s=3.0), 8.0)  # 3 s more: +2 +4 +8
    assert (first, later) == (ScaleDecision(3, "tasks waiting (64 for 2 slots)"),
                              ScaleDecision(17, "tasks waiting (64 for 3 slots)"))
    capped = scaling.pacer_scale(ctx, [], _cluster(17, peak_tasks=64, interval_s=5.0), 13.0)
    assert capped is not None and capped.executors == 64  # never beyond what the tasks need
    idle = scaling.pacer_scale(ctx, [], _cluster(64, peak_tasks=64, interval_s=5.0), 18.0)
    again = scaling.pacer_scale(ctx, [], _cluster(64, peak_tasks=128, interval_s=5.0), 23.0)
    assert idle is not None and again is not None and (idle.executors, again.executors) == (64, 65)  # +1 anew


def test_spark_dynamic_allocation_ratio_asks_for_that_share_of_the_executors_the_tasks_need() -> None:
    ctx = _ctx("spark-dynamic", {"allocation_ratio": 0.5})
    scaling.pacer_scale(ctx, [], _cluster(2, peak_tasks=64, interval_s=5.0), 5.0)
    decision = scaling.pacer_scale(ctx, [], _cluster(3, peak_tasks=64, interval_s=10.0), 15.0)
    assert decision is not None and decision.executors == 32
    with pytest.raises(ValueError, match="allocation_ratio"):
        _ctx("spark-dynamic", {"allocation_ratio": 0.0})


def test_the_new_baselines_are_listed_by_pacer_strategies_decision_scaling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strategies", "--decision", "scaling", "--json"]) == 0
    listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert {"fixed", "spark-dynamic", "dstream-ratio", "scheduled"} <= set(listed)
    assert listed["dstream-ratio"]["package"] == "pacer-core"
