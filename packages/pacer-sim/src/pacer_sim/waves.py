"""Task slots and waves: how the simulated engine hands its cores to batches, as Spark's task scheduler does.

On Spark a batch's stage of ``P`` tasks (one per partition) runs on the task slots its job gets, one task per slot at
a time, so it takes ``ceil(P / slots)`` waves of one task's time, not ``P / slots`` of it: 3 tasks on 2 slots take two
task times, the second wave leaving a slot idle. Slots are whole cores; a running task is never preempted (a slot a
scheduler takes from a batch is handed on when the task on it ends); a slot that frees goes to the batches in the
scheduler's order (FIFO) or by their weights (FAIR pools, pacer's shares). A core of an executor added at run time
runs its first task slower (:class:`SlotPool` keeps which slots are still cold).

Fractional cores (a resource change that takes 25 % of 2 cores) become ``ceil(cores)`` slots, each running at
``cores / slots`` of a core's speed: the cores are shared with another tenant, not fewer task slots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

_EPS = 1e-9


def waves(tasks: int, slots: int) -> int:
    """Rounds a stage of ``tasks`` tasks runs in on ``slots`` task slots (``ceil(tasks / slots)``; 0 without tasks)."""
    if tasks <= 0:
        return 0
    return math.ceil(tasks / max(1, slots))


def slot_capacity(cores: float) -> tuple[int, float]:
    """``cores`` (possibly fractional) as whole task slots and the speed of each: ``(ceil(cores), cores / slots)``;
    ``(0, 1.0)`` without cores."""
    if cores <= _EPS:
        return 0, 1.0
    slots = math.ceil(cores - _EPS)
    return slots, cores / slots


def allocate_slots(order: Sequence[str], demand: Mapping[str, int], shares: Mapping[str, float],
                   slots: int) -> dict[str, int]:
    """Whole task slots per batch: what each should hold once its running tasks allow.

    Without ``shares`` (FIFO), in ``order``, each batch takes what it can use (``demand``: its tasks not yet done).
    With them, slots by weight (water-filling: capped at each batch's demand, the excess handed on, as Spark's FAIR
    pools do), then whole: each batch its floor, the slots left to the largest remainders (ties in ``order``).
    A batch with no weight gets none.
    """
    out = dict.fromkeys(order, 0)
    if not shares:
        left = slots
        for b in order:
            take = min(left, demand[b])
            out[b] = take
            left -= take
        return out
    fluid = dict.fromkeys(order, 0.0)
    weights = {b: max(0.0, shares.get(b, 0.0)) for b in order}
    left_f, open_ = float(slots), [b for b in order if weights[b] > 0 and demand[b] > 0]
    while left_f > _EPS and open_:
        total = sum(weights[b] for b in open_)
        grant = {b: left_f * weights[b] / total for b in open_}
        left_f = 0.0
        still = []
        for b in open_:
            give = min(grant[b], demand[b] - fluid[b])
            fluid[b] += give
            left_f += grant[b] - give
            if fluid[b] < demand[b] - _EPS:
                still.append(b)
        open_ = still
    for b in order:
        out[b] = min(demand[b], math.floor(fluid[b] + _EPS))
    left = slots - sum(out.values())
    for b in sorted(order, key=lambda b: out[b] - fluid[b]):  # largest remainder first; sorted() keeps ties in order
        if left <= 0:
            break
        if fluid[b] - out[b] > _EPS and out[b] < demand[b]:
            out[b] += 1
            left -= 1
    return out


class SlotHolder(Protocol):
    """What :meth:`SlotPool.hand_out` needs of a batch: the slots it holds, how many of them are cold, and how many it
    cannot give back now (those its running tasks hold)."""

    slots: int
    cold: int

    @property
    def pinned(self) -> int: ...  # pragma: no cover - a protocol


@dataclass
class SlotPool:
    """The engine's task slots now: how many, how fast, and how many free ones are cold.

    :ivar total: whole task slots (:func:`slot_capacity` of the cores available).
    :ivar speed: each slot's share of a core's speed (1.0 unless a resource change took part of a core).
    :ivar cold: free slots of executors added at run time that have run no task yet; a batch given slots takes the
        warm ones first, and the first task on a cold one runs ``executor_warmup_s`` longer.
    """

    total: int = 0
    speed: float = 1.0
    cold: int = 0

    def resize(self, cores: float) -> None:
        """The cores available changed (a resource change, an executor added or removed)."""
        self.total, self.speed = slot_capacity(cores)

    def added(self, slots: int) -> None:
        """An executor of ``slots`` cores joined: its slots are cold until each ran a task."""
        self.cold += slots

    def removed(self, slots: int) -> None:
        """An executor of ``slots`` cores left: the idlest go first, so cold slots before warm ones."""
        self.cold = max(0, self.cold - slots)

    def take(self, slots: int, held: int) -> int:
        """Hand ``slots`` free slots to a batch while ``held`` are held by all batches: how many of them are cold."""
        warm_free = max(0, self.total - held - self.cold)
        cold = min(self.cold, max(0, slots - warm_free))
        self.cold -= cold
        return cold

    def give_back(self, cold: int) -> None:
        """A batch gave back slots, ``cold`` of them never used: they stay cold."""
        self.cold += cold

    def hand_out(self, holders: Mapping[str, SlotHolder], targets: Mapping[str, int], order: Sequence[str]) -> int:
        """Move the ``holders``' slots towards their ``targets``: each gives back what is over its target and not
        pinned by a running task, then the free slots go to those under their target, in ``order``.

        :return: the slots held afterwards, by all (more than :attr:`total` only while running tasks pin them after
            cores were taken away).
        """
        held = 0
        for key, holder in holders.items():
            keep = max(holder.pinned, min(holder.slots, targets.get(key, 0)))
            if keep < holder.slots:
                cold = min(holder.cold, holder.slots - keep)
                holder.cold -= cold
                self.give_back(cold)
                holder.slots = keep
            held += holder.slots
        self.cold = min(self.cold, max(0, self.total - held))
        for key in order:
            holder = holders[key]
            grant = min(targets.get(key, 0) - holder.slots, self.total - held)
            if grant > 0:
                holder.cold += self.take(grant, held)
                holder.slots += grant
                held += grant
        return held
