"""The ``fixed-point`` admission strategy: per-query state and the optional overload policy."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pacer import AdmissionDecision, BatchReport, DatasetBuffer, QuerySpec
from pacer_fixedpoint.algorithm import Observation, next_interval, round_to_granule

log = logging.getLogger("pacer.fixedpoint")
OVERLOAD_POLICIES = ("off", "shed", "pause")
INTERVAL_BASES = ("data", "admission")


@dataclass
class FixedPointState:
    """Batch interval control for one query.

    Slow start: the interval starts at ``initial_interval`` and doubles with every
    admission until the first batch completes; from then on Algorithm 1 sets it
    after every completed batch from the last two (interval, processing time) pairs.

    ``interval_basis`` says where a batch interval starts and what Algorithm 1
    observes as its length:

    - ``"data"`` (default): at the *data boundary* of the previous batch, the arrival
      of the newest dataset it took; a batch's observed interval is the span between
      its data boundary and the previous one. This is the time span of the data the
      batch processed, which is what Das's x is (ω(x): processing time of x seconds of
      data). With continuous arrivals (Spark Streaming's 100 ms blocks) the boundary is
      the admission time and both bases coincide.
    - ``"admission"``: at the previous admission; the observed interval is the time
      between admissions (``BatchReport.interval_s``). With lumpy arrivals (one dataset
      per second) this pairs a processing time with an interval that is not the span of
      the data it processed (1.7 s between admissions, 2 s of data).
    """

    rho: float
    backoff: float
    granule: float
    initial_interval: float
    max_interval: float
    overload: str
    max_buffer_s: float
    interval_basis: str = "data"
    interval: float = 0.0
    last_admit: float | None = None
    boundary: float | None = None
    pending_span: float | None = None
    observations: list[Observation] = field(default_factory=list)
    branches: dict[str, int] = field(default_factory=dict)
    shed_datasets: int = 0
    paused_admissions: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.rho < 1:
            raise ValueError(f"fixed-point: rho must be in (0, 1), got {self.rho}")
        if not 0 < self.backoff < 1:
            raise ValueError(f"fixed-point: backoff must be in (0, 1), got {self.backoff}")
        if self.overload not in OVERLOAD_POLICIES:
            raise ValueError(f"fixed-point: overload must be one of {OVERLOAD_POLICIES}, got {self.overload!r}")
        if self.interval_basis not in INTERVAL_BASES:
            raise ValueError(
                f"fixed-point: interval_basis must be one of {INTERVAL_BASES}, got {self.interval_basis!r}"
            )
        if self.overload != "off" and self.max_buffer_s <= 0:
            raise ValueError("fixed-point: the overload policy needs max_buffer_s > 0")
        self.interval = round_to_granule(self.initial_interval, self.granule)

    @property
    def slow_start(self) -> bool:
        """True until the first batch has completed."""
        return not self.observations

    def admit(self, buffer: DatasetBuffer, now: float) -> AdmissionDecision:
        """Admit once the current interval has passed since the interval's start (or the first arrival)."""
        start = self.boundary if self.interval_basis == "data" else self.last_admit
        since = start if start is not None else buffer.earliest_arrival
        assert since is not None
        shed = self._shed_count(buffer, now)
        if now - since + 1e-9 < self.interval and not shed:
            return AdmissionDecision.wait(f"interval {self.interval:.1f}s not reached")
        count = len(buffer) - shed
        if self.overload == "pause":
            count = self._pause_count(buffer)
        if count <= 0 and shed == 0:
            return AdmissionDecision.wait("nothing to admit")
        self.last_admit = now
        if count > 0:
            newest = buffer[shed + count - 1].arrival
            self.pending_span = newest - self.boundary if self.boundary is not None else None
            self.boundary = newest
        if self.slow_start:
            self.interval = round_to_granule(min(self.max_interval, self.interval * 2), self.granule)
        return AdmissionDecision(count, shed=shed, reason=f"fixed-point interval {self.interval:.1f}s")

    def _shed_count(self, buffer: DatasetBuffer, now: float) -> int:
        if self.overload != "shed":
            return 0
        n = 0
        while n < len(buffer) - 1 and now - buffer[n].arrival > self.max_buffer_s:
            n += 1
        if n:
            self.shed_datasets += n
            log.warning("fixed-point: shedding %d datasets older than %.1fs (overload policy 'shed')", n, self.max_buffer_s)
        return n

    def _pause_count(self, buffer: DatasetBuffer) -> int:
        first = buffer[0].arrival
        n = sum(1 for d in buffer if d.arrival - first <= self.max_buffer_s)
        if n < len(buffer):
            self.paused_admissions += 1
            log.warning(
                "fixed-point: batch capped at %d of %d buffered datasets (%.1fs of data, overload policy 'pause')",
                max(1, n), len(buffer), self.max_buffer_s,
            )
        return max(1, n)

    def observe(self, report: BatchReport) -> None:
        """Algorithm 1 after every completed batch."""
        interval = report.interval_s
        if self.interval_basis == "data" and self.pending_span is not None:
            interval = self.pending_span
        self.pending_span = None
        obs = Observation(round_to_granule(max(interval, self.granule), self.granule), report.processing_s)
        self.observations = [*self.observations[-1:], obs]
        if len(self.observations) < 2:
            self.interval = round_to_granule(min(self.max_interval, obs.processing / self.rho), self.granule)
            self.branches["first"] = self.branches.get("first", 0) + 1
            return
        x, branch = next_interval(self.observations[-1], self.observations[-2], rho=self.rho, backoff=self.backoff)
        self.branches[branch] = self.branches.get(branch, 0) + 1
        self.interval = round_to_granule(min(self.max_interval, x), self.granule)


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> FixedPointState:
    """The per-query state factory."""
    return FixedPointState(
        rho=float(params["rho"]),
        backoff=float(params["backoff"]),
        granule=float(params["granule"]),
        initial_interval=float(params["initial_interval"]),
        max_interval=float(params["max_interval"]),
        overload=str(params["overload"]),
        max_buffer_s=float(params["max_buffer_s"]),
        interval_basis=str(params["interval_basis"]),
    )
