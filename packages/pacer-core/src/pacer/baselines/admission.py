"""Baseline admission: the triggers and rate controls a Spark user already knows.

- ``static``: Structured Streaming's ``trigger(processingTime=...)``;
- ``asap``: its default trigger (next batch as soon as the previous one is done);
- ``min-rows``: the Kafka source's ``minOffsetsPerTrigger`` with ``maxTriggerDelay``;
- ``pid``: Spark Streaming's backpressure (``spark.streaming.backpressure.enabled``,
  ``PIDRateEstimator``), see :mod:`pacer.baselines.pid`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pacer.baselines.pid import PID_PARAMS, PidBackpressure, pid_state
from pacer.hookspecs import hookimpl
from pacer.model import AdmissionDecision, BatchReport, DatasetBuffer, QuerySpec, SystemView
from pacer.strategy import Param, StrategyContext, StrategyInfo


@dataclass
class StaticTrigger:
    """Spark's ``trigger(processingTime=interval)``.

    Ticks fall on multiples of ``interval``. A batch forms at the first tick
    after its data arrived; when the previous batch overran a tick, the next one
    starts as soon as it completes (what Spark's ``ProcessingTimeExecutor`` does).
    """

    interval: float
    next_tick: float = -math.inf

    def admit(self, ctx: StrategyContext, buffer: DatasetBuffer, now: float) -> AdmissionDecision:
        """Admit everything buffered when a tick has passed since the data arrived."""
        if now < self.next_tick:
            return AdmissionDecision.wait("before next trigger tick")
        last_tick = math.floor(now / self.interval + 1e-9) * self.interval
        earliest = buffer.earliest_arrival
        last = ctx.history.last
        overran = last is not None and last.completed_at > last_tick
        if self.next_tick > -math.inf and earliest is not None and earliest > last_tick and not overran:
            return AdmissionDecision.wait("data arrived after the last tick")
        self.next_tick = last_tick + self.interval
        return AdmissionDecision.admit_all(buffer, "trigger tick")


@dataclass
class MinRows:
    """The Kafka source's ``minOffsetsPerTrigger`` + ``maxTriggerDelay`` on the default trigger.

    Admit everything buffered once at least ``min_rows`` rows wait, or once the oldest has waited
    ``max_delay`` seconds (Spark's default ``maxTriggerDelay`` is 15 minutes; pacer's default is
    15 s, a delay that matters at the papers' 5-30 s deadlines).
    """

    min_rows: int
    max_delay: float

    def admit(self, buffer: DatasetBuffer, now: float) -> AdmissionDecision:
        """Admit all when enough rows wait or the oldest waited long enough."""
        if buffer.rows >= self.min_rows:
            return AdmissionDecision.admit_all(buffer, f"{buffer.rows} rows >= minOffsetsPerTrigger {self.min_rows}")
        earliest = buffer.earliest_arrival
        if earliest is not None and now - earliest >= self.max_delay:
            return AdmissionDecision.admit_all(buffer, f"oldest waited {now - earliest:.2f}s >= maxTriggerDelay")
        return AdmissionDecision.wait(f"{buffer.rows} rows < minOffsetsPerTrigger {self.min_rows}")


def _min_rows_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> MinRows:
    min_rows, max_delay = int(params["min_rows"]), float(params["max_delay"])
    if min_rows < 1:
        raise ValueError(f"min-rows min_rows must be >= 1, got {min_rows}")
    if max_delay <= 0:
        raise ValueError(f"min-rows max_delay must be > 0 seconds, got {max_delay}")
    return MinRows(min_rows=min_rows, max_delay=max_delay)


def _asap_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> int:
    """The read limit of ``asap``: at most this many datasets per batch (0: no limit)."""
    limit = int(params["max_datasets"])
    if limit < 0:
        raise ValueError(f"asap max_datasets must be >= 0 (0: no limit), got {limit}")
    return limit


def _static_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> StaticTrigger:
    interval = float(params["interval"])
    if interval <= 0:
        raise ValueError(f"static trigger interval must be > 0 seconds, got {interval}")
    return StaticTrigger(interval=interval)


@hookimpl(trylast=True)
def pacer_strategies() -> Sequence[StrategyInfo]:
    """Declare ``static``, ``asap``, ``min-rows`` and ``pid``."""
    return [
        StrategyInfo(
            name="static",
            provides=frozenset({"admission"}),
            summary="Fixed trigger interval: Spark's processingTime trigger",
            params=(Param("interval", 10.0, "trigger interval in seconds"),),
            state=_static_state,
            catch_up=False,  # a fixed Spark trigger: batches by its own rule
        ),
        StrategyInfo(
            name="asap",
            provides=frozenset({"admission"}),
            summary="Admit everything available whenever the query is idle: Spark's default trigger",
            params=(
                Param("max_datasets", 0, "at most this many datasets per batch, oldest first (0: all; "
                                         "Spark's maxFilesPerTrigger)"),
            ),
            state=_asap_state,
            catch_up=False,  # a fixed Spark trigger: batches by its own rule
        ),
        StrategyInfo(
            name="min-rows",
            provides=frozenset({"admission"}),
            summary="Admit once min_rows wait or the oldest waited max_delay: Kafka minOffsetsPerTrigger + maxTriggerDelay",
            params=(
                Param("min_rows", 1000, "admit once at least this many rows wait (Spark: minOffsetsPerTrigger)"),
                Param("max_delay", 15.0, "or once the oldest has waited this long, seconds (Spark: maxTriggerDelay)"),
            ),
            state=_min_rows_state,
            catch_up=False,  # a fixed Spark trigger: batches by its own rule
        ),
        StrategyInfo(
            name="pid",
            provides=frozenset({"admission"}),
            summary="Spark Streaming backpressure: fixed batch interval, ingestion rate cap from a PID controller",
            params=PID_PARAMS,
            state=pid_state,
            catch_up=False,  # a fixed Spark trigger: batches by its own rule
        ),
    ]


@hookimpl(trylast=True)
def pacer_admit(
    ctx: StrategyContext, buffer: DatasetBuffer, now: float, system: SystemView
) -> AdmissionDecision | None:
    """Answer for ``static``, ``asap``, ``min-rows`` and ``pid``."""
    if ctx.chosen == "asap":
        limit: int = ctx.state
        if limit and len(buffer) > limit:
            return AdmissionDecision(limit, reason=f"query idle, read limit {limit}")
        return AdmissionDecision.admit_all(buffer, "query idle")
    if ctx.chosen == "static":
        trigger: StaticTrigger = ctx.state
        return trigger.admit(ctx, buffer, now)
    if ctx.chosen == "min-rows":
        min_rows: MinRows = ctx.state
        return min_rows.admit(buffer, now)
    if ctx.chosen == "pid":
        backpressure: PidBackpressure = ctx.state
        return backpressure.admit(ctx, buffer, now)
    return None


@hookimpl(trylast=True)
def pacer_batch_completed(ctx: StrategyContext, report: BatchReport) -> None:
    """``pid`` updates its rate cap from every completed batch (Spark's ``onBatchCompleted``)."""
    backpressure = ctx.state_of("pid")
    if isinstance(backpressure, PidBackpressure):
        backpressure.observe(report)
