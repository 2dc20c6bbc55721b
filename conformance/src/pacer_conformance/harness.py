"""A small event-driven driver of a real Controller for decision-level conformance tests.

It is not a runtime: it plays arrivals, polls idle queries every 10 ms of a
:class:`~pacer.clock.ManualClock`, runs each admitted batch for a fixed,
size-dependent time and reports per-operator metrics, so that every strategy
decision goes through the real Controller exactly as a runtime would make it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pacer import BatchReport, Controller, Dataset, MicroBatch, OperatorMetric
from pacer.clock import ManualClock

POLL_INTERVAL = 0.01


def default_cost(batch: MicroBatch) -> float:
    """Processing seconds of a batch: Spark's ~0.3 s fixed cost plus 2 MB/s."""
    return 0.3 + batch.bytes / 2e6


@dataclass
class HarnessRun:
    """What a harness run produced."""

    controller: Controller
    admitted: list[MicroBatch] = field(default_factory=list)
    reports: list[BatchReport] = field(default_factory=list)
    schedules: list[tuple[str, ...]] = field(default_factory=list)


def steady_arrivals(query_id: str, *, start: float, end: float, nbytes: int = 65_000, rows: int = 1000) -> list[Dataset]:
    """One dataset per second in ``(start, end]``."""
    count = round(end - start)
    return [Dataset(f"{query_id}-{int(start) + i}", start + i + 1.0, nbytes, rows) for i in range(count)]


def drive(
    controller: Controller,
    clock: ManualClock,
    arrivals: Mapping[str, Sequence[Dataset]],
    *,
    until: float,
    cost: Callable[[MicroBatch], float] = default_cost,
) -> HarnessRun:
    """Play ``arrivals`` into ``controller`` and run until every dataset is processed or ``until``."""
    run = HarnessRun(controller)
    events: list[tuple[float, int, str, str]] = []  # (time, seq, kind, payload)
    seq = 0

    def push(t: float, kind: str, payload: str) -> None:
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, payload))
        seq += 1

    pending_data = {q: list(ds) for q, ds in arrivals.items()}
    by_id: dict[str, Dataset] = {}
    for q, datasets in pending_data.items():
        for d in datasets:
            by_id[f"{q}\0{d.id}"] = d
            push(d.arrival, "arrive", f"{q}\0{d.id}")
    polling: set[str] = set()

    def poll_soon(query_id: str, t: float) -> None:
        if query_id not in polling:
            polling.add(query_id)
            push(t, "poll", query_id)

    while events:
        t, _, kind, payload = heapq.heappop(events)
        if t > until:
            break
        clock.now = max(clock.now, t)
        if kind == "arrive":
            query_id, _ = payload.split("\0", 1)
            controller.arrive(query_id, by_id[payload])
            poll_soon(query_id, t)
        elif kind == "poll":
            polling.discard(payload)
            batch = controller.poll(payload)
            if batch is not None:
                run.admitted.append(batch)
                decision = controller.schedule()
                run.schedules.append(decision.order)
                controller.start(batch.id)
                push(t + cost(batch), "done", batch.id)
            elif not controller.busy(payload) and controller.buffered(payload):
                poll_soon(payload, t + POLL_INTERVAL)
        elif kind == "done":
            batch = next(b for b in controller.pending() if b.id == payload)
            spent = cost(batch)
            placement = batch.placement
            ops = list(placement.devices.items()) if placement else []
            metrics = [
                OperatorMetric(op_id, device, spent / max(1, len(ops)), batch.bytes, batch.rows) for op_id, device in ops
            ]
            report = controller.complete(batch.id, operator_metrics=metrics)
            run.reports.append(report)
            if controller.pending():
                run.schedules.append(controller.schedule().order)
            if controller.buffered(report.query_id):
                poll_soon(report.query_id, t)
    return run
