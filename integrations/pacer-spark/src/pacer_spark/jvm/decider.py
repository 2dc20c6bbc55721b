"""The Python end of ``format("pacer")``: answer the JVM source's "where does this batch end?".

A ``spark.readStream.format("pacer").option("pacer.source", "csv")`` source (the JVM side, built
by :mod:`pacer_spark.jvm.jar`) observes its delegate's offsets; each change is an
:class:`OffsetSnapshot` (one pacer dataset: handle = the offset JSON, arrival = the
previous look at the delegate, the earliest its data can have come).
On each trigger with snapshots pending it calls the decider registered for its query through
PySpark's Py4J callback server, as PySpark does for ``foreachBatch`` functions.

:class:`PacerBridge` registers a :data:`DecisionFunction` per query name. The function gets the
pending snapshots, oldest first, and returns the index of the last one to admit (the batch ends at
its offset), or ``None`` for "no batch now". The JVM side keeps the delegate's read limit as a
cap, forces at least one snapshot per batch under ``trigger(availableNow=True)``, and admits
everything (warning once) when no decider answers.

Wiring pacer's Controller is a decision function: ``arrive`` each snapshot not seen before as a
``Dataset`` whose handle is ``snapshot.offset``, ``poll``, and return the index of the last
admitted handle.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pacer_spark.jvm import callback
from pacer_spark.jvm import jar as jvm

logger = logging.getLogger(__name__)

#: ``decide(query_name, pending_snapshots) -> index of the last snapshot to admit | None``.
DecisionFunction = Callable[[str, Sequence["OffsetSnapshot"]], "int | None"]

#: ``handle(request) -> Decision``: the whole request in, the batch end and its pool out.
RequestHandler = Callable[["DecisionRequest"], "Decision"]

#: ``on_stop(event)``: a source run stopped (the query stopped, failed or restarts).
StopHandler = Callable[["StopEvent"], None]

#: The version of the request JSON the JVM source of this pacer_spark writes (``version`` in the request).
WIRE_VERSION = 6

#: The versions this module reads: 5 (a jar built before runs carried ``run_started``) is read too, its runs
#: ordered without the stamp (by ``first_batch_id``, else as the driver first heard of them).
READ_VERSIONS = (5, WIRE_VERSION)
_older_warned = False  # a request of an older version was warned about (once per process)

#: Seconds the JVM waits for one answer before it admits without one (``PacerBridge(timeout_s=...)``).
DEFAULT_DECIDE_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class OffsetSnapshot:
    """One observed change of the wrapped source's latest offset: one pacer dataset.

    :ivar seq: the JVM source's running number of the snapshot (per query run).
    :ivar offset: the wrapped source's offset JSON the batch would end at (the dataset's handle).
    :ivar arrival: the earliest its data can have arrived: the JVM's previous look at the
        delegate, which did not see it yet; epoch seconds (driver clock).
    :ivar rows: rows since the previous snapshot where the offsets tell (Kafka), else None.
    :ivar files: files since the previous snapshot (file sources), else None.
    :ivar bytes: bytes since the previous snapshot: file sizes for file sources, rows times
        the schema's default row size where ``bytes_estimated``; None when unknown.
    :ivar bytes_estimated: whether ``bytes`` is an estimate from rows rather than sizes.
    :ivar source_time: the oldest data's own time where the source has one (epoch seconds): the Kafka
        timestamp of the record at the snapshot's start offset (the least over its partitions), the
        oldest file's modification time, the rate source's ``timestamp`` of its first row; else None.
    :ivar source_newest: the newest data's own time where the source has one (the Kafka timestamp of the
        record before the snapshot's end offset, the greatest over its partitions; the newest file's
        modification time; rate's last second), else None.
    """

    seq: int
    offset: str
    arrival: float
    rows: int | None
    files: int | None
    bytes: int | None
    bytes_estimated: bool
    source_time: float | None = None
    source_newest: float | None = None

    @property
    def data_arrival(self) -> float:
        """When the data arrived as the data sees it: its own time where known (a record produced between two
        looks is dated when it was produced, not at the earlier look), else :attr:`arrival`. The decider caps it
        at the moment it asks, so that a clock ahead of the driver's dates no data in the future."""
        return self.arrival if self.source_time is None else self.source_time


    @classmethod
    def from_json(cls, s: dict[str, Any]) -> OffsetSnapshot:
        """One element of the request's ``snapshots`` array."""
        return cls(
            seq=int(s["seq"]),
            offset=str(s["offset"]),
            arrival=float(s["arrival"]),
            rows=None if s["rows"] is None else int(s["rows"]),
            files=None if s["files"] is None else int(s["files"]),
            bytes=None if s["bytes"] is None else int(s["bytes"]),
            bytes_estimated=bool(s["bytes_estimated"]),
            source_time=None if s.get("source_time") is None else float(s["source_time"]),
            source_newest=None if s.get("source_newest") is None else float(s["source_newest"]),
        )


def snapshot_spans(snapshots: tuple[OffsetSnapshot, ...], count: int, now: float) -> list[tuple[float, float]]:
    """When the rows of each of the first ``count`` snapshots arrived, as ``(oldest, newest)``: spread between the
    two (the report dates each row in between; admission goes by the oldest).

    The data's own span where the source dates both ends (a Kafka snapshot's first and last records, its oldest
    and newest file). Else up to the next snapshot's oldest data; the last one over the span before it; one seen
    alone over as long as the JVM's looks were apart. Never later than ``now``, the moment the decider asks: no
    row is dated after the look that saw it.
    """
    spans = []
    for i, snapshot in enumerate(snapshots[:count]):
        oldest = min(snapshot.data_arrival, now)
        if snapshot.source_newest is not None:
            newest = snapshot.source_newest
        elif i + 1 < len(snapshots):
            newest = snapshots[i + 1].data_arrival
        else:
            newest = oldest + max(0.0, oldest - snapshots[i - 1].data_arrival if i else now - snapshot.arrival)
        spans.append((oldest, min(now, max(oldest, newest))))
    return spans


@dataclass(frozen=True)
class FailedOpen:
    """An admission the JVM source made without the decider's answer (a failed or late call, a snapshot
    that was not pending, ``availableNow`` forcing one): what Spark batch ``batch_id`` read.

    :ivar batch_id: Spark's batch id (-1 when the source could not tell).
    :ivar reason: why there was no answer.
    :ivar snapshots: the snapshots admitted, oldest first.
    """

    batch_id: int
    reason: str
    snapshots: tuple[OffsetSnapshot, ...]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> FailedOpen:
        """One element of a request's (or stop event's) ``failed_open`` array."""
        return cls(int(raw["batch_id"]), str(raw.get("reason") or ""),
                   tuple(OffsetSnapshot.from_json(s) for s in raw["snapshots"]))


@dataclass(frozen=True)
class StopEvent:
    """A source run stopped: the query stopped, failed, or is restarting.

    :ivar query: the query's name, as in :class:`DecisionRequest`.
    :ivar run: the source run that stopped.
    :ivar spark_run_id: the streaming query run's id (None when unknown).
    :ivar query_id: the streaming query's id.
    :ivar failed_open: admissions of the run no request reported.
    :ivar progress: the query's progress entries no request carried (whether the last batch's trigger ended).
    :ivar options: the source's ``pacer.*`` options; ``source``: the wrapped source's name (a query whose every
        ask failed is registered from them, so its admissions are accounted).
    :ivar first_batch_id: as in :class:`DecisionRequest` (-1: the run never asked).
    :ivar run_started: as in :class:`DecisionRequest`: the driver may handle the event after a later run's asks.
    """

    query: str
    run: str
    spark_run_id: str | None
    query_id: str | None
    failed_open: tuple[FailedOpen, ...]
    progress: tuple[dict[str, Any], ...] = ()
    options: dict[str, str] = field(default_factory=dict)
    source: str = ""
    first_batch_id: int = -1
    run_started: int = -1

    def as_request(self) -> DecisionRequest:
        """The stop as a request that reports only (no snapshots): its run's identity and order, for a query or run
        the driver has not heard of yet."""
        return DecisionRequest(query=self.query, query_id=self.query_id, run=self.run, batch_id=-1,
                               options=self.options, source=self.source, start=None, limit="", available_now=False,
                               admissible=0, now=time.time(), snapshots=(), spark_run_id=self.spark_run_id,
                               progress=self.progress, first_batch_id=self.first_batch_id,
                               run_started=self.run_started)

    @classmethod
    def from_json(cls, query: str, text: str) -> StopEvent:
        """Parses the JVM's stop event; raises ``ValueError`` naming what is wrong."""
        try:
            raw = json.loads(text)
            return cls(query, str(raw["run"]), raw.get("spark_run_id"), raw.get("query_id"),
                       tuple(FailedOpen.from_json(r) for r in raw.get("failed_open") or ()),
                       tuple(p for p in raw.get("progress") or () if isinstance(p, dict)),
                       {str(k): str(v) for k, v in (raw.get("options") or {}).items()}, str(raw.get("source") or ""),
                       int(raw.get("first_batch_id", -1)), int(raw.get("run_started", -1)))
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"malformed format('pacer') stop event ({exc!r}): {text[:200]}") from exc


@dataclass(frozen=True)
class Decision:
    """The answer to a :class:`DecisionRequest`.

    :ivar index: index into the request's snapshots of the last one to admit; None: no batch now.
    :ivar pool: the fair-scheduler pool the batch's jobs run in (set on the stream thread); None: unchanged.
    :ivar error: a problem with the query's pacer options: the JVM fails the query with it (root cause first).
    :ivar metrics: the admitted batch's figures, returned by the source in the batch's progress
        (:mod:`pacer_spark.driver.protocol.progress_metrics`); None: none.
    """

    index: int | None
    pool: str | None = None
    error: str | None = None
    metrics: Mapping[str, str] | None = None


@dataclass(frozen=True)
class DecisionRequest:
    """What the JVM source sends with each decision (see ``jvm/README.md`` for the JSON).

    :ivar query: the query's name (``pacer.query``, else the streaming query's name, else its id).
    :ivar query_id: the streaming query's id (UUID), None before it started.
    :ivar run: the source instance's id: a new one each time the query (re)starts.
    :ivar batch_id: the id of the batch Spark is constructing, -1 when unknown.
    :ivar options: the source's ``pacer.*`` options (``pacer.deadline``, ``pacer.admission``, ...).
    :ivar source: the wrapped source's name (``pacer.source``).
    :ivar start: the offset JSON the batch starts after (None before the first batch).
    :ivar limit: the read limit Spark passed, as Spark prints it.
    :ivar available_now: whether the query runs ``trigger(availableNow=True)``.
    :ivar admissible: how many of the oldest snapshots fit the wrapped source's read limit together.
    :ivar now: the JVM's clock when it asked, epoch seconds.
    :ivar snapshots: the pending snapshots, oldest first (empty when the request only reports).
    :ivar spark_run_id: the streaming query run's id (a new one at every start), None when unknown.
    :ivar progress: the query's progress entries (``StreamingQueryProgress.json()`` as dicts) the source
        had not sent yet, oldest first: the driver completes batches from them, whatever the query's
        name or session.
    :ivar failed_open: admissions the source made without an answer since the last answered request.
    :ivar failed_open_dropped: older such admissions the source could no longer keep (bounded).
    :ivar caller_waiting: a caller waits for the query's data (``processAllAvailable()``): Spark ends that wait
        at the first trigger without new data, so what pacer holds is drained now.
    :ivar first_batch_id: the Spark batch id of the source run's first ask (-1: unknown): a batch before it ran
        from Spark's offset log without asking any source (a replay).
    :ivar ask: the request's number in its source run (from 1): one the driver sees after a later one is stale
        (an answer past the timeout), and is dropped.
    :ivar source_checkpoint: the source's folder in the query's checkpoint (``<checkpoint>/sources/<i>``; None:
        unknown): the driver keeps the query's service-time model beside it.
    :ivar trigger: when the trigger asking started (Spark's clock, ms; -1: unreadable): the same for every source
        of the query asked in one trigger.
    :ivar run_started: when the source run started (wire version 6; -1: not sent): the JVM's wall clock in
        microseconds since the epoch, raised to stay above every stamp it handed out before, so a run created after
        another (a restart) has the higher one. With ``first_batch_id`` it orders the runs of a query
        (:mod:`pacer_spark.driver.protocol.runs`), whatever order their messages reach the driver in.
    :ivar single_batch: the query runs one batch and stops (``trigger(once=True)``, or ``availableNow`` falling back
        to one batch): plain Spark reads everything available in it, so what pacer holds is drained now.
    """

    query: str
    query_id: str | None
    run: str
    batch_id: int
    options: dict[str, str]
    source: str
    start: str | None
    limit: str
    available_now: bool
    admissible: int
    now: float
    snapshots: tuple[OffsetSnapshot, ...]
    spark_run_id: str | None = None
    progress: tuple[dict[str, Any], ...] = ()
    failed_open: tuple[FailedOpen, ...] = ()
    failed_open_dropped: int = 0
    caller_waiting: bool = False
    first_batch_id: int = -1
    trigger: int = -1
    ask: int = 0
    source_checkpoint: str | None = None
    run_started: int = -1
    single_batch: bool = False

    @classmethod
    def from_json(cls, text: str) -> DecisionRequest:
        """Parses the JVM's request; raises ``ValueError`` naming what is wrong."""
        try:
            raw = json.loads(text)
            if raw.get("version") not in READ_VERSIONS:
                raise ValueError(
                    f"request version {raw.get('version')!r}, this pacer_spark reads "
                    f"{WIRE_VERSION}: rebuild the jar (pacer_spark.jvm.jar.build_jar(force=True))"
                )
            if raw["version"] != WIRE_VERSION:
                _warn_older(raw["version"])
            snapshots = tuple(OffsetSnapshot.from_json(s) for s in raw["snapshots"])
            return cls(
                query=str(raw["query"]),
                query_id=raw.get("query_id"),
                run=str(raw["run"]),
                batch_id=int(raw["batch_id"]),
                options={str(k): str(v) for k, v in (raw.get("options") or {}).items()},
                source=str(raw["source"]),
                start=raw["start"],
                limit=str(raw["limit"]),
                available_now=bool(raw["available_now"]),
                admissible=int(raw.get("admissible", len(snapshots))),
                now=float(raw["now"]),
                snapshots=snapshots,
                spark_run_id=raw.get("spark_run_id"),
                progress=tuple(p for p in raw.get("progress") or () if isinstance(p, dict)),
                failed_open=tuple(FailedOpen.from_json(r) for r in raw.get("failed_open") or ()),
                failed_open_dropped=int(raw.get("failed_open_dropped") or 0),
                caller_waiting=bool(raw.get("caller_waiting")),
                single_batch=bool(raw.get("single_batch")),
                first_batch_id=int(raw.get("first_batch_id", -1)),
                trigger=int(raw.get("trigger", -1)),
                ask=int(raw.get("ask", 0)),
                source_checkpoint=raw.get("source_checkpoint"),
                run_started=int(raw.get("run_started", -1)),
            )
        except (KeyError, TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"malformed format('pacer') decision request ({exc!r}): {text[:200]}") from exc


def _warn_older(version: object) -> None:
    """Warn once that the JVM source speaks an older wire version than this module."""
    global _older_warned
    if not _older_warned:
        _older_warned = True
        logger.warning("format('pacer'): the JVM source sends request version %r (this pacer_spark writes %d): its "
                       "runs carry no start stamp, so a query's runs are ordered by first_batch_id and by arrival, "
                       "which cannot order a run that never asked. Rebuild the jar "
                       "(pacer_spark.jvm.jar.build_jar(force=True))", version, WIRE_VERSION)


def admit_all(query_name: str, snapshots: Sequence[OffsetSnapshot]) -> int | None:
    """The default decision: end the batch at the newest snapshot (what plain Spark does)."""
    return len(snapshots) - 1 if snapshots else None


def admit_oldest(query_name: str, snapshots: Sequence[OffsetSnapshot]) -> int | None:
    """End the batch at the oldest pending snapshot: one snapshot per batch."""
    return 0 if snapshots else None


class _JvmDecider:
    """The Py4J callback object implementing ``io.pacer.spark.PacerDecider`` for one query."""

    def __init__(self, handle: RequestHandler, on_stop: StopHandler | None = None) -> None:
        self._handle = handle
        self._on_stop = on_stop
        self.last_request: DecisionRequest | None = None

    def stopped(self, query_name: str, event_json: str) -> None:
        """The JVM: a source run of ``query_name`` stopped (errors are logged, never raised to Spark)."""
        if self._on_stop is None:
            return
        try:
            self._on_stop(StopEvent.from_json(query_name, event_json))
        except Exception:
            logger.exception("format('pacer'): handling the stop of query %r failed", query_name)

    def decide(self, query_name: str, request_json: str) -> str:
        """Answers the JVM: ``{"seq": N, "pool": NAME, "metrics": {...}}``, ``seq`` -1 for no batch now.

        An exception here reaches the JVM, which then admits what is pending without a decision and
        reports that admission with its next request (``failed_open``).
        """
        try:
            request = DecisionRequest.from_json(request_json)
            if request.snapshots:  # a request that only reports progress is not a decision
                self.last_request = request
            decision = self._handle(request)
            index = decision.index
            if decision.error is not None:
                return json.dumps({"seq": -1, "error": decision.error})
            if index is None:
                return json.dumps({"seq": -1, "pool": decision.pool})
            if not isinstance(index, int) or not 0 <= index < len(request.snapshots):
                raise ValueError(
                    f"the decision for query {query_name!r} was {index!r}; it must be None or an "
                    f"index into the {len(request.snapshots)} pending snapshots"
                )
            answer: dict[str, Any] = {"seq": request.snapshots[index].seq, "pool": decision.pool}
            if decision.metrics:
                answer["metrics"] = dict(decision.metrics)
            return json.dumps(answer)
        except Exception:
            logger.exception("format('pacer') decision for query %r failed", query_name)
            raise

    class Java:
        """Py4J: the Java interface this object implements."""

        implements: ClassVar[list[str]] = [f"{jvm.JAVA_PACKAGE}.PacerDecider"]


class PacerBridge:
    """The driver's registrations of decision functions for ``format("pacer")`` queries.

    Creating it builds and loads the JVM side if needed (:func:`pacer_spark.jvm.jar.ensure_loaded`) and
    starts PySpark's Py4J callback server. Its registrations are its own (an owner id in the JVM's
    registry) and prefer the sources of its SparkSession: two bridges, on two sessions or on one,
    never take each other's queries away, and closing one removes only its own registrations. A
    query on a session no bridge was made for is decided by the newest bridge of the SparkContext.

    :param spark: the driver's SparkSession (classic, not Spark Connect).
    :param timeout_s: how long the JVM waits for one decision before it admits without one (and
        reports that admission with its next request).
    """

    def __init__(self, spark: Any, *, timeout_s: float = DEFAULT_DECIDE_TIMEOUT_S) -> None:
        if not timeout_s > 0:
            raise ValueError(f"the decision timeout must be > 0 seconds, got {timeout_s}")
        self._spark = spark
        self.timeout_s = timeout_s
        self.owner = f"bridge-{uuid.uuid4().hex}"
        self.jar = jvm.ensure_loaded(spark)
        callback.start_callback_server(spark)
        self._deciders: dict[str, _JvmDecider] = {}

    @property
    def _registry(self) -> Any:
        return callback.decider_registry(self._spark, jvm.REGISTRY_CLASS)

    def register(self, query_name: str, decide: DecisionFunction = admit_all) -> None:
        """Routes the decisions of query ``query_name`` (``"*"``: every query) to ``decide``.

        Register before the query starts; registering again replaces the function.
        """
        if not query_name:
            raise ValueError(
                "register() needs the query's name: writeStream.queryName(...) or the source's pacer.query option"
            )
        self.register_handler(query_name, lambda request: Decision(  # a report-only request has nothing to decide
            decide(request.query, request.snapshots) if request.snapshots else None))

    def register_handler(self, query_name: str, handle: RequestHandler, on_stop: StopHandler | None = None) -> None:
        """Like :meth:`register`, with a handler that gets the whole request and answers a :class:`Decision`;
        ``on_stop`` hears when a source run of the query stops."""
        if not query_name:
            raise ValueError("register_handler() needs the query's name, or '*' for every query")
        decider = _JvmDecider(handle, on_stop)
        self._deciders[query_name] = decider  # keep the object alive while the JVM holds its proxy
        self._registry.register(self.owner, callback.java_session(self._spark), query_name, decider,
                                int(self.timeout_s * 1000))

    def unregister(self, query_name: str) -> bool:
        """Removes this bridge's function of ``query_name``: its source then admits everything, warning once."""
        self._deciders.pop(query_name, None)
        return bool(self._registry.unregister(self.owner, query_name))

    def close(self) -> None:
        """Unregisters every function this bridge registered (and no other bridge's)."""
        self._deciders.clear()
        self._registry.unregisterOwner(self.owner)

    def last_request(self, query_name: str) -> DecisionRequest | None:
        """The last request with pending snapshots the JVM sent for ``query_name`` (None before the first)."""
        decider = self._deciders.get(query_name)
        return decider.last_request if decider else None

    def decisions(self, query_name: str) -> int:
        """How many decisions the Python side answered for ``query_name`` (JVM-wide count)."""
        return int(self._registry.decisions(query_name))

    def fallback_warnings(self, query_name: str) -> int:
        """How many sources of ``query_name`` warned that they admit everything (once each)."""
        return int(self._registry.fallbackWarnings(query_name))
