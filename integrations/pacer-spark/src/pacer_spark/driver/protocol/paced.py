"""The protocol of ``format("pacer")`` queries: the user's own query, paced by the Controller.

The JVM source (``jvm/``) asks on the query's stream thread, in ``latestOffset``, before the batch is planned; its
ask reaches :meth:`PacedQueries.decide` through :meth:`pacer_spark.driver.loop.Driver.step`. Here:

1. the query is registered with the Controller on its first request, under its ``queryName``, with
   the source's ``pacer.deadline``, ``pacer.admission``, ``pacer.placement`` and
   ``pacer.param.<admission|placement>.<name>`` options over the session's defaults;
2. the previous batch of the query is completed from the query's own progress buffer (its trigger
   has ended: the stream thread is asking for the next one), or earlier by the listener's event;
3. each snapshot not seen before (up to the source's read limit, ``admissible``) arrives as one
   dataset, dated by its data's own times where the source has them (:func:`~pacer_spark.jvm.decider.snapshot_spans`;
   the report's ``arrival`` is then ``"source-time"``), else by the JVM's previous look (``"first-seen"``);
   bytes = file sizes or rows x the schema's row size, rows = the offset delta or bytes / bytes per row;
4. the Controller polls the query's admission strategy; its batch is the oldest snapshots, and
   the batch ends at the last one;
5. the batch passes the :class:`~pacer_spark.driver.gate.Gate` right there: FIFO/EDF wait for their turn,
   FAIR/RDAS get their pool, which the JVM sets on the stream thread.

Under ``trigger(availableNow=True)``, ``trigger(once=True)``, or while a caller waits in ``processAllAvailable()``, a
"wait" admits every admissible snapshot instead (Spark ends ``availableNow`` and that wait at the first trigger
without new data, ``once`` after one batch), and a source of the query asked after the batch was formed joins it with
everything it holds, so that every source drains (a union, a join). An ask that carries no snapshots (a source only
reporting) never takes a trigger's first ask: the first source with data forms the batch.

The source is the truth: before each decision the query's state is rebuilt from what the asking source reports
(the protocol, its messages and the state machine of one query are in the README of pacer-spark): admissions it
made without an answer become exactly the batch Spark ran (a decided batch Spark did not run is taken back), a
batch Spark replayed from its offset log is accounted once, a request overtaken by a later one is dropped, a new
Spark run gives back what the previous one held, and several paced sources of one query (a union, a join) are
one query with one deadline.

Runs are ordered by what their messages carry, never by arrival (:mod:`pacer_spark.driver.protocol.runs`): the JVM gives
up waiting on a call (a stop event after 5 s, an ask after the decision timeout) and Python handles it later, so an old
run's stop event or timed-out ask can come after the new run's first ask. One ``spark_run_id`` is one run; else the
higher ``run_started`` (the JVM's start stamp of the source run) is the later run; without stamps (a version 5 jar) the
higher ``first_batch_id`` of one stream; else a run heard of before is the earlier. A later run is a restart
(:meth:`PacedQueries.verdict`). An ask of an earlier run never becomes current: it is stale, dropped and counted, the
first per query warned naming both runs; the earlier run's stop event settles what it admitted without an answer, once
(:meth:`~pacer_spark.driver.protocol.truth.SourceTruth.old_stop`). A run of another stream (``query_id``) under the same
pacer name while the current run runs is refused with an error answer naming both (:meth:`PacedQueries.refuse`).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from pacer import MicroBatch, OperatorMetric
from pacer.observed import Recorder
from pacer_spark.driver.advice import Advisor
from pacer_spark.driver.books import Books
from pacer_spark.driver.completion import SinkDone
from pacer_spark.driver.gate import Turn
from pacer_spark.driver.protocol import model_store
from pacer_spark.driver.protocol.arrivals import Arrivals
from pacer_spark.driver.protocol.progress_metrics import decision_metrics
from pacer_spark.driver.protocol.runs import RunMark, Verdict, later
from pacer_spark.driver.protocol.state import (
    InFlight,
    PacedQuery,
    RecentIds,
    SourceRun,
    advise_every,
    changed_options,
    check_options,
    merged_options,
    query_engine_profile,
    source_of,
)
from pacer_spark.driver.protocol.truth import SourceTruth
from pacer_spark.jvm import stream_query
from pacer_spark.jvm.decider import Decision, DecisionRequest, StopEvent
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.options import parse_seconds
from pacer_spark.plan.dag import dag_from_plan, operator_metrics

if TYPE_CHECKING:
    from pacer_spark.config import PacerConfig
    from pacer_spark.driver.loop import Driver
    from pacer_spark.driver.protocol.registry import QueryRegistry

log = logging.getLogger("pacer_spark.driver.protocol.paced")

#: Rows of the first batch of a query whose service-time model is not fitted yet (a start or restart with a
#: backlog), doubling with each batch until it is: a Kafka query started with 480 000 records waiting took them
#: all in its first batch before. The wrapped source's own read cap, when set, bounds it further.
PROBE_ROWS = 10_000


class PacedQueries:
    """Decides every ``format("pacer")`` query of one attached session (module docstring): the driver's side of
    the protocol with the JVM sources, which reach it only through :meth:`pacer_spark.driver.loop.Driver.step`
    (their asks, :class:`~pacer_spark.jvm.decider.DecisionRequest`, and stop events,
    :class:`~pacer_spark.jvm.decider.StopEvent`, as the Py4J front end, :mod:`pacer_spark.paced.service`, hands
    them over).

    :param driver: the session's driver (Controller, lock, completion, gate, replay guard); this registers with it.
    :param spark: the attached SparkSession (whether a stream still runs, its executed plan).
    :param config: the session's configuration; ``registry``: registers a query over the session's defaults.
    """

    def __init__(self, driver: Driver, spark: Any, config: PacerConfig, registry: QueryRegistry) -> None:
        self.driver = driver
        self.spark = spark
        self.config = config
        self.registry = registry
        driver.register(self, DecisionRequest, StopEvent)
        self.queries: dict[str, PacedQuery] = {}
        self.arrivals = Arrivals(driver)
        self.truth = SourceTruth(driver, self.arrivals)
        self._by_spark_run: dict[str, str] = {}
        #: source runs whose stop event came before the driver heard of their query: their stop is their last word
        #: (a late ask of theirs registers nothing and decides nothing)
        self._stopped_unheard: RecentIds[str] = RecentIds()

    # ------------------------------------------------------------------ the decision

    def step(self, report: DecisionRequest | StopEvent) -> Decision | None:
        """A JVM source's ask (answered) or stop event (:meth:`pacer_spark.driver.loop.Driver.step`)."""
        if isinstance(report, StopEvent):
            self.stopped(report)
            return None
        return self.decide(report)

    def decide(self, request: DecisionRequest) -> Decision:
        """Answer one ``latestOffset`` of a ``format("pacer")`` source (module docstring) through the driver's
        admission loop (:meth:`pacer_spark.driver.loop.Driver.decide`)."""
        t0 = time.perf_counter()
        ask = SourceAsk(self, request)
        admitted = self.driver.decide(ask)
        waited = admitted.turn.waited_s if admitted is not None and admitted.turn is not None else 0.0
        if ask.q is not None:
            ask.q.decide_s.add(time.perf_counter() - t0 - waited)
            ask.q.drained += admitted is not None and admitted.drained
        if ask.error is not None:
            return Decision(None, error=ask.error)
        if admitted is None:  # nothing now, or its part of the batch another source of the query admitted
            return Decision(ask.index, metrics=ask.metrics)
        return Decision(ask.index, pool=admitted.turn.pool if admitted.turn is not None else None,
                        metrics=ask.metrics)

    def admitted(self, books: Books, q: PacedQuery, request: DecisionRequest, batch: MicroBatch) -> int | None:
        """Record the admitted batch (it runs in the request's Spark batch); the index of the asking source's last
        snapshot in it (None: the batch holds none of this source's data; another source of the query reads it)."""
        parts: dict[str, set[int]] = {}
        for dataset in batch.datasets:
            run, seq = source_of(dataset.id)
            parts.setdefault(run, set()).add(seq)
        q.inflight = InFlight(batch.id, request.batch_id, {run: frozenset(seqs) for run, seqs in parts.items()},
                              request.trigger)
        self.driver.sink_done(q.query_id, SinkDone(batch.id, request.batch_id, time.time(), running=True))
        self.truth.batch_query[batch.id] = q.query_id
        return self.answer(q, request)

    @staticmethod
    def first_ask(q: PacedQuery, request: DecisionRequest) -> bool:
        """Whether ``request`` is the first ask of its trigger (only then may it admit a batch, which can span every
        source of the query: a source asked before it in the trigger was answered already). Spark asks a query's
        sources in one order each trigger; a source asking again in the same Spark batch starts a new trigger (the
        last one ran nothing)."""
        if request.trigger >= 0:
            if q.asked_trigger is not None and request.trigger < q.asked_trigger:
                return False  # an earlier trigger's ask, come late: that trigger's turn is over (and stays over)
            key, new_trigger = request.trigger, q.asked_trigger != request.trigger
        elif request.batch_id >= 0:  # no trigger stamp: a source asking twice in one batch starts a new trigger
            key = request.batch_id
            new_trigger = q.asked_trigger != request.batch_id or request.run in q.asked_runs
        else:
            return True
        if new_trigger:
            q.asked_trigger, q.asked_runs = key, set()
        q.asked_runs.add(request.run)
        return len(q.asked_runs) == 1

    @staticmethod
    def behind(q: PacedQuery, request: DecisionRequest) -> bool:
        """Whether Spark went on past ``request``'s batch before the ask reached the driver: a source of the run asked
        in a later batch, or the batch's trigger ended (accounted from its progress). Its source gave up waiting on
        it (the JVM's timeout); no answer reaches it. Keeps the newest batch asked in."""
        behind = 0 <= request.batch_id < q.newest_batch or (q.spark_run_id, request.batch_id) in q.accounted
        q.newest_batch = max(q.newest_batch, request.batch_id)
        return behind

    def answer(self, q: PacedQuery, request: DecisionRequest) -> int | None:
        """The asking source's part of the batch in flight: the index of its last snapshot (None: no part)."""
        assert q.inflight is not None
        mine = q.inflight.seqs(request.run)
        if not mine:
            return None
        last = max(mine)
        for index, snapshot in enumerate(request.snapshots):
            if snapshot.seq == last:
                return index
        raise RuntimeError(f"query {q.query_id!r}: snapshot {last} of the batch in flight is not pending at source "
                           f"{request.run}")

    # ------------------------------------------------------------------ runs: ordered by their marks, not by arrival

    def verdict(self, q: PacedQuery | None, request: DecisionRequest) -> Verdict:
        """What the run of ``request`` (an ask, or a stop event as one) is to its query, by the order of
        :mod:`pacer_spark.driver.protocol.runs`: the current run (or the first heard of), a later run (a restart), an
        earlier run (or a source run whose stop event came already: its last word), or another stream's run while the
        current one runs (two queries under one pacer name). A run of another stream never replaces a current run
        that still runs: it is refused while it runs itself, and otherwise only its stop event is heard (an earlier
        run's)."""
        if q is None or q.mark is None:
            return Verdict.LATER
        if request.run in q.stopped_sources:
            return Verdict.EARLIER
        if request.run in q.sources or (request.spark_run_id is not None and request.spark_run_id == q.spark_run_id):
            return Verdict.CURRENT
        incoming = RunMark.of(request)
        if incoming.stream_id and q.stream_id and incoming.stream_id != q.stream_id and self._runs(q):
            runs = stream_query.stream_active(self.spark, incoming.stream_id) is not False
            return Verdict.CONFLICT if runs else Verdict.EARLIER
        order = later(q.mark, incoming)
        if order is None:  # no stamps (a version 5 jar) and no batch order: a run heard of before is the earlier
            order = request.spark_run_id is None or request.spark_run_id not in self._by_spark_run
        return Verdict.LATER if order else Verdict.EARLIER

    def _runs(self, q: PacedQuery) -> bool:
        """Whether the current run of ``q`` still runs: no source of it stopped, its run did not terminate, and
        Spark (where it can tell) still lists its stream as active."""
        return not q.dead and stream_query.stream_active(self.spark, q.stream_id) is not False

    def stale(self, books: Books, q: PacedQuery | None, request: DecisionRequest, verdict: Verdict) -> bool:
        """Whether ask ``request`` is stale: of an earlier run than the query's current one, or of a source run
        whose stop event came already, or numbered below one already taken from its source (its source gave up
        waiting and went on). Nothing in it is a current source's state: it is dropped and counted (the report's
        ``paced.stale``); an earlier run's first such ask per query is warned, naming both runs."""
        if q is None:
            if request.run in self._stopped_unheard:
                log.info("query %r: an ask of source %s came after its stop event; dropped", request.query, request.run)
                return True
            return False
        if verdict is Verdict.EARLIER:
            q.stale += 1
            why = "its own stop event" if request.run in q.stopped_sources else "a later run's ask"
            if not q.stale_warned:
                q.stale_warned = True
                current = q.mark.describe() if q.mark is not None else f"Spark run {q.spark_run_id}"
                log.warning("query %r: an ask of %s (source %s, ask %d) reached the driver after %s (the source had "
                            "given up waiting on it); the query's current run is %s. Dropped, as every ask of a run "
                            "the query has left behind is: an earlier run never becomes current again, and its stop "
                            "event settles what it admitted without an answer. Later ones are counted in the report's "
                            "paced.stale", q.query_id, RunMark.of(request).describe(), request.run, request.ask, why,
                            current)
            else:
                log.debug("query %r: an ask of source %s (ask %d) came %s; dropped", q.query_id, request.run,
                          request.ask, why)
            return True
        src = q.sources.get(request.run)
        if src is not None and 0 < request.ask <= src.last_ask:
            q.stale += 1
            log.info("query %r: a request of source %s came after a later one (ask %d); dropped", q.query_id,
                     request.run, request.ask)
            return True
        return False

    def refuse(self, q: PacedQuery, request: DecisionRequest) -> str:
        """The error answer to an ask of another stream while the query's current run runs: two streaming queries
        under one pacer name (the same ``pacer.query``, or one ``queryName`` in two sessions), naming both."""
        q.refused += 1
        error = (f"query {q.query_id!r}: two running streaming queries are paced under this one name: stream "
                 f"{q.stream_id} (Spark run {q.spark_run_id}, paced already) and stream {request.query_id} (Spark "
                 f"run {request.spark_run_id}, refused). pacer paces one query per name: give each its own "
                 f".option('pacer.query', ...) on its format('pacer') source, or its own writeStream.queryName(...) "
                 f"(unique across sessions too)")
        log.warning("%s", error)
        return error

    def query_for(self, books: Books, request: DecisionRequest, verdict: Verdict) -> PacedQuery:
        """The query of ``request``, registered with the Controller on first sight; a later run of it (a restart,
        ``verdict`` LATER) replaces the current one and gives back what it held; a second paced source of the
        current run (a union, a join) joins it, its options merged with the others'."""
        q = self.queries.get(request.query)
        options = check_options(request.options)
        if q is None:
            profile = query_engine_profile(options)  # a file that is none refuses the query before it registers
            self._register(books, request.query, options)
            q = self.queries[request.query] = PacedQuery(request.query, source=request.source, options=options,
                                                         seen_at=time.time(), engine_profile=profile)
            log.info("query %r: paced by pacer (source %s, admission %s, deadline %s)", request.query,
                     request.source, books.query(request.query).admission,
                     books.query(request.query).spec.deadline)
        if request.query_id and request.query_id != q.stream_id:
            q.stream_id = request.query_id
        new_run = False
        if request.run not in q.sources:
            new_run = verdict is not Verdict.CURRENT
            if new_run:  # the first source of a new run of the query: a start, or a restart
                recorder = self._recorder(books, q, request, options)  # refused before anything changes
                if q.runs_seen:
                    self.truth.restart(books, q, request)
                if q.runs_seen and options != q.options:  # restarted with other options: they hold from now on
                    log.info("query %r: restarted with other pacer options (%s)", q.query_id,
                             changed_options(q.options, options))
                    self._register(books, q.query_id, options, again=True)
                q.options = options
                q.observed, q.recorder = recorder is not None, recorder
                q.advisor = self._advisor(books, q, options)
                q.sources = {}
                q.dead, q.error, q.holding, q.first_batch, q.asked_trigger = False, None, False, None, None
                q.newest_batch = -1
            else:  # another paced source of the same run: one query, one deadline
                merged = merged_options(q.query_id, q.options, options)
                if merged != q.options:
                    recorder = None if q.observed else self._recorder(books, q, request, merged)
                    self._register(books, q.query_id, merged, again=True)
                    q.options = merged
                    if recorder is not None:  # pacer.observe given on this source only: the whole query's
                        q.observed, q.recorder = True, recorder
                        q.advisor = self._advisor(books, q, merged)
            q.sources[request.run] = SourceRun(request.run)
            q.runs_seen = True
            if new_run:
                self._restore_model(books, q, request.source_checkpoint)
        q.sources[request.run].last_ask = max(q.sources[request.run].last_ask, request.ask)
        mark = RunMark.of(request)
        q.mark = mark if new_run or q.mark is None else q.mark.known(mark)
        if request.spark_run_id and request.spark_run_id != q.spark_run_id:
            q.spark_run_id = request.spark_run_id
            self._by_spark_run[request.spark_run_id] = q.query_id
        return q

    def _recorder(self, books: Books, q: PacedQuery, request: DecisionRequest,
                  options: dict[str, str]) -> Recorder | None:
        """Observe mode (``pacer.observe``, the recording's path): a run's header, naming the cores and shuffle
        partitions Spark ran it on (what ``pacer advise`` replays it with)."""
        path = options.get("pacer.observe")
        if not path:
            return None
        cores, partitions = stream_query.session_slots(self.spark)
        deadline = self._deadline(books, q, options)
        header = {"query": q.query_id, "stream_id": request.query_id, "spark_run_id": request.spark_run_id,
                  "source": request.source, "cores": cores, "partitions": partitions, "started_at": time.time(),
                  "deadline_s": deadline, "options": {k: v for k, v in options.items() if k != "pacer.observe"}}
        try:
            recorder = Recorder(path, header, after=max((r.seq for r in books.reports(q.query_id)), default=-1))
        except OSError as exc:
            raise ValueError(f"pacer.observe: cannot write the recording {path!r} ({exc.strerror or exc}); give a "
                             "path on the driver's file system that it can write") from None
        log.info("query %r: observed, not paced (pacer.observe): Spark admits as it would without pacer; its "
                 "batches are recorded in %s (pacer advise %s)", q.query_id, path, path)
        return recorder

    def _advisor(self, books: Books, q: PacedQuery, options: dict[str, str]) -> Advisor | None:
        """Observe mode's live advice (:mod:`pacer_spark.driver.advice`), unless ``pacer.observe.adviseEvery`` is 0."""
        every = advise_every(options)
        if q.recorder is None or every <= 0:
            return None
        return Advisor(q.recorder.path, deadline_s=self._deadline(books, q, options),
                       admission=options.get("pacer.admission", "zstream"), every_s=every)

    @staticmethod
    def _deadline(books: Books, q: PacedQuery, options: dict[str, str]) -> float | None:
        """An observed query's deadline: its ``pacer.deadline``, else the session's (``attach``'s), as paced."""
        return parse_seconds(options["pacer.deadline"]) if "pacer.deadline" in options else \
            books.query(q.query_id).spec.deadline

    def record(self, books: Books) -> None:
        """Append the observed queries' batches completed since the last call to their recordings, and start their
        advice where due."""
        for q in self.queries.values():
            if q.recorder is not None:
                try:
                    q.recorder.record(books.reports(q.query_id))
                except OSError:
                    log.warning("query %r: its recording %s could not be written; the query stays observed (Spark "
                                "admits as without pacer), its later batches are not recorded", q.query_id,
                                q.recorder.path, exc_info=True)
                    q.recorder = None
                    continue
                if q.advisor is not None:
                    q.advisor.poll()

    def _restore_model(self, books: Books, q: PacedQuery, source_checkpoint: str | None) -> None:
        """A run starts: take over the service-time model its checkpoint keeps
        (:mod:`pacer_spark.driver.protocol.model_store`)."""
        q.model_file = model_store.model_path(source_checkpoint)
        state = model_store.load(q.model_file) if q.model_file is not None else None
        if state is None:
            return
        try:
            books.restore_service(q.query_id, state)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("query %r: the service-time model in %s is not usable (%s); the query starts with probe "
                        "batches", q.query_id, q.model_file, exc)
            return
        q.model_restored = True
        log.info("query %r: service-time model restored from %s", q.query_id, q.model_file)

    def _register(self, books: Books, query_id: str, options: dict[str, str], *, again: bool = False) -> None:
        """Register the query with the Controller under its options (``again``: give a known one new options)."""
        params = {kind: {k[len(f"pacer.param.{kind}."):]: v for k, v in options.items()
                         if k.startswith(f"pacer.param.{kind}.")} for kind in ("admission", "placement")}
        deadline = parse_seconds(options["pacer.deadline"]) if "pacer.deadline" in options else None
        if again:
            self.registry.reconfigure(books, query_id, deadline=deadline, admission=options.get("pacer.admission"),
                                      placement=options.get("pacer.placement"), admission_params=params["admission"],
                                      placement_params=params["placement"])
            return
        if self.config.overload == "shed":
            self.driver.warn_once(f"no-shed-{query_id}", "query %r: format('pacer') reads every offset Spark logged, "
                                  "so it is never shed: its overload is reported, not dropped (overload=shed "
                                  "applies to pacer-gen/pacer-files queries)", query_id)
        self.registry.register(query_id, deadline=deadline, admission=options.get("pacer.admission"),
                               placement=options.get("pacer.placement"), admission_params=params["admission"],
                               placement_params=params["placement"], overload="keep", probe_rows=PROBE_ROWS)
        books.dated_by(query_id, "first-seen")  # until a snapshot brings its own time

    # ------------------------------------------------------------------ a source's stop

    def stopped(self, event: StopEvent) -> None:
        """A source run stopped (the JVM's ``stop``): a query whose asks never reached the driver is registered from
        the event, so what Spark ran is accounted; then the source's truth decides (:meth:`SourceTruth.stop_run`).
        The stop of a run the query has left behind (heard after a later run's ask: the JVM waits 5 s for it, then
        goes on) settles what that run had Spark run without an answer, once (:meth:`SourceTruth.old_stop`)."""
        with self.driver.books() as books:
            request = event.as_request()
            q = self.queries.get(event.query)
            verdict = self.verdict(q, request)
            if q is not None:  # the stop is the source run's last word: a call of it heard later is stale
                heard = event.run in q.stopped_sources
                q.stopped_sources.add(event.run)
                if heard:
                    return
            if q is not None and verdict in (Verdict.EARLIER, Verdict.CONFLICT):
                log.info("query %r: the stop event of %s (source %s) came after a later run asked; what it had Spark "
                         "run without an answer is settled now", q.query_id, RunMark.of(request).describe(), event.run)
                self.truth.old_stop(books, q, event)
                return
            if (q is None or event.run not in q.sources) and (event.failed_open or event.progress):
                # its asks never reached the driver, yet Spark ran batches: account them
                try:
                    q = self.query_for(books, request, verdict)
                except (ValueError, KeyError, LookupError):
                    log.warning("query %r: its source stopped after admissions pacer could not account (its pacer "
                                "options are refused)", event.query, exc_info=True)
                    return
            src = q.sources.get(event.run) if q is not None else None
            if q is None or src is None:
                self._stopped_unheard.add(event.run)
                return
            q.stopped_sources.add(event.run)  # registered from the event just now
            self.truth.stop_run(books, q, src, event)
            self.record(books)

    # ------------------------------------------------------------------ listener

    def progress(self, books: Books, progress: TriggerProgress) -> bool:
        """A trigger ended: the current run of a paced query completes its batch (:meth:`on_progress`); a late event
        of an earlier run of one is taken and dropped."""
        owner = self.owner(books, progress.run_id)
        if owner is not None:
            self.on_progress(books, owner, progress)
            self.record(books)
            return True
        return self.known_run(books, progress.run_id)

    def terminated(self, books: Books, run_id: str, error: str | None) -> None:
        """A run ended: only a paced query's current run is it (a restart's old run is not)."""
        owner = self.owner(books, run_id)
        if owner is not None:
            self.on_terminated(books, owner, error)
            self.record(books)

    def stream_of(self, books: Books, query_id: str) -> str | None:
        """The paced query's streaming query id, once a source asked with it."""
        q = self.queries.get(query_id)
        return q.stream_id if q is not None else None

    def owner(self, books: Books, run_id: str | None) -> str | None:
        """The pacer id of the ``format("pacer")`` query whose current Spark run is ``run_id`` (else None)."""
        query_id = self._by_spark_run.get(run_id or "")
        q = self.queries.get(query_id or "")
        return query_id if q is not None and q.spark_run_id == run_id else None

    def known_run(self, books: Books, run_id: str | None) -> bool:
        """Whether ``run_id`` is a run (current or past) of one of this session's ``format("pacer")`` queries."""
        return (run_id or "") in self._by_spark_run

    def running(self, books: Books, batch_id: str) -> bool:
        """Whether ``batch_id`` is a ``format("pacer")`` batch whose trigger has not reported yet."""
        return batch_id in self.truth.batch_query

    def on_progress(self, books: Books, query_id: str, progress: TriggerProgress) -> None:
        """A trigger of the current run of a paced query ended: complete its batch.

        Batches Spark replays from its offset log, and admissions the source made without an answer (its progress
        says ``pacerUnanswered``), are accounted from the source's next request, which reports both
        (:meth:`take_reports`).
        """
        q = self.queries[query_id]
        if not progress.executed:  # an idle trigger's entry, under the id of the batch still to come: no batch ended
            return
        if books.waiting_spark_batch(q.query_id) == progress.batch_id and not progress.unanswered:
            self.truth.complete(books, q, progress, event=True)
            self.truth.settle_orphans(books, q)
            return
        # counts the trigger's engine time; a batch a source admitted without an answer is not the one decided: it
        # completes from that source's next ask, which reports what it admitted
        if q.inflight is not None and q.inflight.spark_batch_id == progress.batch_id:
            q.inflight_progress = progress
        books.on_progress(progress, query_id=q.query_id, complete=False)


    def executed_metrics(self, books: Books, query_id: str, done: SinkDone,
                         progress: TriggerProgress) -> list[OperatorMetric]:
        """The batch's operator metrics from the query's executed plan (the engine's ``read_metrics``).

        Read while the plan is still the batch's own (Spark replaces ``lastExecution`` when it plans the next
        batch, so a later batch's plan is never taken for it). The first plan read also replaces the minimal
        chain the query got when first seen with the DAG it really executes (``dag_from_plan``).
        """
        q = self.queries.get(query_id)
        if q is None or q.stream_id is None or not self.config.operator_metrics:
            return []
        try:
            root = stream_query.stream_executed_plan(self.spark, q.stream_id, progress.batch_id)
            if root is None:  # Spark planned the next batch already: this batch's plan is gone
                return []
            if not q.plan_dag:  # registered on first sight with the minimal chain: now the real DAG
                q.plan_dag = True
                books.replace_dag(query_id, dag_from_plan(root))
            batch = books.batch(done.batch_id).batch
            return operator_metrics(root, books.query(query_id).spec.dag, batch.placement,
                                    batch_bytes=batch.bytes, batch_rows=batch.rows)
        except Exception:  # py4j or a plan pacer cannot read: the batch completes without operator metrics
            log.debug("query %r: no operator metrics for batch %s", query_id, done.batch_id, exc_info=True)
            return []

    def on_terminated(self, books: Books, query_id: str, error: str | None) -> None:
        """The current run of the query stopped or failed (the listener, matched by run id). Its batch in flight
        completes, unless a source's stop event that decides it has not come yet (the listener's event and the stop
        events reach the driver in either order): with no progress of it, its sources' events say whether its
        trigger ended; with progress saying a source admitted into it without an answer, that source's record (in
        its stop event) says what Spark ran, so every source's event is awaited."""
        q = self.queries[query_id]
        q.dead, q.error = True, q.error or error
        inflight, progress = q.inflight, q.inflight_progress
        if inflight is not None:
            deciding = inflight.parts if progress is None else q.sources if progress.unanswered else ()
            if not all(run in q.stopped_sources for run in deciding):
                return  # the stop events still on their way decide it (listener first)
        self.truth.close_run(books, q, "terminated")
        self.truth.settle_orphans(books, q)

    # ------------------------------------------------------------------ reading

    def hold(self, query_id: str) -> bool:
        """Admit no further batch of ``query_id``, so that stopping it interrupts none (Spark's ``stop()`` interrupts
        the running batch, which its next run redoes); False when it is no ``format("pacer")`` query here."""
        with self.driver.books() as books:
            q = self.queries.get(query_id)
            if q is not None:
                q.holding = True
                books.notify_all()
            return q is not None

    def owns(self, query_id: str) -> bool:
        """Whether ``query_id`` is a ``format("pacer")`` query of this session."""
        return query_id in self.queries

    def completed(self, books: Books, query_id: str, batch_id: str) -> None:
        """A batch completed: nothing to forget (its snapshots left with its decision)."""

    def dead(self, books: Books, query_id: str) -> bool:
        """Whether the paced query ``query_id`` terminated."""
        q = self.queries.get(query_id)
        return q is not None and q.dead

    def summary(self) -> dict[str, Any]:
        """Per query: decisions, forced admissions, withdrawn and replayed datasets, gate waits, decide times."""
        return {q.query_id: q.summary() for q in self.queries.values()}



class SourceAsk:
    """One ``latestOffset`` of a ``format("pacer")`` source, stepped by the driver's admission loop
    (:class:`pacer_spark.driver.loop.Ask`): the request's side of :meth:`PacedQueries.decide`. It registers the query
    and takes its reports, lets its new snapshots arrive, records the admitted batch and keeps the gate's wait.

    :ivar q: the query, once known; :ivar error: why the request was refused; :ivar index: the answer, the index
        of the admitted batch's last snapshot (None: wait).
    """

    def __init__(self, queries: PacedQueries, request: DecisionRequest) -> None:
        self.queries = queries
        self.request = request
        self.query_id = request.query
        # availableNow ends at the first empty trigger, processAllAvailable() returns at one, Trigger.Once runs one
        # batch: take what is held
        self.drain = request.available_now or request.caller_waiting or request.single_batch
        self.whole = request.single_batch  # one batch in the run: everything held, whatever the strategy's caps
        self.stream_id = request.query_id  # the source asks from its query's stream thread: the query runs
        self.q: PacedQuery | None = None
        self.error: str | None = None
        self.index: int | None = None
        #: the admitted batch's figures for the query's progress (:mod:`pacer_spark.driver.protocol.progress_metrics`)
        self.metrics: dict[str, str] | None = None

    def report(self, books: Books) -> bool:
        """Register the query on first sight, then take its reports; False without new snapshots. An ask of an
        earlier run is dropped (:meth:`PacedQueries.stale`); one of another stream while the current run runs is
        refused (:meth:`PacedQueries.refuse`). Batches its reports completed are recorded (observe mode)."""
        try:
            return self._report(books)
        finally:
            self.queries.record(books)

    def _report(self, books: Books) -> bool:
        q = self.queries.queries.get(self.request.query)
        verdict = self.queries.verdict(q, self.request)
        if q is not None and verdict is Verdict.CONFLICT:
            self.error = self.queries.refuse(q, self.request)
            return False
        if self.queries.stale(books, q, self.request, verdict):
            return False
        try:
            self.q = self.queries.query_for(books, self.request, verdict)
        except (ValueError, KeyError, LookupError) as exc:
            self.error = f"query {self.request.query!r}: {exc}"
            return False
        self.q.decisions += 1
        if self.q.observed:  # every source admits all it may, as without pacer
            self.drain = self.whole = True
        behind = self.queries.behind(self.q, self.request)
        if self.queries.truth.take_reports(books, self.q, self.request, behind=behind) and not behind:
            # another source of the query asked first in this Spark batch: this one's part of its batch
            self.queries.arrivals.arrive(books, self.q, self.request)
            joined = self.drain and not self.q.holding and self.queries.truth.join(books, self.q, self.request)
            self.q.drained += joined  # this trigger must read its data too: it joins the batch
            self.index = self.queries.answer(self.q, self.request)
            if self.index is not None and self.q.inflight is not None:
                self.metrics = decision_metrics(books, books.batch(self.q.inflight.batch_id).batch,
                                                "joined" if joined else "part")
            return False
        # Spark went on without this ask's answer (its source gave up and admitted what it held, which its next ask
        # reports): its pending snapshots are the source's then, and a batch now would take other sources' data into
        # a batch Spark ran without it
        if behind:
            return False
        if not self.request.snapshots:  # only reporting: it never takes the trigger's first ask (a union's idle
            return False  # source asked first must not make the busy one wait, or a drain would end before its data)
        first = self.queries.first_ask(self.q, self.request)
        if self.drain and not self.q.holding:  # an earlier batch may still wait for another source's report
            self.index = self.queries.truth.drain_ahead(books, self.q, self.request)
            if self.index is not None:
                self.q.drained += 1
                return False
        if not first:  # a source asked before it in this Spark batch and was answered: a batch now could not take
            self.queries.arrivals.arrive(books, self.q, self.request)  # its part
            return False
        return not self.q.holding

    @property
    def own(self) -> tuple[str, ...]:
        """The asking source's held snapshots, oldest first (:class:`~pacer_spark.driver.loop.Ask`)."""
        src = self.q.sources.get(self.request.run) if self.q is not None else None
        return tuple(src.arrived[seq] for seq in sorted(src.arrived)) if src is not None else ()

    def arrive(self, books: Books) -> None:
        """The request's new snapshots arrive."""
        assert self.q is not None
        self.queries.arrivals.arrive(books, self.q, self.request)

    def admitted(self, books: Books, batch: MicroBatch) -> bool:
        """Record the batch; it passes the gate (the JVM sets its pool on the stream thread), unless the query is
        observed (it runs as without pacer)."""
        assert self.q is not None
        self.index = self.queries.admitted(books, self.q, self.request, batch)
        self.metrics = decision_metrics(books, batch)
        if self.q.advisor is not None:
            self.metrics.update(self.q.advisor.metrics())
        scaling = self.queries.driver.scaling
        if scaling is not None:
            self.metrics.update(scaling.metrics())
        return not self.q.observed

    def passed(self, books: Books, turn: Turn) -> None:
        """Keep the gate's wait."""
        assert self.q is not None
        self.q.gate_wait_s.add(turn.waited_s)
