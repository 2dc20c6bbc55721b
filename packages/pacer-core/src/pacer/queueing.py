"""What a prospective micro-batch will wait for: the batches the scheduler runs before it.

zStream's Eq. 1 (and LMStream's Eq. 6 once it knows it shares the cores) adds to a batch's buffering and
processing time its *scheduling* time: how long it waits in the queue before it gets the cores. This
module predicts that wait from the :class:`~pacer.model.SystemView` the admission is given, for the
schedulers pacer ships, as they actually run (the simulator enacts exactly this; pacer-spark's gate the
same per batch):

- **fifo** (and any scheduler this module does not know): batches run in admission order, each taking the
  cores it can use. A batch admitted now comes last, so every pending batch is ahead of it.
- **edf** (``preempt=False``, its default): running batches keep their cores; the queued ones run earliest
  ``deadline_at`` first, ties in admission order (a stable sort). A batch admitted now is behind every
  running batch and every queued batch whose ``deadline_at`` is at most its own.
- **fair**, **rdas**: every pending batch, running or not, gets a share of the cores at once (the shares are
  handed out again on every admission and completion, so a running batch gives up cores to a newcomer).
  There is no wait; the batch runs on its share, so its processing time is its full-cores estimate divided
  by :attr:`QueueWait.share`. FAIR splits the cores equally among the pending batches; a weighted scheduler
  (RDAS) gives them in proportion to weights that the caller computes with the scheduler's own rule.

The wait is the sum of the estimated remaining time of the batches ahead, each at full cores, run one after
another: ``estimated_run_s`` for a queued batch, ``estimated_run_s − (now − started_at)`` (at least 0) for a
running one (:func:`remaining_s`). It is exact for batches that use every core (a batch's partitions ≥ the
cores) and estimates that hold; where batches use fewer cores and run side by side it is an upper bound.
What it cannot know is the future: a batch another query admits later with an earlier deadline overtakes
this one under EDF, and a share shrinks when other batches arrive and grows when they finish (the share is
the one at admission). Under EDF with ``preempt=True`` a running batch with a later deadline gives up its
cores, so the wait here is an upper bound there too.

**What the wait cannot see: the batches admitted while a query buffers** (:class:`Peers`). Under FIFO and EDF a
batch, once running, keeps the cores until it ends, and the wait of a query still buffering can jump when another
query admits a batch meanwhile: under FIFO any batch admitted first runs first; under EDF so does one due first,
and a deadline-aware admission admits every batch just in time, so a batch of a query with a looser deadline is
often due first when it is admitted; and a batch that starts while the cores are free (or the moment they fall
free, before the query that just finished polls again) runs to its end whatever its deadline. Such a jump is seen
at the next poll; if by then the deadline can no longer be met, the miss is certain. Measured on the simulator,
this, not the wait behind the batches already queued, is what made the tightest of three queries miss
(pacer-zstream's README). Two rules bound it:

- **Reserve.** While it waits, a query keeps its predicted maximum latency below its deadline by one such jump:
  the longest recent batch of another query (:meth:`Peers.reserve`).
- **Cap.** A query keeps each batch short enough that a query with an earlier deadline can absorb being blocked
  by it (:meth:`Peers.cap`, :func:`capped_size`); the rest of its buffer goes into its next batches.

The deadlines and batch sizes of the other queries are learned from their pending batches in the
:class:`~pacer.model.SystemView` at every poll (a batch's deadline less its oldest dataset's arrival is its
query's deadline; its size is the Controller's full-cores estimate); a query forgets another it has not seen
pending for ``forget_s`` seconds. Under FAIR and RDAS a newcomer takes its share of the cores at once, so
neither rule applies.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pacer.model import DatasetBuffer, MicroBatch, PendingBatch, SystemView
from pacer.service_time import PRIOR_MARGIN, ServiceTimeModel

__all__ = [
    "PEER_WINDOW",
    "PROSPECTIVE_ID",
    "SHARE_SCHEDULERS",
    "Peer",
    "Peers",
    "QueueWait",
    "Weights",
    "capped_prefix",
    "capped_size",
    "queue_wait",
    "remaining_s",
]

#: Schedulers that give every pending batch a share of the cores at once instead of a place in a queue.
SHARE_SCHEDULERS = frozenset({"fair", "rdas"})

#: A weighted scheduler's rule: pending batches and the clock -> batch id -> weight (RDAS's weights).
Weights = Callable[[Sequence[PendingBatch], float], Mapping[str, float]]

#: The batch id the prospective batch has among the pending batches handed to a :data:`Weights` rule.
PROSPECTIVE_ID = "<prospective>"


@dataclass(frozen=True, slots=True)
class QueueWait:
    """The predicted scheduling of a prospective micro-batch.

    :param wait_s: seconds from its admission until it gets the cores (T_sched).
    :param share: the fraction of the cores it then runs on, in (0, 1]: 1 under FIFO and EDF, its FAIR or
        weighted share under FAIR/RDAS. Its processing time is the full-cores estimate divided by it.
    :param ahead: ids of the batches it waits for, in the order they run.
    """

    wait_s: float
    share: float = 1.0
    ahead: tuple[str, ...] = ()


def remaining_s(pending: PendingBatch, now: float) -> float:
    """Estimated seconds left of a pending batch at full cores: all of ``estimated_run_s`` while it is queued,
    ``estimated_run_s − (now − started_at)`` once it runs (at least 0: a batch running late is counted as
    about to finish)."""
    if not pending.running or pending.started_at is None:
        return max(0.0, pending.estimated_run_s)
    return max(0.0, pending.estimated_run_s - (now - pending.started_at))


def queue_wait(system: SystemView, query_id: str, deadline_at: float, *, weights: Weights | None = None) -> QueueWait:
    """Predict the wait of a batch of ``query_id`` admitted now, with absolute deadline ``deadline_at`` (its
    oldest dataset's arrival + the query's deadline, as the Controller gives it to the scheduler).

    Only other queries' batches count (a query has at most one batch in flight, and it is asked to admit only
    when it has none). See the module docstring for the model of each scheduler.

    :param system: the view the admission was given (``system.scheduler`` picks the model).
    :param weights: for a weighted share scheduler (``rdas``): its weight rule, called with the other pending
        batches plus the prospective one (batch id :data:`PROSPECTIVE_ID`, not running, with this
        ``deadline_at`` and no estimate); None: equal weights (FAIR's split).
    :return: the wait, the core share and the batches ahead.
    """
    now = system.now
    others = system.others(query_id)
    if system.scheduler in SHARE_SCHEDULERS:
        rule = None if system.scheduler == "fair" else weights
        return QueueWait(0.0, _share(others, query_id, deadline_at, now, rule))
    if system.scheduler == "edf":
        running = [p for p in others if p.running]
        queued = sorted((p for p in others if not p.running and p.deadline_at <= deadline_at),
                        key=lambda p: p.deadline_at)
        ahead = running + queued
    else:
        ahead = list(others)
    return QueueWait(sum(remaining_s(p, now) for p in ahead), 1.0, tuple(p.batch.id for p in ahead))


def _share(others: Sequence[PendingBatch], query_id: str, deadline_at: float, now: float,
           weights: Weights | None) -> float:
    """The prospective batch's fraction of the cores among ``others``: equal, or by ``weights`` (a batch the
    rule gives no weight gets a vanishing share, 1e-9, never 0)."""
    if not others:
        return 1.0
    if weights is None:
        return 1.0 / (len(others) + 1)
    prospective = PendingBatch(MicroBatch(PROSPECTIVE_ID, query_id, 0, (), now), deadline_at, 0.0)
    given = weights([*others, prospective], now)
    total = sum(max(0.0, float(w)) for w in given.values())
    mine = max(0.0, float(given.get(PROSPECTIVE_ID, 0.0)))
    return max(mine / total, 1e-9) if total > 0 else 1.0 / (len(others) + 1)


#: Recent batches remembered per other query.
PEER_WINDOW = 16


@dataclass
class Peer:
    """Another query as seen from this one: its deadline, its recent batches' full-cores estimates, when seen."""

    deadline: float
    runs: deque[float] = field(default_factory=lambda: deque(maxlen=PEER_WINDOW))
    last_batch: str = ""
    seen_at: float = 0.0

    @property
    def longest(self) -> float:
        """The longest recent batch (full-cores estimate), 0 before any."""
        return max(self.runs, default=0.0)


@dataclass
class Peers:
    """The other queries one query has seen pending, with what each of its batches is estimated to cost.

    :param forget_s: drop a query not seen pending for this long (a stopped query no longer constrains).
    """

    forget_s: float = 120.0
    known: dict[str, Peer] = field(default_factory=dict)

    def observe(self, system: SystemView, query_id: str) -> None:
        """Learn from the batches of other queries pending now."""
        for p in system.others(query_id):
            peer = self.known.get(p.batch.query_id)
            deadline = p.deadline_at - p.batch.earliest_arrival
            if peer is None:
                peer = self.known[p.batch.query_id] = Peer(deadline)
            peer.deadline, peer.seen_at = deadline, system.now
            if p.batch.id != peer.last_batch:
                peer.last_batch = p.batch.id
                peer.runs.append(p.estimated_run_s)
        for other in [q for q, peer in self.known.items() if system.now - peer.seen_at > self.forget_s]:
            del self.known[other]

    def cap(self, deadline: float) -> float | None:
        """The most a batch of a query with ``deadline`` should take (full cores) so that a query with an earlier
        deadline does not miss for it: the least, over those queries, of (their deadline − 2 × their longest recent
        batch) / 2, but at least their longest recent batch; None when no other query has an earlier deadline.

        Why: a tighter query's oldest dataset can arrive just after its previous batch was admitted and wait for
        that batch (queued behind at most one blocking batch, then processed), then, when it completes, for the
        batch queued next, which starts before the tighter query polls again, and for its own processing:
        ``2 × blocking + 2 × its batch`` must stay within its deadline. Below the tighter query's own batch size
        the deadline is too tight for the load whatever the others do, and a smaller cap would only add
        per-batch costs.
        """
        tighter = [max((peer.deadline - 2.0 * peer.longest) / 2.0, peer.longest)
                   for peer in self.known.values() if peer.deadline < deadline - 1e-9]
        return min(tighter) if tighter else None

    def reserve(self, system: SystemView) -> float:
        """The largest jump of this query's wait before its next poll: the longest recent batch of another query
        (see the module docstring); 0 under FAIR/RDAS."""
        if system.scheduler in SHARE_SCHEDULERS:
            return 0.0
        return max((peer.longest for peer in self.known.values()), default=0.0)


def capped_size(model: ServiceTimeModel) -> Callable[[int], float]:
    """What :meth:`Peers.cap` bounds: a batch's full-cores service time with the model's margin, the margin at most
    :data:`~pacer.service_time.PRIOR_MARGIN` (under a preemptive scheduler the engine time of a batch includes the
    time it was preempted, the margin runs away, and an unbounded one would shrink the batches to single
    datasets)."""
    margin = min(model.margin, PRIOR_MARGIN)
    return lambda nbytes: model.predict_raw(nbytes) * margin


def capped_prefix(buffer: DatasetBuffer, size: Callable[[int], float], cap: float) -> int:
    """The largest prefix of ``buffer`` (oldest first) whose ``size`` stays within ``cap`` seconds, at least 1."""
    nbytes = 0
    for taken, dataset in enumerate(buffer):
        nbytes += dataset.bytes
        if taken and size(nbytes) > cap:
            return taken
    return len(buffer)
