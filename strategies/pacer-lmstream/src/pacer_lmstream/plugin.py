"""Registers ``lmstream``: admission (Algorithm 1) and placement (Algorithm 2) sharing one per-query state."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import (
    AdmissionDecision,
    BatchReport,
    DatasetBuffer,
    Devices,
    MicroBatch,
    OperatorDAG,
    Param,
    Placement,
    StrategyContext,
    StrategyInfo,
    SystemView,
    hookimpl,
)
from pacer_lmstream.state import NAME, LMStreamState, build_state

PARAMS: tuple[Param, ...] = (
    Param("initial_inflection_bytes", 0.0, "InfPT_0 in bytes per partition; 0: the query's crossover under the "
          "cost profile (inflection_profile), the paper's 150 KB where none is known; 150000: the paper's letter"),
    Param("inflection_profile", "auto", "the cost profile InfPT_0 is the query's crossover under (where its "
          "GPU-capable operators on the GPU cost what all on the CPU costs): auto (the one pacer-sim runs on when a run "
          "names none: its built-in curves), a pacer-sim GPU profile name (onprem-a100, builtin), a pacer calibrate "
          "--kernels cost-profile file, or none (the paper's fixed 150 KB)"),
    Param("base_trans_cost", 0.1, "baseTransCost of Eq. 9"),
    Param("regression_window", 32, "recent batches that train the Eq. 10 regression"),
    Param("regression_ridge", 1e-3, "ridge strength on the standardised Eq. 10 slopes (0: plain least squares)"),
    Param("async_regression", True, "fit Eq. 10 on a background worker (False: inline, deterministic)"),
    Param("inflection_min_bytes", 1_000.0, "lower clamp of a fitted inflection point, bytes"),
    Param("inflection_max_bytes", 256_000_000.0, "upper clamp of a fitted inflection point, bytes"),
    Param("initial_rows", "", "calibration file (pacer calibrate) whose (InfPT, throughput, latency) rows "
          "Eq. 10 starts from; empty: none"),
    Param("preference", "table-ii", "table-ii: Table II's initial preferences hold at Part = InfPT; "
          "letter: Eqs. 7-8 as printed"),
    Param("service_admission", True, "Eq. 6's processing term from the service-time model (ctx.service) "
          "once it is ready; False: bytes / AvgThPut as printed"),
    Param("t_sched", "queue", "add the predicted wait behind the batches the scheduler runs first and divide "
          "processing by the core share under FAIR/RDAS ('queue'); 'paper': Eq. 6 as printed, as if alone"),
    Param("reserve", True, "with t_sched='queue' under FIFO/EDF: admit early enough to absorb the longest recent "
          "batch of another query starting ahead"),
    Param("cap", True, "with t_sched='queue' under FIFO/EDF: admit at most what the queries with earlier deadlines "
          "can absorb being blocked by (a prefix; the rest waits for the next batch)"),
)


@hookimpl
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``lmstream`` (admission and placement)."""
    return [
        StrategyInfo(
            name=NAME,
            provides=frozenset({"admission", "placement"}),
            summary="LMStream: admit when EstMaxLat (Eq. 6) reaches SlideTime or mean MaxLat; "
            "map devices by inflection point (Eqs. 7-10)",
            params=PARAMS,
            state=build_state,
        )
    ]


@hookimpl
def pacer_admit(ctx: StrategyContext, buffer: DatasetBuffer, now: float, system: SystemView) -> AdmissionDecision | None:
    """Algorithm 1 (ConstructMicroBatch)."""
    if ctx.chosen != NAME:
        return None
    state: LMStreamState = ctx.state
    return state.admit(buffer, now, ctx.history, ctx.service, system)


@hookimpl
def pacer_place(
    ctx: StrategyContext, batch: MicroBatch, dag: OperatorDAG, devices: Devices, now: float
) -> Placement | None:
    """Algorithm 2 (MapDevice)."""
    if ctx.chosen != NAME:
        return None
    state: LMStreamState = ctx.state
    partitions = ctx.query.partitions if ctx.query is not None else 1
    return state.place(batch, dag, devices, partitions)


@hookimpl
def pacer_batch_completed(ctx: StrategyContext, report: BatchReport) -> None:
    """Feed the MaxLat average and the inflection-point regression."""
    state = ctx.state_of(NAME)
    if isinstance(state, LMStreamState):
        state.completed(report)
