"""The source is the truth: a ``format("pacer")`` query's state rebuilt from what its sources report.

Before the driver decides for an ask (the protocol and the state machine of one query: pacer-spark's README), it
takes what the asking source reports: admissions it made without an answer become exactly the batch Spark ran (a
batch the driver decided for that Spark batch is taken back), the batch in flight completes from its trigger's
progress (unless a source admitted into it unanswered: then that source's report completes it), a batch Spark ran
from its offset log before the run's first ask is accounted once, and snapshots the source no longer holds that it
could not report are accounted as run. At a source's stop the same truth decides what ran and what is given back.

A restart heard before the previous run's stop (the JVM gave up waiting on it) decides from what the new run says
(:meth:`SourceTruth.restart`), and that stop event, when it comes, settles what the earlier run had Spark run without
an answer, once (:meth:`SourceTruth.old_stop`; the order of runs: :mod:`pacer_spark.driver.protocol.runs`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pacer import Dataset
from pacer_spark.driver.books import Books
from pacer_spark.driver.completion import SinkDone
from pacer_spark.driver.protocol import model_store
from pacer_spark.driver.protocol.arrivals import DEFAULT_ROW_BYTES, Arrivals
from pacer_spark.driver.protocol.state import MAX_PARKED, InFlight, Orphan, PacedQuery, Parked, SourceRun, snapshot_id
from pacer_spark.jvm.decider import DecisionRequest, FailedOpen, StopEvent
from pacer_spark.jvm.progress import TriggerProgress

if TYPE_CHECKING:
    from pacer_spark.driver.loop import Driver

log = logging.getLogger("pacer_spark.driver.protocol.paced")


class SourceTruth:
    """Rebuilds each ``format("pacer")`` query of a session from its sources' reports (module docstring).

    :ivar batch_query: pacer batch id -> query id, for every batch whose trigger has not reported yet.
    """

    def __init__(self, driver: Driver, arrivals: Arrivals) -> None:
        self.driver = driver
        self.arrivals = arrivals
        self.batch_query: dict[str, str] = {}

    def take_reports(self, books: Books, q: PacedQuery, request: DecisionRequest, *, behind: bool = False) -> bool:
        """Rebuild the query's state from what the asking source reports before any decision (the protocol in
        ``integrations/pacer-spark/README.md``): the admissions it made without an answer, the end of the batch in
        flight, batches Spark replayed from its offset log, and its pending snapshots. An ask that reached the
        driver after Spark went on (``behind``) reports only its records and progress: its pending snapshots are what
        the source held then. Whether the ask is answered already (another source of the query asked first in this
        Spark batch: its part of that batch stands)."""
        src = q.sources[request.run]
        by_batch = self.progress(q, request.progress)
        q.failed_open_lost += request.failed_open_dropped
        for record in request.failed_open:
            self._failed_open(books, q, src, record, by_batch)
        if not behind:
            self._settle(books, q, src, request, by_batch)
        self._settle_ahead(books, q, by_batch)
        if request.first_batch_id >= 0:
            q.first_batch = request.first_batch_id
        self._replays(books, q, by_batch)
        if not behind:
            self._unreported(books, q, src, {snap.seq for snap in request.snapshots})
        self.settle_orphans(books, q)
        return q.inflight is not None and q.inflight.spark_batch_id == request.batch_id

    def _replays(self, books: Books, q: PacedQuery, by_batch: dict[int, TriggerProgress]) -> None:
        """Account the batches Spark ran before the run's first ask (it re-runs the last logged batch at a start
        without asking any source), each once."""
        for p in sorted(by_batch.values(), key=lambda p: p.batch_id):
            if p.rows > 0 and (p.run_id, p.batch_id) not in q.accounted and q.inflight is None and \
                    (q.first_batch is None or p.batch_id < q.first_batch):
                self._replayed(books, q, p)

    @staticmethod
    def progress(q: PacedQuery, entries: tuple[dict[str, Any], ...]) -> dict[int, TriggerProgress]:
        """The progress entries of the query's current Spark run, by Spark batch id, with the batch in flight's
        progress heard before (kept while a source's report of what it admitted into that batch is awaited)."""
        by_batch = SourceTruth._ended(entries, q.spark_run_id)
        if q.inflight_progress is not None:
            by_batch.setdefault(q.inflight_progress.batch_id, q.inflight_progress)
        return by_batch

    @staticmethod
    def _ended(entries: tuple[dict[str, Any], ...], spark_run_id: str | None) -> dict[int, TriggerProgress]:
        """The progress entries of Spark run ``spark_run_id`` whose trigger ran a batch, by Spark batch id. An idle
        trigger's entry (Spark keeps one after 10 s without data, under the id of the batch still to come) says
        nothing of a batch: taken for one, it would end the batch pacer admits next under that id."""
        progress = (TriggerProgress.from_json(p) for p in entries if "batchId" in p)
        return {p.batch_id: p for p in progress if p.run_id in (None, spark_run_id) and p.executed}

    def _settle(self, books: Books, q: PacedQuery, src: SourceRun, request: DecisionRequest,
                by_batch: dict[int, TriggerProgress]) -> None:
        """The batch in flight, against the asking source: complete it when its trigger reported; take back this
        source's part when Spark went on to a later batch while the source still holds that part pending (it never
        admitted it: the answer never reached it)."""
        inflight = q.inflight
        if inflight is None:
            return
        if 0 <= inflight.trigger < request.trigger and request.batch_id == inflight.spark_batch_id:
            # a later trigger of the same Spark batch: the one that formed it ran no batch (no source admitted any
            # of it, or Spark would have gone on to the next batch id), so Spark never ran it
            log.info("query %r: Spark batch %d's trigger ran nothing of the batch pacer admitted; taken back",
                     q.query_id, inflight.spark_batch_id)
            self._retract(books, q)
            return
        progress = by_batch.get(inflight.spark_batch_id)
        if progress is not None and not progress.unanswered:
            self.complete(books, q, progress, event=False)
            return
        if progress is not None:  # a source admitted otherwise: its own ask reports what, and completes it
            q.inflight_progress = progress
            return
        pending = {snap.seq for snap in request.snapshots}
        if request.batch_id != inflight.spark_batch_id and inflight.seqs(src.run) & pending:
            log.warning("query %r: Spark batch %d ran without the part pacer admitted from source %s (the answer "
                        "never reached it); that part waits again", q.query_id, inflight.spark_batch_id, src.run)
            self._rebuild(books, q, {**inflight.parts, src.run: frozenset()}, inflight.spark_batch_id)

    def drain_ahead(self, books: Books, q: PacedQuery, request: DecisionRequest) -> int | None:
        """Under a drain, an ask with data for a later Spark batch than the one in flight: that batch ran (Spark went
        on) but is not settled yet (its trigger ended with ``pacerUnanswered`` and the source that admitted into it
        without an answer asks after this one, or its progress has not come): no batch can be formed before that,
        and a "wait" would end the drain with this source's data held. The source admits all it may; the driver
        keeps that admission as the source's own record of one made without a decision (:attr:`PacedQuery.ahead`),
        accounted as soon as the earlier batch is settled (:meth:`_settle_ahead`), or when the run closes. The index
        of its last snapshot admitted (None: no batch of an earlier Spark batch is in flight, or nothing is
        admissible)."""
        inflight = q.inflight
        end = min(len(request.snapshots), request.admissible)
        if inflight is None or not 0 <= inflight.spark_batch_id < request.batch_id or end <= 0:
            return None
        self.arrivals.arrive(books, q, request)
        reason = f"drained while Spark batch {inflight.spark_batch_id} waited for a source's report"
        q.ahead.setdefault(request.run, []).append(FailedOpen(request.batch_id, reason, request.snapshots[:end]))
        while len(q.ahead) > MAX_PARKED:
            log.warning("query %r: source %s never reported again; what it admitted ahead is forgotten", q.query_id,
                        next(iter(q.ahead)))
            q.ahead.pop(next(iter(q.ahead)))
        log.info("query %r: Spark batch %d waits for a source's report; source %s admits its %d snapshots ahead of it "
                 "(a drain)", q.query_id, inflight.spark_batch_id, request.run, end)
        return end - 1

    def _settle_ahead(self, books: Books, q: PacedQuery, by_batch: dict[int, TriggerProgress]) -> bool:
        """Account what the current run's sources admitted ahead (:meth:`drain_ahead`), oldest Spark batch first, as
        soon as no earlier batch is in flight: each as the admission its source made without a decision. Whether
        any was."""
        due = sorted(((record.batch_id, run) for run, records in q.ahead.items() if run in q.sources
                      for record in records))
        settled = False
        for batch_id, run in due:
            if q.inflight is not None and q.inflight.spark_batch_id < batch_id:
                break  # an earlier batch still waits for its report
            record = q.ahead[run].pop(0)
            if not q.ahead[run]:
                del q.ahead[run]
            self._failed_open(books, q, q.sources[run], record, by_batch, ahead=True)
            settled = True
        return settled

    def own_records(self, q: PacedQuery, run: str, reported: tuple[FailedOpen, ...]) -> tuple[FailedOpen, ...]:
        """An earlier run's source's records of admissions without a decision, from its late stop event: those it
        reports and those the driver kept for it (:meth:`drain_ahead`; normally settled when the run closed) that it
        does not, by Spark batch."""
        told = {record.batch_id for record in reported}
        kept = [record for record in q.ahead.pop(run, ()) if record.batch_id not in told]
        return tuple(sorted((*reported, *kept), key=lambda record: record.batch_id))

    def _failed_open(self, books: Books, q: PacedQuery, src: SourceRun, record: FailedOpen,
                     by_batch: dict[int, TriggerProgress], *, ahead: bool = False) -> None:
        """The source admitted ``record``'s snapshots in Spark batch ``record.batch_id`` without an answer (or, as
        the driver answered, ``ahead`` of an earlier batch's report): that is what Spark ran. A decision the driver
        made for that batch that never reached the source is taken back; an earlier batch still in flight ran
        (Spark went on) and completes. Idempotent: the source reports a record until an answer reaches it, and an
        answer can be lost after the driver acted on it."""
        key = (src.run, record.batch_id)
        if key in q.reconciled:
            return
        q.reconciled.add(key)
        seqs = frozenset(snap.seq for snap in record.snapshots)
        if not ahead:
            q.failed_open += 1
            log.warning("query %r: Spark batch %d was admitted without pacer's decision (%s); accounted from the "
                        "source's report (%d snapshots)", q.query_id, record.batch_id, record.reason, len(seqs))
        inflight = q.inflight
        later: InFlight | None = None
        if inflight is not None and inflight.spark_batch_id == record.batch_id:
            parts = {**inflight.parts, src.run: seqs}  # what Spark read from this source, beside the others' parts
        else:
            if inflight is not None and 0 <= record.batch_id < inflight.spark_batch_id:
                later = inflight  # decided after this record's batch ran (its source never reached the driver)
                self._retract(books, q)
            elif inflight is not None:  # an earlier batch: Spark went on to this one, so that one ran
                self._finish(books, q, by_batch.get(inflight.spark_batch_id))
            parts = {src.run: seqs}
        done = {snap.seq for snap in record.snapshots if books.finished(
            q.query_id, snapshot_id(src.run, snap.seq))}
        if done:  # completed already as the batch decided for them (the same snapshots): accounted once
            parts[src.run] = seqs - done
        for snap in record.snapshots:
            if snap.seq not in src.arrived and snap.seq not in done:
                self.arrivals.arrive_one(books, q, src, snap)
        self._rebuild(books, q, parts, record.batch_id)
        progress = by_batch.get(record.batch_id)
        if progress is not None:
            self.complete(books, q, progress, event=False)
        if later is not None:  # the batch decided after it is in flight again, less what this source read here
            if q.inflight is not None:
                self._finish(books, q, None)
            self._rebuild(books, q, {**later.parts, src.run: later.seqs(src.run) - seqs}, later.spark_batch_id)

    def join(self, books: Books, q: PacedQuery, request: DecisionRequest) -> bool:
        """A drain (``availableNow``, ``processAllAvailable()``, ``Trigger.Once``): the asking source's held snapshots
        join the batch another source of the query formed in this Spark batch, so that this trigger reads every
        source's data as plain Spark would (asked after the batch was formed, the source would otherwise hold its
        part to a later trigger, which a drain may never run). Whether anything joined."""
        inflight = q.inflight
        assert inflight is not None and inflight.spark_batch_id == request.batch_id
        src = q.sources[request.run]
        joining = frozenset(src.arrived) - inflight.seqs(src.run)
        if not joining:
            return False
        self._rebuild(books, q, {**inflight.parts, src.run: inflight.seqs(src.run) | joining}, inflight.spark_batch_id,
                      taken_back=False, trigger=inflight.trigger)
        return True

    def _rebuild(self, books: Books, q: PacedQuery, parts: dict[str, frozenset[int]], spark_batch_id: int, *,
                 taken_back: bool = True, trigger: int = -1) -> None:
        """Make the batch in flight for ``spark_batch_id`` exactly ``parts`` (what the sources really admitted):
        the driver's own batch, if any, is taken back first (``taken_back``: counted so, as Spark never ran it; a
        batch only grown by a joining source is not); no batch when ``parts`` is empty."""
        if q.inflight is not None and q.inflight.spark_batch_id == spark_batch_id:
            self._retract(books, q, counted=taken_back)
        parts = {run: seqs for run, seqs in parts.items() if seqs}
        if not parts:
            return
        ids = [q.sources[run].arrived[seq] for run, seqs in parts.items() for seq in sorted(seqs)]
        batch = books.admit_exactly(q.query_id, ids)
        q.forced += taken_back
        books.start(batch.id)
        self.driver.sink_done(q.query_id, SinkDone(batch.id, spark_batch_id, time.time(),
                                                                    running=True))
        self.batch_query[batch.id] = q.query_id
        q.inflight = InFlight(batch.id, spark_batch_id, parts, trigger)

    def _retract(self, books: Books, q: PacedQuery, *, counted: bool = True) -> None:
        """Take back the batch in flight: Spark never ran it as admitted (``counted`` in the query's ``retracted``;
        not when it is re-formed at once with more data). Its snapshots wait again."""
        inflight = q.inflight
        assert inflight is not None
        books.take_back(q.query_id, inflight.batch_id)
        self.batch_query.pop(inflight.batch_id, None)
        for run, seqs in inflight.parts.items():  # buffered again: their sources' books hold them
            src = q.sources.get(run)
            for seq in seqs if src is not None else ():
                src.arrived[seq] = snapshot_id(run, seq)  # type: ignore[union-attr]
        q.inflight, q.inflight_progress = None, None
        q.retracted += counted

    def _finish(self, books: Books, q: PacedQuery, progress: TriggerProgress | None) -> None:
        """The batch in flight ran: complete it from its progress, or without it when none came."""
        if progress is not None:
            self.complete(books, q, progress, event=False)
            return
        done = books.give_up(q.query_id)
        if done is not None:
            q.given_up.add((None, done.spark_batch_id))
            q.accounted.add((q.spark_run_id, done.spark_batch_id))
        self._done(q)

    def _done(self, q: PacedQuery) -> None:
        """The batch in flight completed: its snapshots leave their sources' books."""
        inflight = q.inflight
        if inflight is None:
            return
        for run, seqs in inflight.parts.items():
            src = q.sources.get(run)
            for seq in seqs if src is not None else ():
                src.arrived.pop(seq, None)  # type: ignore[union-attr]
        self.batch_query.pop(inflight.batch_id, None)
        q.inflight, q.inflight_progress = None, None

    def _unreported(self, books: Books, q: PacedQuery, src: SourceRun, pending: set[int]) -> None:
        """Snapshots the driver buffers that the source no longer holds pending, outside the batch in flight: Spark
        read them in admissions whose records the source could no longer keep (``failed_open_dropped``). They ran:
        accounted as one batch, completed without its progress."""
        inflight = q.inflight.seqs(src.run) if q.inflight is not None else frozenset()
        gone = frozenset(seq for seq in src.arrived if seq not in pending and seq not in inflight)
        if not gone or q.inflight is not None:
            return
        log.warning("query %r: %d snapshots of source %s were read by Spark in admissions it could not report; "
                    "accounted as one batch", q.query_id, len(gone), src.run)
        self._rebuild(books, q, {src.run: gone}, -1)
        self._finish(books, q, None)

    def complete(self, books: Books, q: PacedQuery, progress: TriggerProgress, *, event: bool) -> None:
        """Complete the query's batch in flight from its trigger's progress."""
        self._measured(books, q, progress)
        if books.on_progress(progress, event=event, query_id=q.query_id) is not None:
            self._done(q)
            self._save_model(books, q)

    def give_back(self, books: Books, q: PacedQuery) -> int:
        """Withdraw every buffered snapshot of ``q`` (their sources offer them again: a restart re-observes them from
        the last committed offset, a source's next ask reports them pending); the batch in flight keeps its own."""
        withdrawn = books.withdraw(q.query_id)
        q.withdrawn += withdrawn
        for src in q.sources.values():
            keep = q.inflight.seqs(src.run) if q.inflight is not None else frozenset()
            src.arrived = {seq: dataset for seq, dataset in src.arrived.items() if seq in keep}
        return withdrawn

    def restart(self, books: Books, q: PacedQuery, request: DecisionRequest) -> None:
        """A later run of ``q`` (``request`` is its first message the driver hears) replaces the current one, whose
        stop event may not have come yet (the JVM gives up waiting on it after 5 s). The current run's batch in
        flight:

        - Spark never logged it (the new run's first ``latestOffset`` is at that batch or before it: the new run
          observes its data again), or the new run replayed it from the offset log (its progress counts the replay):
          taken back;
        - its trigger's progress came: it ran, and completes;
        - else only its sources' stop events can tell (a run between the two may have run that Spark batch with
          other data): taken back and parked, each source's part accounted when its stop event says the trigger
          ended (:meth:`old_stop`).

        What the run held is given back."""
        inflight = q.inflight
        if inflight is not None:
            replayed = any(p.get("batchId") == inflight.spark_batch_id and
                           p.get("runId") in (None, request.spark_run_id) for p in request.progress)
            if replayed or 0 <= request.first_batch_id <= inflight.spark_batch_id:
                log.info("query %r: Spark batch %d of the previous run %s (the new run starts at batch %d); taken back",
                         q.query_id, inflight.spark_batch_id, "was replayed by the new run" if replayed else
                         "was never logged", request.first_batch_id)
                self._retract(books, q)
            elif q.inflight_progress is None:
                self._park(books, q)
        self.close_run(books, q, "restarted")
        self.give_back(books, q)

    def _park(self, books: Books, q: PacedQuery) -> None:
        """Take back the batch in flight, keeping each source's part until that source's stop event says whether
        Spark ran it (:meth:`restart`)."""
        inflight = q.inflight
        assert inflight is not None
        by_id = {d.id: d for d in books.batch(inflight.batch_id).batch.datasets}
        for run, seqs in inflight.parts.items():
            q.parked[run] = Parked(q.spark_run_id, inflight.spark_batch_id,
                                   tuple(by_id[snapshot_id(run, seq)] for seq in sorted(seqs)))
        while len(q.parked) > MAX_PARKED:
            dropped = next(iter(q.parked))
            log.warning("query %r: source %s never told whether Spark ran batch %d; forgotten", q.query_id, dropped,
                        q.parked.pop(dropped).spark_batch_id)
        log.info("query %r: Spark batch %d of the previous run may or may not have run; its sources' stop events tell",
                 q.query_id, inflight.spark_batch_id)
        self._retract(books, q)

    def old_stop(self, books: Books, q: PacedQuery, event: StopEvent) -> None:
        """A source of an earlier run of ``q`` stopped, heard after a later run's ask (the JVM gave up waiting on the
        event and went on). What Spark ran of that run that the query has not accounted: the admissions it made
        without an answer in a batch whose trigger ended, its part of a batch the driver decided and parked at the
        restart (:meth:`restart`) when that batch's trigger ended, and the batches it replayed from the offset log
        before its first ask. Each is accounted once (``q.reconciled``, ``q.accounted``; a snapshot that completed
        before is not counted again), as a batch of its own, as soon as the query has no batch in flight
        (:meth:`settle_orphans`). Nothing else of the run is the query's any more."""
        q.late_stops += 1
        by_batch = self._ended(event.progress, event.spark_run_id)
        records = self.own_records(q, event.run, event.failed_open)
        unanswered = {record.batch_id for record in records}
        for p in sorted(by_batch.values(), key=lambda p: p.batch_id):
            if p.rows > 0 and p.batch_id not in unanswered and (
                    event.first_batch_id < 0 or p.batch_id < event.first_batch_id):
                dataset = Dataset(f"replay:{event.query_id}:{p.batch_id}", p.started_at or p.delivered_at,
                                  p.rows * DEFAULT_ROW_BYTES, p.rows)
                q.orphans.append(Orphan(event.run, p.batch_id, (dataset,), p, replay=True))
        recorded = set()
        src = SourceRun(event.run)
        for record in records:
            key = (event.run, record.batch_id)
            if record.batch_id in by_batch and key not in q.reconciled:  # its trigger ended: Spark ran it
                q.reconciled.add(key)
                recorded.add(record.batch_id)
                datasets = tuple(self.arrivals.dataset(q, src, self.arrivals.dated(books, q, snap, time.time()))
                                 for snap in record.snapshots)
                q.orphans.append(Orphan(event.run, record.batch_id, datasets, by_batch[record.batch_id]))
        parked = q.parked.pop(event.run, None)
        if parked is not None and parked.spark_batch_id in by_batch and parked.spark_batch_id not in recorded:
            q.orphans.append(Orphan(event.run, parked.spark_batch_id, parked.datasets, by_batch[parked.spark_batch_id]))
        self.settle_orphans(books, q)

    def settle_orphans(self, books: Books, q: PacedQuery) -> None:
        """Account what earlier runs had Spark run (:meth:`old_stop`), each as one batch completed at once, while the
        query has no batch in flight (else at the next chance: an ask, a completion, a stop)."""
        while q.orphans and q.inflight is None:
            orphan = q.orphans.pop(0)
            p = orphan.progress
            if orphan.replay and ((p.run_id, p.batch_id) in q.accounted or (None, p.batch_id) in q.given_up):
                continue  # accounted already, or completed when the run that first ran it stopped
            datasets = [d for d in orphan.datasets if not books.finished(q.query_id, d.id)]
            if not datasets:  # completed already (the batch decided for them): accounted once
                continue
            if orphan.replay:
                q.accounted.add((p.run_id, p.batch_id))
                q.replays += 1
            else:
                q.failed_open += 1
            self._ran_undecided(books, q, datasets, p)
            log.warning("query %r: Spark batch %d of an earlier run (source %s), reported by its stop event after a "
                        "later run asked, is accounted now (%d datasets)", q.query_id, orphan.spark_batch_id,
                        orphan.run, len(datasets))
        books.notify_all()

    def close_run(self, books: Books, q: PacedQuery, why: str) -> None:
        """The run of ``q`` ended without telling which batch its trigger finished: its batch in flight completes
        now, without its progress (a replay of it by the next run is then not counted again), and so does each
        admission its sources made ahead of it (:meth:`drain_ahead`)."""
        while True:
            if q.inflight is not None:
                log.debug("query %r: run ended (%s); batch %s completed without its progress", q.query_id, why,
                          q.inflight.batch_id)
                self._finish(books, q, None)
            if not self._settle_ahead(books, q, {}):  # what its sources admitted ahead ran too
                return

    @staticmethod
    def _ran_undecided(books: Books, q: PacedQuery, datasets: list[Dataset], progress: TriggerProgress) -> None:
        """A batch Spark ran that no decision formed (a replay from the offset log, an earlier run's admission heard
        from its stop event): exactly ``datasets`` (those not buffered arrive first), admitted as Spark read them
        (the same operation the readers' front end accounts its replays with), then completed at once with its
        trigger's engine time."""
        held = {d.id for d in books.buffered(q.query_id)}
        for dataset in datasets:
            if dataset.id not in held:
                books.arrive(q.query_id, dataset)
        batch = books.admit_exactly(q.query_id, [d.id for d in datasets])
        q.forced += 1
        books.start(batch.id)
        books.complete(batch.id, engine_s=progress.engine_s, completed_at=progress.ended_at)

    def _replayed(self, books: Books, q: PacedQuery, progress: TriggerProgress) -> None:
        """Spark ran a batch from its offset log without asking the source: account it once."""
        q.accounted.add((progress.run_id, progress.batch_id))
        if (None, progress.batch_id) in q.given_up:  # completed when the run that first ran it stopped
            return
        arrival = progress.started_at or progress.delivered_at
        self.give_back(books, q)  # keeps the order: the replay came before them
        dataset = Dataset(f"replay:{q.stream_id}:{progress.batch_id}", arrival, progress.rows * DEFAULT_ROW_BYTES,
                          progress.rows)
        self._ran_undecided(books, q, [dataset], progress)
        q.replays += 1
        log.info("query %r: batch %d was replayed from the checkpoint (%d rows); accounted once",
                 q.query_id, progress.batch_id, progress.rows)

    def _measured(self, books: Books, q: PacedQuery, progress: TriggerProgress) -> None:
        """Keep what the trigger of the batch in flight measured (bytes per row: how snapshots are sized)."""
        q.accounted.add((progress.run_id, progress.batch_id))
        if progress.source_metrics:
            q.source_metrics = dict(progress.source_metrics)
        if q.inflight is None or q.inflight.spark_batch_id != progress.batch_id:
            return
        try:
            q.read_bytes += books.batch(q.inflight.batch_id).batch.bytes
            q.read_rows += progress.rows
        except KeyError:
            pass

    def _save_model(self, books: Books, q: PacedQuery) -> None:
        """Keep the query's fitted model with its checkpoint, at most every ``SAVE_EVERY_S``."""
        now = time.monotonic()
        if q.model_file is None or now - q.model_saved_at < model_store.SAVE_EVERY_S:
            return
        state = books.service_state(q.query_id)
        if not state.get("n"):
            return
        q.model_saved_at = now
        model_store.save(q.model_file, state)

    def stop_run(self, books: Books, q: PacedQuery, src: SourceRun, event: StopEvent) -> None:
        """Source ``src`` of ``q`` stopped (the JVM's ``stop``, after Spark's stream thread ended): a batch whose
        trigger reported completes; one whose trigger never ended is taken back (Spark replays it from its offset
        log at the next start, or the next run observes its data again); what the source held is given back."""
        by_batch = self.progress(q, event.progress)
        if event.first_batch_id >= 0:
            q.first_batch = event.first_batch_id
        self._replays(books, q, {b: p for b, p in by_batch.items()
                                if b not in {r.batch_id for r in event.failed_open}})
        for record in event.failed_open:
            if record.batch_id in by_batch:  # the trigger ended: it ran; else it never happened for Spark
                self._failed_open(books, q, src, record, by_batch)
        inflight = q.inflight
        progress = by_batch.get(inflight.spark_batch_id) if inflight is not None else None
        if inflight is not None and progress is None:
            self._retract(books, q)
        elif progress is not None and not progress.unanswered:
            self.complete(books, q, progress, event=False)
        elif progress is not None:  # another source of the query admitted into it unanswered; its stop event reports
            q.inflight_progress = progress
        self._settle_ahead(books, q, by_batch)  # those ahead of a report still awaited wait for it
        self.give_back(books, q)
        q.dead = True
        self.settle_orphans(books, q)
        books.notify_all()
