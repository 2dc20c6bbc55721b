"""Registers ``dstream``: operator-level CPU/GPU placement by EMA cost table and DAG shortest path."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import (
    BatchReport,
    Devices,
    MicroBatch,
    OperatorDAG,
    Param,
    Placement,
    StrategyContext,
    StrategyInfo,
    hookimpl,
)
from pacer_dstream.state import NAME, DStreamState, build_state

PARAMS: tuple[Param, ...] = (
    Param("beta", 0.5, "EMA weight of the previous estimate T_exec(i,j-1) (Eq. 2)"),
    Param("t_init_s", 0.01, "T_init of Eq. 3: fixed seconds per CPU<->GPU transition"),
    Param("bandwidth_bytes_per_s", 2.0e9, "BW of Eq. 3: host<->device bytes per second"),
    Param("bucket_small_bytes", 100_000.0, "index-table bucket width below the threshold (100 KB)"),
    Param("bucket_threshold_bytes", 1_000_000.0, "batch size where buckets widen (1000 KB)"),
    Param("bucket_large_bytes", 1_000_000.0, "index-table bucket width above the threshold (1000 KB)"),
    Param(
        "cold_start", "scaled",
        "entry never measured in this bucket costs: scaled (from the smaller buckets that measured it: the line "
        "through two, else the one's estimate per byte times the batch's bytes; 0 when none), bound (the nearest "
        "smaller bucket's estimate, a lower bound as costs grow with size, or the line through two; 0 when none), "
        "zero (the paper's 0) or nearest (the nearest bucket's, else 0)",
    ),
    Param(
        "growth", "pooled",
        "cold_start=scaled with one smaller bucket: how its estimate grows to this batch's size: pooled (by the "
        "exponent the device's operators measured in two buckets show, their median; proportional until one has) "
        "or proportional (per byte)",
    ),
    Param(
        "theta", "reported",
        "θ from a metric: reported (its time as is: the operator's wall time in the batch, as pacer_sim reports it), "
        "summed (time summed over partitions, as Spark SQL metrics: CPU / cores used, GPU / gpu_parallelism) "
        "or per-partition (time / partitions)",
    ),
    Param(
        "exploration", "budgeted",
        "when a plan that uses unmeasured entries runs: budgeted (an entry never measured anywhere only when the "
        "operators moved to it cost at least explore_share of the batch; a stale estimate re-measured within "
        "explore_budget of the engine time) or paper (whenever the cold-start estimates make it the shortest path)",
    ),
    Param("explore_share", 0.25, "exploration=budgeted: least share of the exploiting plan's cost a plan trying "
          "entries never measured must move"),
    Param("explore_budget", 0.02, "exploration=budgeted: risks of re-measuring stale estimates, as a share of the "
          "query's engine time"),
    Param("stale_factor", 2.0, "exploration=budgeted: an estimate extrapolated from batches this many times smaller "
          "or larger is stale (re-measured optimistically within the budget)"),
    Param("prior_inflection_bytes", 150_000.0, "exploration=budgeted: an operator never measured on either device "
          "runs on the GPU when the batch has at least this many bytes per partition, else on the CPU (0: the CPU, "
          "the paper's ties)"),
    Param("explore_growth", 1.25, "exploration=budgeted: try an entry never measured only on a batch at most this "
          "many times the smallest batch measured so far (0: whatever its size)"),
    Param("gpu_parallelism", 1.0, "partitions a GPU runs at once, for theta=summed"),
    Param(
        "metric_transfer", "included",
        "whether a metric's time holds the PCIe transfer into the operator: included (pacer_sim; θ = time - Eq. 3) "
        "or excluded (Spark with RAPIDS: transitions are plan nodes of their own)",
    ),
)


@hookimpl
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``dstream`` (placement)."""
    return [
        StrategyInfo(
            name=NAME,
            provides=frozenset({"placement"}),
            summary="dStream: per-bucket EMA cost table (Eqs. 1-3) and shortest path over the CPU/GPU-extended DAG",
            params=PARAMS,
            state=build_state,
        )
    ]


@hookimpl
def pacer_place(
    ctx: StrategyContext, batch: MicroBatch, dag: OperatorDAG, devices: Devices, now: float
) -> Placement | None:
    """Device Mapper (Algorithm 1)."""
    if ctx.chosen != NAME:
        return None
    state: DStreamState = ctx.state
    return state.place(batch, dag, devices)


@hookimpl
def pacer_batch_completed(ctx: StrategyContext, report: BatchReport) -> None:
    """Monitor: update the cost table of the batch's bucket."""
    state = ctx.state_of(NAME)
    if isinstance(state, DStreamState) and ctx.query is not None:
        state.completed(report, ctx.query.dag, ctx.query.partitions)
