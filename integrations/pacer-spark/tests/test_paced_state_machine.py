"""The protocol between ``format("pacer")`` JVM sources and the Python driver, as a Hypothesis state machine.

The driver is the real one (:class:`~pacer_spark.driver.protocol.paced.PacedQueries` on a Driver and Controller,
built by ``test_paced_protocol._paced``); the JVM side is a model of ``PacedStream`` and ``DeciderChannel`` and of
Spark's trigger loop (:class:`JvmSource`, :class:`PacedProtocol`), written from the protocol in pacer-spark's README:

- one streaming query (``stream-1``, pacer name ``q``) reading 1 to 3 paced sources (a union), one of them maybe
  idle (it never gets data), each maybe with a read limit (``admissible``: the source admits at most that many of its
  oldest pending snapshots, also when it fails open);
- each trigger asks every source in one order (``latestOffset``): a source with pending snapshots asks, one with
  none asks only to report (progress not sent yet, failed-open records); an ask is answered, raises (never reaches
  the driver), is answered past the timeout (``late``: decided, the answer goes nowhere), or times out before it
  reaches the driver (``stale``: it reaches it later, at a step of its own, maybe after the source's later asks or
  after a later run's); without an answer the source admits everything it may, recorded until an answer reaches
  the driver; under ``availableNow`` a "wait" with pending data admits one snapshot unanswered;
- Spark runs a batch of what the sources admitted and commits it; its progress goes to every source (sent with its
  next ask, the 8 newest) and to the listener, whose ``onQueryProgress``/``onQueryTerminated`` reach the driver late,
  in order, or never; a trigger that ran nothing may leave an idle progress entry under the id of the batch to come;
- runs: a stop between triggers, while a source waits for its answer (the batch is never logged: the next run
  observes the data again), or while the batch runs (logged, not committed: the next run re-runs it from the offset
  log, asking no source); each source's stop event reaches the driver at once or late (the JVM gives up after 5 s),
  maybe after the new run asked, as do the stopped run's timed-out asks;
- the next run is ``processingTime``, ``availableNow`` (the run ends at the first trigger in which no source admits
  anything; data that came after its start waits for the next run) or ``Trigger.Once`` (``single_batch``: one
  trigger, then the run stops; the read limit does not apply);
- ``processAllAvailable()`` (``caller_waiting``): Spark returns at the first trigger in which no source admitted
  anything; every unit observed before the call must be committed then;
- a second stream (another ``query_id``) under the same pacer name while the first runs: refused with an error
  naming both stream ids, its source stops, and the first goes on.

The protocol as of this machine (issue 44): an ask without snapshots never takes a trigger's first ask (the first
source with data forms the batch); under a drain (``available_now``, ``caller_waiting``, ``single_batch``) a source
asked after another formed the trigger's batch joins it with all its admissible snapshots.

Invariants: Spark commits each observed unit exactly once; the Controller accounts each unit it committed exactly
once (per dataset: a snapshot ``run:seq`` or a replayed batch ``replay:stream:batch``), never one Spark did not
commit, and its ledger balances after every step (no ``LedgerViolation``); an answer never names a snapshot past the
read limit; under a drain, a source asked after the one whose ask formed the batch is answered with all it may admit;
in an availableNow or Once run where every ask was answered no source is told to wait with data, and a Once run
leaves nothing unread; ``processAllAvailable()`` returns with every unit observed before it committed; a second
stream is refused naming both; after quiescing (every late message delivered, triggers until nothing is pending)
every unit is committed and accounted once, the rows the Controller completed are the rows Spark read, nothing is
buffered, no earlier run's batch waits to be accounted, and the query is not busy without a batch Spark runs.

Profiles: CI runs :data:`EXAMPLES` (250) derandomized draws of up to :data:`STEPS` (50) steps each: a fixed,
reproducible sequence, about 15 s on 2 cores. ``PACER_PROTOCOL_EXAMPLES=N`` runs N fresh random draws instead (the
deep profile); with ``--hypothesis-show-statistics`` it shows the share of draws in which the admission strategy was
asked with data held, a late message of a stopped run reached the driver after a later run asked, a union's idle
source was asked before a source with data in ``processAllAvailable()``, an availableNow or Once run ended, ...::

    PACER_PROTOCOL_EXAMPLES=10000 python -m pytest integrations/pacer-spark/tests/test_paced_state_machine.py \\
        -k EveryStep -q -p no:randomly --hypothesis-show-statistics

(``PACER_PROTOCOL_EXAMPLES`` also deepens ``test_paced_protocol.py``'s property test; ``PACER_PROTOCOL_STEPS`` sets the
steps per draw.) Pin what it finds as a plain test replaying the steps Hypothesis prints (``test_found_*`` below). A
defect left open is an ``xfail(strict=True)`` test, and a guard in the machine keeps the draws out of it (so that they
find the next one) until it is fixed.
"""

from __future__ import annotations

import importlib.util
import itertools
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context, event
from hypothesis.control import note as hypothesis_note
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)

from pacer import hookimpl
from pacer_spark.jvm.decider import DecisionRequest, FailedOpen, StopEvent
from pacer_spark.jvm.progress import TriggerProgress

_spec = importlib.util.spec_from_file_location("_protocol_helpers", Path(__file__).with_name("test_paced_protocol.py"))
assert _spec is not None and _spec.loader is not None
_protocol: Any = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _protocol  # its dataclasses look their module up
_spec.loader.exec_module(_protocol)
ModelSource, Scripted, Wire, paced_queries, ROWS = (_protocol.ModelSource, _protocol.Scripted, _protocol.Wire,
                                                   _protocol._paced, _protocol.ROWS)

#: ``DeciderChannel.MAX_PROGRESS``: the newest progress entries one request carries.
MAX_PROGRESS = 8
#: Draws of :class:`TestEveryStepReadsAndAccountsEachUnitOnce` (module docstring); set: fresh random ones (deep).
EXAMPLES = int(os.environ.get("PACER_PROTOCOL_EXAMPLES", "250"))
DEEP = "PACER_PROTOCOL_EXAMPLES" in os.environ
STEPS = int(os.environ.get("PACER_PROTOCOL_STEPS", "50"))
OPTIONS = {"pacer.deadline": "30s"}
FAILURES = ("raise", "late", "stale")
Snapshot = tuple[int, frozenset[int]]
QUIET = ("pacer_spark", "pacer")
#: New units before a trigger (the first is what a simplest draw takes: data, so that runs reach the driver).
NEW = st.sampled_from([1, 2, 0])


log = logging.getLogger(__name__)


def note(text: str) -> None:
    """Hypothesis' note inside a draw; a DEBUG log line where a regression test replays steps."""
    if currently_in_test_context():
        hypothesis_note(text)
    else:
        log.debug("%s", text)


class CountingScripted(Scripted):
    """:class:`Scripted`, counting the polls that asked it with data held (not a catch-up batch: the data is fresh; a
    drain asks it first too) and those in which it admitted a batch itself."""

    def __init__(self, counts: Sequence[int]) -> None:
        super().__init__(counts)
        self.calls = 0
        self.admitted = 0

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> Any:
        decision = super().pacer_admit(ctx, buffer)
        if decision is not None and len(buffer):
            self.calls += 1
            self.admitted += decision.count > 0
        return decision


def entry(spark_run: str, batch_id: int, rows: Sequence[int], unanswered: Sequence[bool], *, ran: bool = True,
          stream: str = "stream-1") -> dict[str, Any]:
    """A progress entry as Spark writes it: a trigger that ran a batch (``addBatch`` timed), or an idle one (kept
    after 10 s of idleness under the id of the batch still to come); each source's ``pacerUnanswered``."""
    durations = {"triggerExecution": 100, "addBatch": 60} if ran else {"triggerExecution": 2}
    return {"id": stream, "runId": spark_run, "name": "q", "batchId": batch_id,
            "timestamp": "2026-11-27T10:00:00.000Z", "numInputRows": sum(rows), "durationMs": durations,
            "sources": [{"numInputRows": r, "metrics": {"pacerUnanswered": str(f).lower()}}
                        for r, f in zip(rows, unanswered, strict=True)]}


@dataclass
class JvmSource(ModelSource):
    """One ``PacedStream`` run (``latestOffset``, ``consult``, the fallback, ``capToLimit``), as
    :class:`ModelSource` with a read limit, ``availableNow``, ``Trigger.Once`` and the newest-8 progress cap."""

    limit: int | None = None  # snapshots per batch at most (None: ReadAllAvailable)
    available_now: bool = False
    single_batch: bool = False
    unanswered: bool = False  # this trigger's admission was made without an answer (metric pacerUnanswered)
    forced: int = 0  # availableNow's one-snapshot admissions after an answered "wait"
    answered: tuple[int, int] | None = None  # this trigger's answer to an ask with data: (index, admissible)
    told_wait: int = 0  # answered "wait" with admissible data under a drain

    def admissible(self) -> int:
        n = len(self.pending)
        return n if self.limit is None or self.single_batch else min(n, self.limit)

    def drains(self) -> bool:
        return self.available_now or self.single_batch or self.caller_waiting

    def request(self, batch_id: int) -> DecisionRequest:
        limit = "ReadAllAvailable" if self.limit is None or self.single_batch else f"MaxFiles: {self.limit}"
        return replace(super().request(batch_id), limit=limit, admissible=self.admissible(),
                       available_now=self.available_now, single_batch=self.single_batch,
                       progress=tuple(self.unsent[-MAX_PROGRESS:]))

    def stop_event(self) -> StopEvent:
        return replace(super().stop_event(), progress=tuple(self.unsent[-MAX_PROGRESS:]))

    def consult(self, wire: Any, batch_id: int, outcome: str) -> tuple[int, str | None, DecisionRequest]:
        """One call to the decider: the index of the last pending snapshot to admit (-1: none), why there was no
        answer (None: it answered), and the request."""
        request = self.request(batch_id)
        if outcome == "raise":
            answer = None
        elif outcome == "stale":  # it reaches the driver later (PacedProtocol.deliver_delayed, or as mail)
            self.delayed.append(request)
            answer = None
        else:
            decision = wire.decide(request)
            answer = None if outcome == "late" else decision
        if answer is None:
            return len(self.pending) - 1, outcome, request
        assert answer.error is None, answer.error
        self.failed_open, self.unsent = [], []  # what was sent is delivered with an answer
        if answer.index is None:
            return -1, None, request
        assert answer.index < request.admissible, \
            f"the answer names snapshot {answer.index} past the read limit ({request.admissible} admissible)"
        return answer.index, None, request

    def latest_offset(self, wire: Any, batch_id: int, outcome: str, trigger: int) -> list[Snapshot]:
        """``PacedStream.latestOffset``: what the source admits into Spark batch ``batch_id``."""
        self.trigger, self.unanswered, self.answered = trigger, False, None
        if self.first_batch < 0:
            self.first_batch = batch_id
        if not self.pending:
            if self.failed_open or self.unsent:  # hasReport: progress or records to send
                self.consult(wire, batch_id, outcome)
            return []
        end, why, request = self.consult(wire, batch_id, outcome)
        if why is None:
            self.answered = (end, request.admissible)
        if end < 0 and why is None and self.drains():
            self.told_wait += 1
        if end < 0 and self.available_now:
            end, why = 0, why or "availableNow admits at least one snapshot"
            self.forced += why == "availableNow admits at least one snapshot"
        if end > 0:
            end = min(end, self.admissible() - 1)  # capToLimit
        if end < 0:
            return []
        taken, self.pending = self.pending[:end + 1], self.pending[end + 1:]
        if why is not None:
            seqs = {seq for seq, _ in taken}
            self.failed_open.append(FailedOpen(batch_id, why, tuple(s for s in request.snapshots if s.seq in seqs)))
            self.unanswered = True
        return taken


class PacedProtocol(RuleBasedStateMachine):
    """Spark, the JVM sources and the listener around the real driver (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = False
        self.broken = False

    # ------------------------------------------------------------------ set-up

    @initialize(sources=st.sampled_from([2, 3, 1]), idle=st.sampled_from([0, None, 1, 2]),
                limits=st.lists(st.sampled_from([None, None, 1, 2]), min_size=3, max_size=3),
                counts=st.lists(st.integers(0, 3), min_size=1, max_size=4))
    def setup(self, sources: int, idle: int | None, limits: list[int | None], counts: list[int]) -> None:
        # the driver warns at every unanswered admission: thousands of steps would keep every record (pytest's capture)
        self.levels = {name: logging.getLogger(name).level for name in QUIET}
        for name in QUIET:
            logging.getLogger(name).setLevel(logging.ERROR)
        self.strategy = CountingScripted(counts)
        self.paced, self.controller = paced_queries(counts, strategy=self.strategy)
        self.wire = Wire(self.paced)
        self.n = sources
        self.idle = idle if idle is not None and sources > 1 and idle < sources else None
        self.limits = limits[:sources]
        self.units = itertools.count()
        self.stamps = itertools.count(1_000)
        self.observed: set[int] = set()
        self.committed: Counter[int] = Counter()
        self.datasets: dict[str, frozenset[int]] = {}  # dataset id -> the units it holds
        self.batch_id = 0  # the next Spark batch (the checkpoint's: it goes on across runs)
        self.runs: list[str] = []
        self.mail: list[tuple[str, DecisionRequest | StopEvent]] = []  # an earlier run's calls on their way
        self.listener: list[tuple[str, Any]] = []  # the listener bus: ("progress", entry) / ("terminated", run)
        self.beyond: list[list[frozenset[int]]] = [[] for _ in range(sources)]  # past availableNow's bound
        self.mode = "processing"
        self.srcs: list[JvmSource] = []
        self.stats: Counter[str] = Counter()
        self.run_failures = False  # an ask of the current run went unanswered
        self.former: int | None = None  # the source whose ask formed the last trigger's batch
        self._start("processing", [[] for _ in range(sources)])
        self.ready = True
        note(f"{sources} source(s), idle {self.idle}, read limits {self.limits}, strategy counts {counts}")

    @contextmanager
    def step(self) -> Iterator[None]:
        """A step: when it raises, teardown checks nothing more (the step's failure is the one to shrink)."""
        self.broken = True
        yield
        self.broken = False

    # ------------------------------------------------------------------ Spark

    def _source(self, i: int, units: list[frozenset[int]]) -> JvmSource:
        run = f"{self.spark_run}/src-{i}"
        src = JvmSource(run, "q", self.spark_run, dict(OPTIONS), limit=self.limits[i],
                        available_now=self.mode == "available_now", single_batch=self.mode == "once")
        for u in units:
            self._observe(src, u)
        return src

    def _observe(self, src: JvmSource, units: frozenset[int]) -> None:
        src.observe(units)
        self.datasets[f"{src.run}:{src.next_seq - 1}"] = units

    def _start(self, mode: str, carried: list[list[frozenset[int]]], replay: list[list[Snapshot]] | None = None,
               listener_now: bool = True) -> None:
        """A new run of the query: its sources observe again what no batch committed, from the committed offsets;
        a batch logged but not committed is re-run first, asking no source."""
        self.spark_run = f"run-{len(self.runs)}"
        self.runs.append(self.spark_run)
        self.mode = mode
        self.run_failures = False
        carried = [c + b for c, b in zip(carried, self.beyond, strict=True)]  # past the last availableNow bound
        self.beyond = [[] for _ in range(self.n)]
        self.srcs = [self._source(i, carried[i]) for i in range(self.n)]
        note(f"start {self.spark_run} ({mode}){f', replaying batch {self.batch_id}' if replay else ''}")
        if replay is not None:
            self._ran(replay, [False] * self.n, listener_now)
            if mode == "once":  # the run's one batch was the replay
                carried, _ = self._stop("between", 0, [False] * self.n, listener_now)
                self._start("processing", carried)

    def _ran(self, parts: list[list[Snapshot]], unanswered: list[bool], listener_now: bool) -> None:
        """Spark ran batch ``batch_id`` of ``parts`` (per source) and committed it; its trigger ended."""
        units = [u for part in parts for _, us in part for u in us]
        for u in units:
            assert self.committed[u] == 0, f"Spark committed unit {u} twice"  # the model's own consistency
            self.committed[u] += 1
        self.datasets[f"replay:stream-1:{self.batch_id}"] = frozenset(units)
        progress = entry(self.spark_run, self.batch_id, [ROWS * sum(len(us) for _, us in p) for p in parts],
                         unanswered)
        note(f"{self.spark_run} batch {self.batch_id}: {[sorted(u for _, us in p for u in us) for p in parts]}")
        self.batch_id += 1
        self._progress(progress, listener_now)

    def _progress(self, progress: dict[str, Any], listener_now: bool) -> None:
        for src in self.srcs:
            src.unsent.append(progress)
        self.listener.append(("progress", progress))
        if listener_now:
            self._listen_all()

    def _listen_all(self) -> None:
        while self.listener:
            self._listen(drop=False)

    def _listen(self, *, drop: bool) -> None:
        kind, what = self.listener.pop(0)
        if drop:
            self.stats["listener event dropped"] += 1
        elif kind == "progress":
            self.paced.driver.on_progress(TriggerProgress.from_json(what))
        else:
            self.paced.driver.on_terminated(what, None)

    def _trigger(self, outcomes: Sequence[str], listener_now: bool, idle_progress: bool = False,
                 joins: bool = False) -> bool:
        """One trigger: every source's ``latestOffset`` in order, then the batch if any source admitted; the end of
        an availableNow run (nothing admitted) or of a Trigger.Once run. Whether a batch ran. Under a drain in a
        run (or a wait) where every ask was answered (``joins``), every source asked after the one whose ask formed
        the batch was told to take all it may (protocol rule 2)."""
        stamp = next(self.stamps)
        outcomes = [outcomes[i % len(outcomes)] for i in range(self.n)]
        self.run_failures |= any(o in FAILURES for o in outcomes)
        if any(s.pending for s in self.srcs) and any(s.pending and s.limit is not None and
                                                      len(s.pending) > s.admissible() for s in self.srcs):
            self.stats["a read limit left snapshots pending"] += 1
        had = [bool(s.pending) for s in self.srcs]
        parts = [src.latest_offset(self.wire, self.batch_id, o, stamp) for src, o in zip(self.srcs, outcomes,
                                                                                         strict=True)]
        self.former = next((i for i, s in enumerate(self.srcs) if had[i] and outcomes[i] in ("answer", "late")),
                           None)  # the source whose ask formed the batch, if any
        joins = joins or (self.mode != "processing" and not self.run_failures)
        if joins and any(s.drains() for s in self.srcs):
            for i, src in enumerate(self.srcs):
                if i == self.former or src.answered is None:
                    continue
                self.stats["a source joined the trigger's batch under a drain"] += 1
                index, admissible = src.answered
                assert index == admissible - 1, (f"under a drain ({self.mode}) source {i}, asked after source "
                                                 f"{self.former} formed the batch, was answered {index} of its "
                                                 f"{admissible} admissible snapshots: it must join with all")
        if any(parts):
            self._ran(parts, [src.unanswered for src in self.srcs], listener_now)
        elif idle_progress:  # an idle trigger's entry: test_found_idle_progress_*, test_found_an_idle_entry_*
            self.stats["idle progress entry"] += 1
            self._progress(entry(self.spark_run, self.batch_id, [0] * self.n, [False] * self.n, ran=False),
                           listener_now)
        if self.mode == "once" or (self.mode == "available_now" and not any(parts)):
            self._end_drained_run(listener_now)
        return any(parts)

    def _end_drained_run(self, listener_now: bool) -> None:
        """An availableNow run ended (no source admitted anything) or a Trigger.Once run ran its trigger: what the
        run could read was read (when every ask was answered, the driver told no source to wait), then it stops."""
        if self.mode == "available_now":
            assert not any(s.pending for s in self.srcs), "availableNow ended with data pending"  # the JVM's forcing
        if not self.run_failures:
            left = [sorted(u for _, us in s.pending for u in us) for s in self.srcs]
            assert not any(left), f"Trigger.Once left data no batch read: {left}"
            waited = [s.told_wait for s in self.srcs]
            assert not any(waited), f"under {self.mode} an answered ask was told to wait with data: {waited}"
        self.stats[f"{self.mode} run ended"] += 1
        self.stats["availableNow forced a snapshot"] += sum(s.forced for s in self.srcs)
        carried, _ = self._stop("between", 0, [False] * self.n, listener_now)
        self._start("processing", carried)

    def _stop(self, how: str, at: int, late: Sequence[bool], listener_now: bool,
              outcomes: Sequence[str] = ("answer",)) -> tuple[list[list[frozenset[int]]], list[list[Snapshot]] | None]:
        """Stop the run: between triggers, while source ``at`` waits for its answer (the batch is never logged), or
        while the batch runs (logged, not committed). Each source's stop event reaches the driver now or late, as do
        its timed-out asks. What the next run observes again, and the batch it re-runs."""
        carried: list[list[frozenset[int]]] = [[] for _ in range(self.n)]
        replay = None
        if how == "interrupted":
            stamp = next(self.stamps)
            for i, src in enumerate(self.srcs):
                if i == at % self.n:  # its ask is on its way (or decided) when stop() interrupts the thread
                    if src.pending or src.failed_open or src.unsent:
                        src.trigger = stamp
                        if src.first_batch < 0:
                            src.first_batch = self.batch_id
                        request = src.request(self.batch_id)
                        if late[i]:
                            self.mail.append((self.spark_run, request))
                        else:
                            self.wire.decide(request)
                    break
                taken = src.latest_offset(self.wire, self.batch_id, "answer", stamp)
                carried[i] += [us for _, us in taken]  # admitted, never logged: observed again
        elif how == "mid_batch":
            stamp = next(self.stamps)
            outs = [outcomes[i % len(outcomes)] for i in range(self.n)]
            parts = [src.latest_offset(self.wire, self.batch_id, o, stamp) for src, o in zip(self.srcs, outs,
                                                                                             strict=True)]
            replay = parts if any(parts) else None
        for i, src in enumerate(self.srcs):
            if late[i]:
                self.mail.append((self.spark_run, src.stop_event()))
            else:
                self.wire.stopped(src.stop_event())
            self.mail.extend((self.spark_run, r) for r in src.delayed)  # its timed-out asks, still on their way
            src.delayed = []
            carried[i] += [us for _, us in src.pending]
        self.listener.append(("terminated", self.spark_run))
        if listener_now:
            self._listen_all()
        where = f" at source {at % self.n}" if how == "interrupted" else ""
        note(f"stop {self.spark_run} ({how}{where}, late stop events {list(late[:self.n])})")
        return carried, replay

    # ------------------------------------------------------------------ rules

    def _arrive(self, source: int, count: int) -> None:
        """``count`` new units at a source that is not the idle one (past the bound of a running availableNow run)."""
        if count <= 0:
            return
        busy = [i for i in range(self.n) if i != self.idle]
        i = busy[source % len(busy)]
        fresh = frozenset(next(self.units) for _ in range(count))
        self.observed.update(fresh)
        if self.mode == "available_now":
            self.beyond[i].append(fresh)
        else:
            self._observe(self.srcs[i], fresh)

    @rule(source=st.integers(0, 2), count=st.integers(1, 3))
    def observe(self, source: int, count: int) -> None:
        """New data at a source."""
        with self.step():
            self._arrive(source, count)

    @rule(source=st.integers(0, 2), count=NEW, listener=st.sampled_from([True, True, False]),
          idle_progress=st.sampled_from([False, False, True]))
    def trigger(self, source: int, count: int, listener: bool, idle_progress: bool) -> None:
        """Maybe new data, then a trigger in which every ask is answered."""
        with self.step():
            self._arrive(source, count)
            self._trigger(["answer"], listener, idle_progress)

    @rule(source=st.integers(0, 2), count=NEW,
          outcomes=st.lists(st.sampled_from([*FAILURES, "answer", "answer"]), min_size=3, max_size=3),
          listener=st.booleans(), idle_progress=st.booleans())
    def trigger_failing(self, source: int, count: int, outcomes: list[str], listener: bool,
                        idle_progress: bool) -> None:
        """Maybe new data, then a trigger in which asks may go unanswered."""
        with self.step():
            self._arrive(source, count)
            self._trigger(outcomes, listener, idle_progress)

    @rule(how=st.sampled_from(["between", "interrupted", "mid_batch"]), at=st.integers(0, 2),
          late=st.lists(st.booleans(), min_size=3, max_size=3),
          mode=st.sampled_from(["processing", "processing", "available_now", "once"]),
          outcomes=st.lists(st.sampled_from(["answer", "answer", *FAILURES]), min_size=3, max_size=3),
          listener=st.booleans(), source=st.integers(0, 2), count=NEW)
    def restart(self, how: str, at: int, late: list[bool], mode: str, outcomes: list[str], listener: bool,
                source: int = 0, count: int = 0) -> None:
        """Stop the run (module docstring) and start the next one; meanwhile new data may come."""
        with self.step():
            carried, replay = self._stop(how, at, late, listener, outcomes)
            self._start(mode, carried, replay, listener)
            self._arrive(source, count)

    @rule(kind=st.sampled_from(["mail", "delayed", "listener", "drop"]), index=st.integers(0, 15),
          source=st.integers(0, 2), count=NEW)
    def deliver(self, kind: str, index: int, source: int = 0, count: int = 0) -> None:
        """Something on its way reaches the driver now (late): a stopped run's stop event or timed-out ask (its
        answer goes nowhere), a timed-out ask of the current run, or the listener's oldest event; or that event is
        never delivered (``drop``). The first kind that has something, from ``kind`` on; new data may come meanwhile."""
        with self.step():
            self._arrive(source, count)
            kinds = ["mail", "delayed", "listener", "drop"]
            for k in kinds[kinds.index(kind):] + kinds[:kinds.index(kind)]:
                if k == "mail" and self.mail:
                    self._deliver_mail(index)
                elif k == "delayed" and any(s.delayed for s in self.srcs):
                    src = next(s for s in self.srcs if s.delayed)
                    request = src.delayed.pop(index % len(src.delayed))
                    if request.ask < src.asks:
                        self.stats["a timed-out ask came after a later ask of its source"] += 1
                    self.wire.decide(request)
                elif k in ("listener", "drop") and self.listener:
                    self.stats["listener event delivered late" if k == "listener" else "listener event dropped"] += 1
                    self._listen(drop=k == "drop")
                else:
                    continue
                return


    def _deliver_mail(self, index: int) -> None:
        run, call = self.mail.pop(index % len(self.mail))
        if run in self.runs and any(self.runs.index(heard) > self.runs.index(run) for heard in self.wire.heard
                                    if heard in self.runs):
            self.stats["a late old-run message came after a later run asked"] += 1
        if isinstance(call, StopEvent):
            self.wire.stopped(call)
        else:
            self.wire.decide(call)

    @rule(late=st.booleans())
    def second_stream(self, late: bool) -> None:
        """Another streaming query (another checkpoint) asks under the pacer name while the first runs (the driver
        heard its current run): refused, naming both; it fails, and its source's stop event reaches the driver now
        or late. (Before the first's current run asked, the other would be the query's run: nothing to check.)"""
        with self.step():
            if self.mode != "processing" or self.spark_run not in self.wire.heard:
                return
            other_run = f"other-{len(self.runs)}-{self.stats['second stream refused']}"
            other = JvmSource(f"{other_run}/src", "q", other_run, dict(OPTIONS), stream="stream-2")
            other.observe(frozenset({-1 - self.stats["second stream refused"]}))
            other.first_batch, other.trigger = 0, next(self.stamps)
            error = self.wire.decide(other.request(0)).error
            assert error is not None and "'q'" in error and "stream-1" in error and "stream-2" in error, error
            self.stats["second stream refused"] += 1
            if late:
                self.mail.append((other_run, other.stop_event()))
            else:
                self.wire.stopped(other.stop_event())
            self.listener.append(("terminated", other_run))

    @rule(source=st.integers(0, 2), count=NEW, listener=st.booleans(), idle_progress=st.booleans())
    def process_all_available(self, source: int, count: int, listener: bool, idle_progress: bool) -> None:
        """Maybe new data, then ``processAllAvailable()`` (in a processingTime run): triggers (every ask answered)
        until the first in which no source admitted anything; then every unit observed before the call is
        committed."""
        with self.step():
            if self.mode != "processing":
                return
            self._arrive(source, count)
            before = set(self.observed)
            pending = [bool(s.pending) for s in self.srcs]
            # an unanswered admission only a source asked after one with data reports (test_found_a_drain_ends_*)
            if any(pending[i] and any(s.failed_open for s in self.srcs[i + 1:]) for i in range(self.n)):
                self.stats["processAllAvailable: a later source's unanswered admission not reported yet"] += 1
            if self.idle is not None and any(pending[self.idle + 1:]):
                self.stats["processAllAvailable: a union's idle source asked before one with data"] += 1
            for src in self.srcs:
                src.caller_waiting = True
            for _ in range(2 * len(before) + 10):
                if not self._trigger(["answer"], listener, idle_progress, joins=True):
                    break
            else:
                raise AssertionError("processAllAvailable() never returned: a batch at every trigger")
            for src in self.srcs:
                src.caller_waiting = False
            left = sorted(before - set(self.committed))
            told = [s.told_wait for s in self.srcs]
            assert not left, \
                f"processAllAvailable() returned with units never committed: {left} (told wait: {told})"

    # ------------------------------------------------------------------ invariants

    def _accounted(self) -> Counter[int]:
        """How many times the Controller accounted each unit, from its completed batches' datasets."""
        counts: Counter[int] = Counter()
        if "q" not in self.paced.queries:
            return counts
        for report in self.controller.reports("q"):
            for dataset_id, _ in report.dataset_latencies:
                assert dataset_id in self.datasets, f"the Controller accounted an unknown dataset {dataset_id}"
                counts.update(self.datasets[dataset_id])
        return counts

    @invariant()
    def accounted_once_and_balanced(self) -> None:
        """The ledger balances; no unit is accounted twice, nor one Spark did not commit."""
        if not self.ready:
            return
        with self.step():
            if "q" in self.paced.queries:
                self.controller.ledger.check_balance("q")
            for unit, times in self._accounted().items():
                assert times == 1, f"unit {unit} accounted {times} times"
                assert self.committed[unit] == 1, f"unit {unit} accounted, never committed by Spark"

    def teardown(self) -> None:
        if not self.ready:
            return
        try:
            if not self.broken:
                self._quiesce()
                self._check()
                self._tally()
        finally:
            for name, level in self.levels.items():
                logging.getLogger(name).setLevel(level)

    def _quiesce(self) -> None:
        """Everything on its way reaches the driver; the run drains (as processAllAvailable() would, past its first
        empty trigger) until no source holds anything; the last progress reaches the driver with a last ask."""
        while self.mail:
            self._deliver_mail(0)
        self._listen_all()
        for _ in range(2 * len(self.observed) + 10):  # an availableNow or Once run ends
            if self.mode == "processing":
                break
            self._trigger(["answer"], True)
        for src in self.srcs:
            src.caller_waiting = True
        for src in self.srcs:  # the current run's timed-out asks reach the driver before its next asks (Spark went on)
            for request in src.delayed:
                self.wire.decide(request)
            src.delayed = []
        for _ in range(2 * len(self.observed) + 10):
            ran = self._trigger(["answer"], True)
            if not ran and not any(s.pending or s.failed_open for s in self.srcs):
                break
        else:
            raise AssertionError("stall: a batch at every trigger, or data pending no trigger admits")
        for src in self.srcs:  # the last batch's progress reaches the driver with the next ask
            if src.unsent:
                src.latest_offset(self.wire, self.batch_id, "answer", next(self.stamps))

    def _check(self) -> None:
        stuck = sorted(u for s in self.srcs for _, us in s.pending for u in us)
        assert not stuck, f"stall: units pending at the sources after quiescing: {stuck}"
        never = sorted(self.observed - set(self.committed))
        assert not never, f"units Spark never committed: {never}"
        if "q" not in self.paced.queries:
            assert not self.committed, "Spark committed data of a query the driver never heard of"
            return
        q = self.paced.queries["q"]
        note(f"driver: {self.paced.summary()['q']}")
        self.controller.ledger.check_balance("q")
        accounted = self._accounted()
        missing = sorted(u for u in self.committed if accounted[u] == 0)
        assert not missing, f"units Spark committed that the Controller never accounted: {missing}"
        done_rows = sum(r.rows for r in self.controller.reports("q"))
        assert done_rows == ROWS * sum(self.committed.values()), \
            f"accounted {done_rows} rows, Spark read {ROWS * sum(self.committed.values())}"
        assert not self.controller.busy("q") and q.inflight is None, \
            f"left busy without a batch Spark runs (in flight: {q.inflight})"
        held = [d.id for d in self.controller.buffered("q")]
        assert not held, f"pacer holds data no source has pending: {held}"
        assert not q.orphans, f"an earlier run's batches never accounted: {q.orphans}"
        assert not q.parked, f"parts of a replaced run's batch still wait for a stop event that came: {q.parked}"

    def _tally(self) -> None:
        if not currently_in_test_context():
            return
        event("the admission strategy was asked with data held" if self.strategy.calls else
              "the admission strategy was never asked")
        if self.strategy.admitted:
            event("the admission strategy admitted a batch")
        event("the driver was asked" if self.wire.heard else "the driver was never asked")
        for name, count in sorted(self.stats.items()):
            if count:
                event(name)


def _settings(examples: int) -> settings:
    return settings(max_examples=examples, stateful_step_count=STEPS, deadline=None, derandomize=not DEEP,
                    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


class TestEveryStepReadsAndAccountsEachUnitOnce(PacedProtocol.TestCase):  # type: ignore[misc,valid-type]
    """The state machine (module docstring): CI's derandomized draws, or PACER_PROTOCOL_EXAMPLES fresh ones."""

    settings = _settings(EXAMPLES)


# ---------------------------------------------------------------------- what the machine found, pinned
#
# Each test replays the steps Hypothesis shrank a failure to (a rule call is a step; the invariant runs after each, as
# in a draw). Each fixed one failed on the code before its fix (the comment above it names the fix). None is open: one
# left open would be xfail(strict=True), its fix failing the test until the marker goes, and the machine would keep its
# draws out of it with a guard (so that they find the next one) until then.


@contextmanager
def replayed() -> Iterator[PacedProtocol]:
    """The machine, for a test to call its steps on; its teardown (quiescing and the final checks, unless a step
    failed, and the log levels back) when the block ends."""
    state = PacedProtocol()
    try:
        yield state
    finally:
        state.teardown()


IDLE_ENTRY = ("an idle trigger's progress entry (Spark keeps one after 10 s without data, under the id of the batch "
              "still to come) is taken for the end of the batch pacer then admits under that id")


# fixed: {IDLE_ENTRY}: the listener completed it before Spark ran it, with the idle entry's 0 rows
# (PacedQueries.on_progress); entries of triggers that ran no batch are no batch's end now
def test_found_idle_progress_entry_completes_the_next_batch_early_with_no_rows() -> None:
    """processAllAvailable() runs batch 0, then an idle trigger leaves an entry for batch 1; the listener is slow. The
    next processAllAvailable() admits batch 1 and the listener delivers the idle entry now: batch 1 completes with 0
    rows (accounted 10 rows, Spark read 20)."""
    with replayed() as state:
        state.setup(sources=1, idle=None, limits=[None, None, None], counts=[0])
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=False, idle_progress=True)
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()


# fixed: {IDLE_ENTRY}: a stop event carrying it said that batch's trigger ended (SourceTruth.stop_run), and the replay
# of it was accounted again
def test_found_idle_progress_entry_in_a_stop_event_counts_a_replayed_batch_twice() -> None:
    """A trigger without a batch leaves an idle entry for batch 0; the next trigger's ask times out (the source admits
    unit 0 unanswered into batch 0, logged) and stop() comes while batch 0 runs. The stop event carries the record
    and the idle entry: batch 0 is accounted (0 rows) as ended; the new run re-runs batch 0 from the offset log and
    its replay is accounted too: unit 0 twice."""
    with replayed() as state:
        state.setup(sources=1, idle=None, limits=[None, None, None], counts=[0])
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=1, listener=True, idle_progress=True)
        state.accounted_once_and_balanced()
        state.restart(how="mid_batch", at=0, late=[False, False, False], mode="processing", outcomes=["stale"],
                      listener=True)
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=0, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()


# fixed (SourceTruth.old_stop): a late stop event carrying an idle trigger's entry (under the id of the batch still to
# come) took it for the end of that batch's trigger, so the source's unanswered record for it was accounted as run in
# the old run, and the new run's replay of the same batch again; an idle entry says no trigger of that batch ended
def test_found_an_idle_entry_before_a_restart_mid_batch_counts_rows_twice() -> None:
    """A union (source 0 idle), processAllAvailable() with an idle entry, a unit observed, a restart while the batch
    runs (source 1's ask raised; its stop event late), processAllAvailable() again: 50 rows accounted, 40 read."""
    with replayed() as state:
        state.setup(sources=2, idle=0, limits=[None, None, None], counts=[0])
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=True, listener=False, source=0)
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.restart(at=0, count=1, how="mid_batch", late=[False, True, False], listener=False, mode="processing",
                      outcomes=["answer", "raise", "answer"], source=0)
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=False, listener=False, source=0)
        state.accounted_once_and_balanced()


# fixed: the listener's terminated event completed the batch in flight as decided when its progress came with
# pacerUnanswered (PacedQueries.on_terminated waited for the stop events only without progress); the stop event's
# record then completed the rest with the whole Spark batch's progress, whose rows were counted again
def test_found_terminated_completes_an_unanswered_batch_and_its_rows_count_twice() -> None:
    """The driver admits snapshot 0 of 2 into batch 0, its answer comes past the timeout and the source admits both
    (20 rows); the run stops, its stop event is late, and the listener's progress (pacerUnanswered) and terminated
    events come first: batch 0 completes as decided (10 rows). The late stop event's record completes snapshot 1
    with batch 0's progress: 20 rows more (accounted 40 rows with unit 2's batch, Spark read 30)."""
    with replayed() as state:
        state.setup(sources=1, idle=None, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.observe(source=0, count=1)
        state.accounted_once_and_balanced()
        state.trigger_failing(source=0, count=1, outcomes=["late"], listener=False, idle_progress=False)
        state.accounted_once_and_balanced()
        state.restart(how="between", at=0, late=[True, False, False], mode="processing", outcomes=["answer"],
                      listener=True, source=0, count=1)
        state.accounted_once_and_balanced()


# fixed (PacedQueries.behind): a timed-out ask that reached the driver after Spark went on to a later batch (another
# source of the query asked in it), and after no later ask of its own source, was decided for its old batch: the batch
# took another source's data that arrived since; the asking source's unanswered record then rebuilt it as what Spark
# ran, keeping the other parts, so that data was accounted as read where Spark never read it. Such an ask is no
# trigger's first ask now: its snapshots arrive, nothing is decided for it
def test_found_a_timed_out_ask_decided_after_its_trigger_accounts_another_source_s_data() -> None:
    """Source 1 holds unit 0 (told to wait: its ask came after source 0's formed batch 0, whose answer came past the
    timeout). Source 0's next two asks time out (it admits units 3, then 4-5 unanswered, into batches 1 and 2). Its
    ask for batch 1 reaches the driver now: not overtaken (no later ask of source 0 reached it), it settles batch 0
    and decides batch 1: unit 0 of source 1. Its ask for batch 2 then reports batch 1 as admitted unanswered: batch
    1 is rebuilt as unit 0 plus unit 3 and completed; Spark's batch 1 was unit 3 alone."""
    with replayed() as state:
        state.setup(sources=2, idle=None, limits=[1, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.observe(source=1, count=1)
        state.accounted_once_and_balanced()
        state.trigger_failing(source=0, count=2, outcomes=["late", "answer"], listener=True, idle_progress=False)
        state.accounted_once_and_balanced()
        state.trigger_failing(source=0, count=1, outcomes=["stale", "answer"], listener=False, idle_progress=False)
        state.accounted_once_and_balanced()
        state.trigger_failing(source=0, count=2, outcomes=["stale", "answer"], listener=True, idle_progress=False)
        state.accounted_once_and_balanced()
        state.deliver(kind="delayed", index=0, source=0, count=0)
        state.accounted_once_and_balanced()
        state.deliver(kind="delayed", index=0, source=0, count=0)
        state.accounted_once_and_balanced()


# fixed (Driver.take_all): under Trigger.Once (single_batch) the batch of the source that formed it was what
# Driver.admit gave, not everything held: the strategy's own count when it admitted (Driver.admit drained only a
# 'wait'), the one batch leaving the rest to the next run
def test_found_trigger_once_reads_only_what_the_strategy_admits() -> None:
    """Two snapshots wait when the query restarts under Trigger.Once; the strategy admits one: the one batch reads
    it, the other waits for the next run (plain Spark reads both)."""
    with replayed() as state:
        state.setup(sources=1, idle=None, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.observe(source=0, count=1)
        state.accounted_once_and_balanced()
        state.observe(source=0, count=1)
        state.accounted_once_and_balanced()
        state.restart(how="between", at=0, late=[False, False, False], mode="once", outcomes=["answer"], listener=True)
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=0, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()


# fixed, the same: a drain cut by the Controller's probe limit (pacer.batch_size: probe_limit_bytes, probe_rows;
# ReplayGuard.admit keeps the caps), the one batch leaving held snapshots to the next run
def test_found_trigger_once_reads_only_a_probe_of_what_is_held() -> None:
    """Batch 0 measured one snapshot; three more wait when the query restarts under Trigger.Once: the one batch takes
    two of them (the probe limit past what was measured), where plain Spark reads all three."""
    with replayed() as state:
        state.setup(sources=1, idle=None, limits=[None, None, None], counts=[0])
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()
        for _ in range(3):
            state.observe(source=0, count=1)
            state.accounted_once_and_balanced()
        state.restart(how="between", at=0, late=[False, False, False], mode="once", outcomes=["answer"], listener=True)
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=0, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()


# fixed (SourceTruth.drain_ahead): under a drain, the first source with data found the query busy with a batch whose
# trigger ended with pacerUnanswered, which only a source asked after it reports; it was told to wait, the trigger
# read nothing and processAllAvailable() returned with its data held. Two fixes were taken back: completing the batch
# as decided counted a part its source had read earlier without an answer, and parking the other sources' parts until
# they report left a batch completed with a part never read (deep profile). Now the source admits all it may ahead,
# kept by the driver as its record of an admission without a decision, accounted once the earlier batch is settled
def test_found_a_drain_ends_while_a_later_source_s_unanswered_admission_holds_the_batch() -> None:
    """Three sources; source 2's answer for batch 0 comes past the timeout (it admits unit 0 unanswered). Unit 1 comes
    at source 0 and processAllAvailable() is called: in its first trigger source 0 asks first, batch 0 still waits
    for source 2's report (its progress says pacerUnanswered), so source 0 is told to wait; source 2's ask then
    settles batch 0, too late: no source admitted anything, Spark returns with unit 1 never committed."""
    with replayed() as state:
        state.setup(sources=3, idle=None, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.trigger_failing(source=2, count=1, outcomes=["answer", "answer", "late"], listener=False,
                              idle_progress=False)
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=False, idle_progress=False)
        state.accounted_once_and_balanced()


# fixed, the same (SourceTruth.drain_ahead for every source with data asked before the report): the source asked
# between the first and the one that reports was told to wait under the drain instead of admitting all it holds
def test_found_a_drain_lets_every_source_asked_before_the_report_admit_all_it_holds() -> None:
    """As above, with unit 2 at source 1 too: source 1, asked after source 0 admitted ahead and before source 2's
    report settles batch 0, admits all it holds in the same trigger (the drain's join rule)."""
    with replayed() as state:
        state.setup(sources=3, idle=None, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.trigger_failing(source=2, count=1, outcomes=["answer", "answer", "late"], listener=False,
                              idle_progress=False)
        state.accounted_once_and_balanced()
        state.observe(source=1, count=1)
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=False, idle_progress=False)
        state.accounted_once_and_balanced()


OLDER_HELD = ("under a drain, the batch formed at the first ask with data took another source's older snapshot (the "
              "strategy's count, or the drain's caps, filled by it), which that source had admitted without an "
              "answer already, unknown to the driver until its own ask: the asking source was told to wait, the "
              "record then emptied the batch, and the trigger read nothing")


# fixed (Driver.with_own): {OLDER_HELD}; processAllAvailable() returned with the asking source's unit unread
def test_found_a_drain_batch_of_another_source_s_unanswered_snapshot_ends_process_all_available() -> None:
    """Three sources (0 idle); source 2's ask for batch 0 is decided 'wait', its answer late: it admits unit 0
    unanswered. processAllAvailable() with unit 1 at source 1: source 1 asks first with data, the strategy admits
    the oldest held (source 2's unit 0) and source 1 is told to wait; source 2's record takes unit 0 back into batch
    0: the trigger reads nothing and unit 1 is never committed."""
    with replayed() as state:
        state.setup(sources=3, idle=0, limits=[None, None, None], counts=[0, 1])
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["raise", "raise", "late"],
                              source=1)
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=False, listener=False, source=0)
        state.accounted_once_and_balanced()


# fixed, the same ({OLDER_HELD}): a source asked later had new data and was not let join the emptied batch
def test_found_a_drain_batch_of_another_source_s_unanswered_snapshot_lets_no_later_source_join() -> None:
    """As above after a few batches and two refused second streams: source 2's new unit, asked after the emptied
    batch, was told to wait under the drain instead of joining."""
    with replayed() as state:
        state.setup(sources=3, counts=[1, 0, 0, 0], limits=[None, None, None], idle=0)
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=False, listener=False, source=0)
        state.accounted_once_and_balanced()
        state.trigger(count=1, idle_progress=False, listener=True, source=0)
        state.accounted_once_and_balanced()
        state.second_stream(late=False)
        state.accounted_once_and_balanced()
        state.second_stream(late=False)
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=False, listener=False, source=0)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["raise", "raise", "late"],
                              source=1)
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.process_all_available(count=1, idle_progress=False, listener=False, source=1)
        state.accounted_once_and_balanced()


# fixed (a late ask's pending snapshots no longer arrive, PacedQueries.behind): found while test_found_a_drain_ends_*
# was tried fixed (that fix completed such a batch as decided, counting a part its source had read in an earlier batch
# without an answer); the late ask of that source re-arrived a snapshot completed since (LedgerViolation)
def test_found_a_part_decided_for_a_batch_its_source_read_earlier_unanswered_counts_once() -> None:
    """Source 0 holds 22 snapshots, source 1 one; batch 0: source 0's answer is late (it admits all it holds), source 1
    is told to wait; batch 1: source 0's ask raises (it admits its new one), source 1's answer comes past the timeout
    (it admits its snapshot unanswered; its ask reaches the driver at the end); batch 2: source 0 reports both records
    and the driver decides source 1's snapshot (it does not know yet) with source 0's new one; source 1's ask raises.
    Every unit once: source 1's snapshot belongs to batch 1, as its record says."""
    with replayed() as state:
        state.setup(sources=2, idle=None, limits=[None, None, None], counts=[2])
        state.accounted_once_and_balanced()
        for _ in range(22):
            state.observe(count=1, source=0)
            state.accounted_once_and_balanced()
        state.observe(count=1, source=1)
        state.accounted_once_and_balanced()
        for outcomes in (["late", "answer", "raise"], ["raise", "stale", "raise"], ["answer", "raise", "raise"]):
            state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=outcomes, source=0)
            state.accounted_once_and_balanced()


# fixed (PacedQueries._stopped_unheard): a source run's stop event that came before the driver heard of its query
# was dropped without a trace; the run's late ask then registered the query, was decided, and the batch was parked at
# the next run's first ask for a stop event that had come already (found by the deep profile)
def test_found_an_ask_after_its_run_s_stop_event_came_first_is_dropped() -> None:
    """Run 0 is stopped while its first ask is on its way; its stop event reaches the driver first (nothing to say),
    then the ask: it must not make run 0 the query's current run. Two restarts later every unit is accounted once
    and no part waits for a stop event."""
    with replayed() as state:
        state.setup(sources=1, idle=0, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.deliver(count=1, index=0, kind="mail", source=0)
        state.accounted_once_and_balanced()
        state.restart(at=0, count=1, how="interrupted", late=[True, False, False], listener=False,
                      mode="processing", outcomes=["answer", "answer", "answer"], source=0)
        state.accounted_once_and_balanced()
        state.deliver(count=1, index=1, kind="mail", source=0)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["raise", "raise", "raise"],
                              source=0)
        state.accounted_once_and_balanced()
        state.deliver(count=1, index=0, kind="mail", source=0)
        state.accounted_once_and_balanced()
        state.restart(at=0, count=1, how="between", late=[True, False, False], listener=False, mode="processing",
                      outcomes=["answer", "answer", "answer"], source=0)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["late", "raise", "raise"],
                              source=0)
        state.accounted_once_and_balanced()


# found against the second fix tried for test_found_a_drain_ends_* (parking the other sources' parts), taken back: a
# batch completed with a part its source never read, which the source then reported pending again (LedgerViolation)
def test_found_a_batch_completed_with_a_part_its_source_still_holds() -> None:
    """Three sources; long runs of asks that raise (each source admits what it holds without an answer) and late
    answers: every unit once. The steps Hypothesis printed, one trigger_failing each: (source, count, listener,
    outcomes of sources 0-2: Raise, Late, Answer, Stale)."""
    outcome = {"R": "raise", "L": "late", "A": "answer", "S": "stale"}
    steps = [
        (2, 1, False, "RRL"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRL"),
        (0, 1, False, "RRR"),
        (0, 1, True, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (2, 1, False, "RRL"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "ARL"),
        (1, 1, False, "RLR"),
        (0, 1, False, "RRR"),
        (0, 1, False, "RRR"),
        (2, 1, False, "RRL"),
        (0, 1, False, "ARR"),
        (2, 1, False, "ARA"),
        (2, 0, True, "ARS"),
    ]
    with replayed() as state:
        state.setup(sources=3, idle=None, limits=[None, None, None], counts=[0, 1, 2, 1])
        state.accounted_once_and_balanced()
        for source, count, listener, outcomes in steps:
            state.trigger_failing(count=count, idle_progress=False, listener=listener,
                                  outcomes=[outcome[o] for o in outcomes], source=source)
            state.accounted_once_and_balanced()


# fixed (SourceTruth._settle, by the batch's trigger stamp): a batch formed in a trigger that ran nothing (its one
# source with a part was told to wait; the others' asks raised) was taken at the next trigger of the same Spark batch
# for that trigger's batch: its sources were answered their parts of it, and a later source's ask formed another
# batch taking the first source's data, answered "wait" already (found by the deep profile)
def test_found_a_batch_of_a_trigger_that_ran_nothing_is_taken_back_at_the_next() -> None:
    """Three sources (1 idle); after three batches, source 0's answers come late twice and a second stream is
    refused; in the next trigger source 0 is told to wait (the strategy takes source 2's older snapshot, which source
    2 admitted unanswered before) and the trigger runs nothing; every unit once."""
    with replayed() as state:
        state.setup(sources=3, idle=1, limits=[None, None, None], counts=[0, 0, 1, 2])
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.observe(count=1, source=0)
        state.accounted_once_and_balanced()
        state.trigger(count=1, idle_progress=False, listener=True, source=0)
        state.accounted_once_and_balanced()
        state.trigger(count=1, idle_progress=False, listener=True, source=0)
        state.accounted_once_and_balanced()
        state.trigger(count=1, idle_progress=False, listener=True, source=0)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["raise", "raise", "late"], source=1)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["late", "raise", "raise"], source=0)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["late", "raise", "raise"], source=0)
        state.accounted_once_and_balanced()
        state.second_stream(late=False)
        state.accounted_once_and_balanced()
        state.trigger_failing(count=1, idle_progress=False, listener=False, outcomes=["answer", "raise", "raise"], source=0)
        state.accounted_once_and_balanced()
        state.trigger(count=1, idle_progress=False, listener=True, source=1)
        state.accounted_once_and_balanced()


# ---------------------------------------------------------------------- the holes, closed: kept so


def test_a_union_s_idle_source_asked_first_never_ends_process_all_available() -> None:
    """A union whose idle source is asked first: after a batch, the idle source asks only to report its progress.
    Before the protocol's rule 1 its ask took the trigger's first ask, the source with data was told to wait, and
    processAllAvailable() returned at that trigger with unit 1 never committed."""
    with replayed() as state:
        state.setup(sources=2, idle=0, limits=[None, None, None], counts=[1])
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=1, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()
        state.process_all_available(source=0, count=1, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()


def test_under_trigger_once_a_source_asked_after_the_batch_formed_joins_it() -> None:
    """Both sources of a union hold data when the query restarts under Trigger.Once: source 0's ask forms the batch,
    source 1's joins it with all it holds (protocol rule 2); before, source 1 was told to wait and its data stayed
    for a next run."""
    with replayed() as state:
        state.setup(sources=2, idle=None, limits=[None, None, None], counts=[0])
        state.accounted_once_and_balanced()
        state.observe(source=0, count=1)
        state.accounted_once_and_balanced()
        state.observe(source=1, count=1)
        state.accounted_once_and_balanced()
        state.restart(how="between", at=0, late=[False, False, False], mode="once", outcomes=["answer"], listener=True)
        state.accounted_once_and_balanced()
        state.trigger(source=0, count=0, listener=True, idle_progress=False)
        state.accounted_once_and_balanced()
