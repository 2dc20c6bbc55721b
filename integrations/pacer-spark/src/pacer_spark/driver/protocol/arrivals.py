"""How a ``format("pacer")`` query's snapshots arrive in the Controller: dated and sized.

A snapshot is dated by its data's own time where the source has one and ``pacer.arrival`` is ``source`` (and the
time is believable), else by the JVM's look that first saw it; its bytes are the files' sizes or its rows times the
query's measured bytes per row (:data:`DEFAULT_ROW_BYTES` before any batch measured them).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from pacer import Dataset
from pacer_spark.driver.books import Books
from pacer_spark.driver.protocol.state import DEFAULT_MAX_AGE_S, PacedQuery, SourceRun, snapshot_id
from pacer_spark.jvm.decider import DecisionRequest, OffsetSnapshot, snapshot_spans
from pacer_spark.options import parse_seconds

if TYPE_CHECKING:
    from pacer_spark.driver.loop import Driver

log = logging.getLogger("pacer_spark.driver.protocol.arrivals")

#: Bytes per row assumed for a file source's snapshot before any batch measured it.
DEFAULT_ROW_BYTES = 64


class Arrivals:
    """Hands a query's snapshots to the session's Controller as datasets (module docstring)."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    def arrive(self, books: Books, q: PacedQuery, request: DecisionRequest) -> None:
        """New snapshots (up to the read limit) arrive, each dated by :func:`~pacer_spark.jvm.decider.snapshot_spans`
        (after :meth:`dated`)."""
        src = q.sources[request.run]
        now = min(time.time(), request.now)
        dated = tuple(self.dated(books, q, snap, now) if snap.seq not in src.arrived else snap for snap in request.snapshots)
        spans = snapshot_spans(dated, request.admissible, now)
        for snapshot, (oldest, newest) in zip(dated, spans, strict=False):
            if snapshot.seq not in src.arrived:
                self.arrive_one(books, q, src, snapshot, arrival=oldest, newest=newest)

    def dated(self, books: Books, q: PacedQuery, snapshot: OffsetSnapshot, now: float) -> OffsetSnapshot:
        """``snapshot`` as the query dates it: its source time kept where ``pacer.arrival`` is ``source`` and the time
        is believable; else dated when the JVM first saw it (zero, in the future, or older than the query's start by
        more than ``pacer.arrival.maxAge``: a producer's event time, a copy that kept old mtimes), counted and
        warned once. A source-timed query's snapshot that came without its time (reading it failed) is counted."""
        if q.options.get("pacer.arrival", "source").strip().lower() == "observed":
            return replace(snapshot, source_time=None, source_newest=None)
        if snapshot.source_time is not None and not q.source_timed:
            q.source_timed = True  # the source dates its data: the report says so from now on
            books.dated_by(q.query_id, "source-time")
        if snapshot.source_time is None:
            if q.source_timed:
                q.source_time_missing += 1
                self.driver.warn_once(f"undated-{q.query_id}", "query %r: a snapshot came without its data's "
                                           "own time (reading it failed); such snapshots are dated when first seen, "
                                           "counted in the report's source_time_missing", q.query_id)
            return snapshot
        max_age = parse_seconds(q.options.get("pacer.arrival.maxAge")) or DEFAULT_MAX_AGE_S
        believable = 0 < snapshot.source_time <= now + 1.0 and snapshot.source_time >= q.seen_at - max_age
        if believable:
            return snapshot
        q.source_time_clamped += 1
        self.driver.warn_once(f"clamped-{q.query_id}", "query %r: a snapshot's source time %.3f is not an "
                                   "arrival (zero, in the future, or older than the query's start by more than "
                                   "pacer.arrival.maxAge, %.0f s): dated when pacer saw it. Set pacer.arrival=observed "
                                   "for a source whose times are event times", q.query_id, snapshot.source_time, max_age)
        return replace(snapshot, source_time=None, source_newest=None)

    def arrive_one(self, books: Books, q: PacedQuery, src: SourceRun, snapshot: OffsetSnapshot, *, arrival: float | None = None,
                newest: float | None = None) -> None:
        if arrival is None:  # an admission the source reported: dated as any other snapshot
            snapshot = self.dated(books, q, snapshot, time.time())
        dataset = self.dataset(q, src, snapshot, arrival=arrival, newest=newest)
        if q.engine_profile is not None and snapshot.rows and snapshot.bytes is not None:
            self.take_profile(books, q, snapshot.bytes / snapshot.rows)
        books.arrive(q.query_id, dataset)
        src.arrived[snapshot.seq] = dataset.id

    @staticmethod
    def take_profile(books: Books, q: PacedQuery, bytes_per_row: float) -> None:
        """The query's ``pacer.engineProfile`` becomes its prior in the bytes its source measures a row in (Kafka's
        estimate of a record from its schema is not pacer-gen's of a row: :meth:`EngineProfile.in_bytes_of`); a
        model that already measured batches (restored with the checkpoint) keeps its own."""
        assert q.engine_profile is not None
        profile, q.engine_profile = q.engine_profile.in_bytes_of(bytes_per_row), None
        try:
            books.take_engine_profile(q.query_id, profile)
        except ValueError as exc:
            log.info("query %r: pacer.engineProfile not taken (%s): its model goes on from what it measured",
                     q.query_id, exc)

    def dataset(self, q: PacedQuery, src: SourceRun, snapshot: OffsetSnapshot, *, arrival: float | None = None,
                 newest: float | None = None) -> Dataset:
        row_bytes = q.read_bytes / q.read_rows if q.read_rows and q.read_bytes else DEFAULT_ROW_BYTES
        nbytes = snapshot.bytes if snapshot.bytes is not None else int((snapshot.rows or 0) * row_bytes)
        rows = snapshot.rows if snapshot.rows is not None else round(nbytes / max(row_bytes, 1.0))
        return Dataset(snapshot_id(src.run, snapshot.seq), snapshot.data_arrival if arrival is None else arrival,
                       max(0, nbytes), max(0, rows), handle=snapshot.offset, newest=newest)
