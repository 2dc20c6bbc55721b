"""The admission service of ``pacer-gen``/``pacer-files`` queries: their sources' driver-side state.

A source's reader asks over the RPC (:class:`~pacer_spark.rpc.ControllerServer`) for the end offset of
its next batch (:meth:`AdmissionService.handle`). Here every dataset that has arrived (generated
traffic up to now, or the files the reader listed) is handed to the Controller, the query's
admission strategy polls, and the answer is the admitted batch's end and the offsets it shed. A batch
Spark replays from its offset log after a restart never asks: its ``foreachBatch`` finds no admitted
batch, and :meth:`AdmissionService.claim` admits exactly the replayed datasets (:class:`ReplayGuard`),
described from the source's plan or its manifest, less those its end offset records as shed.
A ``pacer-files`` manifest lives in the checkpoint :meth:`AdmissionService.checkpointed` learns from
``start`` before Spark starts the query; the reader asks where (``op: manifest``) before it first reads it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.query import StreamingQuery

from pacer import Controller, Dataset, MicroBatch
from pacer.summary import StreamingSummary
from pacer_spark import spark_jvm, telemetry
from pacer_spark.enact import enact_placement
from pacer_spark.files_source import FILES_FORMAT, Manifest, ignored_name, manifest_in_checkpoint
from pacer_spark.gate import Gate
from pacer_spark.options import GenPlan
from pacer_spark.replay import ReplayGuard
from pacer_spark.sources import GEN_FORMAT, shed_in

if TYPE_CHECKING:
    from pacer_spark.driver import Driver

log = logging.getLogger("pacer_spark")


@dataclass
class SourceState:
    """Driver-side state of one query's ``pacer-gen``/``pacer-files`` source.

    :ivar next_index: the next dataset offset to hand to the Controller (None before the reader asked).
    :ivar admitted_end: the end offset of the last admitted batch.
    :ivar handle: the streaming query, once started.
    :ivar observe_only: Spark's own trigger decides its batches; pacer only observes.
    :ivar listed: a ``pacer-files`` reader has listed its folder at least once.
    :ivar manifest: a ``pacer-files`` manifest: option ``manifest``, or in the checkpoint once
        :meth:`AdmissionService.checkpointed` knows it (None: ``default_manifest``, for a plain ``writeStream``).
    """

    query_id: str
    fmt: str
    options: dict[str, str]
    gen: GenPlan | None = None
    files: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_index: int | None = None
    admitted_end: int | None = None
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    handle: StreamingQuery | None = None
    observe_only: bool = False
    dead: bool = False
    error: str | None = None
    gate_wait_s: StreamingSummary = field(default_factory=StreamingSummary)
    metrics_s: StreamingSummary = field(default_factory=StreamingSummary)
    durations: telemetry.DurationAverages = field(default_factory=telemetry.DurationAverages)
    shed: list[int] = field(default_factory=list)
    spark_batches: int = 0
    listed: bool = False
    manifest: Path | None = None
    default_manifest: Path | None = None

    def manifest_path(self) -> Path:
        """Where this ``pacer-files`` source records its files' offsets (see :attr:`manifest`)."""
        path = self.manifest or self.default_manifest
        assert path is not None, "a pacer-files source always has a default manifest"
        return path

    def dataset(self, index: int) -> Dataset | None:
        """The dataset at offset ``index``: rebuilt from the traffic plan, or the file the reader told about."""
        if self.gen is not None:
            return self.gen.dataset(self.query_id, index)
        entry = self.files.get(index)
        if entry is None:
            return None
        return Dataset(f"{index}:{entry['name']}", float(entry["arrival"]), int(entry["bytes"]), int(entry["rows"]),
                       handle=index)

    def drained(self) -> bool:
        """Whether every dataset of the source was handed to the Controller (generated, or in its folder)."""
        if self.gen is not None:
            return self.next_index is not None and self.next_index >= len(self.gen.arrivals())
        known = max(self.files) + 1 if self.files else (self.next_index or 0)
        if not self.listed or known == 0 or known < self.files_waiting():
            return False  # not listed yet, no file yet, or files the reader has not told about
        return (self.next_index or 0) >= known

    def files_waiting(self) -> int:
        """Datasets waiting in a ``pacer-files`` folder right now (what its reader will list)."""
        try:
            return sum(1 for e in os.scandir(self.options["path"]) if e.is_file() and not ignored_name(e.name))
        except FileNotFoundError:
            return 0

    def quarantined(self) -> int:
        """Rows a ``pacer-files`` source set aside as malformed."""
        directory = Path(self.options.get("quarantine") or Path(self.options["path"]) / "_pacer_quarantine")
        if not directory.is_dir():
            return 0
        return sum(len(p.read_text().splitlines()) for p in directory.glob("*.bad"))


@dataclass(eq=False)
class AdmissionService:
    """Admits the batches of a session's ``pacer-gen``/``pacer-files`` queries (module docstring): the RPC front end
    of the session's :class:`~pacer_spark.driver.Driver`, registered with it as an :class:`~pacer_spark.driver.Owner`.

    :param driver: the session's driver: its Controller (every call under its lock), batch completion (a batch
        waiting for its progress is completed here first), replay guard and gate (an admitted batch waits for its
        turn there, in the reader's ``latestOffset`` before Spark plans it, as a ``format("pacer")`` batch does; its
        pool, which only the stream thread can take, is set in ``foreachBatch``).
    :param rapids: whether the RAPIDS Accelerator is loaded (placements are enacted).
    :ivar sources: query id -> its source's state.
    :ivar gated: batches that passed the gate at admission.
    :ivar rpc_s: seconds each RPC request took to handle (the gate's wait left out); ``rpc_rtt_s``: the
        readers' round trips.
    """

    driver: Driver
    rapids: bool
    gated: set[str] = field(default_factory=set, init=False)
    sources: dict[str, SourceState] = field(default_factory=dict, init=False)
    rpc_s: StreamingSummary = field(default_factory=StreamingSummary, init=False)
    rpc_rtt_s: StreamingSummary = field(default_factory=StreamingSummary, init=False)
    polls: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.controller: Controller = self.driver.controller
        self.cond: threading.Condition = self.driver.cond
        self.engine: telemetry.BatchCompletion = self.driver.engine
        self.gate: Gate = self.driver.gate
        self.warn_once = self.gate.warn_once
        self.excluded = self.driver.excluded
        self.driver.register(self)

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` reads a ``pacer-gen``/``pacer-files`` source of this session."""
        return query_id in self.sources

    def dead(self, query_id: str) -> bool:
        """Whether the query's stream terminated."""
        source = self.sources.get(query_id)
        return source is not None and source.dead

    def running(self, batch_id: str) -> bool:
        """Never: a pacer source's batch completes from its sink (:class:`~pacer_spark.sink_gate.SinkGate`)."""
        return False

    def executed_metrics(self, query_id: str, done: telemetry.SinkDone,
                         progress: telemetry.TriggerProgress) -> Sequence[Any]:
        """None here: the sink gate reads a pacer source's operator metrics in ``foreachBatch``."""
        return []

    def add(self, query_id: str, fmt: str, options: Mapping[str, str], *, partitions: int,
            manifest: Path) -> dict[str, str]:
        """Track a new source of ``query_id``; its options with the defaults filled in.

        :param partitions: a ``pacer-gen`` source's default ``numPartitions``.
        :param manifest: a ``pacer-files`` manifest's place while its checkpoint is unknown (see :meth:`checkpointed`).
        :raises ValueError: for an unknown format or a ``pacer-files`` source without ``path``.
        """
        opts = dict(options)
        if fmt == GEN_FORMAT:
            opts.setdefault("start", repr(time.time()))
            opts.setdefault("numPartitions", str(partitions))
            source = SourceState(query_id, fmt, opts, gen=GenPlan.from_options(opts))
        elif fmt == FILES_FORMAT:
            if "path" not in opts:
                raise ValueError("pacer-files needs path=<directory to watch>")
            source = SourceState(query_id, fmt, opts, default_manifest=manifest)
            if opts.get("manifest"):
                source.manifest = Path(opts["manifest"])
        else:
            raise ValueError(f"unknown pacer source {fmt!r}; use {GEN_FORMAT!r} or {FILES_FORMAT!r}")
        with self.cond:
            if query_id in self.sources and query_id in self.controller.query_ids():
                # the query restarts in this session: its new reader offers again, from the committed offset, what
                # the Controller still holds from the last run (observed, never admitted), so it is taken back
                self.controller.withdraw(query_id)
            self.sources[query_id] = source
        return opts

    def checkpointed(self, query_id: str, checkpoint: str) -> None:
        """The query of ``query_id`` starts on ``checkpoint`` (before Spark starts it): a ``pacer-files`` source
        without option ``manifest`` keeps its manifest in it, so the manifest moves with the checkpoint."""
        with self.cond:
            source = self.sources[query_id]
            if source.fmt == FILES_FORMAT and not source.options.get("manifest"):
                source.manifest = manifest_in_checkpoint(checkpoint, legacy=source.default_manifest)
                if source.manifest is None:
                    self.warn_once(f"manifest-{query_id}", "query %r: checkpoint %s is not a local path; pacer-files "
                                   "keeps its manifest at %s (option manifest= keeps it elsewhere)", query_id,
                                   checkpoint, source.default_manifest)

    def started(self, query_id: str, handle: StreamingQuery) -> None:
        """The query of ``query_id``'s source started as ``handle``."""
        with self.cond:
            source = self.sources[query_id]
            source.handle = handle
            source.dead = False

    # ------------------------------------------------------------------ the RPC

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer a reader's request (``op: latest``): ``{"end": offset, "shed": [offsets]}``, once an admitted
        batch's turn has come."""
        t0 = time.perf_counter()
        try:
            if request.get("op") == "manifest":
                with self.cond:
                    return {"manifest": str(self._source(str(request["query"])).manifest_path())}
            if request.get("op") != "latest":
                raise ValueError(f"unknown request {request.get('op')!r}")
            until = request.get("until")
            query_id = str(request["query"])
            reply, admitted = self._latest(query_id, int(request["start"]), request.get("new") or (),
                                           request.get("rtt"), None if until is None else int(until))
        finally:
            self.rpc_s.add(time.perf_counter() - t0)
        if admitted is not None:  # outside the lock: the gate waits on the session's condition
            turn = self.gate.pass_batch(admitted.id, excluded=self.excluded)
            with self.cond:
                self.gated.add(admitted.id)
                self.sources[query_id].gate_wait_s.add(turn.waited_s)
        return reply

    def _latest(self, query_id: str, start: int, new: Sequence[Mapping[str, Any]], rtt: float | None,
                until: int | None) -> tuple[dict[str, Any], MicroBatch | None]:
        """The reply, and the batch admitted now that must pass the gate (None: none, or Spark's own trigger)."""
        with self.cond:
            source = self._source(query_id)
            if rtt is not None:
                self.rpc_rtt_s.add(float(rtt))
            source.listed = True
            for entry in new:
                source.files[int(entry["index"])] = dict(entry)
            if source.next_index is None or source.next_index < start:
                source.next_index = start  # datasets before ``start`` were processed by an earlier run
            waiting = self.engine.waiting_spark_batch(query_id)  # its trigger ended: Spark holds its progress
            if waiting is not None and source.handle is not None:
                progress = spark_jvm.query_progress(source.handle, waiting)
                if progress is not None:
                    self.engine.on_progress(progress, event=False)
            stale = self.engine.expire(query_id, time.time())  # its trigger never reported: completed as at its sink
            if stale is not None:
                self.warn_once(f"no-progress-{query_id}", "query %r: no progress event %.0f s after batch %s's "
                               "sink; completed without its engine time", query_id, self.engine.timeout_s,
                               stale.batch_id)
            if source.admitted_end is not None and start < source.admitted_end:
                # another reader of the same query (a self-join), or a repeated ask: same answer
                return {"end": source.admitted_end, "shed": source.shed}, None
            if source.handle is None:
                self._committed_unwatched(source)
            self._arrive_available(source, time.time(), until)
            self.polls += 1
            # availableNow (``until``): nothing more will come and an empty answer ends the run: drain what is held
            batch = self.driver.admit(query_id, drain=until is not None)
            if batch is None:
                return {"end": start}, None
            self._admitted(source, batch)
            taken = {int(d.handle) for d in batch.datasets}  # the rest of [start, end) was shed: not to be read
            source.shed = [i for i in range(start, source.admitted_end or start) if i not in taken]
            return {"end": source.admitted_end, "shed": source.shed}, None if source.observe_only else batch

    def _source(self, query_id: str) -> SourceState:
        """The source of ``query_id`` (lock held); KeyError for a query this session does not know."""
        source = self.sources.get(query_id)
        if source is None or query_id not in self.controller.query_ids():
            raise KeyError(f"query {query_id!r} is not registered with this pacer session")
        return source

    def _committed_unwatched(self, source: SourceState) -> None:
        """Complete the in-flight batch of a query started with a plain ``writeStream`` (lock held).

        Without :meth:`pacer_spark.PacerSession.start` no gate sees its batches run and no progress event
        is routed to it; but Spark asks its source for the next batch only once the last one committed,
        so that batch completed by now (its engine time unknown). Without this, the query stalled after
        its first batch.
        """
        q = self.controller.query(source.query_id)
        if q.in_flight is None:
            return
        self.warn_once(f"unwatched-{source.query_id}",
                       "query %r reads a pacer source but was not started with PacerSession.start: a batch "
                       "completes when Spark asks for the next one (no scheduling gate, no engine time)",
                       source.query_id)
        self.controller.start(q.in_flight)
        self.controller.complete(q.in_flight, completed_at=time.time())
        self.completed(source.query_id, q.in_flight)

    def _arrive_available(self, source: SourceState, now: float, until: int | None = None) -> None:
        """Hand the Controller every dataset that has arrived and that it has not seen (under availableNow,
        none at or past ``until``: the reader will not read them in this run)."""
        assert source.next_index is not None
        end = source.gen.available_end(now) if source.gen is not None else max(source.files, default=-1) + 1
        if until is not None:
            end = min(end, until)
        while source.next_index < end:
            dataset = source.dataset(source.next_index)
            if dataset is None:
                break
            self.controller.arrive(source.query_id, dataset)
            source.next_index += 1

    def _admitted(self, source: SourceState, batch: MicroBatch) -> None:
        indices = [int(d.handle) for d in batch.datasets]
        begin, end = min(indices), max(indices) + 1
        source.ranges[batch.id] = (begin, end)
        source.admitted_end = end
        enact_placement(self.controller, batch, source.handle, rapids=self.rapids)
        self.cond.notify_all()

    # ------------------------------------------------------------------ foreachBatch: the batch Spark runs

    def claim(self, query_id: str, spark_batch_id: int) -> str | None:
        """The pacer batch Spark's batch ``spark_batch_id`` runs: the admitted one, or a replay admitted now.

        :return: None for a no-data batch (a watermark's) or one pacer did not form.
        """
        with self.cond:
            source = self.sources[query_id]
            source.spark_batches += 1
            q = self.controller.query(query_id)
            if q.in_flight is not None:
                # admitted for this trigger: not started yet, or started by the gate at admission and its sink
                # not run yet (one that ran waits only for its progress: this is a batch pacer did not form)
                fresh = not q.in_flight_started or (q.in_flight in self.gated and not self.engine.awaiting(q.in_flight))
                return q.in_flight if fresh else None
        # No admitted batch: a replay after restart, or a no-data batch. The offset log tells which.
        span = _offset_range(source, spark_batch_id)
        with self.cond:
            if span is None or span[1] <= span[0]:
                return None
            begin, end, shed = span
            if source.next_index is None or source.next_index < begin:
                source.next_index = begin
            arrived = 0
            while source.next_index < end:
                if source.next_index in shed:  # shed by the first attempt: the replay does not read it either
                    source.next_index += 1
                    continue
                dataset = source.dataset(source.next_index)
                if dataset is None:
                    _load_manifest(source)
                    dataset = source.dataset(source.next_index)
                if dataset is None:
                    log.warning("query %r: cannot describe dataset %d of replayed batch %d; not tracked",
                                query_id, source.next_index, spark_batch_id)
                    return None
                self.controller.arrive(query_id, dataset)
                arrived += 1
                source.next_index += 1
            batch = self.driver.force(query_id, arrived) if arrived else None
            if batch is None:
                return None
            self._admitted(source, batch)
            log.info("query %r: replaying batch %d (datasets %d..%d) from the checkpoint", query_id,
                     spark_batch_id, begin, end - 1)
            return batch.id

    def completed(self, query_id: str, batch_id: str) -> None:
        """The batch completed (lock held): forget its offsets."""
        self.gated.discard(batch_id)
        source = self.sources.get(query_id)  # None for a format("pacer") query
        if source is not None:
            source.ranges.pop(batch_id, None)

    # ------------------------------------------------------------------ reading

    def drained(self) -> bool:
        """True when every source is done: generated traffic fully processed, no file dataset waiting."""
        with self.cond:
            for query_id, source in self.sources.items():
                if source.dead:
                    if source.error:
                        return False
                    continue
                q = self.controller.query(query_id)
                if q.in_flight is not None or q.buffered_count or not source.drained():
                    return False
            return True

    def failed(self) -> bool:
        """Whether a source's query terminated with an error."""
        return any(s.dead and s.error for s in self.sources.values())

    def stop(self, timeout: float) -> None:
        """Mark every source dead (no batch waits for them) and stop each query, between batches when it can."""
        with self.cond:
            for source in self.sources.values():
                source.dead = True
            self.cond.notify_all()
        for source in self.sources.values():
            handle = source.handle
            if handle is None or not handle.isActive:
                continue
            limit = time.time() + timeout
            try:
                while time.time() < limit and handle.isActive and handle.status.get("isTriggerActive"):
                    time.sleep(0.05)
                handle.stop()
            except Exception:  # already failing or stopped
                log.debug("stopping %s", source.query_id, exc_info=True)


def _load_manifest(source: SourceState) -> None:
    """Describe a ``pacer-files`` source's datasets from its manifest (a replay after a restart)."""
    if source.fmt == FILES_FORMAT:
        for entry in Manifest(source.manifest_path()).entries:
            source.files.setdefault(entry.index, entry.as_json())


def _offset_range(source: SourceState, spark_batch_id: int) -> tuple[int, int, frozenset[int]] | None:
    """``(start, end, shed)``: the dataset offsets of a Spark batch, from the query's offset log, and the datasets
    its end offset records as shed."""
    if source.handle is None:
        return None
    logged = spark_jvm.logged_offsets(source.handle, spark_batch_id)
    if logged is None:  # an internal API changed: pacer then just does not track this batch
        return None
    begin, end = logged
    if end is None or begin is None:
        return None
    return int(begin["index"]), int(end["index"]), shed_in(end)


__all__ = ["AdmissionService", "ReplayGuard", "SourceState"]
