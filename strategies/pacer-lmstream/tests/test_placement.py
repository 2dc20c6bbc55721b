"""Algorithm 2 and Eqs. 7-9: exact values on chosen sizes."""

from __future__ import annotations

import math

import pytest

from pacer import Operator, OperatorDAG
from pacer_lmstream import BASE_COST, CompiledDAG, map_device
from pacer_lmstream.placement import execution_costs, preferring_costs, transition_cost

KB = 1_000.0


def _chain(*kinds: str) -> CompiledDAG:
    return OperatorDAG.chain(*(Operator(f"{k}#{i}", k) for i, k in enumerate(kinds))).compiled  # type: ignore[arg-type]


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
    devices, costs = map_device(dag, 300 * KB, 150 * KB, preference="letter")
    # scan (first): CPU 1.6, GPU 0.4 + 0.2 = 0.6 -> GPU
    assert (costs["scan#0"].cpu, costs["scan#0"].gpu) == pytest.approx((1.6, 0.6))
    # filter after a GPU scan: CPU 2.0 + 0.2 = 2.2, GPU 0.5 -> GPU
    assert (costs["filter#1"].cpu, costs["filter#1"].gpu) == pytest.approx((2.2, 0.5))
    # project (last): CPU 1.8, GPU 0.45 + 0.2 = 0.65 -> GPU
    assert (costs["project#3"].cpu, costs["project#3"].gpu) == pytest.approx((1.8, 0.65))
    assert set(devices.values()) == {"gpu"}


def test_preferring_costs_mirror_table_ii_around_the_neutral_base() -> None:
    # Eq. 8 as printed on the GPU side; the CPU side's base is 2 x 0.9 - baseCost
    assert preferring_costs(1.0, 150 * KB, 150 * KB) == pytest.approx((0.8, 1.0))  # CPU-preferring
    assert preferring_costs(0.9, 150 * KB, 150 * KB) == pytest.approx((0.9, 0.9))  # neutral
    assert preferring_costs(0.8, 150 * KB, 150 * KB) == pytest.approx((1.0, 0.8))  # GPU-preferring
    assert preferring_costs(1.0, 300 * KB, 150 * KB) == pytest.approx((1.6, 0.5))


def test_algorithm_2_at_the_inflection_point_follows_table_ii_and_transitions() -> None:
    """Table II: at Part = InfPT aggregate/filter/shuffle prefer the CPU, scan/sort the GPU; neutral
    operators (project/join/expand) follow their input, because only the transition cost tells them apart."""
    devices, costs = map_device(_chain("scan", "filter", "project", "expand", "aggregate"), 150 * KB, 150 * KB)
    # scan (GPU-preferring, first): CPU 1.0, GPU 0.8 + Trans 0.1 = 0.9 -> GPU
    assert devices["scan#0"] == "gpu" and (costs["scan#0"].cpu, costs["scan#0"].gpu) == pytest.approx((1.0, 0.9))
    # filter (CPU-preferring) after a GPU scan: CPU 0.8 + 0.1 = 0.9, GPU 1.0 -> CPU, paying the transition
    assert devices["filter#1"] == "cpu" and (costs["filter#1"].cpu, costs["filter#1"].gpu) == pytest.approx((0.9, 1.0))
    # project, expand (neutral) after the CPU: CPU 0.9, GPU 0.9 + 0.1 -> stay on the CPU
    assert [devices[k] for k in ("project#2", "expand#3")] == ["cpu", "cpu"]
    # aggregate (CPU-preferring, last): CPU 0.8, GPU 1.0 + 0.1 -> CPU
    assert devices["aggregate#4"] == "cpu"
    devices, costs = map_device(_chain("scan", "project", "sort", "filter"), 150 * KB, 150 * KB)
    # project (neutral) after a GPU scan: CPU 0.9 + 0.1, GPU 0.9 -> follows its input onto the GPU
    assert devices["project#1"] == "gpu"
    # sort prefers the GPU (CPU 1.0 + 0.1 > GPU 0.8) but is CPU-only in pacer's plans; filter (last): CPU 0.8, GPU 1.1
    assert (costs["sort#2"].cpu, costs["sort#2"].gpu) == pytest.approx((1.1, 0.8)) and devices["sort#2"] == "cpu"
    assert devices["filter#3"] == "cpu"


def test_gpu_preferring_operators_move_to_the_gpu_at_smaller_partitions_than_cpu_preferring_ones() -> None:
    """The same preference seen as sizes: the smallest Part at which a lone first operator goes to the GPU."""

    def switch_point(kind: str, preference: str) -> float:
        return next(k for k in range(100, 300) if map_device(_chain(kind), k * KB, 150 * KB, preference=preference,
                                                              base_trans_cost=0.0)[0][f"{kind}#0"] == "gpu")

    assert switch_point("scan", "table-ii") < switch_point("project", "table-ii") < switch_point("aggregate", "table-ii")
    # Eqs. 7-8 as printed cannot tell the kinds apart: every kind switches exactly at InfPT
    assert {switch_point(k, "letter") for k in ("scan", "project", "aggregate")} == {150}


def test_at_the_inflection_point_the_letter_of_eqs_7_8_contradicts_table_ii() -> None:
    """Why ``preference="table-ii"`` is the default: as printed, equal costs leave only Trans, which sends
    Table II's GPU-preferring scan to the CPU at Part = InfPT."""
    devices, costs = map_device(_chain("scan", "filter"), 150 * KB, 150 * KB, preference="letter")
    assert (costs["scan#0"].cpu, costs["scan#0"].gpu) == pytest.approx((0.8, 0.9))
    assert devices["scan#0"] == "cpu"


def test_mixed_plan_between_the_regimes() -> None:
    # Part = 160 KB: CPU(base) = base × 1.0667, GPU(base) = base × 0.9375, Trans = 0.10667
    dag = _chain("scan", "filter", "project", "sink")
    devices, costs = map_device(dag, 160 * KB, 150 * KB, preference="letter")
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
    dag = OperatorDAG(ops, (("a", "j"), ("b", "j"), ("j", "p"))).compiled
    devices, costs = map_device(dag, 300 * KB, 150 * KB)
    assert devices["a"] == "gpu" and devices["b"] == "cpu"
    # join: b on the CPU -> GPU += Trans: CPU 1.8, GPU 0.45 + 0.2
    assert costs["j"].gpu == pytest.approx(0.65) and costs["j"].cpu == pytest.approx(1.8)


def test_rejects_non_positive_inflection_point_and_unknown_preference() -> None:
    with pytest.raises(ValueError, match="inflection"):
        map_device(_chain("scan"), 1.0, 0.0)
    with pytest.raises(ValueError, match="table-ii, letter"):
        map_device(_chain("scan"), 1.0, 1.0, preference="paper")
