"""dStream's Device Mapper: the extended DAG G_d and its shortest path (Algorithm 1).

G_d has a CPU vertex and, unless the operator is CPU-only, a GPU vertex per operator of
G_p, plus a dummy ``startVertex`` (on the host, i.e. the CPU) in front of every source,
so a multi-source plan (a join) is searched from a single source. Entering the vertex of
operator i on device d costs T_exec(i, d), plus T_trans(i) when the edge comes from the
other device (Eq. 1, Eq. 3). Vertices are relaxed in topological order: Θ(V + E).

Algorithm 1 traces one path back from the sink. An operator with several inputs (a
join) needs every input placed, so its distance here is its own cost plus the *sum*
over its inputs of the best way to reach it from each; on a chain this is exactly
Algorithm 1, on an in-tree it is exact, and where one operator feeds several others
its device is taken from the consumer visited first on the way back.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pacer.model import CompiledDAG, Device


@dataclass(frozen=True, slots=True)
class Path:
    """The optimised plan: a device per operator (topological order) and its estimated cost."""

    devices: tuple[Device, ...]
    cost: float


def shortest_path(
    dag: CompiledDAG,
    cpu: Sequence[float],
    gpu: Sequence[float],
    edge_trans: Sequence[float],
    sink_trans: Sequence[float],
) -> Path:
    """Relax G_d in topological order and trace the plan back from the sinks.

    :param cpu: T_exec of each operator (topological order) on the CPU.
    :param gpu: T_exec on the GPU; ``math.inf`` where the GPU vertex does not exist.
    :param edge_trans: T_trans of one input edge of each operator whose endpoints differ in device.
    :param sink_trans: cost of bringing a GPU-placed final operator's result back to the host.
    :return: the plan; ties go to the CPU (no transfer, Spark's default).
    """
    n = len(dag.ids)
    dist_c = [0.0] * n
    dist_g = [0.0] * n
    parents = dag.parents
    for i in range(n):
        t = edge_trans[i]
        ps = parents[i]
        if not ps:  # the edge from startVertex, which sits on the host
            in_c, in_g = 0.0, t
        else:
            in_c = in_g = 0.0
            for p in ps:
                pc, pg = dist_c[p], dist_g[p]
                in_c += pc if pc <= pg + t else pg + t
                in_g += pg if pg <= pc + t else pc + t
        dist_c[i] = cpu[i] + in_c
        g = gpu[i]
        dist_g[i] = g + in_g if g != math.inf else math.inf
    assigned: list[Device | None] = [None] * n
    total = 0.0
    for i in range(n):
        if dag.is_sink[i]:
            on_gpu = dist_g[i] + sink_trans[i]
            if on_gpu < dist_c[i]:
                assigned[i] = "gpu"
                total += on_gpu
            else:
                assigned[i] = "cpu"
                total += dist_c[i]
    for i in range(n - 1, -1, -1):
        d = assigned[i]
        t = edge_trans[i]
        for p in parents[i]:
            if assigned[p] is not None:
                continue
            pc, pg = dist_c[p], dist_g[p]
            if d == "cpu":
                assigned[p] = "cpu" if pc <= pg + t else "gpu"
            else:
                assigned[p] = "gpu" if pg <= pc + t else "cpu"
    devices: tuple[Device, ...] = tuple(d if d is not None else "cpu" for d in assigned)
    return Path(devices=devices, cost=total)
