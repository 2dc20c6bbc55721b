"""zStream's admission controller (Eqs. 1-4, Algorithm 1).

MaxLat = T_buff + T_sched + T_anal; the buffered datasets become a micro-batch
as soon as MaxLat >= the query's deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pacer import AdmissionDecision, DatasetBuffer, QueryHistory, QuerySpec, SystemView

log = logging.getLogger("pacer.zstream")

#: Schedulers that share cores among queries, for which Eq. 4 scales throughput by the core share.
SHARED_SCHEDULERS = frozenset({"fair", "rdas"})


@dataclass(frozen=True)
class Estimate:
    """The terms of Eq. 1 for one prospective micro-batch (seconds)."""

    t_buff: float
    t_sched: float
    t_anal: float

    @property
    def max_latency(self) -> float:
        """Eq. 1."""
        return self.t_buff + self.t_sched + self.t_anal


def t_buff(buffer: DatasetBuffer, now: float) -> float:
    """Eq. 2: now - arrival of the earliest buffered dataset."""
    earliest = buffer.earliest_arrival
    return 0.0 if earliest is None else max(0.0, now - earliest)


def t_sched(system: SystemView, query_id: str) -> float:
    """Eq. 3: the estimated analysis time of every other query's queued micro-batch."""
    return sum(p.estimated_run_s for p in system.others(query_id))


def t_anal(batch_bytes: int, avg_throughput: float, system: SystemView, query_id: str) -> float:
    """Eq. 4: BatchSize / AvgThPut (FIFO/EDF), or / (AvgThPut x allocCores / totalCores) (FAIR/RDAS)."""
    if avg_throughput <= 0:
        return 0.0
    if system.scheduler not in SHARED_SCHEDULERS:
        return batch_bytes / avg_throughput
    active = {p.batch.query_id for p in system.pending} | {query_id}
    alloc = system.allocated_cores.get(query_id, system.cores / len(active))
    share = max(alloc, 1e-9) / system.cores
    return batch_bytes / (avg_throughput * share)


@dataclass
class ZStreamAdmission:
    """Per-query state: the deadline, and counts of what the controller decided.

    Cold start (the paper is silent): before the first batch completes there is no
    average throughput, so the first micro-batch is admitted at once to measure it.
    When queued work and processing alone already exceed the deadline
    (T_sched + T_anal >= deadline), the batch is predicted to miss it; it is
    admitted at once (never stall) and counted in ``predicted_misses``, logged once
    per query at INFO level.
    """

    deadline: float
    admitted: int = 0
    predicted_misses: int = 0
    logged: bool = False
    last: Estimate | None = None

    def admit(self, query_id: str, buffer: DatasetBuffer, now: float, system: SystemView, history: QueryHistory) -> AdmissionDecision:
        """Algorithm 1."""
        throughput = history.avg_throughput_bytes_per_s
        if throughput is None:
            self.admitted += 1
            return AdmissionDecision.admit_all(buffer, "cold start: admit to measure throughput")
        estimate = Estimate(t_buff(buffer, now), t_sched(system, query_id), t_anal(buffer.bytes, throughput, system, query_id))
        self.last = estimate
        if estimate.max_latency < self.deadline:
            return AdmissionDecision.wait(f"MaxLat {estimate.max_latency:.2f}s < deadline {self.deadline:.2f}s")
        if estimate.t_sched + estimate.t_anal >= self.deadline:
            self.predicted_misses += 1
            if not self.logged:
                self.logged = True
                log.info(
                    "zstream: query %r is predicted to miss its %.2fs deadline (queued work + processing estimate "
                    "%.2fs); admitting at once. A persistent miss means the deadline is too tight for the resources.",
                    query_id, self.deadline, estimate.t_sched + estimate.t_anal,
                )
        self.admitted += 1
        return AdmissionDecision.admit_all(buffer, f"MaxLat {estimate.max_latency:.2f}s >= deadline {self.deadline:.2f}s")


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> ZStreamAdmission:
    """Per-query state; the deadline is the query's (default: its window slide)."""
    if spec is None:
        raise ValueError("zstream admission needs a query")
    return ZStreamAdmission(deadline=spec.effective_deadline)
