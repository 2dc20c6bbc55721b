"""Shared fixtures for pacer-core tests: a manual clock and a small DAG."""

from __future__ import annotations

import pytest

from pacer import Operator, OperatorDAG, QuerySpec
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
