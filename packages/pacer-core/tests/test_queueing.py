"""pacer.queueing: the wait of a prospective batch behind what the scheduler runs first, and what a query learns
of the others (reserve, cap), with exact values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pacer import Dataset, DatasetBuffer, Devices, MicroBatch, PendingBatch, QueueWait, SystemView, queue_wait
from pacer.queueing import PROSPECTIVE_ID, Peers, capped_prefix, capped_size, remaining_s
from pacer.service_time import PRIOR_MARGIN, ServiceTimeModel


def _pending(query_id: str, deadline_at: float, run_s: float, *, started_at: float | None = None, seq: int = 1,
             arrival: float = 0.0) -> PendingBatch:
    batch = MicroBatch(f"{query_id}#{seq}", query_id, seq, (Dataset("d", arrival, 100, 1),), arrival)
    return PendingBatch(batch, deadline_at, run_s, started_at is not None, started_at)


def _system(scheduler: str, *pending: PendingBatch, now: float = 10.0, cores: int = 4) -> SystemView:
    return SystemView(now, cores, Devices(cores), scheduler, tuple(pending))


def test_a_queued_batch_counts_in_full_a_running_one_what_is_left() -> None:
    assert remaining_s(_pending("a", 20.0, 3.0), 10.0) == 3.0
    assert remaining_s(_pending("a", 20.0, 3.0, started_at=9.0), 10.0) == 2.0
    assert remaining_s(_pending("a", 20.0, 3.0, started_at=5.0), 10.0) == 0.0, "late: about to finish, never < 0"


def test_fifo_waits_for_every_pending_batch_of_the_other_queries() -> None:
    system = _system("fifo", _pending("a", 30.0, 4.0, started_at=8.5), _pending("b", 12.0, 2.0),
                     _pending("c", 50.0, 1.25))
    # a: 4 - 1.5 = 2.5 left; b and c in full, whatever their deadlines
    assert queue_wait(system, "q", 11.0) == QueueWait(5.75, 1.0, ("a#1", "b#1", "c#1"))


def test_an_unknown_scheduler_is_taken_for_fifo() -> None:
    system = _system("my-own", _pending("a", 30.0, 4.0), _pending("b", 12.0, 2.0))
    assert queue_wait(system, "q", 1.0).wait_s == 6.0


def test_the_query_s_own_batches_never_count() -> None:
    system = _system("fifo", _pending("q", 11.0, 9.0), _pending("a", 30.0, 1.5))
    assert queue_wait(system, "q", 20.0) == QueueWait(1.5, 1.0, ("a#1",))


def test_edf_waits_for_the_running_batches_and_the_queued_ones_due_no_later() -> None:
    system = _system(
        "edf",
        _pending("a", 40.0, 3.0, started_at=9.0),  # running, due late: still ahead (not preempted), 2 s left
        _pending("b", 18.0, 1.0),  # due after the prospective batch: behind it
        _pending("c", 14.0, 0.5),  # due first
        _pending("d", 15.0, 0.75),  # due at the same time: admitted first, so ahead (stable sort)
    )
    wait = queue_wait(system, "q", 15.0)
    assert wait == QueueWait(3.25, 1.0, ("a#1", "c#1", "d#1"))
    assert queue_wait(system, "q", 13.0).ahead == ("a#1",), "due before every queued batch: only the running one"
    assert queue_wait(system, "q", 13.0).wait_s == 2.0


def test_fair_has_no_wait_and_an_equal_share() -> None:
    system = _system("fair", _pending("a", 20.0, 3.0, started_at=9.0), _pending("b", 20.0, 3.0))
    assert queue_wait(system, "q", 15.0) == QueueWait(0.0, pytest.approx(1.0 / 3.0))  # type: ignore[arg-type]
    assert queue_wait(_system("fair"), "q", 15.0) == QueueWait(0.0, 1.0), "alone: every core"


def _urgency(pending: Sequence[PendingBatch], now: float) -> Mapping[str, float]:
    """A weight rule as RDAS's: 1 + 2 x (1 - normalised remaining time), most urgent 3, least urgent 1."""
    times = {p.batch.id: p.deadline_at - now for p in pending}
    lo, hi = min(times.values()), max(times.values())
    return {b: 1.0 + 2.0 * (1.0 - (t - lo) / (hi - lo)) for b, t in times.items()}


def test_rdas_share_is_the_prospective_batch_s_weight_by_the_scheduler_s_rule() -> None:
    system = _system("rdas", _pending("a", 30.0, 3.0, started_at=9.0), _pending("b", 20.0, 3.0))
    seen: list[str] = []

    def rule(pending: Sequence[PendingBatch], now: float) -> Mapping[str, float]:
        seen.extend(p.batch.id for p in pending)
        return _urgency(pending, now)

    # remaining: a 20 s, b 10 s, the prospective batch 0 s (most urgent): weights 1, 2, 3 -> 3 / 6
    assert queue_wait(system, "q", 10.0, weights=rule) == QueueWait(0.0, 0.5)
    assert seen == ["a#1", "b#1", PROSPECTIVE_ID]
    # least urgent: weight 1 of 1 + 3 + 2 (a 20 s, b 10 s, it 30 s)
    assert queue_wait(system, "q", 40.0, weights=_urgency).share == pytest.approx(1.0 / 6.0)
    assert queue_wait(system, "q", 10.0).share == pytest.approx(1.0 / 3.0), "no rule: FAIR's equal split"
    assert queue_wait(_system("fair", *system.pending), "q", 10.0, weights=_urgency).share == pytest.approx(1.0 / 3.0), \
        "FAIR ignores a weight rule"


def test_a_weight_rule_that_gives_nothing_leaves_a_vanishing_share_not_zero() -> None:
    system = _system("rdas", _pending("a", 30.0, 3.0))
    assert queue_wait(system, "q", 10.0, weights=lambda pending, now: {"a#1": 1.0}).share == 1e-9


# ---------------------------------------------------------------------- Peers


def test_peers_learn_deadlines_and_recent_batch_sizes_from_the_pending_batches() -> None:
    peers = Peers()
    peers.observe(_system("edf", _pending("a", 7.0, 1.5, arrival=2.0), _pending("q", 99.0, 9.0)), "q")
    peers.observe(_system("edf", _pending("a", 7.0, 1.5, arrival=2.0)), "q")  # the same batch again: once
    peers.observe(_system("edf", _pending("a", 9.0, 0.5, seq=2, arrival=4.0), now=12.0), "q")
    assert set(peers.known) == {"a"}
    a = peers.known["a"]
    assert (a.deadline, list(a.runs), a.longest, a.seen_at) == (5.0, [1.5, 0.5], 1.5, 12.0)
    peers.observe(_system("edf", now=12.0 + peers.forget_s + 0.1), "q")
    assert peers.known == {}, "a query not seen pending for forget_s is forgotten"


def test_the_reserve_is_the_longest_recent_batch_of_another_query_under_fifo_and_edf_only() -> None:
    peers = Peers()
    peers.observe(_system("edf", _pending("a", 5.0, 1.0), _pending("b", 20.0, 2.5)), "q")
    assert peers.reserve(_system("edf")) == 2.5
    assert peers.reserve(_system("fifo")) == 2.5
    assert peers.reserve(_system("fair")) == peers.reserve(_system("rdas")) == 0.0
    assert Peers().reserve(_system("edf")) == 0.0, "nobody seen: nothing to reserve"


def test_the_cap_lets_every_tighter_query_absorb_two_blockings() -> None:
    peers = Peers()
    peers.observe(_system("edf", _pending("a", 5.0, 1.0), _pending("b", 10.0, 2.0), _pending("c", 20.0, 6.0)), "q")
    # for a query due in 20 s: a (5 - 2 x 1) / 2 = 1.5, b (10 - 2 x 2) / 2 = 3: the least
    assert peers.cap(20.0) == 1.5
    assert peers.cap(10.0) == 1.5, "only queries with earlier deadlines count (a)"
    assert peers.cap(5.0) is None, "the tightest query is capped by nobody"
    assert peers.cap(4.0) is None


def test_the_cap_is_never_below_the_tighter_query_s_own_batch() -> None:
    peers = Peers()
    peers.observe(_system("edf", _pending("a", 5.0, 2.0)), "q")  # (5 - 4) / 2 = 0.5 < 2: too tight anyway
    assert peers.cap(20.0) == 2.0


def test_the_capped_size_takes_the_margin_at_most_the_prior_one() -> None:
    model = ServiceTimeModel()
    for mb in (1.0, 2.0, 3.0) * 5:
        model.observe(mb * 1e6, 0.5 + mb)  # exact: margin 1 once ten errors are seen
    assert model.margin == pytest.approx(1.0)
    assert capped_size(model)(2_000_000) == pytest.approx(2.5)
    for _ in range(100):
        model.observe(1e6, 6.0)  # a preempted batch: 4x its prediction
    assert model.margin > PRIOR_MARGIN
    assert capped_size(model)(2_000_000) == pytest.approx(model.predict_raw(2_000_000) * PRIOR_MARGIN)


def test_the_capped_prefix_is_the_largest_within_the_cap_at_least_one_dataset() -> None:
    buf = DatasetBuffer([Dataset(f"d{i}", float(i), 1_000_000, 1) for i in range(4)])

    def size(nbytes: int) -> float:
        return 0.5 + nbytes / 1e6

    assert capped_prefix(buf, size, 2.5) == 2  # 1.5, 2.5, 3.5
    assert capped_prefix(buf, size, 0.1) == 1
    assert capped_prefix(buf, size, 100.0) == 4
