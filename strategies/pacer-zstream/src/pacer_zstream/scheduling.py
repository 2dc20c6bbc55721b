"""zStream's priority-based scheduler (Eq. 5, Algorithm 2): EDF and RDAS."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import PendingBatch, ScheduleDecision


def remaining(p: PendingBatch, now: float) -> float:
    """Eq. 5: time left until the deadline of the batch's earliest dataset (negative when late)."""
    return p.deadline_at - now


def edf(pending: Sequence[PendingBatch], now: float, *, preempt: bool = False) -> ScheduleDecision:
    """Earliest deadline first; ties by admission order (the sort is stable).

    :param preempt: False (default): running batches keep their place ahead of the waiting ones, which
        are sorted (batch-level EDF, what a gate in front of the sink can enact). True: running batches
        are sorted with the others, so a more urgent newcomer takes the cores first (zStream sorts
        Spark's TaskScheduler queue, whose free slots go to the most urgent task set: preemption at task
        boundaries; a runtime that can move cores between running batches, the simulator, enacts it).
    """
    if preempt:
        return ScheduleDecision(order=tuple(p.batch.id for p in sorted(pending, key=lambda p: remaining(p, now))))
    running = [p for p in pending if p.running]
    waiting = sorted((p for p in pending if not p.running), key=lambda p: remaining(p, now))
    return ScheduleDecision(order=tuple(p.batch.id for p in running + waiting))


def rdas_weights(pending: Sequence[PendingBatch], now: float, spread: float) -> dict[str, float]:
    """Min-max normalised urgency as weights in ``[1, 1 + spread]``.

    The priority is T_remain (Eq. 5); normalised n = (T - min) / (max - min), so the
    most urgent batch has n = 0. Its weight is ``1 + spread * (1 - n)``: the most
    urgent gets ``1 + spread``, the least urgent 1, and equal urgency gives equal
    weights (FAIR). The paper gives the normalisation, not the mapping; this is our choice.
    """
    times = {p.batch.id: remaining(p, now) for p in pending}
    lo, hi = min(times.values()), max(times.values())
    if hi - lo <= 1e-12:
        return dict.fromkeys(times, 1.0)
    return {b: 1.0 + spread * (1.0 - (t - lo) / (hi - lo)) for b, t in times.items()}


def rdas(pending: Sequence[PendingBatch], now: float, cores: int, spread: float) -> ScheduleDecision:
    """Resource-aware deadline scheduling: cores in proportion to the RDAS weights, most urgent first."""
    weights = rdas_weights(pending, now, spread)
    total = sum(weights.values())
    order = sorted(pending, key=lambda p: remaining(p, now))
    return ScheduleDecision(
        order=tuple(p.batch.id for p in order),
        shares={b: cores * w / total for b, w in weights.items()},
    )
