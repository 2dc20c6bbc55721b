"""pacer's own time: the ``timed`` context manager and what the Controller charges to each batch."""

from __future__ import annotations

import pytest

from pacer import Controller, Dataset, QuerySpec
from pacer.clock import ManualClock
from pacer.timing import timed


class _Ticks:
    """A timer that advances one second per reading: every timed step takes exactly 1 s."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_timed_records_a_finished_block_only() -> None:
    seen: list[tuple[float, str]] = []
    with timed(_Ticks(), lambda s, tag: seen.append((s, tag)), "ok"):
        pass
    with timed(_Ticks(), lambda s, tag: seen.append((s, tag)), "cancelled") as t:
        t.cancel()
    with pytest.raises(RuntimeError), timed(_Ticks(), lambda s, tag: seen.append((s, tag)), "raised"):
        raise RuntimeError("boom")
    with timed(None, lambda s, tag: seen.append((s, tag)), "untimed") as t:
        t.cancel()  # the no-op context takes a cancel too
    assert seen == [(1.0, "ok")]


def test_the_controller_charges_polls_scheduling_and_feedback_to_the_batch(clock: ManualClock,
                                                                            spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, timer=_Ticks())
    c.add_query(spec, admission="min-rows", admission_params={"min_rows": 20})
    c.arrive("q1", Dataset("a", 0.0, 100, 10))
    assert c.poll("q1") is None  # a poll that admits nothing is pacer's time too, on no batch
    clock.now = 1.0
    c.arrive("q1", Dataset("b", 1.0, 100, 10))
    batch = c.poll("q1")
    assert batch is not None
    assert c.schedule().order == (batch.id,)
    c.start(batch.id)
    clock.now = 3.0
    c.complete(batch.id)
    assert c.overhead.poll_s == (1.0, 1.0)
    assert c.overhead.per_batch_s == (3.0,)  # its poll, its scheduling and its feedback
    assert c.poll("q1") is None and c.overhead.poll_s == (1.0, 1.0)  # nothing buffered: no poll at all


def test_an_unmeasured_controller_records_no_overhead(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(spec)
    c.arrive("q1", Dataset("a", 0.0, 100, 10))
    batch = c.poll("q1")
    assert batch is not None
    c.schedule()
    c.start(batch.id)
    c.complete(batch.id)
    assert len(c.overhead.poll) == 0 and len(c.overhead.per_batch) == 0
