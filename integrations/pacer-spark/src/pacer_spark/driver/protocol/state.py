"""The driver's state of one ``format("pacer")`` query, and the checks of its ``pacer.*`` options.

:mod:`pacer_spark.driver.protocol.paced` decides; this module holds what it remembers between decisions, every part of
it bounded however long the query runs (:class:`RecentIds`, :class:`~pacer.summary.StreamingSummary`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pacer import Dataset
from pacer.engine_profile import EngineProfile, EngineProfileError
from pacer.engine_profile import load as load_engine_profile
from pacer.observed import Recorder
from pacer.summary import StreamingSummary
from pacer_spark.driver.advice import DEFAULT_EVERY_S, Advisor
from pacer_spark.driver.protocol.runs import RunMark
from pacer_spark.jvm.decider import FailedOpen
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.options import parse_seconds

#: The ``pacer.*`` source options the service reads (besides ``pacer.param.*``); ``pacer.source`` and
#: ``pacer.query`` are the JVM's.
KNOWN_OPTIONS = frozenset({"pacer.deadline", "pacer.admission", "pacer.placement", "pacer.query", "pacer.overload",
                           "pacer.arrival", "pacer.arrival.maxAge", "pacer.engineProfile", "pacer.observe",
                           "pacer.observe.adviseEvery"})
#: How the arrivals of a query's data are dated (``pacer.arrival``): by the data's own time where the source has one
#: (Kafka record timestamps, file mtimes, rate's timestamp column), or when pacer first saw it.
ARRIVAL_MODES = ("source", "observed")
#: A source time older than the query's start by more than this (``pacer.arrival.maxAge``) is taken for a
#: producer's event time or a copy that kept old mtimes, not an arrival: the row is dated when pacer saw it.
DEFAULT_MAX_AGE_S = 7 * 24 * 3600.0


def check_options(given: Mapping[str, str]) -> dict[str, str]:
    """A source's ``pacer.*`` options, checked: unknown names, a duration that is none (or <= 0) and
    ``pacer.overload=shed`` are refused, naming the option, the value and what to do instead (``ValueError``). Names are read as Spark reads a source's options, whatever
    their case (Spark hands a V2 source its options lowercased): the result spells them as :data:`KNOWN_OPTIONS`
    does."""
    spelled = {name.lower(): name for name in KNOWN_OPTIONS}
    options = {spelled.get(k.lower(), k): v for k, v in given.items()}
    unknown = sorted(k for k in options if k not in KNOWN_OPTIONS and not k.startswith("pacer.param."))
    if unknown:
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; format('pacer') reads "
                         f"{', '.join(sorted(KNOWN_OPTIONS))} and pacer.param.<admission|placement>.<name>")
    for name in ("pacer.deadline", "pacer.arrival.maxAge"):  # durations > 0, in Spark's wording too ("1 minute")
        if name in options:
            parse_seconds(options[name], name, positive=True)
    overload = options.get("pacer.overload", "keep").strip().lower()
    if overload == "shed":
        raise ValueError("pacer.overload=shed is refused: Spark reads every offset a format('pacer') source "
                         "logged, so pacer cannot drop data from it (rows it called dropped would be written). "
                         "Leave pacer.overload unset or 'keep': an overload is reported, nothing is dropped; "
                         "to bound a batch use the wrapped source's own read limit (maxOffsetsPerTrigger, "
                         "maxFilesPerTrigger)")
    if overload != "keep":
        raise ValueError(f"pacer.overload must be 'keep', got {options['pacer.overload']!r}")
    arrival = options.get("pacer.arrival", "source").strip().lower()
    if arrival not in ARRIVAL_MODES:
        raise ValueError(f"pacer.arrival must be one of {', '.join(ARRIVAL_MODES)}, got {options['pacer.arrival']!r}")
    advise_every(options)
    return options


def advise_every(options: Mapping[str, str]) -> float:
    """Seconds between an observed query's pieces of advice (``pacer.observe.adviseEvery``: a duration, ``0`` for
    none; :data:`pacer_spark.driver.advice.DEFAULT_EVERY_S` where unset). A bad value is refused (``ValueError``)."""
    value = options.get("pacer.observe.adviseEvery")
    if value is None:
        return DEFAULT_EVERY_S
    try:
        seconds = parse_seconds(value)
    except ValueError:
        seconds = None
    if seconds is None or not seconds >= 0:
        raise ValueError(f"pacer.observe.adviseEvery expects a duration such as '5 minutes' or '30s' (0: no advice "
                         f"while the query runs), got {value!r}")
    return seconds


def query_engine_profile(options: Mapping[str, str]) -> EngineProfile | None:
    """The engine profile a query's ``pacer.engineProfile`` names (the path of a ``pacer calibrate --runtime spark``
    file; None: unset). A file that cannot be read as one is refused, naming the option, the file and what to do
    (``ValueError``)."""
    path = options.get("pacer.engineProfile")
    if not path:
        return None
    try:
        return load_engine_profile(path)
    except EngineProfileError as exc:
        raise ValueError(f"pacer.engineProfile: {exc}") from None


def changed_options(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """``name: old -> new`` for every option that differs, comma-separated."""
    names = sorted(set(old) | set(new))
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in names if old.get(k) != new.get(k))


K = TypeVar("K", bound=Hashable)


class RecentIds(Generic[K]):
    """The most recent ``size`` ids added (a set with a bounded memory): Spark batch ids already accounted."""

    def __init__(self, size: int = 1024) -> None:
        self._order: deque[K] = deque(maxlen=size)
        self._ids: set[K] = set()

    def add(self, key: K) -> None:
        """Remember ``key`` (forgetting the oldest once full)."""
        if key in self._ids:
            return
        if len(self._order) == self._order.maxlen:
            self._ids.discard(self._order[0])
        self._order.append(key)
        self._ids.add(key)

    def __contains__(self, key: object) -> bool:
        return key in self._ids


def merged_options(query: str, current: Mapping[str, str], new: Mapping[str, str]) -> dict[str, str]:
    """The ``pacer.*`` options of two paced sources of one query (a union or a join), merged: an option one source
    leaves out is the other's; one they both give must agree (``ValueError`` naming both values)."""
    clash = sorted(k for k in set(current) & set(new) if current[k] != new[k])
    if clash:
        both = "; ".join(f"{k}: {current[k]!r} on one source, {new[k]!r} on another" for k in clash)
        raise ValueError(f"the format('pacer') sources of query {query!r} disagree ({both}). A query has one "
                         "deadline and one strategy: give the option the same value on every source, or on one "
                         "source only")
    return {**current, **new}


def snapshot_id(run: str, seq: int) -> str:
    """The dataset id of snapshot ``seq`` of source run ``run`` (``<run>:<seq>``: unique across runs and sources)."""
    return f"{run}:{seq}"


def source_of(dataset_id: str) -> tuple[str, int]:
    """The source run and snapshot seq of a snapshot's dataset id (:func:`snapshot_id`'s inverse)."""
    run, _, seq = dataset_id.rpartition(":")
    return run, int(seq)


@dataclass(frozen=True)
class Orphan:
    """What an earlier run of a query had Spark run that the driver still has to account, from its stop event heard
    after a later run's ask (:meth:`pacer_spark.driver.protocol.truth.SourceTruth.old_stop`): the ``datasets`` of source
    run ``run`` that Spark batch ``spark_batch_id`` read (an admission made without an answer, the part of a batch the
    driver decided, or, ``replay``, a batch replayed from the offset log, sized by its ``progress``). Accounted once the
    query has no batch in flight, each dataset once.
    """

    run: str
    spark_batch_id: int
    datasets: tuple[Dataset, ...]
    progress: TriggerProgress
    replay: bool = False


@dataclass(frozen=True)
class Parked:
    """A source's part of a batch the driver decided in a run that a later run replaced before the run's stop event
    came (:meth:`pacer_spark.driver.protocol.truth.SourceTruth.restart`): taken back for now; the source's stop event,
    when it comes, says whether Spark ran it (its trigger ended: then it is accounted) or not."""

    spark_run_id: str | None
    spark_batch_id: int
    datasets: tuple[Dataset, ...]


#: Parked parts kept at most (their stop events never came: the oldest are dropped first).
MAX_PARKED = 64


@dataclass(frozen=True)
class InFlight:
    """The batch of a query Spark runs (or is about to): pacer's id, Spark's batch id, and per paced source of the
    query (its run id) the snapshot seqs the batch ends (a union of two paced sources reads from both)."""

    batch_id: str
    spark_batch_id: int
    parts: Mapping[str, frozenset[int]]
    #: the start stamp of the trigger whose ask formed it (-1: not known, as for a batch rebuilt from a source's report)
    trigger: int = -1

    def seqs(self, run: str) -> frozenset[int]:
        """The seqs of source run ``run`` in the batch (empty: none of its data)."""
        return self.parts.get(run, frozenset())


@dataclass
class SourceRun:
    """One paced source of a query's current Spark run (a query reading two is a union or a join).

    :ivar run: the JVM source instance's id (a new one at every start of the query).
    :ivar arrived: snapshot seq -> dataset id for every snapshot the source holds pending and the Controller
        buffers (or holds in the batch in flight): what the source's next ask is checked against.
    """

    run: str
    arrived: dict[int, str] = field(default_factory=dict)
    #: the number of the latest request of this source the driver took (a lower one is stale)
    last_ask: int = 0


@dataclass
class PacedQuery:
    """Driver-side state of one ``format("pacer")`` query.

    :ivar query_id: pacer's id: the source's ``pacer.query``, else the stream's ``queryName``, else its id.
    :ivar sources: source run id -> its state, for every paced source of the current Spark run.
    :ivar spark_run_id: the streaming query's current run id (Spark's ``runId``): listener events of
        any other run (an older one that ended after this one started) are not this run's.
    :ivar inflight: the batch Spark runs or is about to, until its trigger reports (or it is taken back).
    :ivar stream_id: the streaming query's id (UUID, stable across restarts from one checkpoint).
    :ivar accounted: (spark run id, Spark batch id) of batches already completed or accounted (bounded).
    :ivar reconciled: (source run, Spark batch id) of the failed-open admissions already accounted.
    :ivar runs_seen: whether a run of the query was seen before (a new one is then a restart).
    :ivar given_up: Spark batch ids (of the stream) completed without their progress when a run stopped:
        if the next run replays one from its offset log, it was accounted already.
    """

    query_id: str
    sources: dict[str, SourceRun] = field(default_factory=dict)
    spark_run_id: str | None = None
    inflight: InFlight | None = None
    #: the progress of the batch in flight, heard while a source's report of what it really admitted is awaited
    inflight_progress: Any = None
    stream_id: str | None = None
    source: str = ""
    options: dict[str, str] = field(default_factory=dict)
    decisions: int = 0
    forced: int = 0
    withdrawn: int = 0
    replays: int = 0
    failed_open: int = 0
    failed_open_lost: int = 0
    #: batches the driver admitted that Spark never ran (taken back: a late answer, a stop before the batch)
    retracted: int = 0
    #: requests that reached the driver after a later one of their source (answers past the timeout): dropped
    stale: int = 0
    #: admissions that took everything held where the strategy would have waited, or a source's data joining the
    #: trigger's batch, because the trigger drains (``processAllAvailable()``, ``availableNow``, ``Trigger.Once``)
    drained: int = 0
    #: Whether a snapshot of this query came with the data's own time (its arrivals are then source-time).
    source_timed: bool = False
    #: when the driver first saw the query (the bound of ``pacer.arrival.maxAge`` counts from it)
    seen_at: float = 0.0
    #: the profile its ``pacer.engineProfile`` names, until its first measured snapshot says how its source measures
    #: a row (:meth:`pacer_spark.driver.protocol.arrivals.Arrivals.arrive_one`); None once taken, or without one
    engine_profile: EngineProfile | None = None
    #: the query's service-time model file in its checkpoint (None: not on this machine), when it was last saved,
    #: and whether this run started from a saved one
    model_file: Path | None = None
    model_saved_at: float = float("-inf")
    model_restored: bool = False
    #: snapshots whose source time was not believable (zero, in the future, older than maxAge): dated when seen
    source_time_clamped: int = 0
    #: snapshots of a source-timed query that came without their time (reading it failed): dated when seen
    source_time_missing: int = 0
    #: The source's metrics at its latest measured batch (``pacer.*`` counters of the JVM source).
    source_metrics: dict[str, str] = field(default_factory=dict)
    gate_wait_s: StreamingSummary = field(default_factory=StreamingSummary)
    decide_s: StreamingSummary = field(default_factory=StreamingSummary)
    read_rows: int = 0
    read_bytes: int = 0
    accounted: RecentIds[tuple[str | None, int]] = field(default_factory=RecentIds)
    given_up: RecentIds[tuple[str | None, int]] = field(default_factory=RecentIds)
    reconciled: RecentIds[tuple[str, int]] = field(default_factory=RecentIds)
    runs_seen: bool = False
    #: the current run's identity and order (:mod:`pacer_spark.driver.protocol.runs`), from its messages
    mark: RunMark | None = None
    #: source runs whose stop event was handled: their stop is their last word, a call of theirs after it is stale
    stopped_sources: RecentIds[str] = field(default_factory=RecentIds)
    #: whether a message of an earlier run was dropped already (the first is warned, the others counted)
    stale_warned: bool = False
    #: asks refused because another stream ran under the query's pacer name (two queries, one name)
    refused: int = 0
    #: stop events of earlier runs heard after a later run's ask, and what they had Spark run still to account
    late_stops: int = 0
    orphans: list[Orphan] = field(default_factory=list)
    #: source run -> its part of a batch in flight when a later run replaced its run, until its stop event comes
    parked: dict[str, Parked] = field(default_factory=dict)
    #: source run -> what it admitted ahead of an earlier batch's report under a drain, as the driver answered it
    #: (:meth:`pacer_spark.driver.protocol.truth.SourceTruth.drain_ahead`), until that batch is settled
    ahead: dict[str, list[FailedOpen]] = field(default_factory=dict)
    #: the latest trigger (its start, else its Spark batch), and the sources that asked in it (the first may admit)
    asked_trigger: int | None = None
    asked_runs: set[str] = field(default_factory=set)
    #: the Spark batch id of the current run's first ask: a batch before it that Spark ran is a replay
    first_batch: int | None = None
    #: the newest Spark batch a source of the current run asked in: an ask for an earlier one reached the driver after
    #: Spark went on (its source gave up waiting and admitted without an answer; its next ask reports what)
    newest_batch: int = -1
    dead: bool = False
    #: Admit nothing more in this run (:meth:`pacer_spark.driver.protocol.paced.PacedQueries.hold`): it is about to
    #stop.
    holding: bool = False
    error: str | None = None
    plan_dag: bool = False  # its DAG was read from Spark's executed plan
    #: observe mode (``pacer.observe``): Spark admits as without pacer, and each completed batch is recorded in
    #: ``recorder`` (None once a write failed: the query is still observed, no longer recorded)
    observed: bool = False
    recorder: Recorder | None = None
    #: observe mode's live advice from the recording (None: not observed, or ``pacer.observe.adviseEvery`` 0)
    advisor: Advisor | None = None

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
                "failed_open_lost": self.failed_open_lost, "retracted": self.retracted, "drained": self.drained,
                "stale": self.stale, "refused": self.refused, "late_stops": self.late_stops,
                "model_restored": self.model_restored,
                "sources": len(self.sources), "gate_wait_ms_avg": ms(self.gate_wait_s),
                "gate_wait_ms_max": 1e3 * self.gate_wait_s.max if self.gate_wait_s.count else None,
                "decide_ms_avg": ms(self.decide_s), "decide_ms_p99": ms(self.decide_s, 99),
                "arrival": "source-time" if self.source_timed else "first-seen",
                "arrival_option": self.options.get("pacer.arrival", "source"),
                "source_time_clamped": self.source_time_clamped, "source_time_missing": self.source_time_missing,
                # the JVM source's time reading the data's own times (Kafka: one fetch per partition of each new
                # snapshot), and how many snapshots it read them for
                "source_time_ms": metric("pacerSourceTimeMs"),
                "source_time_fetches": metric("pacerSourceTimeFetches"),
                "error": self.error,
                # observe mode: where its batches are recorded (``pacer advise PATH`` replays them), else None
                "observed": None if self.recorder is None else str(self.recorder.path),
                # observe mode: what pacing would do, replayed from the recording while it runs
                "advice": None if self.advisor is None else self.advisor.summary()}
