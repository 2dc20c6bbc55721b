"""The simulator's cost model: per-operator CPU and GPU cost curves, PCIe transfers, fixed overhead, noise.

Every figure produced with it is *simulated*. Its defaults follow the shapes the
papers report, not measurements of a real GPU:

- per partition, an operator costs ``fixed + per_mb * MB`` on its device; the GPU
  has a larger fixed (launch) cost and a much smaller slope, so the CPU wins on
  small partitions and the GPU on large ones, crossing between roughly 100 and
  180 KB per partition depending on the operator (LMStream Fig. 5: CPU below
  ~15 KB, mixed around 150 KB, GPU above; dStream: the GPU wins as the rate grows);
- the stream-stream join also pays ``join_superlinear * MB^join_exponent`` per
  partition (``gpu_join_factor`` times that on the GPU): its cost grows faster
  than its batch (Das §3.2, LMStream LR1), so intervals above the stable point diverge;
- moving data between devices costs ``pcie_init + bytes / pcie_bandwidth``
  wherever adjacent operators sit on different devices; data arrives in, and
  leaves from, host memory (dStream Eq. 3);
- every micro-batch pays ``batch_overhead`` (Spark's planning, WAL and offset
  commits, task launch; the README says where its default comes from); the share
  ``fixed_task_share`` of it is each task's own fixed part (launch, deserialisation,
  the state store's open and commit), run on an executor core and counted as task time
  (busy core-seconds), the rest is the driver's and holds no core;
- CPU work runs as one task per partition, in waves of as many tasks as the batch has
  task slots (:mod:`pacer_sim.waves`); GPU work runs on the GPU, one device shared by
  every batch on it, and does not speed up with cores;
- one multiplicative log-normal noise factor per batch, drawn from a
  ``numpy.random.Generator`` seeded by (seed, query, batch number), so a batch's
  cost does not depend on the order events happen in.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacer import Dataset, Device, MicroBatch, OperatorDAG, Placement, QuerySpec
from pacer_sim.waves import slot_capacity, waves

MB = 1_000_000.0
#: ``CostModel.source`` of the built-in curves.
BUILTIN_SOURCE = "pacer-sim built-in curves (shapes from the papers, not measured)"


def interpolate(points: tuple[tuple[float, float], ...], x: float) -> float:
    """Piecewise-linear ``y(x)`` through ``points`` (x increasing), extrapolated along the end segments, >= 0."""
    if x <= points[0][0]:
        (x0, y0), (x1, y1) = points[0], points[1]
    elif x >= points[-1][0]:
        (x0, y0), (x1, y1) = points[-2], points[-1]
    else:
        i = next(i for i in range(1, len(points)) if points[i][0] >= x)
        (x0, y0), (x1, y1) = points[i - 1], points[i]
    return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))


@dataclass(frozen=True)
class OperatorCost:
    """Cost curve of one operator kind: seconds per partition over megabytes per partition.

    :param cpu_fixed: seconds per partition on the CPU, whatever its size.
    :param cpu_per_mb: CPU seconds per MB of a partition.
    :param gpu_fixed: seconds per partition on the GPU (kernel launch, scheduling).
    :param gpu_per_mb: GPU seconds per MB of a partition.
    :param selectivity: bytes out / bytes in (what the next operator reads).
    """

    cpu_fixed: float
    cpu_per_mb: float
    gpu_fixed: float
    gpu_per_mb: float
    selectivity: float = 1.0

    def crossover_mb(self) -> float | None:
        """MB per partition above which the GPU is cheaper (None: it never is)."""
        slope = self.cpu_per_mb - self.gpu_per_mb
        if slope <= 0:
            return None
        return max(0.0, (self.gpu_fixed - self.cpu_fixed) / slope)


def default_operators() -> dict[str, OperatorCost]:
    """The default cost curve of every operator kind pacer's DAGs use."""
    return {
        "scan": OperatorCost(0.002, 0.30, 0.030, 0.020),
        "filter": OperatorCost(0.001, 0.15, 0.025, 0.015, selectivity=0.6),
        "project": OperatorCost(0.001, 0.12, 0.020, 0.012),
        "expand": OperatorCost(0.002, 0.35, 0.030, 0.030, selectivity=3.0),
        "aggregate": OperatorCost(0.003, 0.45, 0.060, 0.050, selectivity=0.2),
        "join": OperatorCost(0.004, 0.50, 0.060, 0.050),
        "sort": OperatorCost(0.002, 0.40, 0.050, 0.040),
        "shuffle": OperatorCost(0.004, 0.25, 0.040, 0.030),
        "state": OperatorCost(0.003, 0.20, 0.003, 0.20),
        "sink": OperatorCost(0.002, 0.05, 0.002, 0.05),
    }


_SCALARS = ("join_superlinear", "join_exponent", "gpu_join_factor", "batch_overhead", "pcie_init", "pcie_bandwidth",
            "noise", "fixed_task_share", "executor_warmup_s", "state_reload_s")


@dataclass(frozen=True)
class CostModel:
    """All parameters of the simulated processing time; override any of them.

    :param operators: cost curve per operator kind (:func:`default_operators`).
    :param join_superlinear: coefficient of the join's superlinear term, seconds per partition (8.0).
    :param join_exponent: exponent of that term over MB per partition (1.5; > 1 is superlinear).
    :param gpu_join_factor: the superlinear term on the GPU, as a fraction of the CPU's (0.25).
    :param batch_overhead: fixed seconds per micro-batch (0.3).
    :param pcie_init: seconds to start one host-device transfer (0.01).
    :param pcie_bandwidth: bytes per second of a host-device transfer (2e9).
    :param noise: standard deviation of the per-batch multiplicative log-normal noise (0.03; 0 = none).
    :param fixed_task_share: the share of ``batch_overhead`` each of a batch's tasks spends on its own fixed part
        (launch, deserialisation, state-store open and commit), on an executor core: task time, so busy
        core-seconds, where the rest of ``batch_overhead`` (the driver's planning and commits) holds no core
        (0.125: a no-op batch's tasks take 37.5 ms each, Spark in ``local[2]`` shows 20-50 ms; ``pacer calibrate
        --runtime spark`` measures ``fixed_core_s / (partitions x fixed_s)``, README "Cost model defaults").
    :param executor_warmup_s: seconds the first task on each core of a newly added executor runs longer (class
        loading, JIT, first connections; 1.5, not measured here: a figure to calibrate).
    :param state_reload_s: seconds a task of a stateful query runs longer when the executor that held its state
        partition was removed and the state is loaded again from the checkpoint (0.5, not measured here).
    :param cpu_only_operators: engine operator names (``StreamingSymmetricHashJoin``) that have no GPU
        implementation: they run on the CPU whatever the placement says, and the simulator marks them
        ``cpu_only`` in its queries' DAGs so placements see it (RAPIDS' ``supportedExecs.csv``, :mod:`pacer_sim.rapids`).
    :param measured: measured curves that replace the linear ones: kind -> device -> ``(bytes, seconds)``
        points of one partition on one core (a ``pacer.cost-profile/1``, :mod:`pacer_sim.cost_profile`),
        interpolated piecewise linearly and extrapolated along the last segment.
    :param source: where the curves come from, in words (recorded in the report's config).
    :param citations: ``KIND.DEVICE`` (and ``pcie``) -> where that measured curve came from: implementation,
        library, machine and profile (:mod:`pacer_sim.cost_profile`); every other curve is cited as modelled
        (:meth:`citation`).
    """

    operators: Mapping[str, OperatorCost] = field(default_factory=default_operators)
    join_superlinear: float = 8.0
    join_exponent: float = 1.5
    gpu_join_factor: float = 0.25
    batch_overhead: float = 0.3
    pcie_init: float = 0.01
    pcie_bandwidth: float = 2.0e9
    noise: float = 0.03
    fixed_task_share: float = 0.125
    executor_warmup_s: float = 1.5
    state_reload_s: float = 0.5
    cpu_only_operators: frozenset[str] = frozenset()
    measured: Mapping[str, Mapping[str, tuple[tuple[float, float], ...]]] = field(default_factory=dict)
    source: str = BUILTIN_SOURCE
    citations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _SCALARS:
            if getattr(self, name) < 0:
                raise ValueError(f"cost model parameter {name!r} must be >= 0, got {getattr(self, name)}")
        if self.pcie_bandwidth <= 0:
            raise ValueError("cost model parameter 'pcie_bandwidth' must be > 0")
        if self.fixed_task_share > 1:
            raise ValueError(f"cost model parameter 'fixed_task_share' is a share of batch_overhead: at most 1, "
                             f"got {self.fixed_task_share}")
        for kind, devices in self.measured.items():
            for device, points in devices.items():
                if device not in ("cpu", "gpu") or len(points) < 2:
                    raise ValueError(f"measured curve {kind}.{device}: need a cpu or gpu curve of >= 2 points")
                if any(b2 <= b1 for (b1, _), (b2, _) in itertools.pairwise(points)):
                    raise ValueError(f"measured curve {kind}.{device}: bytes must increase from point to point")

    def with_overrides(self, overrides: Mapping[str, Any]) -> CostModel:
        """A copy with ``overrides`` applied: ``{"batch_overhead": 0.4, "join.gpu_fixed": 0.1}``.

        Keys are the scalar parameters or ``KIND.FIELD`` of an operator curve; values may be strings.
        :raises ValueError: for an unknown key or a value that is not a number.
        """
        scalars: dict[str, float] = {}
        operators = dict(self.operators)
        fields = {f.name for f in dataclasses.fields(OperatorCost)}
        for key, raw in overrides.items():
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise ValueError(f"cost parameter {key!r} expects a number, got {raw!r}") from None
            kind, dot, name = key.partition(".")
            if not dot:
                if key not in _SCALARS:
                    raise ValueError(f"unknown cost parameter {key!r}; scalars are {', '.join(_SCALARS)}, "
                                     f"curves are KIND.FIELD with FIELD in {', '.join(sorted(fields))}")
                scalars[key] = value
            elif kind in operators and name in fields:
                operators[kind] = dataclasses.replace(operators[kind], **{name: value})
            else:
                raise ValueError(f"unknown cost parameter {key!r}; operator kinds are {', '.join(sorted(operators))} "
                                 f"and their fields {', '.join(sorted(fields))}")
        return dataclasses.replace(self, operators=operators, **scalars)  # type: ignore[arg-type]

    def as_config(self) -> dict[str, Any]:
        """Every parameter as plain JSON values (recorded in reports)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _SCALARS}
        out["operators"] = {kind: dataclasses.asdict(c) for kind, c in sorted(self.operators.items())}
        out["cpu_only_operators"] = sorted(self.cpu_only_operators)
        out["measured"] = {kind: {d: [list(p) for p in pts] for d, pts in sorted(devs.items())}
                           for kind, devs in sorted(self.measured.items())}
        out["source"] = self.source
        out["citations"] = {key: self.citation(*key.split(".")) for key in
                            [f"{kind}.{device}" for kind in sorted(self.operators) for device in ("cpu", "gpu")]}
        out["citations"]["pcie"] = self.citation("pcie")
        return out

    def citation(self, kind: str, device: str = "") -> str:
        """Where the curve of ``kind`` on ``device`` (or ``pcie``) comes from: the measured implementation and
        machine, or ``modelled, not measured`` and the model's source."""
        key = f"{kind}.{device}" if device else kind
        return self.citations.get(key) or f"modelled, not measured: {self.source}"

    def operator_seconds(self, kind: str, device: Device, mb_per_partition: float) -> float:
        """Seconds one partition of ``mb_per_partition`` MB spends in an operator of ``kind`` on ``device``."""
        cost = self.operators[kind]
        points = self.measured.get(kind, {}).get(device)
        if points is not None:
            return interpolate(points, mb_per_partition * MB)
        if device == "gpu":
            seconds = cost.gpu_fixed + cost.gpu_per_mb * mb_per_partition
        else:
            seconds = cost.cpu_fixed + cost.cpu_per_mb * mb_per_partition
        if kind == "join":
            factor = self.gpu_join_factor if device == "gpu" else 1.0
            seconds += factor * self.join_superlinear * mb_per_partition**self.join_exponent
        return seconds

    def transfer_seconds(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` between host and device (dStream Eq. 3: T_init + size / bandwidth)."""
        return self.pcie_init + nbytes / self.pcie_bandwidth


@dataclass(frozen=True)
class OperatorWork:
    """The raw cost of one operator in one batch, before contention turns it into a measured time.

    :param cpu_core_s: CPU core-seconds (all partitions).
    :param gpu_s: GPU device-seconds.
    :param transfer_s: PCIe seconds to bring its input onto its device.
    """

    operator_id: str
    device: Device
    cpu_core_s: float
    gpu_s: float
    transfer_s: float
    bytes_in: int
    rows_in: int


@dataclass(frozen=True)
class BatchWork:
    """What a batch costs, in three phases run one after another: the driver's fixed part, the GPU, the tasks.

    :param fixed_s: seconds that hold no task slot and do not shrink with cores: the driver's part of
        ``batch_overhead`` (planning, offset log, commit) and the PCIe transfers.
    :param gpu_s: GPU device-seconds (shared with every other batch in its GPU phase).
    :param cpu_core_s: core-seconds of its tasks on the CPU: every task's fixed part (``task_fixed_s``) and the
        CPU operators' work; one task per partition, ``cpu_core_s / parallelism`` each, run in waves
        (:func:`pacer_sim.waves.waves`).
    :param parallelism: the batch's partitions: its tasks, the most task slots it can use at once.
    :param operators: the per-operator costs, in topological order.
    :param enacted: False when operators placed on the GPU ran on the CPU (no GPU modelled, or no GPU exec).
    :param task_fixed_s: seconds of each task's own fixed part (``fixed_task_share x batch_overhead``), counted in
        ``cpu_core_s``: task time on an executor core, though no operator's.
    """

    fixed_s: float
    gpu_s: float
    cpu_core_s: float
    parallelism: int
    operators: tuple[OperatorWork, ...]
    enacted: bool
    task_fixed_s: float = 0.0

    @property
    def serial_s(self) -> float:
        """Seconds that do not shrink with cores: ``fixed_s + gpu_s`` (uncontended)."""
        return self.fixed_s + self.gpu_s

    @property
    def task_s(self) -> float:
        """Seconds one of its tasks runs on a core of full speed (its fixed part and its share of the work)."""
        return self.cpu_core_s / max(1, self.parallelism)

    def alone_s(self, cores: float) -> float:
        """Processing time of the batch alone on ``cores`` cores and an idle GPU: its driver part, its GPU part and
        its tasks in ``ceil(parallelism / slots)`` waves (fractional cores: ``ceil(cores)`` slots, each that much
        slower, :func:`pacer_sim.waves.slot_capacity`)."""
        slots, speed = slot_capacity(cores)
        if slots == 0:
            return math.inf
        return self.fixed_s + self.gpu_s + waves(self.parallelism, slots) * self.task_s / speed


def noise_factor(model: CostModel, seed: int, query_id: str, seq: int) -> float:
    """The batch's multiplicative noise, a function of (seed, query, batch number) only."""
    if model.noise <= 0:
        return 1.0
    rng = np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, zlib.crc32(query_id.encode()), seq]))
    return float(np.exp(rng.normal(0.0, model.noise)))


@dataclass(frozen=True)
class _Step:
    op_id: str
    kind: str
    name: str
    parents: tuple[str, ...]
    source: bool
    sink: bool


_PLANS: dict[int, tuple[OperatorDAG, tuple[_Step, ...]]] = {}


def _plan(dag: OperatorDAG) -> tuple[_Step, ...]:
    """The DAG in topological order with what the cost walk needs, computed once per DAG object."""
    cached = _PLANS.get(id(dag))
    if cached is not None and cached[0] is dag:
        return cached[1]
    sources = set(dag.sources())
    steps = tuple(
        _Step(op_id, dag.operator(op_id).kind, dag.operator(op_id).name, tuple(dag.parents(op_id)), op_id in sources,
              not dag.children(op_id))
        for op_id in dag.topological_order()
    )
    if len(_PLANS) > 256:
        _PLANS.clear()
    _PLANS[id(dag)] = (dag, steps)
    return steps


def batch_work(model: CostModel, spec: QuerySpec, batch: MicroBatch, *, gpus: int, seed: int) -> BatchWork:
    """Cost of ``batch`` of query ``spec`` under its placement (GPU operators run on the CPU when ``gpus == 0``
    or when the model lists them in ``cpu_only_operators``).

    Every source operator reads the whole batch (LR1 reads its stream twice); other
    operators read their parents' output (input bytes times the parent's selectivity).
    """
    return _work(model, spec, batch, gpus, noise_factor(model, seed, spec.id, batch.seq))


def no_data_work(model: CostModel, spec: QuerySpec, seq: int, *, seed: int) -> BatchWork:
    """Cost of Spark's no-data batch of ``spec`` (:mod:`pacer_sim.stateful`): a batch of no bytes, all on the CPU,
    that pays the fixed part, its tasks' fixed part and each operator's per-partition fixed time (evicting state,
    emitting what the watermark closed). ``seq`` numbers the query's no-data batches; their noise is drawn apart
    from its data batches' (key ``{query}/no-data``), so adding them changes no data batch's cost."""
    batch = MicroBatch(f"{spec.id}/no-data/{seq}", spec.id, seq, (), 0.0)
    return _work(model, spec, batch, 0, noise_factor(model, seed, f"{spec.id}/no-data", seq))


def _work(model: CostModel, spec: QuerySpec, batch: MicroBatch, gpus: int, factor: float) -> BatchWork:
    """:func:`batch_work` with the batch's noise ``factor`` given."""
    dag: OperatorDAG = spec.dag
    placement = batch.placement.devices if batch.placement else {}
    cpu_only = model.cpu_only_operators
    partitions = max(1, spec.partitions)
    rows_per_byte = batch.rows / batch.bytes if batch.bytes else 0.0
    bytes_out: dict[str, float] = {}
    device_of: dict[str, Device] = {}
    task_fixed = model.batch_overhead * model.fixed_task_share
    fixed = model.batch_overhead - task_fixed
    enacted = True
    gpu_total = 0.0
    cpu_total = task_fixed * partitions
    ops: list[OperatorWork] = []
    for step in _plan(dag):
        op_id, parents = step.op_id, step.parents
        placed_gpu = placement.get(op_id, "cpu") == "gpu"
        device: Device = "gpu" if placed_gpu and gpus > 0 and step.name not in cpu_only else "cpu"
        enacted = enacted and (device == "gpu") == placed_gpu
        device_of[op_id] = device
        transfer = 0.0
        if step.source:
            nbytes = float(batch.bytes)
            if device == "gpu":  # data arrives in host memory
                transfer += model.transfer_seconds(nbytes)
        else:
            nbytes = 0.0
            for p in parents:
                nbytes += bytes_out[p]
                if device_of[p] != device:
                    transfer += model.transfer_seconds(bytes_out[p])
        bytes_out[op_id] = nbytes * model.operators[step.kind].selectivity
        if device == "gpu" and step.sink:  # results leave from host memory
            transfer += model.transfer_seconds(bytes_out[op_id])
        seconds = model.operator_seconds(step.kind, device, nbytes / partitions / MB) * factor * partitions
        cpu_s, gpu_s = (0.0, seconds) if device == "gpu" else (seconds, 0.0)
        gpu_total += gpu_s
        cpu_total += cpu_s
        fixed += transfer
        ops.append(OperatorWork(op_id, device, cpu_s, gpu_s, transfer, int(nbytes), int(nbytes * rows_per_byte)))
    return BatchWork(fixed, gpu_total, cpu_total, partitions, tuple(ops), enacted, task_fixed)


def alone_seconds(model: CostModel, spec: QuerySpec, devices: Mapping[str, Device], nbytes: float, *, cores: float,
                  gpus: int) -> float:
    """Seconds one batch of ``nbytes`` of query ``spec``, placed on ``devices``, takes alone on ``cores`` cores and an
    idle GPU under ``model`` (:func:`batch_work` of its first batch, seed 0: pass a noise-free model for the curve
    itself)."""
    batch = MicroBatch("alone", spec.id, 0, (Dataset("alone", 0.0, int(nbytes), 1),), 0.0,
                       placement=Placement(dict(devices)))
    return float(batch_work(model, spec, batch, gpus=gpus, seed=0).alone_s(cores))
