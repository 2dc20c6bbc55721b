"""Every branch of Das et al. Algorithm 1, with exact values."""

from __future__ import annotations

import pytest

from pacer import AdmissionDecision, BatchReport, Controller, Dataset, DatasetBuffer, get_plugin_manager
from pacer.clock import ManualClock
from pacer_fixedpoint import FixedPointState, Observation, next_interval, round_to_granule
from pacer_workloads import make_query

RHO, R = 0.7, 0.25


def test_fixed_point_iteration_on_a_linear_workload() -> None:
    # omega(x)/x equal at both points (linear): x_next = p_last / rho
    x, branch = next_interval(Observation(2.0, 1.0), Observation(1.0, 0.5), rho=RHO, backoff=R)
    assert branch == "fixed-point" and x == pytest.approx(1.0 / 0.7)


def test_type_ii_backs_off_from_the_smaller_interval() -> None:
    # superlinear (0.9 > 0.8) and p_last = 1.8 > rho * 2 = 1.4: x_next = (1 - r) * x_small = 0.75
    x, branch = next_interval(Observation(2.0, 1.8), Observation(1.0, 0.8), rho=RHO, backoff=R)
    assert branch == "type-ii" and x == pytest.approx(0.75)


def test_type_ii_when_the_last_batch_was_the_smaller_one() -> None:
    x, branch = next_interval(Observation(1.0, 0.8), Observation(2.0, 1.8), rho=RHO, backoff=R)
    assert branch == "type-ii" and x == pytest.approx(0.75)


def test_superlinear_but_within_slack_iterates() -> None:
    # 0.6 > 0.5 (superlinear) but p_last = 1.2 <= rho * 2 = 1.4: fixed-point, 1.2 / 0.7
    x, branch = next_interval(Observation(2.0, 1.2), Observation(1.0, 0.5), rho=RHO, backoff=R)
    assert branch == "fixed-point" and x == pytest.approx(1.2 / 0.7)


def test_equal_intervals_corner_case_applies_fixed_point() -> None:
    x, branch = next_interval(Observation(1.0, 0.9), Observation(1.0, 0.5), rho=RHO, backoff=R)
    assert branch == "equal-intervals" and x == pytest.approx(0.9 / 0.7)


def test_rounding_to_the_100ms_granule() -> None:
    assert round_to_granule(1.4285, 0.1) == pytest.approx(1.4)
    assert round_to_granule(0.01, 0.1) == pytest.approx(0.1)
    assert round_to_granule(2.26, 0.0) == 2.26


def _state(**kw: object) -> FixedPointState:
    params = dict(rho=0.7, backoff=0.25, granule=0.1, initial_interval=0.1, max_interval=600.0, overload="off", max_buffer_s=60.0)
    params.update(kw)
    return FixedPointState(**params)  # type: ignore[arg-type]


def _report(interval: float, processing: float, seq: int = 1) -> BatchReport:
    return BatchReport(f"q#{seq}", "q", seq, 0.0, 0.0, processing, 100, 10, (), 0.0, interval)


def test_slow_start_doubles_until_the_first_batch_completes() -> None:
    state = _state()
    buf = DatasetBuffer([Dataset(f"d{i}", 0.0, 1, 1) for i in range(3)])
    intervals = []
    now = 0.0
    for _ in range(4):
        now += state.interval
        assert state.admit(buf, now).admits
        intervals.append(state.interval)
    assert intervals == pytest.approx([0.2, 0.4, 0.8, 1.6])
    state.observe(_report(1.6, 0.7))
    assert state.interval == pytest.approx(1.0), "first completion: p / rho = 0.7 / 0.7"
    assert not state.slow_start


def test_observe_applies_algorithm_1_with_rounding() -> None:
    state = _state()
    state.observe(_report(1.0, 0.5, 1))
    state.observe(_report(2.0, 1.8, 2))
    assert state.interval == pytest.approx(0.8), "type-ii: 0.75 rounded to the granule"
    assert state.branches == {"first": 1, "type-ii": 1}


def test_waits_for_the_interval() -> None:
    state = _state(initial_interval=2.0)
    buf = DatasetBuffer([Dataset("a", 10.0, 1, 1)])
    assert not state.admit(buf, 11.0).admits
    assert state.admit(buf, 12.0).admits


def test_shed_policy_drops_old_data_and_counts_it() -> None:
    state = _state(overload="shed", max_buffer_s=5.0, initial_interval=100.0)
    buf = DatasetBuffer([Dataset(f"d{i}", float(i), 1, 1) for i in range(10)])
    decision = state.admit(buf, 10.0)
    # data older than 5 s at t = 10: arrivals 0..4 are shed, 5..9 admitted
    assert decision == AdmissionDecision(5, shed=5, reason=decision.reason)
    assert state.shed_datasets == 5


def test_pause_policy_caps_the_batch_and_keeps_the_rest() -> None:
    state = _state(overload="pause", max_buffer_s=3.0)
    buf = DatasetBuffer([Dataset(f"d{i}", float(i), 1, 1) for i in range(10)])
    decision = state.admit(buf, 20.0)
    assert decision.count == 4 and decision.shed == 0 and state.paused_admissions == 1


def test_bad_parameters_are_named() -> None:
    with pytest.raises(ValueError, match="rho must be in"):
        _state(rho=1.5)
    with pytest.raises(ValueError, match="overload must be one of"):
        _state(overload="drop")


def test_controller_counts_shed_datasets_in_the_ledger() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager(), timer=None)
    c.add_query(make_query("lr2", query_id="q"), admission="fixed-point",
                admission_params={"overload": "shed", "max_buffer_s": 2.0, "initial_interval": 50.0})
    for i in range(6):
        c.arrive("q", Dataset(f"q-{i}", float(i), 10, 1))
    clock.now = 6.0
    batch = c.poll("q")
    assert batch is not None and [d.id for d in batch.datasets] == ["q-4", "q-5"]
    c.complete(batch.id)
    assert c.ledger.counts["q"]["shed"] == 4
    c.ledger.check_complete()


def _admit_times(state: FixedPointState, buf: DatasetBuffer, start: float, end: float) -> float:
    """The first 10 ms poll in [start, end) at which ``state`` admits (as the Controller polls)."""
    now = start
    while now < end:
        if state.admit(buf, now).admits:
            return now
        now = round(now + 0.01, 2)
    raise AssertionError("never admitted")


@pytest.mark.parametrize(("basis", "second_admission", "branch"), [("data", 3.0, "fixed-point"), ("admission", 4.0, "equal-intervals")])
def test_interval_basis_with_one_dataset_per_second(basis: str, second_admission: float, branch: str) -> None:
    """Choice: with lumpy arrivals an interval starts at the newest arrival the previous batch took, and
    Algorithm 1 observes the span of the batch's data; ``interval_basis="admission"`` is the time between admissions."""
    state = _state(initial_interval=1.0, interval_basis=basis)
    buf = DatasetBuffer([Dataset("d0", 1.0, 1, 1)])
    assert _admit_times(state, buf, 1.0, 5.0) == pytest.approx(2.0)  # 1.0 s after the first arrival
    buf.take(1)
    state.observe(_report(1.0, 1.4, 1))  # first completion: 1.4 / 0.7 = 2.0
    assert state.interval == pytest.approx(2.0)
    buf.append(Dataset("d1", 2.0, 1, 1))
    buf.append(Dataset("d2", 3.0, 1, 1))
    # data: 2.0 s after the boundary 1.0 (arrival of d0) -> 3.0; admission: 2.0 s after the admission at 2.0 -> 4.0
    assert _admit_times(state, buf, 2.4, 6.0) == pytest.approx(second_admission)
    buf.take(2)
    state.observe(_report(1.0, 1.0, 2))  # a report saying 1.0 s between admissions
    # data: Algorithm 1 sees the 2 s of data the batch took (1.0 -> 3.0): (2.0, 1.0) vs (1.0, 1.4), not superlinear;
    # admission: it sees the report's 1.0 s, equal to the last interval (1.0): the corner case. Both give 1.0 / 0.7.
    assert state.observations[-1].interval == pytest.approx(2.0 if basis == "data" else 1.0)
    assert state.branches.get(branch) == 1, state.branches
    assert state.interval == pytest.approx(1.4)


def test_bad_interval_basis_is_named() -> None:
    with pytest.raises(ValueError, match="interval_basis must be one of"):
        _state(interval_basis="clock")


def test_max_interval_caps_a_diverging_iteration() -> None:
    """Choice: without a Type-I point x = p / rho keeps growing (Das §3.5); ``max_interval`` bounds it."""
    state = _state(max_interval=5.0)
    state.observe(_report(2.0, 1.8, 1))
    state.observe(_report(3.0, 9.0, 2))  # superlinear, over the slack: type-ii -> 0.75 x 2.0
    assert state.interval == pytest.approx(1.5)
    state.observe(_report(3.0, 9.0, 3))  # equal intervals: 9.0 / 0.7 = 12.9, capped
    assert state.interval == pytest.approx(5.0)
