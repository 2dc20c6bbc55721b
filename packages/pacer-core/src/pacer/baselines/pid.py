"""``pid``: Spark Streaming's backpressure, the rate control a DStream user turns on.

With ``spark.streaming.backpressure.enabled``, Spark Streaming keeps its fixed batch
interval and caps the ingestion rate (rows per second) with a PID controller,
``PIDRateEstimator``, updated after every batch from that batch's row count, its
processing delay and its scheduling delay:

    processingRate  = rows / processingDelay
    error           = latestRate - processingRate
    historicalError = schedulingDelay × processingRate / batchInterval
    dError          = (error - latestError) / (time since the last update)
    newRate         = max(minRate, latestRate - P × error - I × historicalError - D × dError)

The first batch only initialises ``latestRate`` to its processing rate; before it,
ingestion is not capped (no ``initialRate``). Defaults are Spark's
``spark.streaming.backpressure.pid.*`` (P 1.0, I 0.2, D 0.0, minRate 100).

In pacer a batch forms at each tick of ``interval`` (as ``static`` does) and takes at
most ``rate × interval`` rows, oldest first, at least one dataset; the rest waits, as
records wait in Kafka under Spark's ``maxRatePerPartition``. A DStream batch's
scheduling delay is the time from its batch time to its start; the data of batch
``t`` arrives during ``[t - interval, t)``, so pacer measures it as the start minus
the oldest row's arrival minus one interval (never below 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pacer.model import AdmissionDecision, BatchReport, DatasetBuffer, QuerySpec
from pacer.strategy import Param, StrategyContext

#: ``pid``'s parameters, named as pacer names them, defaulting to Spark's.
PID_PARAMS = (
    Param("interval", 1.0, "batch interval in seconds (Spark Streaming's batchDuration)"),
    Param("proportional", 1.0, "spark.streaming.backpressure.pid.proportional"),
    Param("integral", 0.2, "spark.streaming.backpressure.pid.integral"),
    Param("derived", 0.0, "spark.streaming.backpressure.pid.derived"),
    Param("min_rate", 100.0, "spark.streaming.backpressure.pid.minRate, rows per second"),
)


@dataclass
class PidRateEstimator:
    """The PID controller of Spark Streaming's backpressure (see the module docstring)."""

    interval: float
    proportional: float = 1.0
    integral: float = 0.2
    derived: float = 0.0
    min_rate: float = 100.0
    latest_time: float | None = None
    latest_rate: float = -1.0
    latest_error: float = -1.0
    first_run: bool = True

    def compute(self, time: float, rows: int, processing_s: float, scheduling_s: float) -> float | None:
        """Update from one completed batch; the new rate cap (rows/s), or None when not updated."""
        if rows <= 0 or processing_s <= 0 or (self.latest_time is not None and time <= self.latest_time):
            return None
        since = time - self.latest_time if self.latest_time is not None else 0.0
        processing_rate = rows / processing_s
        error = self.latest_rate - processing_rate
        historical_error = scheduling_s * processing_rate / self.interval
        d_error = (error - self.latest_error) / since if since > 0 else 0.0
        new_rate = max(
            self.min_rate,
            self.latest_rate - self.proportional * error - self.integral * historical_error - self.derived * d_error,
        )
        self.latest_time = time
        if self.first_run:
            self.latest_rate = processing_rate
            self.latest_error = 0.0
            self.first_run = False
            return None
        self.latest_rate = new_rate
        self.latest_error = error
        return new_rate


@dataclass
class PidBackpressure:
    """Per-query state of ``pid``: the batch ticks and the rate cap the estimator sets."""

    estimator: PidRateEstimator
    rate_cap: float | None = None
    next_tick: float = field(default=float("-inf"))

    def admit(self, ctx: StrategyContext, buffer: DatasetBuffer, now: float) -> AdmissionDecision:
        """At a tick, admit the oldest datasets within ``rate_cap × interval`` rows (at least one)."""
        interval = self.estimator.interval
        if now < self.next_tick:
            return AdmissionDecision.wait("before next batch time")
        last_tick = int(now / interval + 1e-9) * interval
        self.next_tick = last_tick + interval
        if self.rate_cap is None:
            return AdmissionDecision.admit_all(buffer, "batch time (no rate estimate yet)")
        budget = self.rate_cap * interval
        rows = 0
        count = 0
        for dataset in buffer:
            if count and rows + dataset.rows > budget:
                break
            rows += dataset.rows
            count += 1
        return AdmissionDecision(count, reason=f"batch time, rate cap {self.rate_cap:.0f} rows/s")

    def observe(self, report: BatchReport) -> None:
        """Spark's ``onBatchCompleted``: feed the estimator, adopt its new rate."""
        scheduling = max(0.0, report.started_at - report.earliest_arrival - self.estimator.interval)
        new_rate = self.estimator.compute(report.completed_at, report.rows, report.processing_s, scheduling)
        if new_rate is not None:
            self.rate_cap = new_rate


def pid_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> PidBackpressure:
    """Build ``pid``'s state; rejects a non-positive interval or negative gains."""
    interval = float(params["interval"])
    if interval <= 0:
        raise ValueError(f"pid interval must be > 0 seconds, got {interval}")
    gains = {k: float(params[k]) for k in ("proportional", "integral", "derived", "min_rate")}
    if any(v < 0 for v in gains.values()):
        raise ValueError(f"pid gains and min_rate must be >= 0, got {gains}")
    return PidBackpressure(PidRateEstimator(
        interval=interval, proportional=gains["proportional"], integral=gains["integral"],
        derived=gains["derived"], min_rate=gains["min_rate"],
    ))
