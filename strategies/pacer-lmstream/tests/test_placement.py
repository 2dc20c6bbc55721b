"""Algorithm 2 and Eqs. 7-9: exact values on chosen sizes."""

from __future__ import annotations

import math

import pytest

from pacer import Operator, OperatorDAG
from pacer_lmstream import BASE_COST, CompiledDAG, map_device
from pacer_lmstream.placement import execution_costs, transition_cost

KB = 1_000.0


def _chain(*kinds: str) -> CompiledDAG:
    return CompiledDAG.of(OperatorDAG.chain(*(Operator(f"{k}#{i}", k) for i, k in enumerate(kinds))))  # type: ignore[arg-type]


def test_table_ii_base_costs() -> None:
    assert [BASE_COST[k] for k in ("aggregate", "filter", "shuffle")] == [1.0, 1.0, 1.0]
    assert [BASE_COST[k] for k in ("project", "join", "expand")] == [0.9, 0.9, 0.9]
    assert [BASE_COST[k] for k in ("scan", "sort")] == [0.8, 0.8]


@pytest.mark.parametrize(
    ("base", "part", "cpu", "gpu", "trans"),
    [
        (1.0, 300 * KB, 2.0, 0.5, 0.2),  # Part = 2 × InfPT
        (0.9, 75 * KB, 0.45, 1.8, 0.05),  # Part = InfPT / 2
        (0.8, 150 * KB, 0.8, 0.8, 0.1),  # Part = InfPT: equal costs
        (0.8, 15 * KB, 0.08, 8.0, 0.01),  # LMStream's "CPU only" size
    ],
)
def test_eqs_7_8_9(base: float, part: float, cpu: float, gpu: float, trans: float) -> None:
    assert execution_costs(base, part, 150 * KB) == pytest.approx((cpu, gpu))
    assert transition_cost(0.1, part, 150 * KB) == pytest.approx(trans)


def test_zero_bytes_cost_the_gpu_infinitely() -> None:
    assert execution_costs(1.0, 0.0, 150 * KB) == (0.0, math.inf)


def test_algorithm_2_on_a_chain_at_twice_the_inflection_point() -> None:
    dag = _chain("scan", "filter", "aggregate", "project")
    devices, costs = map_device(dag, 300 * KB, 150 * KB)
    # scan (first): CPU 1.6, GPU 0.4 + 0.2 = 0.6 -> GPU
    assert (costs["scan#0"].cpu, costs["scan#0"].gpu) == pytest.approx((1.6, 0.6))
    # filter after a GPU scan: CPU 2.0 + 0.2 = 2.2, GPU 0.5 -> GPU
    assert (costs["filter#1"].cpu, costs["filter#1"].gpu) == pytest.approx((2.2, 0.5))
    # project (last): CPU 1.8, GPU 0.45 + 0.2 = 0.65 -> GPU
    assert (costs["project#3"].cpu, costs["project#3"].gpu) == pytest.approx((1.8, 0.65))
    assert set(devices.values()) == {"gpu"}


def test_algorithm_2_at_the_inflection_point_follows_table_ii_and_transitions() -> None:
    dag = _chain("scan", "filter", "project", "expand", "aggregate")
    devices, costs = map_device(dag, 150 * KB, 150 * KB)
    # scan: CPU 0.8, GPU 0.8 + 0.1 = 0.9 -> CPU
    assert devices["scan#0"] == "cpu" and costs["scan#0"].gpu == pytest.approx(0.9)
    # filter after CPU: CPU 1.0, GPU 1.1 -> CPU; project: 0.9 vs 1.0 -> CPU; expand likewise
    assert [devices[k] for k in ("filter#1", "project#2", "expand#3")] == ["cpu", "cpu", "cpu"]
    # aggregate (last): CPU 1.0, GPU 1.1 -> CPU
    assert costs["aggregate#4"].cpu == pytest.approx(1.0) and costs["aggregate#4"].gpu == pytest.approx(1.1)


def test_mixed_plan_between_the_regimes() -> None:
    # Part = 160 KB: CPU(base) = base × 1.0667, GPU(base) = base × 0.9375, Trans = 0.10667
    dag = _chain("scan", "filter", "project", "sink")
    devices, costs = map_device(dag, 160 * KB, 150 * KB)
    r = 160 / 150
    # scan: CPU 0.8r = 0.8533, GPU 0.8/r + 0.1r = 0.75 + 0.1067 = 0.8567 -> CPU (GPU greater)
    assert costs["scan#0"].cpu == pytest.approx(0.8 * r)
    assert costs["scan#0"].gpu == pytest.approx(0.8 / r + 0.1 * r)
    assert devices["scan#0"] == "cpu"
    # filter, previous on CPU: CPU 1.0667, GPU 0.9375 + 0.1067 = 1.0442 -> GPU
    assert costs["filter#1"].gpu == pytest.approx(1 / r + 0.1 * r)
    assert devices["filter#1"] == "gpu"
    # project after a GPU filter: CPU 0.96 + 0.1067 = 1.0667, GPU 0.84375 -> GPU
    assert costs["project#2"].cpu == pytest.approx(0.9 * r + 0.1 * r)
    assert devices["project#2"] == "gpu"
    assert devices["sink#3"] == "cpu"  # CPU-only


def test_cpu_only_and_no_gpu() -> None:
    dag = _chain("scan", "sort", "state", "sink")
    devices, _ = map_device(dag, 10_000 * KB, 150 * KB)
    assert devices == {"scan#0": "gpu", "sort#1": "cpu", "state#2": "cpu", "sink#3": "cpu"}
    devices, _ = map_device(dag, 10_000 * KB, 150 * KB, gpu_available=False)
    assert set(devices.values()) == {"cpu"}


def test_multi_input_operator_counts_any_cpu_parent_as_previous_on_cpu() -> None:
    ops = (Operator("a", "scan"), Operator("b", "scan", cpu_only=True), Operator("j", "join"), Operator("p", "project"))
    dag = CompiledDAG.of(OperatorDAG(ops, (("a", "j"), ("b", "j"), ("j", "p"))))
    devices, costs = map_device(dag, 300 * KB, 150 * KB)
    assert devices["a"] == "gpu" and devices["b"] == "cpu"
    # join: b on the CPU -> GPU += Trans: CPU 1.8, GPU 0.45 + 0.2
    assert costs["j"].gpu == pytest.approx(0.65) and costs["j"].cpu == pytest.approx(1.8)


def test_rejects_non_positive_inflection_point() -> None:
    with pytest.raises(ValueError, match="inflection"):
        map_device(_chain("scan"), 1.0, 0.0)
