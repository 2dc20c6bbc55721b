"""The data model every runtime and strategy shares.

Times are seconds as floats on the runtime's clock (virtual in the
simulator, wall clock on Spark). Sizes are bytes and rows. Everything here is
an immutable value except :class:`DatasetBuffer`, which the Controller owns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.dag import (
    CPU_ONLY_KINDS,
    DECISION_KINDS,
    OPERATOR_KINDS,
    CompiledDAG,
    DecisionKind,
    Device,
    Devices,
    Operator,
    OperatorDAG,
    OperatorKind,
    Placement,
    QuerySpec,
)

__all__ = [
    "CPU_ONLY_KINDS",
    "DECISION_KINDS",
    "OPERATOR_KINDS",
    "AdmissionDecision",
    "BatchReport",
    "CompiledDAG",
    "Dataset",
    "DatasetBuffer",
    "DecisionKind",
    "Device",
    "Devices",
    "MicroBatch",
    "Operator",
    "OperatorDAG",
    "OperatorKind",
    "OperatorMetric",
    "PendingBatch",
    "Placement",
    "QueryHistory",
    "QuerySpec",
    "ScheduleDecision",
    "SystemView",
]



@dataclass(frozen=True, slots=True)
class Dataset:
    """One unit of arrival: a file, or one chunk of a generator.

    :param id: unique within its query's stream.
    :param arrival: arrival time (seconds, runtime clock).
    :param bytes: size in bytes (0 is allowed).
    :param rows: number of rows.
    :param handle: opaque runtime data (a file path, an offset), never read by strategies.
    :param newest: the time of its newest data, where its rows arrived over a span (a Kafka snapshot: from its
        oldest record to the next snapshot's); its rows are taken as spread evenly from ``arrival`` to ``newest``
        when counting the rows that missed the deadline. None: every row arrived at ``arrival``.
    """

    id: str
    arrival: float
    bytes: int
    rows: int
    handle: Any = None
    newest: float | None = None


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

    def take_ids(self, dataset_ids: Iterable[str]) -> tuple[Dataset, ...]:
        """Remove and return the datasets ``dataset_ids`` wherever they wait, in the buffer's order (a runtime
        that read exactly these, whatever was decided); ``KeyError`` naming one that is not buffered."""
        wanted = set(dataset_ids)
        out = tuple(d for d in self._items if d.id in wanted)
        if len(out) != len(wanted):
            missing = sorted(wanted - {d.id for d in out})
            raise KeyError(f"datasets {missing} are not buffered")
        self._items = deque(d for d in self._items if d.id not in wanted)
        self._bytes -= sum(d.bytes for d in out)
        self._rows -= sum(d.rows for d in out)
        return out

    def put_back(self, datasets: Sequence[Dataset]) -> None:
        """Return ``datasets`` (oldest first) to the front of the buffer, where they waited before admission."""
        for dataset in reversed(datasets):
            self._items.appendleft(dataset)
            self._bytes += dataset.bytes
            self._rows += dataset.rows

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
    :param started_at: when it started (None while queued): what is left of a running batch is
        ``estimated_run_s`` less the time since.
    """

    batch: MicroBatch
    deadline_at: float
    estimated_run_s: float
    running: bool = False
    started_at: float | None = None


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
    ``dataset_rows``: the rows of each dataset, in the order of ``dataset_latencies`` (the Controller always
    fills it; empty in a report built without it). ``dataset_spans``: seconds from each dataset's oldest to its
    newest data (:attr:`Dataset.newest`; 0: all at its arrival; empty: none known).

    Three costs, one definition on every runtime: :attr:`busy_core_s`, the core-seconds its tasks executed (Spark: the
    sum of its tasks' executor run time, the batch's own tasks by Spark's batch id; the simulator: the cores running
    its tasks over that time; None where the runtime does not measure it); :attr:`trigger_s`, the engine's time on
    the batch less ``gate_wait_s``, the seconds it waited for its turn at pacer's gate inside it (Spark's trigger
    includes that wait); and, per run, the cores allocated (the report's ``cost.allocated_core_s``). Where the runtime
    measures them, two parts of the task time beside: :attr:`cpu_core_s`, the tasks' CPU time (Spark's executor CPU
    time: ``busy_core_s`` less what they waited for), and :attr:`failed_core_s`, the run time of task attempts that
    failed or were killed (counted in ``busy_core_s``); None where not measured. :attr:`tasks`: the task attempts
    that ran the batch (Spark: its stages' tasks; a file source runs one per file up to the partitions, a Kafka
    source one per topic partition), where the runtime counts them.
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
    dataset_rows: tuple[int, ...] = ()
    dataset_spans: tuple[float, ...] = ()
    busy_core_s: float | None = None
    gate_wait_s: float = 0.0
    cpu_core_s: float | None = None
    failed_core_s: float | None = None
    tasks: int | None = None

    @property
    def cost_s(self) -> float:
        """What the batch cost the engine: ``engine_s`` when the runtime measured it (Spark's
        ``triggerExecution``), else its processing time (start → completion)."""
        return self.engine_s if self.engine_s is not None else self.completed_at - self.started_at

    @property
    def trigger_s(self) -> float:
        """What the batch cost the engine without waiting: :attr:`cost_s` less the seconds it waited for its turn at
        pacer's gate inside it (what the service-time model learns from)."""
        return max(0.0, self.cost_s - self.gate_wait_s)

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
    """Completed batch reports of one query, newest last, bounded in length.

    :param maxlen: at most this many reports.
    :param max_datasets: and (when > 0) only the latest reports holding at most this many datasets together
        (always the last one), so big batches do not make the window big; the totals cover every report.
    """

    def __init__(self, maxlen: int = 4096, max_datasets: int = 0) -> None:
        self._reports: deque[BatchReport] = deque(maxlen=maxlen)
        self.max_datasets = max_datasets
        self._datasets = 0
        self.total_bytes = 0
        self.total_processing_s = 0.0

    def add(self, report: BatchReport) -> None:
        """Record a completed batch."""
        if len(self._reports) == self._reports.maxlen:
            self._datasets -= len(self._reports[0].dataset_latencies)
        self._reports.append(report)
        self._datasets += len(report.dataset_latencies)
        if self.max_datasets > 0:
            while self._datasets > self.max_datasets and len(self._reports) > 1:
                self._datasets -= len(self._reports.popleft().dataset_latencies)
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
