"""LMStream Algorithm 2 (MapDevice) with the cost models of Eqs. 7-9 and Table II base costs.

For the data partition size Part (bytes of the micro-batch / its partitions) and the
inflection point InfPT, as the paper prints them:

CPU(o)   = baseCost_o × Part / InfPT            (Eq. 7)
GPU(o)   = baseCost_o × InfPT / Part            (Eq. 8)
Trans(o) = baseTransCost × Part / InfPT         (Eq. 9)

Every operator starts on the GPU; walking the DAG parents-first, Trans is added to
the GPU cost when the operator is the first or the last one, or when the previous
operator runs on the CPU, and to the CPU cost otherwise; the operator moves to the
CPU when its GPU cost is greater than its CPU cost.

Table II and Eqs. 7-8 disagree: Table II gives each operation an *initial preference*,
"the device preference of each operation when data size is as similar as inflection
point", but with the same base cost on both sides Eqs. 7 and 8 are equal at
Part = InfPT for every operation, so the base cost decides nothing there (only Trans
does, and it favours the CPU-preferring aggregate moving to the GPU *before* the
GPU-preferring scan: the opposite of the table). With ``preference="table-ii"`` (the
default) the base cost of Table II is the GPU function's (Eq. 8 as printed) and the CPU
function's base is its mirror around the neutral 0.9,

CPU(o)   = (2 × 0.9 − baseCost_o) × Part / InfPT

so at Part = InfPT a CPU-preferring operation (1.0) costs 0.8 on the CPU and 1.0 on the
GPU, a GPU-preferring one (0.8) the reverse and a neutral one (0.9) the same on both.
``preference="letter"`` keeps Eq. 7 as printed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pacer.model import CompiledDAG, Device

#: Table II base costs by pacer operator kind. Aggregation (hash), filtering and shuffling
#: prefer the CPU (1.0); projection, join (hash) and expand are neutral (0.9); scan and sort
#: prefer the GPU (0.8). ``state`` and ``sink`` are not in Table II: they are CPU-only in
#: pacer, so their base cost never decides anything; 1.0 (CPU-preferring) is recorded.
BASE_COST: dict[str, float] = {
    "aggregate": 1.0,
    "filter": 1.0,
    "shuffle": 1.0,
    "project": 0.9,
    "join": 0.9,
    "expand": 0.9,
    "scan": 0.8,
    "sort": 0.8,
    "state": 1.0,
    "sink": 1.0,
}

#: Table II's neutral base cost (projection, join, expand): equal cost on both devices at Part = InfPT.
NEUTRAL_BASE_COST = 0.9

#: How the Table II base cost enters Eq. 7: ``table-ii`` (mirrored around the neutral 0.9) or ``letter``.
PREFERENCES = ("table-ii", "letter")


@dataclass(frozen=True, slots=True)
class OperatorCost:
    """The costs MapDevice weighed for one operator (Trans already added to one side)."""

    cpu: float
    gpu: float
    trans: float
    device: Device


def execution_costs(base_cost: float, part_bytes: float, inflection_bytes: float) -> tuple[float, float]:
    """Eqs. 7 and 8: (CPU cost, GPU cost) of an operator; a zero-byte partition costs the GPU infinitely."""
    cpu = base_cost * part_bytes / inflection_bytes
    gpu = base_cost * inflection_bytes / part_bytes if part_bytes > 0 else math.inf
    return cpu, gpu


def preferring_costs(base_cost: float, part_bytes: float, inflection_bytes: float) -> tuple[float, float]:
    """(CPU cost, GPU cost) with Table II's initial preference: Eq. 8 as printed, Eq. 7 with the mirrored base.

    At ``part_bytes == inflection_bytes`` the CPU costs ``2 × 0.9 − base`` and the GPU ``base``: a
    CPU-preferring operation (1.0) is cheaper on the CPU, a GPU-preferring one (0.8) on the GPU.
    """
    _, gpu = execution_costs(base_cost, part_bytes, inflection_bytes)
    return (2 * NEUTRAL_BASE_COST - base_cost) * part_bytes / inflection_bytes, gpu


def transition_cost(base_trans_cost: float, part_bytes: float, inflection_bytes: float) -> float:
    """Eq. 9: cost of moving a partition between the devices."""
    return base_trans_cost * part_bytes / inflection_bytes


def map_device(
    dag: CompiledDAG,
    part_bytes: float,
    inflection_bytes: float,
    *,
    base_trans_cost: float = 0.1,
    base_costs: Mapping[str, float] = BASE_COST,
    gpu_available: bool = True,
    preference: str = "table-ii",
) -> tuple[dict[str, Device], dict[str, OperatorCost]]:
    """Algorithm 2: a device per operator, and the costs that decided it.

    In a DAG with several inputs, "o - 1 runs on the CPU" holds when any parent runs on
    the CPU (at least one input would have to move to the GPU). CPU-only operators, and
    every operator when no GPU is on offer, stay on the CPU.

    :param part_bytes: Part(i,j), bytes per data partition.
    :param inflection_bytes: InfPT_i in bytes (> 0).
    :param preference: ``table-ii`` (:func:`preferring_costs`, Table II's initial preferences hold at
        Part = InfPT) or ``letter`` (:func:`execution_costs`, Eqs. 7-8 as printed).
    """
    if inflection_bytes <= 0:
        raise ValueError(f"inflection point must be > 0 bytes, got {inflection_bytes}")
    if preference not in PREFERENCES:
        raise ValueError(f"preference must be one of {', '.join(PREFERENCES)}, got {preference!r}")
    costs_of = preferring_costs if preference == "table-ii" else execution_costs
    devices: list[Device] = []
    costs: dict[str, OperatorCost] = {}
    trans = transition_cost(base_trans_cost, part_bytes, inflection_bytes)
    sources, sinks = dag.is_source, dag.is_sink
    for i, op_id in enumerate(dag.ids):
        cpu, gpu = costs_of(base_costs.get(dag.kinds[i], 1.0), part_bytes, inflection_bytes)
        previous_on_cpu = any(devices[p] == "cpu" for p in dag.parents[i])
        if sources[i] or sinks[i] or previous_on_cpu:
            gpu += trans
        else:
            cpu += trans
        device: Device = "cpu" if gpu > cpu or dag.cpu_only[i] or not gpu_available else "gpu"
        devices.append(device)
        costs[op_id] = OperatorCost(cpu=cpu, gpu=gpu, trans=trans, device=device)
    return dict(zip(dag.ids, devices, strict=True)), costs
