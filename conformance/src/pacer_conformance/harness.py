"""A small event-driven driver of a real Controller for decision-level conformance tests.

It is not a runtime: on the simulator's event loop (:class:`pacer.event_loop.EventLoop`) it plays
arrivals, polls idle queries every 10 ms of a :class:`~pacer.clock.ManualClock`, runs each admitted batch for a fixed,
size-dependent time and reports per-operator metrics, so that every strategy
decision goes through the real Controller exactly as a runtime would make it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer import BatchReport, Controller, Dataset, MicroBatch, OperatorMetric
from pacer.clock import ManualClock
from pacer.event_loop import POLL_INTERVAL, EventLoop


def default_cost(batch: MicroBatch) -> float:
    """Processing seconds of a batch: 0.3 s fixed (as the simulator's ``batch_overhead``) plus 2 MB/s."""
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
    tick: Callable[[float], None] | None = None,
    tick_every_s: float = 5.0,
) -> HarnessRun:
    """Play ``arrivals`` into ``controller`` and run until every dataset is processed or ``until``; ``tick`` is
    called at 0 s and every ``tick_every_s`` seconds after (a scaling strategy's turn), whatever else happens."""
    run = HarnessRun(controller)
    loop = EventLoop(controller, poll_interval=POLL_INTERVAL)  # one rank: events at equal times in push order
    for query_id, datasets in arrivals.items():
        for d in datasets:
            loop.push(d.arrival, 0, ("arrive", query_id, d))
    if tick is not None:
        loop.push(0.0, 0, ("tick", "", None))

    def step(t: float, _: int, event: Any) -> bool:
        clock.now = max(clock.now, t)
        if isinstance(event, tuple) and event[0] == "tick":
            assert tick is not None
            tick(t)
            if t + tick_every_s <= until:
                loop.push(t + tick_every_s, 0, ("tick", "", None))
            return False
        if isinstance(event, str):  # a poll of query ``event``
            batch = loop.poll(event, t)
            if batch is not None:
                run.admitted.append(batch)
                run.schedules.append(controller.schedule().order)
                controller.start(batch.id)
                loop.push(t + cost(batch), 0, ("done", batch.id, None))
            return False
        kind, key, dataset = event  # ("arrive", query id, dataset) or ("done", batch id, None)
        if kind == "arrive":
            controller.arrive(key, dataset)
            loop.poll_soon(key, t)
            return False
        batch = controller.batch(key).batch
        spent = cost(batch)
        ops = list(batch.placement.devices.items()) if batch.placement else []
        metrics = [OperatorMetric(op_id, device, spent / max(1, len(ops)), batch.bytes, batch.rows) for op_id, device in ops]
        report = controller.complete(batch.id, operator_metrics=metrics)
        run.reports.append(report)
        if controller.pending():
            run.schedules.append(controller.schedule().order)
        if controller.has_buffered(report.query_id):
            loop.poll_soon(report.query_id, t)
        return False

    loop.run(until, step)
    return run
