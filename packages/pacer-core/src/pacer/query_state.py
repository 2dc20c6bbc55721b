"""What the Controller keeps per query and per pending batch, and the errors it raises."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.catch_up import CatchUp
from pacer.engine_profile import EngineProfile
from pacer.model import BatchReport, DatasetBuffer, MicroBatch, OperatorMetric, QueryHistory, QuerySpec
from pacer.overload import OverloadMonitor
from pacer.recorder import QueryRecord
from pacer.service_time import ServiceTimeModel

#: The decision each baseline falls back to when a strategy raises and fallback is on.
FALLBACK = {"admission": "asap", "scheduling": "fifo", "placement": "cpu-only"}

#: What the Controller does with a query whose offered load no batch size can serve within its deadline.
OVERLOAD_POLICIES = ("shed", "keep")


class StrategyError(RuntimeError):
    """A strategy raised, or returned an ill-formed decision. The message names it."""

    def __init__(self, strategy: str, decision: str, query_id: str | None, detail: str) -> None:
        where = f" for query {query_id!r}" if query_id else ""
        super().__init__(f"{decision} strategy {strategy!r} failed{where}: {detail}")
        self.strategy = strategy
        self.decision = decision
        self.query_id = query_id


@dataclass
class QueryState:
    """One registered query: its spec, strategies, buffer, history, service-time model, overload monitor and policy.

    Private to the Controller; others read it through :class:`pacer.views.QueryView`. ``record`` is the
    query's part of the Controller's :class:`~pacer.recorder.RunRecorder`.
    """

    spec: QuerySpec
    selected: dict[str, str]
    params: dict[str, dict[str, Any]]
    states: dict[str, Any]
    buffer: DatasetBuffer = field(default_factory=DatasetBuffer)
    history: QueryHistory = field(default_factory=QueryHistory)
    seq: int = 0
    in_flight: str | None = None
    last_admitted_at: float | None = None
    shed: int = 0
    fallbacks: int = 0
    record: QueryRecord = field(default_factory=QueryRecord)
    service: ServiceTimeModel = field(default_factory=ServiceTimeModel)
    overload: OverloadMonitor = field(default_factory=lambda: OverloadMonitor(deadline=10.0))
    max_rows: int = 0
    max_bytes: int = 0
    overload_policy: str = "keep"
    #: rows of a cold-start probe batch (0: none; :meth:`pacer.Controller.add_query`)
    probe_rows: int = 0
    catch_up: CatchUp = field(default_factory=lambda: CatchUp(deadline=10.0))
    #: what the engine measured its batches to cost (None: nothing; :meth:`pacer.Controller.add_query`)
    engine_profile: EngineProfile | None = None

    def completed(self, batch: MicroBatch, report: BatchReport, now: float) -> None:
        """``batch`` completed at ``now`` as ``report`` tells: the service-time model, the overload monitor, catch-up,
        the history and the record learn of it (``report.rows`` beyond ``batch.rows``: rows the engine counted
        beyond the datasets' own counts)."""
        recounted = report.rows - batch.rows
        self.service.observe(report.bytes, report.trigger_s)
        self.overload.check(now, self.service)
        self.catch_up.completed(batch.id, now, self.buffer, recounted=recounted)
        self.history.add(report)
        self.record.completed(report, recounted=recounted)

    def estimate_run_s(self, nbytes: int) -> float:
        """Processing time estimate: the service-time model (fixed + per-byte, no margin) once it has seen two
        batches, else bytes / the average throughput (0 before history)."""
        if self.service.observations >= 2:
            return self.service.predict_raw(nbytes)
        throughput = self.history.avg_throughput_bytes_per_s
        if throughput:
            return nbytes / throughput
        last = self.history.last
        return last.processing_s if last is not None else 0.0


@dataclass
class RunningBatch:
    """An admitted batch until it completes: when it started, its interval and pacer's time on it, and the parts of
    its task time the runtime measured beside ``busy_core_s`` (:meth:`pacer.reconcile.Reconciliation.task_costs`)."""

    batch: MicroBatch
    started_at: float | None = None
    interval_s: float = 0.0
    overhead_s: float = 0.0
    cpu_core_s: float | None = None
    failed_core_s: float | None = None
    tasks: int | None = None

    def report(self, completed_at: float, *, operator_metrics: Iterable[OperatorMetric] = (),
               cores_used: float | None = None, engine_s: float | None = None, rows: int | None = None,
               busy_core_s: float | None = None, gate_wait_s: float = 0.0) -> BatchReport:
        """The batch's report, completed at ``completed_at`` (a batch never started counts as started then).

        :param rows: the rows the engine counted in the batch, where it counts them: they replace the datasets'
            own counts (estimates for some sources), shared among the datasets as those counts (or bytes) are.
        """
        batch = self.batch
        counts = tuple(d.rows for d in batch.datasets)
        if rows is not None and rows != batch.rows:
            counts = apportion(max(0, rows), counts if batch.rows > 0 else tuple(d.bytes for d in batch.datasets))
        return BatchReport(
            batch_id=batch.id,
            query_id=batch.query_id,
            seq=batch.seq,
            admitted_at=batch.admitted_at,
            started_at=self.started_at if self.started_at is not None else completed_at,
            completed_at=completed_at,
            bytes=batch.bytes,
            rows=sum(counts),
            dataset_latencies=tuple((d.id, completed_at - d.arrival) for d in batch.datasets),
            earliest_arrival=batch.earliest_arrival,
            interval_s=self.interval_s,
            placement=batch.placement,
            operator_metrics=tuple(operator_metrics),
            cores_used=cores_used,
            engine_s=engine_s,
            busy_core_s=busy_core_s,
            gate_wait_s=gate_wait_s,
            cpu_core_s=self.cpu_core_s,
            failed_core_s=self.failed_core_s,
            tasks=self.tasks,
            dataset_rows=counts,
            dataset_spans=tuple(max(0.0, d.newest - d.arrival) if d.newest is not None else 0.0
                                for d in batch.datasets),
        )


def apportion(total: int, weights: Sequence[int]) -> tuple[int, ...]:
    """``total`` split into whole parts in proportion to ``weights`` (largest remainders; evenly where every weight
    is 0); the parts sum to ``total``."""
    if not weights:
        return ()
    weight = sum(weights)
    shares = [total * w / weight for w in weights] if weight > 0 else [total / len(weights)] * len(weights)
    parts = [int(share) for share in shares]
    by_remainder = sorted(range(len(weights)), key=lambda i: parts[i] - shares[i])
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    return tuple(parts)
