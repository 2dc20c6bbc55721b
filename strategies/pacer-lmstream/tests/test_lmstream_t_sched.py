"""Eq. 6 with the wait behind the batches the scheduler runs first (``t_sched="queue"``), its reserve and its cap,
against Eq. 6 as printed (``t_sched="paper"``), with exact values."""

from __future__ import annotations

import pytest

from pacer import BatchReport, Dataset, DatasetBuffer, Devices, MicroBatch, PendingBatch, QueryHistory, SystemView
from pacer.service_time import ServiceTimeModel
from pacer_lmstream import construct_micro_batch, estimate_max_latency
from pacer_lmstream.plugin import PARAMS
from pacer_lmstream.state import LMStreamState
from pacer_workloads import make_query


def _pending(query_id: str, deadline_at: float, run_s: float, *, started_at: float | None = None,
             arrival: float = 0.0) -> PendingBatch:
    batch = MicroBatch(f"{query_id}#1", query_id, 1, (Dataset("d", arrival, 100, 1),), arrival)
    return PendingBatch(batch, deadline_at, run_s, started_at is not None, started_at)


def _view(now: float, scheduler: str, *pending: PendingBatch) -> SystemView:
    return SystemView(now, 2, Devices(2), scheduler, pending)


def _model(fixed: float = 0.0, per_mb: float = 1.0) -> ServiceTimeModel:
    model = ServiceTimeModel()
    for mb in (0.5, 1.0, 2.0, 4.0) * 4:  # enough exact batches that the margin is 1
        model.observe(mb * 1e6, fixed + per_mb * mb)
    return model


def _state(deadline: float = 10.0, **params: object) -> LMStreamState:
    """lr2 (SlideTime 10 s) with ``deadline``, one past batch (so no cold start)."""
    defaults = {p.name: p.default for p in PARAMS}
    state = LMStreamState(make_query("lr2", deadline=deadline), {**defaults, "async_regression": False, **params})
    state.max_latency.add(BatchReport("q#0", "lr2", 0, 0.0, 0.0, 1.0, 1, 1, (), 0.0, 0.0))
    return state


ONE_MB = DatasetBuffer([Dataset("a", 0.0, 1_000_000, 1)])  # 1 s to process; due at 0 + 10 s


def test_eq6_with_a_wait_and_a_share() -> None:
    buf = DatasetBuffer([Dataset("a", 1.0, 300, 1), Dataset("b", 2.0, 500, 1)])
    # 3 s buffered + 1.5 s queued + 800 B at 200 B/s on half the cores (8 s)
    assert estimate_max_latency(buf, 4.0, 200.0, wait_s=1.5, share=0.5) == pytest.approx(12.5)
    kwargs = {"slide_time": 10.0, "avg_throughput": 200.0, "past_max_latency": 1.0, "processing_s": 4.0}
    assert not construct_micro_batch(buf, 4.0, **kwargs, wait_s=2.9).admits  # 3 + 2.9 + 4 < 10
    assert construct_micro_batch(buf, 4.0, **kwargs, wait_s=3.0).admits
    assert construct_micro_batch(buf, 4.0, **kwargs, share=0.5).admits  # 3 + 8
    assert construct_micro_batch(buf, 4.0, **kwargs, reserve_s=3.0).admits


def test_an_earlier_deadline_batch_of_another_query_makes_lmstream_admit_earlier() -> None:
    earlier, later = _pending("a", 8.0, 3.0), _pending("a", 30.0, 3.0)
    state = _state(reserve=False)
    assert state.admit(ONE_MB, 6.0, QueryHistory(), _model(), _view(6.0, "edf", earlier)).admits  # 6 + 3 + 1
    assert state.last_wait.wait_s == 3.0
    assert not _state(reserve=False).admit(ONE_MB, 6.0, QueryHistory(), _model(), _view(6.0, "edf", later)).admits
    paper = _state(t_sched="paper")
    assert not paper.admit(ONE_MB, 6.0, QueryHistory(), _model(), _view(6.0, "edf", earlier)).admits, \
        "Eq. 6 as printed plans as if alone: 6 + 1 < 10"
    fresh, older = _pending("a", 30.0, 3.0, started_at=6.0), _pending("a", 30.0, 3.0, started_at=5.0)
    assert _state(reserve=False).admit(ONE_MB, 6.5, QueryHistory(), _model(), _view(6.5, "fifo", fresh)).admits, \
        "2.5 s left of a running batch: 6.5 + 2.5 + 1"
    assert not _state(reserve=False).admit(ONE_MB, 6.5, QueryHistory(), _model(), _view(6.5, "fifo", older)).admits, \
        "1.5 s left: 6.5 + 1.5 + 1 < 10"


def test_fair_divides_processing_by_the_share() -> None:
    state = _state()
    assert state.admit(ONE_MB, 8.0, QueryHistory(), _model(), _view(8.0, "fair", _pending("a", 30.0, 3.0))).admits
    assert state.last_wait.share == 0.5  # 8 + 1 / 0.5 = 10
    assert not _state().admit(ONE_MB, 7.9, QueryHistory(), _model(), _view(7.9, "fair", _pending("a", 30.0, 3.0))).admits


def test_the_reserve_and_the_cap() -> None:
    state = _state()
    seen = _view(1.0, "edf", _pending("a", 30.0, 2.0))  # queued behind (due later): no wait, 2 s reserve
    assert not state.admit(ONE_MB, 1.0, QueryHistory(), _model(), seen).admits
    assert state.admit(ONE_MB, 7.0, QueryHistory(), _model(), _view(7.0, "edf")).admits  # 7 + 1 + 2
    assert not _state(reserve=False).admit(ONE_MB, 7.0, QueryHistory(), _model(), _view(7.0, "edf")).admits
    # a 5 s query with 1 s batches absorbs 1.5 s of blocking: this 20 s query takes 1.5 s of data, not 4 s
    buf = DatasetBuffer([Dataset(f"d{i}", float(i), 250_000, 1) for i in range(4)])
    tight = _view(9.0, "edf", _pending("a", 14.0, 1.0, arrival=9.0))
    capped = _state(deadline=20.0, reserve=False)
    assert capped.admit(buf, 9.0, QueryHistory(), _model(1.0, 1.0), tight).count == 2  # 9 + 2 s >= SlideTime 10
    assert _state(deadline=20.0, reserve=False, cap=False).admit(buf, 9.0, QueryHistory(), _model(1.0, 1.0),
                                                                 tight).count == 4


def test_t_sched_must_be_queue_or_paper() -> None:
    assert _state().t_sched == "queue"
    with pytest.raises(ValueError, match="t_sched"):
        _state(t_sched="eq3")
