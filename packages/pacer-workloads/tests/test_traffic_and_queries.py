from __future__ import annotations

import math

import pytest

from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_query, make_traffic, schedule_arrivals


@pytest.mark.parametrize("name", TRAFFIC_PATTERNS)
def test_every_pattern_has_about_the_requested_mean(name: str) -> None:
    traffic = make_traffic(name, rate=1000, duration=600)
    arrivals = schedule_arrivals(traffic, duration=600, seed=1)
    assert len(arrivals) == 600 and arrivals[0].time == 1.0 and arrivals[-1].time == 600.0
    mean = sum(a.rows for a in arrivals) / len(arrivals)
    assert mean == pytest.approx(1000, rel=0.1), name


def test_shapes() -> None:
    sine = make_traffic("sinusoidal", rate=1000, amp=400, period=60)
    assert sine.rate(15) == pytest.approx(1400) and sine.rate(45) == pytest.approx(600)
    binary = make_traffic("binary", rate=1000, min=0, max=2000, period=10)
    assert [binary.rate(t) for t in (0, 4.9, 5, 9.9, 10)] == [2000, 2000, 0, 0, 2000]
    wave = make_traffic("wave", rate=1000, min=200, max=1800, period=40)
    assert wave.rate(10) == pytest.approx(1800) and wave.rate(30) == pytest.approx(200)
    spike = make_traffic("spike", rate=1000, min=100, max=900, period=10, spike=0.2)
    assert spike.rate(5) == 100 and spike.rate(9) == pytest.approx(500) and spike.rate(9.999) == pytest.approx(900, rel=1e-3)
    up = make_traffic("increasing", rate=1000, duration=100)
    assert [up.rate(t) for t in (0, 50, 100, 200)] == [500, 1000, 1500, 1500]
    down = make_traffic("decreasing", rate=1000, duration=100)
    assert [down.rate(t) for t in (0, 50, 100)] == [1500, 1000, 500]


def test_random_is_deterministic_per_seed_and_never_negative() -> None:
    traffic = make_traffic("random", rate=100, sd=200)
    a = schedule_arrivals(traffic, duration=100, seed=5)
    assert a == schedule_arrivals(traffic, duration=100, seed=5)
    assert a != schedule_arrivals(traffic, duration=100, seed=6)
    assert min(x.rows for x in a) == 0 and all(x.rows >= 0 for x in a)


def test_idle_periods_give_zero_row_datasets() -> None:
    arrivals = schedule_arrivals(make_traffic("binary", rate=500, min=0, max=1000, period=4), duration=8, seed=1)
    assert [a.rows for a in arrivals] == [1000, 1000, 0, 0, 1000, 1000, 0, 0]


def test_bad_traffic_is_rejected_with_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="unknown traffic pattern 'square'; known patterns: constant"):
        make_traffic("square", rate=1)
    with pytest.raises(ValueError, match="rate must be >= 0"):
        make_traffic("constant", rate=-5)
    with pytest.raises(ValueError, match="min .* must not exceed max"):
        make_traffic("wave", rate=10, min=20, max=10)
    with pytest.raises(ValueError, match="period must be > 0"):
        make_traffic("binary", rate=10, period=0)
    with pytest.raises(ValueError, match=r"has no parameter \['periode'\]"):
        make_traffic("binary", rate=10, periode=3)
    assert math.isclose(make_traffic("constant", rate=5).params()["rate"], 5)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_query_dags_mirror_spark_plans(workload: str) -> None:
    spec = make_query(workload)
    dag = spec.dag
    kinds = [op.kind for op in dag.operators]
    assert dag.sinks() == (dag.operators[-1].id,) and kinds[-1] == "sink"
    assert all(dag.operator(s).kind == "scan" for s in dag.sources())
    order = dag.topological_order()
    assert order[-1] == dag.sinks()[0]
    assert ("expand" in kinds) == (not WORKLOADS[workload].tumbling)
    assert spec.workload == workload and spec.id == workload
    assert spec.effective_deadline == WORKLOADS[workload].window_slide


def test_specific_operators() -> None:
    assert len(WORKLOADS["lr1"].dag.sources()) == 2 and "join" in [o.kind for o in WORKLOADS["lr1"].dag.operators]
    assert "sort" in [o.kind for o in WORKLOADS["cm1"].dag.operators]
    cm2 = WORKLOADS["cm2"].dag
    assert cm2.operator(cm2.children(cm2.sources()[0])[0]).kind == "filter", "WHERE eventType = 1 right after the scan"
    assert "HAVING" in WORKLOADS["lr2"].sql and WORKLOADS["lr2"].dag.operators[-3].kind == "filter"


def test_make_query_options_and_errors() -> None:
    spec = make_query("lr2", query_id="fast", deadline=4, partitions=8)
    assert (spec.id, spec.effective_deadline, spec.partitions) == ("fast", 4, 8)
    with pytest.raises(ValueError, match="unknown workload 'lr9'; known workloads: lr1, lr1t"):
        make_query("lr9")
    with pytest.raises(ValueError, match="deadline must be > 0"):
        make_query("lr2", deadline=0)
