"""Spark executed plans as pacer operator DAGs, their SQL metrics as OperatorMetric, and RAPIDS enactment."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from pacer import Device, Operator, OperatorDAG, OperatorMetric, Placement
from pacer_spark.jvm.plans import PlanNode

log = logging.getLogger("pacer_spark.plan.dag")

#: Plan nodes that only wrap or adapt others: looked through, never operators of their own.
WRAPPERS = frozenset({
    "WholeStageCodegen", "InputAdapter", "ColumnarToRow", "RowToColumnar", "AdaptiveSparkPlan",
    "EventTimeWatermark", "DeserializeToObject", "SerializeFromObject", "AQEShuffleRead", "GpuColumnarToRow",
    "GpuRowToColumnar",
})

#: Spark node name -> pacer operator kind (names not listed are matched by the rules in :func:`kind_of`).
NODE_KINDS: Mapping[str, str] = {
    "Filter": "filter", "Project": "project", "Expand": "expand", "HashAggregate": "aggregate",
    "ObjectHashAggregate": "aggregate", "SortAggregate": "aggregate", "Sort": "sort", "Exchange": "shuffle",
    "ShuffleExchange": "shuffle", "ReusedExchange": "shuffle", "BroadcastExchange": "shuffle",
    "StateStoreRestore": "state", "StateStoreSave": "state", "SessionWindowStateStoreRestore": "state",
    "SessionWindowStateStoreSave": "state", "StreamingDeduplicate": "state",
}

#: pacer operator name (a Spark node name) -> the RAPIDS exec whose ``spark.rapids.sql.exec.<Exec>`` conf enables it.
RAPIDS_EXECS: Mapping[str, str] = {
    "Filter": "FilterExec", "Project": "ProjectExec", "Expand": "ExpandExec", "HashAggregate": "HashAggregateExec",
    "ObjectHashAggregate": "ObjectHashAggregateExec", "SortAggregate": "SortAggregateExec", "Sort": "SortExec",
    "Exchange": "ShuffleExchangeExec", "BatchScan": "BatchScanExec",
    "ShuffledHashJoin": "ShuffledHashJoinExec", "SortMergeJoin": "SortMergeJoinExec",
    "BroadcastHashJoin": "BroadcastHashJoinExec",
}
RAPIDS_PLUGIN = "com.nvidia.spark.SQLPlugin"
#: Stateful operators that are not state stores: Spark shuffles their inputs for them, RAPIDS has no exec for them.
STATEFUL_JOINS = frozenset({"StreamingSymmetricHashJoin"})
#: The start of a placement's note when RAPIDS' confs were coarsened to operator types.
COARSENED = "coarsened to operator types"
#: The start of a placement's note on a session whose RAPIDS runs in ``explainOnly`` mode: RAPIDS planned the
#: placement (its confs were set and it tagged the plan), and every operator ran on the CPU.
EXPLAIN_ONLY = "explainOnly"


def kind_of(name: str) -> str | None:
    """The pacer kind of a Spark node name, or None for wrappers and nodes pacer does not model."""
    name = name.removeprefix("Gpu")
    if name in WRAPPERS:
        return None
    if name in NODE_KINDS:
        return NODE_KINDS[name]
    if "Scan" in name:
        return "scan"
    if "Join" in name:
        return "join"
    if "Exchange" in name:
        return "shuffle"
    if name.startswith("StateStore"):
        return "state"
    return None


def _operators(root: PlanNode) -> list[tuple[PlanNode, str]]:
    return [(n, k) for n in root.walk_post() if (k := kind_of(n.name)) is not None]


def dag_from_plan(root: PlanNode) -> OperatorDAG:
    """The operator DAG of an executed plan (wrappers looked through, a sink added at the root)."""
    ops: list[Operator] = []
    edges: list[tuple[str, str]] = []
    ids: dict[int, str] = {}

    def visit(node: PlanNode, stateful_above: bool = False) -> list[str]:
        """Return the ids of the nearest modelled operators at or under ``node``; ``stateful_above``: a state
        store consumes this node's output with no shuffle in between."""
        kind = kind_of(node.name)
        name = node.name.removeprefix("Gpu")
        below_stateful = (stateful_above or stateful(kind, name)) and kind != "shuffle"
        below = [i for child in node.children for i in visit(child, below_stateful)]
        if kind is None:
            return below
        op_id = f"{kind}#{len(ops)}"
        # A node with no RAPIDS exec pacer can switch (the streaming scan MicroBatchScan, the stream-stream
        # join, state stores) runs on the CPU whatever a placement says: mark it so, so that placements and
        # gpu_operator_ratio never count it as GPU. So does the shuffle a state store requires (Spark's
        # REQUIRED_BY_STATEFUL_OPERATOR origin), which RAPIDS never runs on the GPU.
        pinned = name not in RAPIDS_EXECS or (kind == "shuffle" and stateful_above)
        ops.append(Operator(op_id, kind, name, cpu_only=pinned))  # type: ignore[arg-type]
        ids[id(node)] = op_id
        edges.extend((b, op_id) for b in below)
        return [op_id]

    tops = visit(root)
    sink = Operator(f"sink#{len(ops)}", "sink", "ForeachBatchSink")
    ops.append(sink)
    edges.extend((t, sink.id) for t in tops)
    return OperatorDAG(tuple(ops), tuple(edges))


def stateful(kind: str | None, name: str) -> bool:
    """Whether an operator keeps streaming state (a state store, the stream-stream join): Spark shuffles its input
    for it (``REQUIRED_BY_STATEFUL_OPERATOR``), a shuffle RAPIDS never runs on the GPU."""
    return kind == "state" or name in STATEFUL_JOINS


def spark_dag(dag: OperatorDAG) -> OperatorDAG:
    """``dag`` (a workload's template, a query's own) with every operator Spark + RAPIDS can only run on the CPU
    marked CPU-only, so that no placement puts it on the GPU: those with no RAPIDS exec pacer switches (the
    streaming scan, state stores, the stream-stream join, the sink) and the shuffles feeding a stateful operator
    with no other shuffle in between (as :func:`dag_from_plan` marks them in an executed plan)."""
    by_id = {op.id: op for op in dag.operators}
    successors: dict[str, list[str]] = {}
    for src, dst in dag.edges:
        successors.setdefault(src, []).append(dst)

    def feeds_state(op_id: str) -> bool:
        for nxt in successors.get(op_id, []):
            op = by_id[nxt]
            if stateful(op.kind, op.name) or (op.kind != "shuffle" and feeds_state(nxt)):
                return True
        return False

    pinned = tuple(op if op.cpu_only else replace(op, cpu_only=True)
                   if op.name not in RAPIDS_EXECS or (op.kind == "shuffle" and feeds_state(op.id)) else op
                   for op in dag.operators)
    return OperatorDAG(pinned, dag.edges)


def _time_s(metrics: Mapping[str, tuple[float, str]]) -> float | None:
    total, found = 0.0, False
    for value, mtype in metrics.values():
        if mtype == "timing":
            total, found = total + value / 1e3, True
        elif mtype == "nsTiming":
            total, found = total + value / 1e9, True
    return total if found else None


def operator_metrics(
    root: PlanNode,
    dag: OperatorDAG,
    placement: Placement | None,
    *,
    batch_bytes: int,
    batch_rows: int,
) -> list[OperatorMetric]:
    """Per-operator times and input sizes of one batch, matched to ``dag``'s operators kind by kind in data-flow order.

    Time is the node's own timing metrics; a node without one (code-generated ``Filter``/``Project``) gets an
    equal share of its whole-stage-codegen stage's ``pipelineTime``. Input rows are the children's
    ``numOutputRows``; input bytes the children's ``dataSize`` where Spark measures it, otherwise the
    rows scaled by the batch's bytes per row. The device is where it really ran: the GPU only when the
    placement was enacted, and never under RAPIDS' ``explainOnly`` mode (its note starts with :data:`EXPLAIN_ONLY`).
    """
    stage_share: dict[int, float] = {}

    def assign(node: PlanNode, stage: tuple[float, list[PlanNode]] | None) -> None:
        if node.name == "WholeStageCodegen":
            members: list[PlanNode] = []
            pipeline = (_time_s({k: v for k, v in node.metrics.items() if k == "pipelineTime"}) or 0.0)
            stage = (pipeline, members)
            for child in node.children:
                assign(child, stage)
            timed = [m for m in members if _time_s(m.metrics) is None]
            for m in timed:
                stage_share[id(m)] = pipeline / max(1, len(timed))
            return
        if node.name == "InputAdapter":
            stage = None
        elif stage is not None and kind_of(node.name) is not None:
            stage[1].append(node)
        for child in node.children:
            assign(child, stage)

    assign(root, None)
    by_kind: dict[str, list[PlanNode]] = {}
    for node, kind in _operators(root):
        by_kind.setdefault(kind, []).append(node)
    per_row = batch_bytes / batch_rows if batch_rows else 0.0
    out: list[OperatorMetric] = []
    template: dict[str, list[str]] = {}
    for op_id in dag.topological_order():
        template.setdefault(dag.operator(op_id).kind, []).append(op_id)
    for kind, op_ids in template.items():
        for op_id, node in zip(op_ids, by_kind.get(kind, []), strict=False):
            time_s = _time_s(node.metrics)
            if time_s is None:
                time_s = stage_share.get(id(node), 0.0)
            rows_in = _child_sum(node, "numOutputRows") if node.children else int(node.metrics.get("numOutputRows", (0, ""))[0])
            size = _child_sum(node, "dataSize")
            bytes_in = size if size else round(rows_in * per_row)
            planned = placement.devices.get(op_id, "cpu") if placement is not None else "cpu"
            ran = placement is not None and placement.enacted and not placement.note.startswith(EXPLAIN_ONLY)
            device: Device = planned if ran else "cpu"
            out.append(OperatorMetric(op_id, device, time_s, bytes_in, rows_in))
    return out


def _child_sum(node: PlanNode, metric: str) -> int:
    total = 0
    for child in node.children:
        if metric in child.metrics:
            total += int(child.metrics[metric][0])
        elif kind_of(child.name) is None:  # look through wrappers
            total += _child_sum(child, metric)
    return total


def rapids_confs(placement: Placement, dag: OperatorDAG, *, explain_only: bool = False) -> tuple[dict[str, str], str]:
    """RAPIDS confs enacting ``placement``, and a note when the instance-level plan had to be coarsened.

    RAPIDS switches execs per operator *type*: a type runs on the GPU only when every instance of it was
    placed there. Operators with no RAPIDS exec (state stores, the streaming join, the sink) stay on the CPU.
    Every exec pacer switches gets its conf, those the DAG lacks ``false``: a plan node pacer did not model
    (a query's first batch is placed on a minimal chain) never runs on the GPU behind pacer's back.

    :param explain_only: the session runs RAPIDS in ``explainOnly`` mode: ``spark.rapids.sql.enabled`` stays
        ``true`` even with nothing on the GPU, so that RAPIDS tags (and logs) every batch's plan.
    """
    devices_by_exec: dict[str, set[str]] = {exec_name: set() for exec_name in RAPIDS_EXECS.values()}
    for op in dag.operators:
        exec_name = RAPIDS_EXECS.get(op.name)
        if exec_name is not None:
            devices_by_exec[exec_name].add(placement.devices.get(op.id, "cpu"))
    confs: dict[str, str] = {}
    mixed: list[str] = []
    for exec_name, devices in sorted(devices_by_exec.items()):
        on_gpu = devices == {"gpu"}
        if len(devices) > 1:
            mixed.append(exec_name)
        confs[f"spark.rapids.sql.exec.{exec_name}"] = "true" if on_gpu else "false"
    any_gpu = any(v == "true" for v in confs.values())
    confs["spark.rapids.sql.enabled"] = "true" if any_gpu or explain_only else "false"
    note = f"{COARSENED}: {', '.join(mixed)} had instances on both devices, kept on CPU" if mixed else ""
    return confs, note


def enacted_devices(placement: Placement, dag: OperatorDAG) -> dict[str, Device]:
    """Per operator, the device the confs of :func:`rapids_confs` allow it: the GPU only when every instance of its
    exec type was placed there (and it is not CPU-only)."""
    confs, _ = rapids_confs(placement, dag)
    out: dict[str, Device] = {}
    for op in dag.operators:
        exec_name = RAPIDS_EXECS.get(op.name)
        on = not op.cpu_only and exec_name is not None and confs.get(f"spark.rapids.sql.exec.{exec_name}") == "true"
        out[op.id] = "gpu" if on else "cpu"
    return out


def rapids_loaded(plugins_conf: str | None) -> bool:
    """True when ``spark.plugins`` names the RAPIDS Accelerator."""
    return bool(plugins_conf) and RAPIDS_PLUGIN in str(plugins_conf)

