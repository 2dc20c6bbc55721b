"""The operator DAG of a query, the query itself, the devices on offer and a placement over them.

Part of the data model (:mod:`pacer.model` re-exports everything here); immutable values.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

OperatorKind = Literal["scan", "filter", "project", "expand", "aggregate", "join", "sort", "shuffle", "state", "sink"]
OPERATOR_KINDS: tuple[OperatorKind, ...] = (
    "scan",
    "filter",
    "project",
    "expand",
    "aggregate",
    "join",
    "sort",
    "shuffle",
    "state",
    "sink",
)
Device = Literal["cpu", "gpu"]
DecisionKind = Literal["admission", "scheduling", "placement", "scaling"]
DECISION_KINDS: tuple[DecisionKind, ...] = ("admission", "scheduling", "placement", "scaling")

#: Operators that never run on a GPU: dStream keeps sorting and the
#: materialising sink on the CPU, and state-store access is host-side in Spark.
CPU_ONLY_KINDS: frozenset[str] = frozenset({"sort", "sink", "state"})


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator instance of a query plan.

    :param id: unique within its DAG (e.g. ``"agg#2"``).
    :param kind: one of :data:`OPERATOR_KINDS`.
    :param name: the engine's name for it (``"HashAggregate"``, ``"SortMergeJoin"``).
    :param cpu_only: True when it can never run on a GPU.
    """

    id: str
    kind: OperatorKind
    name: str = ""
    cpu_only: bool = False

    def __post_init__(self) -> None:
        if self.kind not in OPERATOR_KINDS:
            raise ValueError(f"operator {self.id!r}: unknown kind {self.kind!r}; use one of {OPERATOR_KINDS}")
        if self.kind in CPU_ONLY_KINDS and not self.cpu_only:
            object.__setattr__(self, "cpu_only", True)


@dataclass(frozen=True, slots=True)
class CompiledDAG:
    """An :class:`OperatorDAG` flattened once, for linear-time walks (placement strategies, cost models).

    Operators are in topological order (Kahn's algorithm, declaration order on ties); every per-operator
    tuple is indexed by that position, and ``position`` maps an operator id to it.
    """

    ids: tuple[str, ...]
    kinds: tuple[str, ...]
    cpu_only: tuple[bool, ...]
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    position: Mapping[str, int]
    #: Per position: True for an operator with no parent (a scan).
    is_source: tuple[bool, ...]
    #: Per position: True for an operator with no child.
    is_sink: tuple[bool, ...]

    @classmethod
    def of(cls, operators: Sequence[Operator], edges: Sequence[tuple[str, str]]) -> CompiledDAG:
        """Sort topologically in O(V + E); raises ValueError on a cycle or an edge to an unknown operator."""
        index = {op.id: i for i, op in enumerate(operators)}
        n = len(operators)
        children: list[list[int]] = [[] for _ in range(n)]
        parents: list[list[int]] = [[] for _ in range(n)]
        for src, dst in edges:
            if src not in index or dst not in index:
                raise ValueError(f"edge {src}->{dst} names an operator not in the DAG")
            children[index[src]].append(index[dst])
            parents[index[dst]].append(index[src])
        indegree = [len(p) for p in parents]
        ready = deque(i for i in range(n) if indegree[i] == 0)
        order: list[int] = []
        while ready:
            node = ready.popleft()
            order.append(node)
            for child in children[node]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        if len(order) != n:
            raise ValueError("operator DAG has a cycle")
        position = {node: pos for pos, node in enumerate(order)}
        ops = [operators[i] for i in order]
        return cls(
            ids=tuple(op.id for op in ops),
            kinds=tuple(op.kind for op in ops),
            cpu_only=tuple(op.cpu_only for op in ops),
            parents=tuple(tuple(position[p] for p in parents[i]) for i in order),
            children=tuple(tuple(position[c] for c in children[i]) for i in order),
            position={op.id: pos for pos, op in enumerate(ops)},
            is_source=tuple(not parents[i] for i in order),
            is_sink=tuple(not children[i] for i in order),
        )


@dataclass(frozen=True, slots=True)
class OperatorDAG:
    """A query's operators and the data-flow edges between them (multi-source allowed).

    The DAG is compiled once at construction (:attr:`compiled`): topological order, parents,
    children, sources and sinks come from it in linear time.
    """

    operators: tuple[Operator, ...]
    edges: tuple[tuple[str, str], ...] = ()
    compiled: CompiledDAG = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = [op.id for op in self.operators]
        if len(set(ids)) != len(ids):
            raise ValueError(f"operator ids must be unique, got {ids}")
        object.__setattr__(self, "compiled", CompiledDAG.of(self.operators, self.edges))  # raises on a cycle

    @classmethod
    def chain(cls, *operators: Operator) -> OperatorDAG:
        """A linear DAG: each operator feeds the next."""
        edges = tuple((a.id, b.id) for a, b in itertools.pairwise(operators))
        return cls(tuple(operators), edges)

    def operator(self, op_id: str) -> Operator:
        """The operator with this id."""
        for op in self.operators:
            if op.id == op_id:
                return op
        raise KeyError(op_id)

    def parents(self, op_id: str) -> tuple[str, ...]:
        """Ids of operators feeding ``op_id``."""
        c = self.compiled
        return tuple(c.ids[p] for p in c.parents[c.position[op_id]])

    def children(self, op_id: str) -> tuple[str, ...]:
        """Ids of operators ``op_id`` feeds."""
        c = self.compiled
        return tuple(c.ids[p] for p in c.children[c.position[op_id]])

    def sources(self) -> tuple[str, ...]:
        """Operators with no parent (scans; several for a join), in declaration order."""
        c = self.compiled
        return tuple(op.id for op in self.operators if not c.parents[c.position[op.id]])

    def sinks(self) -> tuple[str, ...]:
        """Operators with no child, in declaration order."""
        c = self.compiled
        return tuple(op.id for op in self.operators if not c.children[c.position[op.id]])

    def topological_order(self) -> tuple[str, ...]:
        """Operator ids, parents before children (stable: ties keep declaration order)."""
        return self.compiled.ids


@dataclass(frozen=True, slots=True)
class QuerySpec:
    """A continuous query as pacer sees it.

    :param id: unique query id.
    :param dag: the operator DAG.
    :param window_range: window length in seconds (0 for no window).
    :param window_slide: slide in seconds; equal to ``window_range`` for a tumbling window.
    :param deadline: latency target in seconds; None means the window slide
        (zStream's default), or the range for a tumbling window.
    :param workload: the workload template it came from (``"lr2"``), informational.
    :param partitions: data partitions a batch is split into (Spark's shuffle partitions).
    """

    id: str
    dag: OperatorDAG
    window_range: float = 0.0
    window_slide: float = 0.0
    deadline: float | None = None
    workload: str = ""
    partitions: int = 2

    def __post_init__(self) -> None:
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(
                f"query {self.id!r}: deadline must be > 0 seconds, got {self.deadline}; omit it to use the window slide"
            )
        if self.window_range < 0 or self.window_slide < 0:
            raise ValueError(f"query {self.id!r}: window range and slide must be >= 0")

    @property
    def tumbling(self) -> bool:
        """True for a tumbling window (slide equals range, or no slide)."""
        return self.window_slide == 0 or self.window_slide >= self.window_range

    @property
    def slide_time(self) -> float:
        """LMStream's SlideTime: the slide of a sliding window, 0 for a tumbling one."""
        return 0.0 if self.tumbling else self.window_slide

    @property
    def effective_deadline(self) -> float:
        """The deadline in force: explicit, else the slide (the range when tumbling), else 10 s."""
        if self.deadline is not None:
            return self.deadline
        return self.window_slide or self.window_range or 10.0


@dataclass(frozen=True, slots=True)
class Devices:
    """The devices a runtime offers: CPU cores and GPUs."""

    cpu_cores: int
    gpus: int = 0

    @property
    def has_gpu(self) -> bool:
        """True when at least one GPU is present."""
        return self.gpus > 0


@dataclass(frozen=True, slots=True)
class Placement:
    """A device for every operator instance of a DAG.

    :param devices: operator id -> ``"cpu"`` or ``"gpu"``.
    :param strategy: the placement strategy that decided it.
    :param enacted: whether the runtime could apply it (False without RAPIDS).
    :param note: why it was coarsened or not enacted.
    :param ran: operator id -> the device the engine planned it on, where the runtime knows it and it may differ
        from ``devices`` (RAPIDS switches whole operator types, and refuses some operators); None: as placed.
    """

    devices: Mapping[str, Device]
    strategy: str = ""
    enacted: bool = True
    note: str = ""
    ran: Mapping[str, Device] | None = None

    @property
    def gpu_ratio(self) -> float:
        """Share of operators placed on the GPU."""
        if not self.devices:
            return 0.0
        return sum(1 for d in self.devices.values() if d == "gpu") / len(self.devices)

    @property
    def ran_gpu_ratio(self) -> float:
        """Share of operators that ran on the GPU: 0 when not enacted (all ran on the CPU), else the share the engine
        planned there (:attr:`ran`) where the runtime recorded it, else the placed share."""
        if not self.enacted or not self.devices:
            return 0.0
        if self.ran is None:
            return self.gpu_ratio
        return sum(1 for op in self.devices if self.ran.get(op) == "gpu") / len(self.devices)

    def validate(self, dag: OperatorDAG, devices: Devices | None = None) -> None:
        """Raise ValueError unless every operator has a device, CPU-only ones are on the CPU and,
        when ``devices`` is given, a GPU placement has a GPU to run on."""
        missing = [op.id for op in dag.operators if op.id not in self.devices]
        if missing:
            raise ValueError(f"placement by {self.strategy!r} leaves operators unplaced: {missing}")
        extra = sorted(set(self.devices) - {op.id for op in dag.operators})
        if extra:
            raise ValueError(f"placement by {self.strategy!r} names unknown operators: {extra}")
        for op in dag.operators:
            device = self.devices[op.id]
            if device not in ("cpu", "gpu"):
                raise ValueError(f"placement by {self.strategy!r}: {op.id} on unknown device {device!r}")
            if op.cpu_only and device != "cpu":
                raise ValueError(f"placement by {self.strategy!r} puts CPU-only operator {op.id} on {device}")
        if devices is not None and not devices.has_gpu:
            on_gpu = sorted(op_id for op_id, device in self.devices.items() if device == "gpu")
            if on_gpu:
                raise ValueError(
                    f"placement by {self.strategy!r} puts {len(on_gpu)} operator(s) ({', '.join(on_gpu[:3])}"
                    f"{', ...' if len(on_gpu) > 3 else ''}) on a GPU, but the runtime has none; give it a GPU "
                    "(e.g. --gpus 1 on the simulator, the RAPIDS Accelerator on Spark) or choose a CPU placement"
                )
