"""zStream's T_sched from the scheduler's queue (``t_sched="queue"``), its reserve and its cap, against Eq. 3's letter
(``t_sched="paper"``), with exact values."""

from __future__ import annotations

import pytest

from pacer import Dataset, DatasetBuffer, Devices, MicroBatch, PendingBatch, QueryHistory, SystemView
from pacer.service_time import ServiceTimeModel
from pacer_workloads import make_query
from pacer_zstream import ZStreamAdmission
from pacer_zstream.admission import Estimate, build_state


def _pending(query_id: str, deadline_at: float, run_s: float, *, started_at: float | None = None,
             arrival: float = 0.0) -> PendingBatch:
    batch = MicroBatch(f"{query_id}#1", query_id, 1, (Dataset("d", arrival, 100, 1),), arrival)
    return PendingBatch(batch, deadline_at, run_s, started_at is not None, started_at)


def _model(fixed: float = 0.0, per_mb: float = 1.0) -> ServiceTimeModel:
    model = ServiceTimeModel()
    for mb in (0.5, 1.0, 2.0, 4.0) * 4:  # enough exact batches that the margin is 1
        model.observe(mb * 1e6, fixed + per_mb * mb)
    return model


def _state(mode: str = "queue", deadline: float = 10.0, **params: object) -> ZStreamAdmission:
    return build_state(make_query("lr2", deadline=deadline), {"t_sched": mode, **params})


ONE_MB = DatasetBuffer([Dataset("a", 0.0, 1_000_000, 1)])  # T_anal 1 s; due at 0 + 10 s


def _view(now: float, scheduler: str, *pending: PendingBatch) -> SystemView:
    return SystemView(now, 2, Devices(2), scheduler, pending)


def test_an_earlier_deadline_batch_of_another_query_makes_zstream_admit_earlier() -> None:
    """EDF runs the other query's batch first when it is due first (8 s < 10 s): 3 s of T_sched, admit at 6 s;
    due later (30 s) it runs after this one: no T_sched, keep buffering until 9 s."""
    earlier = (_pending("a", 8.0, 3.0),)
    later = (_pending("a", 30.0, 3.0),)
    state = _state(reserve=False)
    assert state.admit("q", ONE_MB, 6.0, _view(6.0, "edf", *earlier), QueryHistory(), _model()).admits
    assert state.last == Estimate(6.0, 3.0, 1.0)
    state = _state(reserve=False)
    assert not state.admit("q", ONE_MB, 6.0, _view(6.0, "edf", *later), QueryHistory(), _model()).admits
    assert state.last == Estimate(6.0, 0.0, 1.0)
    assert state.admit("q", ONE_MB, 9.0, _view(9.0, "edf", *later), QueryHistory(), _model()).admits


def test_paper_keeps_eq3_every_other_pending_batch_in_full() -> None:
    for pending in ((_pending("a", 8.0, 3.0),), (_pending("a", 30.0, 3.0),)):
        state = _state("paper")
        assert state.admit("q", ONE_MB, 6.0, _view(6.0, "edf", *pending), QueryHistory(), _model()).admits
        assert state.last == Estimate(6.0, 3.0, 1.0)
    running = _pending("a", 30.0, 3.0, started_at=4.0)  # 2 s into its 3 s
    state = _state("paper")
    state.admit("q", ONE_MB, 6.0, _view(6.0, "edf", running), QueryHistory(), _model())
    assert state.last == Estimate(6.0, 3.0, 1.0), "the letter counts a running batch in full"


def test_queue_counts_what_is_left_of_a_running_batch() -> None:
    running = _pending("a", 30.0, 3.0, started_at=4.0)
    for scheduler in ("edf", "fifo"):
        state = _state(reserve=False)
        assert not state.admit("q", ONE_MB, 6.0, _view(6.0, scheduler, running), QueryHistory(), _model()).admits
        assert state.last == Estimate(6.0, 1.0, 1.0)


def test_fifo_waits_for_every_other_pending_batch_whatever_its_deadline() -> None:
    state = _state(reserve=False)
    view = _view(6.0, "fifo", _pending("a", 30.0, 2.0), _pending("b", 40.0, 1.5))
    assert state.admit("q", ONE_MB, 6.0, view, QueryHistory(), _model()).admits
    assert state.last == Estimate(6.0, 3.5, 1.0)


def test_fair_and_rdas_wait_for_nothing_and_divide_t_anal_by_the_share() -> None:
    pending = (_pending("a", 25.0, 2.0, started_at=5.0), _pending("b", 40.0, 1.5))
    fair = _state()
    fair.admit("q", ONE_MB, 6.0, _view(6.0, "fair", *pending), QueryHistory(), _model())
    assert fair.last == Estimate(6.0, 0.0, pytest.approx(3.0))  # type: ignore[arg-type]
    # RDAS at 6 s: remaining a 19 s, b 34 s, this batch 4 s (most urgent): weights 2, 1, 3 -> half the cores
    rdas = _state()
    rdas.admit("q", ONE_MB, 6.0, _view(6.0, "rdas", *pending), QueryHistory(), _model())
    assert rdas.last == Estimate(6.0, 0.0, pytest.approx(2.0))  # type: ignore[arg-type]
    paper = _state("paper")
    paper.admit("q", ONE_MB, 6.0, _view(6.0, "rdas", *pending), QueryHistory(), _model())
    assert paper.last == Estimate(6.0, 3.5, pytest.approx(3.0))  # type: ignore[arg-type]


def _admitted_at(state: ZStreamAdmission, scheduler: str) -> float:
    """Poll every 10 ms from 6 s (another query's 2 s batch queued behind, due later, at the first poll only)."""
    seen = _pending("a", 30.0, 2.0)
    for step in range(400):
        now = 6.0 + step / 100
        view = _view(now, scheduler, seen) if step == 0 else _view(now, scheduler)
        if state.admit("q", ONE_MB, now, view, QueryHistory(), _model()).admits:
            return now
    raise AssertionError("never admitted")


def test_the_reserve_admits_early_enough_for_another_query_s_longest_batch() -> None:
    """Once it has seen another query's 2 s batch, the query admits when MaxLat + 2 s reaches the deadline less
    one poll (10 ms): at 6.99 s instead of 8.99 s; under FAIR the newcomer would share the cores at once."""
    assert _admitted_at(_state(), "edf") == pytest.approx(6.99)
    assert _admitted_at(_state(reserve=False), "edf") == pytest.approx(8.99)
    assert _admitted_at(_state("paper"), "edf") == pytest.approx(8.99)
    assert _admitted_at(_state(), "fair") == pytest.approx(8.99)


def test_a_looser_query_caps_its_batch_for_a_tighter_one() -> None:
    """A 5 s query with 1 s batches absorbs (5 - 2) / 2 = 1.5 s of blocking: a 20 s query with 1 s fixed + 1 s/MB
    batches takes two 250 KB datasets (1.5 s), not four, and the rest next time."""
    buf = DatasetBuffer([Dataset(f"d{i}", float(i), 250_000, 1) for i in range(4)])
    tight = _pending("a", 5.0 + 9.0, 1.0, arrival=9.0)  # a's deadline: 14 - 9 = 5 s
    capped = _state(deadline=20.0, reserve=False)
    decision = capped.admit("q", buf, 19.0, _view(19.0, "edf", tight), QueryHistory(), _model(1.0, 1.0))
    assert decision.count == 2
    free = _state(deadline=20.0, reserve=False, cap=False)
    assert free.admit("q", buf, 19.0, _view(19.0, "edf", tight), QueryHistory(), _model(1.0, 1.0)).count == 4
    paper = _state("paper", deadline=20.0)
    assert paper.admit("q", buf, 19.0, _view(19.0, "edf", tight), QueryHistory(), _model(1.0, 1.0)).count == 4


def test_t_sched_must_be_queue_or_paper() -> None:
    assert _state().t_sched_mode == "queue"
    assert build_state(make_query("lr2"), {}).t_sched_mode == "queue", "the default"
    with pytest.raises(ValueError, match="t_sched"):
        _state("eq3")


def test_three_queries_sharing_two_cores_meet_their_deadlines_simulated() -> None:
    """Simulated, pacer-bench's multi-query scenario (lr2/lr3/cm2, deadlines 5/10/20 s, binary bursts, EDF, 300 s):
    Eq. 3's letter missed 16 % / 10 % / 2 % of the rows; the queue, the reserve and the cap none."""
    from pacer_sim import Simulation

    sim = Simulation(seed=7, cores=2, scheduler="edf")
    for workload, deadline in (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0)):
        sim.add_query(workload, traffic="binary", rate=1600.0, admission="zstream", deadline=deadline,
                      traffic_params={"min": 200.0, "max": 3000.0, "period": 30.0})
    report = sim.run(300.0)
    assert max(report["queries"][q]["deadline_miss_ratio"] for q in ("lr2", "lr3", "cm2")) <= 0.01
