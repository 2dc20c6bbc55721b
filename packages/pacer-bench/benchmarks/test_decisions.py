"""The cost of one decision: admission per strategy (vs ``asap``), placement on DAGs of 5 to 200 operators
(vs ``cpu-only``), and one Controller poll per admission strategy (vs ``asap``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from pacer import Controller, DatasetBuffer, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer_workloads import make_query

ADMISSIONS = ("asap", "static", "fixed-point", "zstream", "lmstream")
PLACEMENTS = ("cpu-only", "static-preference", "dstream", "lmstream")
DAG_SIZES = (5, 20, 50, 100, 200)
_KINDS = ("filter", "project", "aggregate", "shuffle", "expand")

Warmed = Callable[..., tuple[Controller, ManualClock]]


def dag_of(n: int) -> OperatorDAG:
    """``n`` operators: two scanned and filtered sources joined (the multi-source case of dStream's dummy start
    vertex), then a chain of mixed operators ending in a sink."""
    ops = [Operator("scan#a", "scan"), Operator("filter#a", "filter"), Operator("scan#b", "scan"),
           Operator("join#0", "join")]
    edges = [("scan#a", "filter#a"), ("filter#a", "join#0"), ("scan#b", "join#0")]
    for i in range(n - 5):
        ops.append(Operator(f"op#{i}", _KINDS[i % len(_KINDS)]))
        edges.append((ops[-2].id, ops[-1].id))
    ops.append(Operator("sink#0", "sink", cpu_only=True))
    edges.append((ops[-2].id, "sink#0"))
    assert len(ops) == n
    return OperatorDAG(tuple(ops), tuple(edges))


@pytest.mark.parametrize("admission", ADMISSIONS)
def test_admission_decision(ratio_bench: Any, warmed: Warmed, admission: str) -> None:
    controller, clock = warmed(make_query("lr2"), admission=admission)
    hook = controller.pm.hook.pacer_admit
    ctx = controller.context("lr2", "admission")
    buffer = DatasetBuffer(controller.query("lr2").buffered)
    system = controller.system_view()
    decision = ratio_bench("admission", baseline=admission == "asap")(
        lambda: hook(ctx=ctx, buffer=buffer, now=clock.now, system=system))
    assert decision is not None


@pytest.mark.parametrize("admission", ADMISSIONS)
def test_controller_poll(ratio_bench: Any, warmed: Warmed, admission: str) -> None:
    """One ``Controller.poll`` on a query in steady state (admission, and placement when it admits)."""
    def setup() -> tuple[tuple[Controller], dict[str, Any]]:
        controller, _ = warmed(make_query("lr2"), admission=admission)
        return (controller,), {}

    ratio_bench("poll", baseline=admission == "asap").pedantic(
        lambda c: c.poll("lr2"), setup=setup, rounds=200, iterations=1)


@pytest.mark.parametrize("size", DAG_SIZES)
@pytest.mark.parametrize("placement", PLACEMENTS)
def test_placement_decision(ratio_bench: Any, warmed: Warmed, placement: str, size: int) -> None:
    """One placement of a batch on a DAG of ``size`` operators (dStream: the DAG shortest path)."""
    spec = QuerySpec("q", dag_of(size), window_range=30, window_slide=10)
    controller, clock = warmed(spec, placement=placement)
    batch = controller.poll("q")
    assert batch is not None
    hook = controller.pm.hook.pacer_place
    ctx = controller.context("q", "placement")
    result = ratio_bench(f"placement-{size:03d}", baseline=placement == "cpu-only")(
        lambda: hook(ctx=ctx, batch=batch, dag=spec.dag, devices=controller.devices, now=clock.now))
    assert len(result.devices) == size
