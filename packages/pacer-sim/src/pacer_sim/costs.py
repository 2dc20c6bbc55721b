"""The simulator's cost model: per-operator CPU and GPU cost curves, PCIe transfers, fixed overhead, noise.

Every figure produced with it is *simulated*. Its defaults follow the shapes the
papers report, not measurements of a real GPU:

- per partition, an operator costs ``fixed + per_mb * MB`` on its device; the GPU
  has a larger fixed (launch) cost and a much smaller slope, so the CPU wins on
  small partitions and the GPU on large ones, crossing near 150 KB per partition
  (LMStream Fig. 5: CPU below ~15 KB, mixed around 150 KB, GPU above);
- the stream-stream join also pays ``join_superlinear * MB^join_exponent``: its
  cost grows faster than its batch (Das §3.2, LMStream LR1S), so intervals above
  the stable point diverge;
- moving data between devices costs ``pcie_init + bytes / pcie_bandwidth``
  (dStream Eq. 3);
- every micro-batch pays ``batch_overhead`` (Spark's planning, WAL and offset
  commits: 300-420 ms on the 2-core machines pacer is developed on);
- CPU work runs in parallel over the batch's partitions (up to the cores it is
  given); GPU work and transfers run one after another on the single device.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from pacer import Device, MicroBatch, OperatorDAG, OperatorMetric, QuerySpec

MB = 1_000_000.0


@dataclass(frozen=True)
class OperatorCost:
    """Cost curve of one operator kind, seconds per partition over megabytes per partition."""

    cpu_fixed: float
    cpu_per_mb: float
    gpu_fixed: float
    gpu_per_mb: float
    selectivity: float = 1.0  # bytes out / bytes in


def _default_operators() -> dict[str, OperatorCost]:
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


@dataclass(frozen=True)
class CostModel:
    """All parameters of the simulated processing time; override any of them.

    :param operators: cost curve per operator kind.
    :param join_superlinear: coefficient of the join's superlinear term (seconds per partition).
    :param join_exponent: exponent of that term over MB per partition (> 1: superlinear).
    :param batch_overhead: fixed seconds per micro-batch.
    :param pcie_init: seconds to start one host-device transfer.
    :param pcie_bandwidth: bytes per second of a host-device transfer.
    :param noise: standard deviation of the multiplicative log-normal noise per batch.
    """

    operators: Mapping[str, OperatorCost] = field(default_factory=_default_operators)
    join_superlinear: float = 8.0
    join_exponent: float = 1.5
    batch_overhead: float = 0.3
    pcie_init: float = 0.01
    pcie_bandwidth: float = 2.0e9
    noise: float = 0.03

    def operator_seconds(self, kind: str, device: Device, mb_per_partition: float) -> float:
        """Seconds one partition of ``mb_per_partition`` MB spends in an operator of ``kind`` on ``device``."""
        cost = self.operators[kind]
        if device == "gpu":
            seconds = cost.gpu_fixed + cost.gpu_per_mb * mb_per_partition
        else:
            seconds = cost.cpu_fixed + cost.cpu_per_mb * mb_per_partition
        if kind == "join":
            seconds += self.join_superlinear * mb_per_partition**self.join_exponent * (0.25 if device == "gpu" else 1.0)
        return seconds

    def transfer_seconds(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` between host and device (dStream Eq. 3)."""
        return self.pcie_init + nbytes / self.pcie_bandwidth


@dataclass(frozen=True)
class BatchWork:
    """What a batch costs: serial seconds (overhead, GPU, transfers), parallel CPU core-seconds, metrics."""

    serial_s: float
    cpu_core_s: float
    parallelism: int
    metrics: tuple[OperatorMetric, ...]
    enacted: bool


def _noise_factor(model: CostModel, seed: int, query_id: str, seq: int) -> float:
    if model.noise <= 0:
        return 1.0
    rng = np.random.default_rng(np.random.SeedSequence([seed & 0xFFFFFFFF, zlib.crc32(query_id.encode()), seq]))
    return float(np.exp(rng.normal(0.0, model.noise)))


def batch_work(model: CostModel, spec: QuerySpec, batch: MicroBatch, *, gpus: int, seed: int) -> BatchWork:
    """Cost of ``batch`` of query ``spec`` under its placement (GPU operators run on the CPU when there is no GPU)."""
    dag: OperatorDAG = spec.dag
    placement = batch.placement.devices if batch.placement else {}
    enacted = gpus > 0 or all(d == "cpu" for d in placement.values())
    partitions = max(1, spec.partitions)
    factor = _noise_factor(model, seed, spec.id, batch.seq)
    sources = dag.sources()
    bytes_in: dict[str, float] = {}
    device_of: dict[str, Device] = {}
    serial = model.batch_overhead
    cpu = 0.0
    metrics = []
    rows_ratio = batch.rows / batch.bytes if batch.bytes else 0.0
    for op_id in dag.topological_order():
        op = dag.operator(op_id)
        parents = dag.parents(op_id)
        if op_id in sources:
            nbytes = float(batch.bytes)  # every scan reads the whole batch (LR1 reads its stream twice)
        else:
            nbytes = sum(bytes_in[p] * model.operators[dag.operator(p).kind].selectivity for p in parents)
        bytes_in[op_id] = nbytes
        wanted = placement.get(op_id, "cpu")
        device: Device = "gpu" if wanted == "gpu" and gpus > 0 else "cpu"
        device_of[op_id] = device
        transfer = 0.0
        upstream = [device_of[p] for p in parents] or ["cpu"]  # data arrives in host memory
        for p_device, p_id in zip(upstream, parents or [None], strict=False):
            if p_device != device:
                moved = bytes_in[p_id] * model.operators[dag.operator(p_id).kind].selectivity if p_id else nbytes
                transfer += model.transfer_seconds(moved)
        per_partition = model.operator_seconds(op.kind, device, nbytes / partitions / MB) * factor
        total = per_partition * partitions
        if device == "gpu":
            serial += total + transfer
        else:
            cpu += total
            serial += transfer
        metrics.append(
            OperatorMetric(op_id, device, total + transfer, int(nbytes), int(nbytes * rows_ratio))
        )
    return BatchWork(serial, cpu, partitions, tuple(metrics), enacted)
