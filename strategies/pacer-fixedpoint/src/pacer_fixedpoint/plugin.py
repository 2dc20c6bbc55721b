"""Registers the ``fixed-point`` admission strategy."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import AdmissionDecision, BatchReport, DatasetBuffer, Param, StrategyContext, StrategyInfo, hookimpl
from pacer_fixedpoint.admission import FixedPointState, build_state

NAME = "fixed-point"


@hookimpl
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``fixed-point``."""
    return [
        StrategyInfo(
            name=NAME,
            provides=frozenset({"admission"}),
            summary="Das et al.: batch interval by fixed-point iteration with slack rho and superlinear back-off r",
            params=(
                Param("rho", 0.7, "slack: target processing time = rho x batch interval"),
                Param("backoff", 0.25, "r: shrink factor near a Type-II intersection"),
                Param("granule", 0.1, "intervals are rounded to multiples of this many seconds"),
                Param("initial_interval", 0.1, "slow start: first interval, doubled per batch until one completes"),
                Param("max_interval", 600.0, "upper bound of the interval (seconds)"),
                Param("overload", "off", "off | shed (drop data older than max_buffer_s) | pause (cap batches at max_buffer_s of data)"),
                Param("max_buffer_s", 60.0, "buffer cap in seconds of data for the overload policy"),
                Param(
                    "interval_basis", "data",
                    "data: an interval starts at the newest arrival the previous batch took and its observed "
                    "length is the span of its data | admission: time between admissions",
                ),
            ),
            state=build_state,
        )
    ]


@hookimpl
def pacer_admit(ctx: StrategyContext, buffer: DatasetBuffer, now: float) -> AdmissionDecision | None:
    """Admit when the current fixed-point interval has elapsed."""
    if ctx.chosen != NAME:
        return None
    state: FixedPointState = ctx.state
    return state.admit(buffer, now)


@hookimpl
def pacer_batch_completed(ctx: StrategyContext, report: BatchReport) -> None:
    """Run Algorithm 1 on the completed batch."""
    state = ctx.state_of(NAME)
    if isinstance(state, FixedPointState):
        state.observe(report)
