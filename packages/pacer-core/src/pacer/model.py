"""The data model every runtime and strategy shares.

Times are seconds as floats on the runtime's clock (virtual in the
simulator, wall clock on Spark). Sizes are bytes and rows. Everything here is
an immutable value except :class:`DatasetBuffer`, which the Controller owns.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
DecisionKind = Literal["admission", "scheduling", "placement"]
DECISION_KINDS: tuple[DecisionKind, ...] = ("admission", "scheduling", "placement")

#: Operators that never run on a GPU: dStream keeps sorting and the
#: materialising sink on the CPU, and state-store access is host-side in Spark.
CPU_ONLY_KINDS: frozenset[str] = frozenset({"sort", "sink", "state"})


@dataclass(frozen=True, slots=True)
class Dataset:
    """One unit of arrival: a file, or one chunk of a generator.

    :param id: unique within its query's stream.
    :param arrival: arrival time (seconds, runtime clock).
    :param bytes: size in bytes (0 is allowed).
    :param rows: number of rows.
    :param handle: opaque runtime data (a file path, an offset), never read by strategies.
    """

    id: str
    arrival: float
    bytes: int
    rows: int
    handle: Any = None


class DatasetBuffer:
    """Datasets of one query that arrived and wait for admission, oldest first."""

    __slots__ = ("_bytes", "_items", "_rows")

    def __init__(self, items: Iterable[Dataset] = ()) -> None:
        self._items: deque[Dataset] = deque()
        self._bytes = 0
        self._rows = 0
        for item in items:
            self.append(item)

    def append(self, dataset: Dataset) -> None:
        """Add a newly arrived dataset at the end."""
        self._items.append(dataset)
        self._bytes += dataset.bytes
        self._rows += dataset.rows

    def take(self, count: int) -> tuple[Dataset, ...]:
        """Remove and return the ``count`` oldest datasets."""
        if count < 0 or count > len(self._items):
            raise ValueError(f"cannot take {count} datasets from a buffer of {len(self._items)}")
        out = tuple(self._items.popleft() for _ in range(count))
        self._bytes -= sum(d.bytes for d in out)
        self._rows -= sum(d.rows for d in out)
        return out

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Dataset]:
        return iter(self._items)

    def __getitem__(self, index: int) -> Dataset:
        return self._items[index]

    @property
    def bytes(self) -> int:
        """Total bytes buffered."""
        return self._bytes

    @property
    def rows(self) -> int:
        """Total rows buffered."""
        return self._rows

    @property
    def earliest_arrival(self) -> float | None:
        """Arrival time of the oldest dataset, or None when empty."""
        return self._items[0].arrival if self._items else None

    def prefix_bytes(self, count: int) -> int:
        """Bytes of the ``count`` oldest datasets."""
        return sum(self._items[i].bytes for i in range(count))


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
    """

    devices: Mapping[str, Device]
    strategy: str = ""
    enacted: bool = True
    note: str = ""

    @property
    def gpu_ratio(self) -> float:
        """Share of operators placed on the GPU."""
        if not self.devices:
            return 0.0
        return sum(1 for d in self.devices.values() if d == "gpu") / len(self.devices)

    @property
    def ran_gpu_ratio(self) -> float:
        """Share of operators that ran on the GPU: the placed share when enacted, else 0 (all ran on the CPU)."""
        return self.gpu_ratio if self.enacted else 0.0

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


@dataclass(frozen=True, slots=True)
class MicroBatch:
    """An admitted micro-batch of one query, waiting to run or running."""

    id: str
    query_id: str
    seq: int
    datasets: tuple[Dataset, ...]
    admitted_at: float
    placement: Placement | None = None
    estimated_run_s: float | None = None

    @property
    def bytes(self) -> int:
        """Total bytes of its datasets."""
        return sum(d.bytes for d in self.datasets)

    @property
    def rows(self) -> int:
        """Total rows of its datasets."""
        return sum(d.rows for d in self.datasets)

    @property
    def earliest_arrival(self) -> float:
        """Arrival time of its oldest dataset (its admission time if it is empty)."""
        return min((d.arrival for d in self.datasets), default=self.admitted_at)


@dataclass(frozen=True, slots=True)
class PendingBatch:
    """A micro-batch in the scheduling queue, as schedulers and admission see it.

    :param batch: the micro-batch.
    :param deadline_at: absolute time by which its oldest dataset should be done.
    :param estimated_run_s: the Controller's estimate of its processing time at full cores.
    :param running: True once it started (it still counts for T_sched).
    """

    batch: MicroBatch
    deadline_at: float
    estimated_run_s: float
    running: bool = False


@dataclass(frozen=True, slots=True)
class SystemView:
    """What one decision may know about the rest of the system.

    :param now: current time.
    :param cores: total CPU cores (task slots) of the runtime.
    :param devices: the devices on offer.
    :param scheduler: the name of the scheduling strategy in force.
    :param pending: every queued or running micro-batch of every query.
    :param allocated_cores: cores the scheduler last gave each query (FAIR/RDAS share).
    """

    now: float
    cores: int
    devices: Devices
    scheduler: str
    pending: tuple[PendingBatch, ...] = ()
    allocated_cores: Mapping[str, float] = field(default_factory=dict)

    def others(self, query_id: str) -> tuple[PendingBatch, ...]:
        """Pending batches of every query but ``query_id``."""
        return tuple(p for p in self.pending if p.batch.query_id != query_id)


@dataclass(frozen=True, slots=True)
class AdmissionDecision:
    """The answer of an admission strategy.

    :param count: admit the ``count`` oldest buffered datasets as one micro-batch (0: keep buffering).
    :param shed: drop this many of the oldest datasets *before* admitting (an explicit,
        counted overload policy; never silent).
    :param reason: a short human-readable reason, kept in the trace.
    """

    count: int
    shed: int = 0
    reason: str = ""

    @classmethod
    def wait(cls, reason: str = "") -> AdmissionDecision:
        """Keep buffering."""
        return cls(0, 0, reason)

    @classmethod
    def admit_all(cls, buffer: DatasetBuffer, reason: str = "") -> AdmissionDecision:
        """Admit everything in the buffer."""
        return cls(len(buffer), 0, reason)

    @property
    def admits(self) -> bool:
        """True when a micro-batch is formed."""
        return self.count > 0


@dataclass(frozen=True, slots=True)
class ScheduleDecision:
    """The answer of a scheduling strategy.

    :param order: ids of every pending batch, the one to run first first.
    :param shares: batch id -> cores (may be fractional); empty means "in order,
        each batch takes the cores it can use" (FIFO). The sum stays within the cores.
    """

    order: tuple[str, ...]
    shares: Mapping[str, float] = field(default_factory=dict)

    def validate(self, pending: Sequence[PendingBatch], cores: int, strategy: str = "") -> None:
        """Raise ValueError unless ``order`` is a permutation of pending and shares fit the cores."""
        expected = sorted(p.batch.id for p in pending)
        if sorted(self.order) != expected:
            raise ValueError(
                f"scheduler {strategy!r} must return a permutation of the pending batches "
                f"{expected}, got {list(self.order)}"
            )
        if self.shares:
            unknown = sorted(set(self.shares) - set(expected))
            if unknown:
                raise ValueError(f"scheduler {strategy!r} gives shares to unknown batches {unknown}")
            if any(v < 0 for v in self.shares.values()):
                raise ValueError(f"scheduler {strategy!r} gives a negative share")
            if sum(self.shares.values()) > cores + 1e-9:
                raise ValueError(f"scheduler {strategy!r} hands out {sum(self.shares.values()):.3f} cores of {cores}")


@dataclass(frozen=True, slots=True)
class OperatorMetric:
    """Measured cost of one operator instance in one batch (when the runtime knows it)."""

    operator_id: str
    device: Device
    time_s: float
    bytes_in: int = 0
    rows_in: int = 0


@dataclass(frozen=True, slots=True)
class BatchReport:
    """A completed micro-batch, as given to every strategy's feedback hook.

    Latency of a dataset = ``completed_at`` - its arrival (buffering + queueing + processing).
    """

    batch_id: str
    query_id: str
    seq: int
    admitted_at: float
    started_at: float
    completed_at: float
    bytes: int
    rows: int
    dataset_latencies: tuple[tuple[str, float], ...]
    earliest_arrival: float
    interval_s: float
    placement: Placement | None = None
    operator_metrics: tuple[OperatorMetric, ...] = ()
    cores_used: float | None = None
    engine_s: float | None = None

    @property
    def cost_s(self) -> float:
        """What the batch cost the engine: ``engine_s`` when the runtime measured it (Spark's
        ``triggerExecution``), else its processing time (start → completion)."""
        return self.engine_s if self.engine_s is not None else self.completed_at - self.started_at

    @property
    def service_s(self) -> float:
        """Admission → completion (queueing included)."""
        return self.completed_at - self.admitted_at

    @property
    def buffering_s(self) -> float:
        """Admission time - arrival of the oldest dataset."""
        return self.admitted_at - self.earliest_arrival

    @property
    def queueing_s(self) -> float:
        """Start - admission."""
        return self.started_at - self.admitted_at

    @property
    def processing_s(self) -> float:
        """Completion - start."""
        return self.completed_at - self.started_at

    @property
    def max_latency_s(self) -> float:
        """Completion - arrival of the oldest dataset."""
        return self.completed_at - self.earliest_arrival

    @property
    def throughput_bytes_per_s(self) -> float:
        """Bytes / processing time (LMStream Eq. 4); 0 when processing took no time."""
        return self.bytes / self.processing_s if self.processing_s > 0 else 0.0


class QueryHistory:
    """Completed batch reports of one query, newest last, bounded in length."""

    def __init__(self, maxlen: int = 4096) -> None:
        self._reports: deque[BatchReport] = deque(maxlen=maxlen)
        self.total_bytes = 0
        self.total_processing_s = 0.0

    def add(self, report: BatchReport) -> None:
        """Record a completed batch."""
        self._reports.append(report)
        self.total_bytes += report.bytes
        self.total_processing_s += report.processing_s

    def __len__(self) -> int:
        return len(self._reports)

    def __iter__(self) -> Iterator[BatchReport]:
        return iter(self._reports)

    @property
    def last(self) -> BatchReport | None:
        """The latest completed batch."""
        return self._reports[-1] if self._reports else None

    def recent(self, count: int) -> list[BatchReport]:
        """The ``count`` latest reports, oldest first."""
        return list(self._reports)[-count:] if count > 0 else []

    @property
    def avg_throughput_bytes_per_s(self) -> float | None:
        """Bytes processed / processing time over the whole run (zStream's AvgThPut), None before any."""
        if self.total_processing_s <= 0:
            return None
        return self.total_bytes / self.total_processing_s
