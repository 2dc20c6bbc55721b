"""The Device Mapper's shortest path over the extended DAG (Algorithm 1)."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from pacer import Operator, OperatorDAG
from pacer_dstream import CompiledDAG, shortest_path


def _brute_force(dag: CompiledDAG, cpu, gpu, edge, sink) -> float:  # type: ignore[no-untyped-def]
    best = math.inf
    n = len(dag.ids)
    for combo in itertools.product(("cpu", "gpu"), repeat=n):
        total = 0.0
        for i, d in enumerate(combo):
            total += cpu[i] if d == "cpu" else gpu[i]
            if not dag.parents[i]:
                total += edge[i] if d == "gpu" else 0.0
            for p in dag.parents[i]:
                total += edge[i] if combo[p] != d else 0.0
            if dag.is_sink[i] and d == "gpu":
                total += sink[i]
        best = min(best, total)
    return best


def _cost_of(dag: CompiledDAG, devices, cpu, gpu, edge, sink) -> float:  # type: ignore[no-untyped-def]
    total = 0.0
    for i, d in enumerate(devices):
        total += cpu[i] if d == "cpu" else gpu[i]
        total += (edge[i] if d == "gpu" else 0.0) if not dag.parents[i] else 0.0
        total += sum(edge[i] for p in dag.parents[i] if devices[p] != d)
        total += sink[i] if dag.is_sink[i] and d == "gpu" else 0.0
    return total


def _chain(n: int) -> CompiledDAG:
    return OperatorDAG.chain(*(Operator(f"o{i}", "project") for i in range(n))).compiled


def _join_tree() -> CompiledDAG:
    ops = tuple(Operator(x, "filter") for x in ("s1", "f1", "s2", "f2", "j", "p", "k"))
    edges = (("s1", "f1"), ("s2", "f2"), ("f1", "j"), ("f2", "j"), ("j", "p"), ("p", "k"))
    return OperatorDAG(ops, edges).compiled


def test_figure_5_relaxation_prefers_the_cheaper_predecessor() -> None:
    # 1st operator: CPU 1, GPU 3 (+ 1 to load it); 2nd: GPU 2 from either (transition 1)
    dag = _chain(2)
    path = shortest_path(dag, [1.0, 9.0], [3.0, 2.0], [1.0, 1.0], [0.0, 0.0])
    # GPU1->GPU2 = 4 + 2 = 6; CPU1->GPU2 = 1 + 1 + 2 = 4
    assert path.devices == ("cpu", "gpu") and path.cost == pytest.approx(4.0)


@pytest.mark.parametrize("make", [lambda: _chain(7), _join_tree])
def test_matches_brute_force_on_chains_and_in_trees(make) -> None:  # type: ignore[no-untyped-def]
    dag = make()
    rng = random.Random(5)
    n = len(dag.ids)
    for _ in range(200):
        cpu = [rng.uniform(0, 5) for _ in range(n)]
        gpu = [rng.uniform(0, 5) if rng.random() > 0.15 else math.inf for _ in range(n)]
        edge = [rng.uniform(0, 2) for _ in range(n)]
        sink = [rng.uniform(0, 2) for _ in range(n)]
        path = shortest_path(dag, cpu, gpu, edge, sink)
        best = _brute_force(dag, cpu, gpu, edge, sink)
        assert path.cost == pytest.approx(best)
        assert _cost_of(dag, path.devices, cpu, gpu, edge, sink) == pytest.approx(best)


def test_cpu_only_vertex_and_ties_go_to_the_cpu() -> None:
    dag = _chain(3)
    path = shortest_path(dag, [1.0, 1.0, 1.0], [0.1, math.inf, 0.1], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert path.devices == ("gpu", "cpu", "gpu")
    assert shortest_path(dag, [0.0] * 3, [0.0] * 3, [0.0] * 3, [0.0] * 3).devices == ("cpu", "cpu", "cpu")


def test_shared_ancestor_is_placed_once() -> None:
    ops = tuple(Operator(x, "project") for x in ("s", "a", "b", "j"))
    dag = OperatorDAG(ops, (("s", "a"), ("s", "b"), ("a", "j"), ("b", "j"))).compiled
    path = shortest_path(dag, [1.0] * 4, [0.5] * 4, [0.1] * 4, [0.1] * 4)
    assert len(path.devices) == 4 and set(path.devices) == {"gpu"}

