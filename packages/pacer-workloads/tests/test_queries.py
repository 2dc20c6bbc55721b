from __future__ import annotations

import re

import pytest

from pacer import CPU_ONLY_KINDS, OperatorDAG, QuerySpec
from pacer_workloads import STREAMS, WORKLOADS, WorkloadSpec, make_query

AGGREGATION = [
    ("HashAggregate", "aggregate"), ("Exchange", "shuffle"), ("HashAggregate", "aggregate"),
    ("StateStoreRestore", "state"), ("HashAggregate", "aggregate"), ("StateStoreSave", "state"),
    ("HashAggregate", "aggregate"),
]
SLIDING = [("Expand", "expand"), ("Filter", "filter"), ("Project", "project")]


def _path(dag: OperatorDAG, source: str) -> list[str]:
    """Operator ids from ``source`` down to the sink (every DAG here has one child per operator)."""
    path = [source]
    while dag.children(path[-1]):
        (child,) = dag.children(path[-1])
        path.append(child)
    return path


def _plan(dag: OperatorDAG, ids: list[str]) -> list[tuple[str, str]]:
    return [(dag.operator(i).name, dag.operator(i).kind) for i in ids]


def test_the_six_workloads() -> None:
    assert sorted(WORKLOADS) == ["cm1", "cm2", "lr1", "lr1t", "lr2", "lr3"]
    windows = {k: (w.window_range, w.window_slide) for k, w in WORKLOADS.items()}
    assert windows == {
        "lr1": (30, 5), "lr1t": (30, 30), "lr2": (30, 10), "lr3": (30, 15), "cm1": (60, 10), "cm2": (60, 5),
    }


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_spec_is_consistent(workload: str) -> None:
    spec = WORKLOADS[workload]
    assert isinstance(spec, WorkloadSpec) and spec.id == workload and spec.stream in STREAMS
    assert spec.stream == ("linear_road" if workload.startswith("lr") else "cluster_monitoring")
    assert ("SegSpeedStr" if spec.stream == "linear_road" else "TaskEvents") in spec.sql
    match = re.search(r"\[range (\d+) slide (\d+)\]", spec.sql)
    assert match and (float(match[1]), float(match[2])) == (spec.window_range, spec.window_slide)
    assert spec.description


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_dag_is_well_formed(workload: str) -> None:
    spec = WORKLOADS[workload]
    dag = spec.dag
    ids = [op.id for op in dag.operators]
    assert all(re.fullmatch(r"[a-z_]+#\d+", i) for i in ids) and len(set(ids)) == len(ids)
    assert [int(i.split("#")[1]) for i in ids] == list(range(len(ids)))
    assert all(op.name for op in dag.operators)
    # one sink, every source a scan, parents before children
    assert dag.sinks() == (ids[-1],) and dag.operator(ids[-1]).kind == "sink"
    assert all(dag.operator(s).kind == "scan" for s in dag.sources())
    order = dag.topological_order()
    assert sorted(order) == sorted(ids) and order[-1] == ids[-1]
    position = {op_id: n for n, op_id in enumerate(order)}
    assert all(position[a] < position[b] for a, b in dag.edges)
    # core marks sort, state and sink operators CPU-only, and only those
    assert all(op.cpu_only == (op.kind in CPU_ONLY_KINDS) for op in dag.operators)
    # a sliding window expands, a tumbling one does not
    kinds = [op.kind for op in dag.operators]
    assert ("expand" in kinds) == (spec.window_slide < spec.window_range)


@pytest.mark.parametrize("workload", ["lr2", "lr3", "cm1", "cm2"])
def test_streaming_aggregations_follow_spark(workload: str) -> None:
    dag = WORKLOADS[workload].dag
    (source,) = dag.sources()
    plan = _plan(dag, _path(dag, source))
    head = [("MicroBatchScan", "scan")] + ([("Filter", "filter")] if workload == "cm2" else [])
    tail = {
        "lr2": [("Filter", "filter"), ("Project", "project")],
        "lr3": [("Project", "project")],
        "cm1": [("Project", "project"), ("Exchange", "shuffle"), ("Sort", "sort")],
        "cm2": [("Project", "project")],
    }[workload]
    assert plan == head + SLIDING + AGGREGATION + tail + [("ForeachBatchSink", "sink")]
    aggregates = [op.id for op in dag.operators if op.kind == "aggregate"]
    assert aggregates[0].startswith("agg_partial#") and aggregates[-1].startswith("agg_final#")


@pytest.mark.parametrize(("workload", "window"), [("lr1", SLIDING), ("lr1t", [("Filter", "filter"), ("Project", "project")])])
def test_lr1_is_a_self_join_of_two_scans(workload: str, window: list[tuple[str, str]]) -> None:
    dag = WORKLOADS[workload].dag
    windowed, plain = dag.sources()
    (join,) = [op.id for op in dag.operators if op.kind == "join"]
    assert dag.operator(join).name == "StreamingSymmetricHashJoin" and len(dag.parents(join)) == 2
    a, b = _path(dag, windowed), _path(dag, plain)
    assert a[a.index(join):] == b[b.index(join):], "both sides meet at the join and share the rest"
    assert _plan(dag, a[: a.index(join)]) == [("MicroBatchScan", "scan"), *window, ("Exchange", "shuffle")]
    assert _plan(dag, b[: b.index(join)]) == [
        ("MicroBatchScan", "scan"), ("Filter", "filter"), ("Project", "project"), ("Exchange", "shuffle"),
    ]
    assert _plan(dag, a[a.index(join) + 1:]) == [("Project", "project"), ("ForeachBatchSink", "sink")]


def test_lr1_operator_ids_are_stable() -> None:
    # pacer-sim's tests name these operators
    ids = {op.id for op in WORKLOADS["lr1"].dag.operators}
    assert {"join#9", "sink#11"} <= ids


def test_where_and_having_filters() -> None:
    cm2 = WORKLOADS["cm2"].dag
    assert cm2.operator(cm2.children(cm2.sources()[0])[0]).kind == "filter", "WHERE eventType = 1 right after the scan"
    assert "eventType = 1" in WORKLOADS["cm2"].sql and "ORDER BY" in WORKLOADS["cm1"].sql
    lr2 = WORKLOADS["lr2"].dag
    assert "HAVING avgSpeed < 40.0" in WORKLOADS["lr2"].sql
    assert lr2.parents(lr2.operators[-3].id)[0].startswith("agg_final#") and lr2.operators[-3].kind == "filter"


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_make_query_defaults(workload: str) -> None:
    query = make_query(workload)
    spec = WORKLOADS[workload]
    assert isinstance(query, QuerySpec)
    assert (query.id, query.workload, query.partitions, query.deadline) == (workload, workload, 2, None)
    assert query.dag == spec.dag and (query.window_range, query.window_slide) == (spec.window_range, spec.window_slide)
    assert query.effective_deadline == spec.window_slide
    assert query.tumbling == (workload == "lr1t")


def test_make_query_options_and_errors() -> None:
    spec = make_query("lr2", query_id="fast", deadline=4, partitions=8)
    assert (spec.id, spec.effective_deadline, spec.partitions) == ("fast", 4, 8)
    with pytest.raises(ValueError, match="unknown workload 'lr9'; known workloads: lr1, lr1t, lr2, lr3, cm1, cm2"):
        make_query("lr9")
    with pytest.raises(ValueError, match="deadline must be > 0"):
        make_query("lr2", deadline=0)
    with pytest.raises(ValueError, match="partitions must be >= 1"):
        make_query("lr2", partitions=0)
