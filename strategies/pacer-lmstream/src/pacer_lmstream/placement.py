"""LMStream Algorithm 2 (MapDevice) with the cost models of Eqs. 7-9 and Table II base costs.

For the data partition size Part (bytes of the micro-batch / its partitions) and the
inflection point InfPT:

CPU(o)   = baseCost_o × Part / InfPT            (Eq. 7)
GPU(o)   = baseCost_o × InfPT / Part            (Eq. 8)
Trans(o) = baseTransCost × Part / InfPT         (Eq. 9)

Every operator starts on the GPU; walking the DAG parents-first, Trans is added to
the GPU cost when the operator is the first or the last one, or when the previous
operator runs on the CPU, and to the CPU cost otherwise; the operator moves to the
CPU when its GPU cost is greater than its CPU cost.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from pacer.model import Device, OperatorDAG

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


@dataclass(frozen=True, slots=True)
class CompiledDAG:
    """A DAG flattened once for O(V + E) walks: operators parents-first, with parent indices."""

    ids: tuple[str, ...]
    kinds: tuple[str, ...]
    cpu_only: tuple[bool, ...]
    parents: tuple[tuple[int, ...], ...]
    is_first: tuple[bool, ...]
    is_last: tuple[bool, ...]

    @classmethod
    def of(cls, dag: OperatorDAG) -> CompiledDAG:
        """Topologically sort ``dag`` (Kahn, declaration order on ties) in linear time."""
        index = {op.id: i for i, op in enumerate(dag.operators)}
        n = len(dag.operators)
        children: list[list[int]] = [[] for _ in range(n)]
        parents: list[list[int]] = [[] for _ in range(n)]
        for src, dst in dag.edges:
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
        ops = [dag.operators[i] for i in order]
        return cls(
            ids=tuple(op.id for op in ops),
            kinds=tuple(op.kind for op in ops),
            cpu_only=tuple(op.cpu_only for op in ops),
            parents=tuple(tuple(position[p] for p in parents[i]) for i in order),
            is_first=tuple(not parents[i] for i in order),
            is_last=tuple(not children[i] for i in order),
        )


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
) -> tuple[dict[str, Device], dict[str, OperatorCost]]:
    """Algorithm 2: a device per operator, and the costs that decided it.

    In a DAG with several inputs, "o - 1 runs on the CPU" holds when any parent runs on
    the CPU (at least one input would have to move to the GPU). CPU-only operators, and
    every operator when no GPU is on offer, stay on the CPU.

    :param part_bytes: Part(i,j), bytes per data partition.
    :param inflection_bytes: InfPT_i in bytes (> 0).
    """
    if inflection_bytes <= 0:
        raise ValueError(f"inflection point must be > 0 bytes, got {inflection_bytes}")
    devices: list[Device] = []
    costs: dict[str, OperatorCost] = {}
    trans = transition_cost(base_trans_cost, part_bytes, inflection_bytes)
    for i, op_id in enumerate(dag.ids):
        cpu, gpu = execution_costs(base_costs.get(dag.kinds[i], 1.0), part_bytes, inflection_bytes)
        previous_on_cpu = any(devices[p] == "cpu" for p in dag.parents[i])
        if dag.is_first[i] or dag.is_last[i] or previous_on_cpu:
            gpu += trans
        else:
            cpu += trans
        device: Device = "cpu" if gpu > cpu or dag.cpu_only[i] or not gpu_available else "gpu"
        devices.append(device)
        costs[op_id] = OperatorCost(cpu=cpu, gpu=gpu, trans=trans, device=device)
    return dict(zip(dag.ids, devices, strict=True)), costs
