"""The driver's state of one ``format("pacer")`` query, and the checks of its ``pacer.*`` options.

:mod:`pacer_spark.paced` decides; this module holds what it remembers between decisions, every part of
it bounded however long the query runs (:class:`RecentIds`, :class:`~pacer.summary.StreamingSummary`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pacer.summary import StreamingSummary
from pacer_spark import telemetry
from pacer_spark.options import parse_seconds

#: The ``pacer.*`` source options the service reads (besides ``pacer.param.*``); ``pacer.source`` and
#: ``pacer.query`` are the JVM's.
KNOWN_OPTIONS = frozenset({"pacer.deadline", "pacer.admission", "pacer.placement", "pacer.query", "pacer.overload"})


def check_options(options: Mapping[str, str]) -> dict[str, str]:
    """A source's ``pacer.*`` options, checked: unknown names, a deadline <= 0 and ``pacer.overload=shed`` are
    refused with what to do instead (``ValueError``)."""
    unknown = sorted(k for k in options if k not in KNOWN_OPTIONS and not k.startswith("pacer.param."))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; format('pacer') reads "
                         f"{', '.join(sorted(KNOWN_OPTIONS))} and pacer.param.<admission|placement>.<name>")
    if "pacer.deadline" in options:
        deadline = parse_seconds(options["pacer.deadline"])
        if deadline is None or not deadline > 0:
            raise ValueError(f"pacer.deadline must be > 0 seconds, got {options['pacer.deadline']!r}")
    overload = options.get("pacer.overload", "keep").strip().lower()
    if overload == "shed":
        raise ValueError("pacer.overload=shed is refused: Spark reads every offset a format('pacer') source "
                         "logged, so pacer cannot drop data from it (rows it called dropped would be written). "
                         "Leave pacer.overload unset or 'keep': an overload is reported, nothing is dropped; "
                         "to bound a batch use the wrapped source's own read limit (maxOffsetsPerTrigger, "
                         "maxFilesPerTrigger)")
    if overload != "keep":
        raise ValueError(f"pacer.overload must be 'keep', got {options['pacer.overload']!r}")
    return dict(options)


def changed_options(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """``name: old -> new`` for every option that differs, comma-separated."""
    names = sorted(set(old) | set(new))
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in names if old.get(k) != new.get(k))


def without_engine_time(progress: telemetry.TriggerProgress) -> telemetry.TriggerProgress:
    """``progress`` with no ``triggerExecution`` and no rows of its own: for a second batch completed by one trigger
    (its engine time went to the first; its rows are only part of the trigger's)."""
    durations = {k: v for k, v in progress.durations_ms.items() if k != "triggerExecution"}
    return replace(progress, durations_ms=durations, source_rows=None)


class RecentIds:
    """The most recent ``size`` ids added (a set with a bounded memory): Spark batch ids already accounted."""

    def __init__(self, size: int = 1024) -> None:
        self._order: deque[tuple[str | None, int]] = deque(maxlen=size)
        self._ids: set[tuple[str | None, int]] = set()

    def add(self, key: tuple[str | None, int]) -> None:
        """Remember ``key`` (forgetting the oldest once full)."""
        if key in self._ids:
            return
        if len(self._order) == self._order.maxlen:
            self._ids.discard(self._order[0])
        self._order.append(key)
        self._ids.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self._ids


@dataclass(frozen=True)
class InFlight:
    """The batch the driver admitted last for a query: pacer's id, Spark's batch id, the snapshots it ends."""

    batch_id: str
    spark_batch_id: int
    seqs: frozenset[int]


@dataclass
class PacedQuery:
    """Driver-side state of one ``format("pacer")`` query.

    :ivar query_id: pacer's id: the source's ``pacer.query``, else the stream's ``queryName``, else its id.
    :ivar run: the JVM source run whose snapshots the Controller holds.
    :ivar spark_run_id: the streaming query's run id of ``run`` (Spark's ``runId``): listener events of
        any other run (an older one that ended after this one started) are not this run's.
    :ivar arrived: snapshot seq (of ``run``) -> dataset id, for every snapshot handed to the Controller
        that the JVM has not admitted yet.
    :ivar inflight: the batch the driver admitted last, until it completes.
    :ivar stream_id: the streaming query's id (UUID, stable across restarts from one checkpoint).
    :ivar accounted: (spark run id, Spark batch id) of batches already completed or accounted (bounded).
    :ivar reconciled: (source run, Spark batch id) of the failed-open admissions already accounted.
    :ivar given_up: Spark batch ids (of the stream) completed without their progress when a run stopped:
        if the next run replays one from its offset log, it was accounted already.
    """

    query_id: str
    run: str | None = None
    spark_run_id: str | None = None
    arrived: dict[int, str] = field(default_factory=dict)
    inflight: InFlight | None = None
    stream_id: str | None = None
    source: str = ""
    options: dict[str, str] = field(default_factory=dict)
    decisions: int = 0
    forced: int = 0
    withdrawn: int = 0
    replays: int = 0
    failed_open: int = 0
    failed_open_lost: int = 0
    #: Whether a snapshot of this query came with the data's own time (its arrivals are then source-time).
    source_timed: bool = False
    #: The source's metrics at its latest measured batch (``pacer.*`` counters of the JVM source).
    source_metrics: dict[str, str] = field(default_factory=dict)
    gate_wait_s: StreamingSummary = field(default_factory=StreamingSummary)
    decide_s: StreamingSummary = field(default_factory=StreamingSummary)
    read_rows: int = 0
    read_bytes: int = 0
    accounted: RecentIds = field(default_factory=RecentIds)
    given_up: RecentIds = field(default_factory=RecentIds)
    reconciled: RecentIds = field(default_factory=RecentIds)
    dead: bool = False
    #: Admit nothing more in this run (:meth:`pacer_spark.paced.PacedQueries.hold`): it is about to stop.
    holding: bool = False
    error: str | None = None
    plan_dag: bool = False  # its DAG was read from Spark's executed plan

    def summary(self) -> dict[str, Any]:
        """The query's part of the report's ``paced`` section: decisions, forced admissions, withdrawn and replayed
        datasets, gate waits, decide times, how its data is dated and what dating it cost."""
        def ms(values: StreamingSummary, p: float | None = None) -> float | None:
            if not values.count:
                return None
            return 1e3 * (values.mean if p is None else values.percentile(p))

        def metric(name: str) -> int | None:
            value = self.source_metrics.get(name)
            return None if value is None else int(value)

        return {"source": self.source, "decisions": self.decisions, "forced": self.forced,
                "withdrawn": self.withdrawn, "replays": self.replays, "failed_open": self.failed_open,
                "failed_open_lost": self.failed_open_lost, "gate_wait_ms_avg": ms(self.gate_wait_s),
                "gate_wait_ms_max": 1e3 * self.gate_wait_s.max if self.gate_wait_s.count else None,
                "decide_ms_avg": ms(self.decide_s), "decide_ms_p99": ms(self.decide_s, 99),
                "arrival": "source-time" if self.source_timed else "first-seen",
                # the JVM source's time reading the data's own times (Kafka: one fetch per partition of each new
                # snapshot), and how many snapshots it read them for
                "source_time_ms": metric("pacer.sourceTimeMs"),
                "source_time_fetches": metric("pacer.sourceTimeFetches"),
                "error": self.error}
