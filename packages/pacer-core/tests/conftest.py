"""Shared fixtures for pacer-core tests: a manual clock, a small DAG, and a Controller that ran a few batches."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def dag() -> OperatorDAG:
    return OperatorDAG.chain(
        Operator("scan#0", "scan", "Scan"),
        Operator("filter#1", "filter", "Filter"),
        Operator("agg#2", "aggregate", "HashAggregate"),
        Operator("sort#3", "sort", "Sort"),
        Operator("sink#4", "sink", "ForeachBatchSink"),
    )


@pytest.fixture
def spec(dag: OperatorDAG) -> QuerySpec:
    return QuerySpec("q1", dag, window_range=30, window_slide=10)


@pytest.fixture
def ran(clock: ManualClock, spec: QuerySpec) -> Callable[[int], Controller]:
    """``ran(n)``: a Controller on 2 cores whose query ``q1`` (:func:`spec`) ran ``n`` batches, one a second, each of
    one 1000-byte dataset that arrived as it formed and took 0.5 s."""

    def run(batches: int) -> Controller:
        controller = Controller(clock=clock, cores=2, timer=None)
        controller.add_query(spec)
        for i in range(batches):
            clock.now = float(i)
            controller.arrive("q1", Dataset(f"d{i}", clock.now, 1000, 10))
            batch = controller.poll("q1")
            assert batch is not None
            controller.start(batch.id)
            clock.now += 0.5
            controller.complete(batch.id)
        return controller

    return run
