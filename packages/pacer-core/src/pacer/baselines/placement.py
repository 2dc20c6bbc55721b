"""Baseline placement: all on the CPU, all on the GPU, or LMStream's static preferences."""

from __future__ import annotations

from collections.abc import Sequence

from pacer.hookspecs import hookimpl
from pacer.model import Device, Devices, MicroBatch, OperatorDAG, Placement
from pacer.strategy import Param, StrategyContext, StrategyInfo

#: LMStream Table II initial preferences; "neutral" follows the ``neutral`` parameter.
#: Sort is GPU-preferred in the table but CPU-only in pacer's plans (dStream), so it stays on the CPU.
TABLE_II_PREFERENCE: dict[str, str] = {
    "aggregate": "cpu",
    "filter": "cpu",
    "shuffle": "cpu",
    "project": "neutral",
    "join": "neutral",
    "expand": "neutral",
    "scan": "gpu",
    "sort": "gpu",
    "state": "cpu",
    "sink": "cpu",
}


def uniform(dag: OperatorDAG, device: Device, strategy: str) -> Placement:
    """Every operator on ``device``, CPU-only operators on the CPU."""
    return Placement(devices={op.id: ("cpu" if op.cpu_only else device) for op in dag.operators}, strategy=strategy)


def static_preference(dag: OperatorDAG, neutral: Device) -> Placement:
    """LMStream Table II: each operator kind on its preferred device."""
    devices: dict[str, Device] = {}
    for op in dag.operators:
        pref = TABLE_II_PREFERENCE.get(op.kind, "cpu")
        device: Device = neutral if pref == "neutral" else ("gpu" if pref == "gpu" else "cpu")
        devices[op.id] = "cpu" if op.cpu_only else device
    return Placement(devices=devices, strategy="static-preference")


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``cpu-only``, ``gpu-only`` and ``static-preference``."""
    return [
        StrategyInfo(name="cpu-only", provides=frozenset({"placement"}), summary="Every operator on the CPU"),
        StrategyInfo(
            name="gpu-only",
            provides=frozenset({"placement"}),
            summary="Every operator that can run on a GPU on the GPU (CPU-only operators stay on the CPU)",
        ),
        StrategyInfo(
            name="static-preference",
            provides=frozenset({"placement"}),
            summary="LMStream Table II initial preference per operator kind, fixed for the run",
            params=(Param("neutral", "cpu", "device for operators Table II calls neutral: cpu or gpu"),),
        ),
    ]


@hookimpl(trylast=True)
def pacer_place(
    ctx: StrategyContext, batch: MicroBatch, dag: OperatorDAG, devices: Devices, now: float
) -> Placement | None:
    """Answer for the three baselines."""
    if ctx.chosen == "cpu-only":
        return uniform(dag, "cpu", "cpu-only")
    if ctx.chosen == "gpu-only":
        return uniform(dag, "gpu", "gpu-only")
    if ctx.chosen == "static-preference":
        neutral = str(ctx.params.get("neutral", "cpu"))
        if neutral not in ("cpu", "gpu"):
            raise ValueError(f"static-preference: neutral must be 'cpu' or 'gpu', got {neutral!r}")
        return static_preference(dag, "gpu" if neutral == "gpu" else "cpu")
    return None
