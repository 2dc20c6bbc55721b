"""The papers' queries (WORKLOADS.md) as operator-DAG templates mirroring Spark's executed plans."""

from __future__ import annotations

from dataclasses import dataclass

from pacer import Operator, OperatorDAG, QuerySpec


@dataclass(frozen=True)
class WorkloadSpec:
    """A query of the papers: its stream, window, SQL text and operator DAG.

    :param window_slide: equals ``window_range`` for a tumbling window.
    """

    id: str
    stream: str
    window_range: float
    window_slide: float
    sql: str
    dag: OperatorDAG
    description: str

    @property
    def tumbling(self) -> bool:
        """True for a tumbling window."""
        return self.window_slide >= self.window_range


class _DagBuilder:
    """Numbers operators in creation order: ``kind#n``."""

    def __init__(self) -> None:
        self.ops: list[Operator] = []
        self.edges: list[tuple[str, str]] = []

    def add(self, label: str, kind: str, name: str, *parents: str) -> str:
        op_id = f"{label}#{len(self.ops)}"
        self.ops.append(Operator(op_id, kind, name))  # type: ignore[arg-type]
        self.edges.extend((p, op_id) for p in parents)
        return op_id

    def chain(self, parent: str, *steps: tuple[str, str, str]) -> str:
        for label, kind, name in steps:
            parent = self.add(label, kind, name, parent)
        return parent

    def build(self) -> OperatorDAG:
        return OperatorDAG(tuple(self.ops), tuple(self.edges))


def _window_steps(sliding: bool) -> tuple[tuple[str, str, str], ...]:
    """What Spark's ``TimeWindowing`` rule leaves in the executed plan.

    A sliding window becomes ``Expand`` (one row per window a timestamp falls in), then ``Filter``
    (``isnotnull(timestamp)`` and the window bounds) and ``Project``; a tumbling one only
    ``Filter (isnotnull(timestamp))`` and a ``Project`` computing the window.
    """
    if sliding:
        return (("expand", "expand", "Expand"), ("filter", "filter", "Filter"), ("project", "project", "Project"))
    return (("filter", "filter", "Filter"), ("project", "project", "Project"))


def _aggregation(sliding: bool, *, where: bool = False, having: bool = False, order_by: bool = False) -> OperatorDAG:
    """A windowed streaming aggregation, as ``AggUtils.planStreamingAggregation`` plans it.

    partial ``HashAggregate`` -> ``Exchange hashpartitioning`` -> merge ``HashAggregate`` ->
    ``StateStoreRestore`` -> merge ``HashAggregate`` -> ``StateStoreSave`` -> final ``HashAggregate``;
    a pushed-down WHERE ``Filter`` sits right after the scan, a HAVING ``Filter`` after the final
    aggregate, and a global ORDER BY adds ``Exchange rangepartitioning`` + ``Sort``.
    """
    b = _DagBuilder()
    node = b.add("scan", "scan", "MicroBatchScan")
    if where:
        node = b.chain(node, ("filter", "filter", "Filter"))
    node = b.chain(
        node,
        *_window_steps(sliding),
        ("agg_partial", "aggregate", "HashAggregate"),
        ("exchange", "shuffle", "Exchange"),
        ("agg_merge", "aggregate", "HashAggregate"),
        ("state_restore", "state", "StateStoreRestore"),
        ("agg_merge", "aggregate", "HashAggregate"),
        ("state_save", "state", "StateStoreSave"),
        ("agg_final", "aggregate", "HashAggregate"),
    )
    if having:
        node = b.chain(node, ("filter", "filter", "Filter"))
    node = b.chain(node, ("project", "project", "Project"))
    if order_by:
        node = b.chain(node, ("exchange", "shuffle", "Exchange"), ("sort", "sort", "Sort"))
    b.chain(node, ("sink", "sink", "ForeachBatchSink"))
    return b.build()


def _self_join(sliding: bool) -> OperatorDAG:
    """LR1: windowed side A and plain side L of the same stream, each hash-partitioned on vehicle, joined.

    Spark plans a stream-stream inner join as ``StreamingSymmetricHashJoin`` (its state stores are
    inside the operator); side L carries the ``Filter (isnotnull(vehicle))`` inferred from the join and
    a column-pruning ``Project``. Operator ids of ``lr1`` are relied on elsewhere (``join#9``, ``sink#11``).
    """
    b = _DagBuilder()
    windowed = b.chain(
        b.add("scan", "scan", "MicroBatchScan"), *_window_steps(sliding), ("exchange", "shuffle", "Exchange")
    )
    plain = b.chain(
        b.add("scan", "scan", "MicroBatchScan"),
        ("filter", "filter", "Filter"),
        ("project", "project", "Project"),
        ("exchange", "shuffle", "Exchange"),
    )
    join = b.add("join", "join", "StreamingSymmetricHashJoin", windowed, plain)
    b.chain(join, ("project", "project", "Project"), ("sink", "sink", "ForeachBatchSink"))
    return b.build()


_LR1_SQL = (
    "SELECT L.timestamp, L.vehicle, L.speed, L.highway, L.lane, L.direction, L.segment "
    "FROM SegSpeedStr [range {r} slide {s}] AS A, SegSpeedStr AS L WHERE A.vehicle = L.vehicle"
)

WORKLOADS: dict[str, WorkloadSpec] = {
    w.id: w
    for w in (
        WorkloadSpec("lr1", "linear_road", 30.0, 5.0, _LR1_SQL.format(r=30, s=5), _self_join(True),
                     "Linear Road window self-join on vehicle (superlinear in the batch)"),
        WorkloadSpec("lr1t", "linear_road", 30.0, 30.0, _LR1_SQL.format(r=30, s=30), _self_join(False),
                     "LR1 with a tumbling window"),
        WorkloadSpec(
            "lr2", "linear_road", 30.0, 10.0,
            "SELECT timestamp, highway, direction, segment, AVG(speed) AS avgSpeed FROM SegSpeedStr "
            "[range 30 slide 10] GROUP BY highway, direction, segment HAVING avgSpeed < 40.0",
            _aggregation(True, having=True), "Average speed per segment, congested segments only",
        ),
        WorkloadSpec(
            "lr3", "linear_road", 30.0, 15.0,
            "SELECT timestamp, highway, direction, segment, COUNT(vehicle) AS numVehicle FROM SegSpeedStr "
            "[range 30 slide 15] GROUP BY highway, direction, segment",
            _aggregation(True), "Vehicles per segment",
        ),
        WorkloadSpec(
            "cm1", "cluster_monitoring", 60.0, 10.0,
            "SELECT timestamp, category, SUM(cpu) AS totalCpu FROM TaskEvents [range 60 slide 10] "
            "GROUP BY category ORDER BY SUM(cpu)",
            _aggregation(True, order_by=True), "Total CPU requested per scheduling class, sorted",
        ),
        WorkloadSpec(
            "cm2", "cluster_monitoring", 60.0, 5.0,
            "SELECT jobId, AVG(cpu) AS avgCpu FROM TaskEvents [range 60 slide 5] WHERE eventType = 1 GROUP BY jobId",
            _aggregation(True, where=True), "Average CPU of scheduled tasks per job",
        ),
    )
}


def make_query(
    workload: str, *, query_id: str | None = None, deadline: float | None = None, partitions: int = 2
) -> QuerySpec:
    """A :class:`pacer.QuerySpec` for one of :data:`WORKLOADS`.

    :param query_id: defaults to the workload id.
    :param deadline: seconds; None keeps the default (the window slide).
    :param partitions: partitions a batch is split into (Spark's shuffle partitions).
    :raises ValueError: for an unknown workload (the message lists the known ones).
    """
    try:
        spec = WORKLOADS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; known workloads: {', '.join(WORKLOADS)}") from None
    if partitions < 1:
        raise ValueError(f"partitions must be >= 1, got {partitions}")
    return QuerySpec(
        id=query_id or workload,
        dag=spec.dag,
        window_range=spec.window_range,
        window_slide=spec.window_slide,
        deadline=deadline,
        workload=workload,
        partitions=partitions,
    )
