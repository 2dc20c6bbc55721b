from __future__ import annotations

import pytest

from pacer import (
    AdmissionDecision,
    Dataset,
    DatasetBuffer,
    MicroBatch,
    Operator,
    OperatorDAG,
    PendingBatch,
    Placement,
    QuerySpec,
    ScheduleDecision,
)


def test_cpu_only_kinds_are_forced_onto_the_cpu() -> None:
    assert Operator("s", "sort").cpu_only
    assert Operator("k", "sink").cpu_only
    assert not Operator("a", "aggregate").cpu_only


def test_unknown_operator_kind_is_rejected_with_the_known_kinds() -> None:
    with pytest.raises(ValueError, match="unknown kind 'window'.*scan"):
        Operator("w", "window")  # type: ignore[arg-type]


def test_multi_source_dag_orders_parents_first() -> None:
    ops = (
        Operator("scanA", "scan"),
        Operator("scanL", "scan"),
        Operator("expand", "expand"),
        Operator("join", "join"),
        Operator("sink", "sink"),
    )
    dag = OperatorDAG(ops, (("scanA", "expand"), ("expand", "join"), ("scanL", "join"), ("join", "sink")))
    order = dag.topological_order()
    assert dag.sources() == ("scanA", "scanL")
    assert dag.sinks() == ("sink",)
    assert order.index("expand") < order.index("join") and order.index("scanL") < order.index("join")
    assert dag.parents("join") == ("expand", "scanL")


def test_cycle_and_dangling_edge_are_rejected() -> None:
    a, b = Operator("a", "scan"), Operator("b", "filter")
    with pytest.raises(ValueError, match="cycle"):
        OperatorDAG((a, b), (("a", "b"), ("b", "a")))
    with pytest.raises(ValueError, match="not in the DAG"):
        OperatorDAG((a, b), (("a", "zzz"),))


def test_buffer_tracks_sizes_and_takes_oldest_first() -> None:
    buf = DatasetBuffer([Dataset("a", 1.0, 10, 1), Dataset("b", 2.0, 20, 2), Dataset("c", 3.0, 0, 0)])
    assert (len(buf), buf.bytes, buf.rows, buf.earliest_arrival) == (3, 30, 3, 1.0)
    assert buf.prefix_bytes(2) == 30
    taken = buf.take(2)
    assert [d.id for d in taken] == ["a", "b"]
    assert (len(buf), buf.bytes, buf.earliest_arrival) == (1, 0, 3.0)
    with pytest.raises(ValueError):
        buf.take(5)


def test_deadline_defaults_to_slide_and_rejects_non_positive(dag: OperatorDAG) -> None:
    assert QuerySpec("s", dag, window_range=30, window_slide=10).effective_deadline == 10
    tumbling = QuerySpec("t", dag, window_range=30, window_slide=30)
    assert tumbling.tumbling and tumbling.slide_time == 0 and tumbling.effective_deadline == 30
    assert QuerySpec("d", dag, window_range=30, window_slide=10, deadline=4).effective_deadline == 4
    with pytest.raises(ValueError, match="deadline must be > 0"):
        QuerySpec("bad", dag, deadline=0)


def test_placement_validation_names_the_problem(dag: OperatorDAG) -> None:
    ok = Placement({op.id: "cpu" for op in dag.operators}, "x")
    ok.validate(dag)
    with pytest.raises(ValueError, match="unplaced"):
        Placement({"scan#0": "cpu"}, "x").validate(dag)
    bad = dict(ok.devices)
    bad["sort#3"] = "gpu"
    with pytest.raises(ValueError, match="CPU-only operator sort#3"):
        Placement(bad, "x").validate(dag)
    half = Placement({op.id: ("gpu" if i < 2 else "cpu") for i, op in enumerate(dag.operators)})
    assert half.gpu_ratio == pytest.approx(0.4)


def _pending(batch_id: str) -> PendingBatch:
    batch = MicroBatch(batch_id, "q", 1, (Dataset("d", 0.0, 1, 1),), 0.0)
    return PendingBatch(batch, deadline_at=10.0, estimated_run_s=1.0)


def test_schedule_must_be_a_permutation_within_the_cores() -> None:
    pending = [_pending("a"), _pending("b")]
    ScheduleDecision(("b", "a"), {"a": 1.0, "b": 1.0}).validate(pending, 2)
    with pytest.raises(ValueError, match="permutation"):
        ScheduleDecision(("a",)).validate(pending, 2, "x")
    with pytest.raises(ValueError, match="hands out 3.000 cores of 2"):
        ScheduleDecision(("a", "b"), {"a": 2.0, "b": 1.0}).validate(pending, 2, "x")


def test_admission_decision_helpers() -> None:
    buf = DatasetBuffer([Dataset("a", 1.0, 10, 1)])
    assert AdmissionDecision.admit_all(buf).count == 1
    assert not AdmissionDecision.wait().admits
