"""The fourth decision on Spark: the session's :class:`pacer.scaler.Scaler`, enacted through the cluster manager.

The truth about the executors is Spark's status store (the executors it lists, their cores and running tasks); the
truth about what was asked is this module's record of its calls. :meth:`ExecutorScaling.follow` runs under the
driver's lock, on the scaler's own clock (:class:`ScalingClock`, every second) and at each ask; it never waits on
the cluster manager: its calls go to :mod:`pacer_spark.driver.cluster_calls`' thread and what came of them is read
at the next turn.

- More executors: a request for the new total at once. One not running ``grant_timeout`` after it was asked is
  reported ungranted (it is not counted as held: what is held is what Spark lists).
- Fewer: the new total at once (executors asked for and not started are called off), then a removal of running
  ones between batches: while one is due, the driver admits no batch (:meth:`ExecutorScaling.holding`, at most
  :data:`REMOVAL_TIMEOUT_S`), and once no admitted batch runs, executors running no task are removed. A removal
  the cluster manager refused is reported and made again; the executors it named count again meanwhile.
- What it wants and learned (start-up, cores per executor) is kept in the checkpoint root, so a restart with a
  backlog starts from what was needed, not from the fewest (:func:`saved_state`).
- Cores per executor and the task slots are read from Spark's executors (a standalone executor takes all of its
  worker's cores unless ``spark.executor.cores`` says otherwise); slots leave out executors asked to leave.

With ``enact=False`` (``spark-dynamic``: Spark's own dynamic allocation decides) it only watches and records.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pacer.scaler import Scaler
from pacer_spark.driver.cluster_calls import CallResult, Calls, ClusterCalls
from pacer_spark.jvm import executor_requests, status_store
from pacer_spark.jvm.status_store import LiveExecutor

log = logging.getLogger("pacer_spark.driver.scaling")

#: Seconds a due removal holds the next batch at most, waiting for the running ones to complete.
REMOVAL_TIMEOUT_S = 30.0
#: Seconds an executor is taken to need to start before one was seen to (a standalone worker: a few).
DEFAULT_STARTUP_S = 10.0
#: Seconds after which executors asked for and not running are reported ungranted (or three start-ups, if longer).
GRANT_TIMEOUT_S = 60.0
#: Seconds between two turns of the scaler's own clock.
TICK_S = 1.0

#: The executors' figures in a paced query's progress and Spark's metrics system, with what each holds.
METRICS: dict[str, str] = {
    "pacerExecutorsRunning": "executors taking tasks now (Spark's list, less those asked to leave)",
    "pacerExecutorsHeld": "executors the application holds now (Spark's list, leaving ones included)",
    "pacerExecutorsWanted": "executors the scaling strategy wants (the cluster manager's target)",
    "pacerExecutorsRecommended": "executors the scaling strategy would hold (with scale.recommendOnly, enacted none)",
    "pacerScalingUps": "changes to more executors wanted so far",
    "pacerScalingDowns": "changes to fewer executors wanted so far",
    "pacerScalingRefused": "cluster-manager calls refused so far (each made again)",
    "pacerScalingUngrantedExecutors": "executors asked for and not running after the grant timeout",
}


class ExecutorScaling:
    """A scaling strategy run on a Spark session (module docstring).

    :param scaler: the strategy's runner (bounds, cores per executor, period, record).
    :param spark: the session whose executors change.
    :param clock: seconds, monotonic (the Controller's clock).
    :param live: reads the listed executors (default: Spark's status store; None: unreadable now).
    :param calls: makes the cluster manager's calls (default: :class:`ClusterCalls` on the session's JVM; removal
        decommissions where the session has ``spark.decommission.enabled`` on).
    :param enact: False: only watch the executors Spark's dynamic allocation holds.
    :param startup_s: seconds an executor is taken to need to start until one is seen to (None:
        :data:`DEFAULT_STARTUP_S`; an engine profile's measured start-up).
    :param learn_cores: read cores per executor from the executors Spark lists (False: keep the scaler's).
    :param state_path: where the scaling keeps what it wants and learned (:func:`saved_state`), written at each
        change: a restart on the same checkpoint root starts from it (None: nowhere).
    :ivar target: the executors the strategy wants now (the cluster manager's target too).
    :ivar removal_since: when the removal still to be made became due (None: none is).
    """

    def __init__(self, scaler: Scaler, spark: Any, *, clock: Callable[[], float] = time.monotonic,
                 live: Callable[[], list[LiveExecutor] | None] | None = None, calls: Calls | None = None,
                 enact: bool = True, startup_s: float | None = None, learn_cores: bool = True,
                 state_path: Path | None = None) -> None:
        self.scaler = scaler
        self.enact = enact
        self.clock = clock
        self.started = clock()
        self._live = live or (lambda: status_store.live_executors(spark))
        gently = calls is None and spark is not None and executor_requests.decommissions(spark)
        self.how = "decommissioned" if gently else "removed"
        if calls is None and enact:
            remove = executor_requests.decommission if gently else executor_requests.kill
            calls = ClusterCalls(lambda n: executor_requests.request_total(spark, n), lambda ids: remove(spark, ids),
                                 clock=clock)
        self.calls = calls
        self.learn_cores = learn_cores
        self.state_path = state_path
        self.target = scaler.initial
        self.startup_s = DEFAULT_STARTUP_S if startup_s is None else startup_s
        self.removal_since: float | None = None
        self.removed: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.ungranted: list[dict[str, Any]] = []
        self.ignored = 0  # answers to no call of this run's, or answered already
        #: bumps when the executors taking tasks may have changed (the driver then reads the task slots again)
        self.revision = 0
        self._asked_at: float | None = None
        self._request_refused = False
        self._removal: tuple[int, tuple[str, ...]] | None = None  # (seq, ids) asked and not yet answered
        self._removal_at = 0.0
        self._retry_at = -1.0
        self._excess = False  # more executors ran than wanted at the last turn
        self.deferrals: list[dict[str, Any]] = []
        self._leaving: set[str] = set()  # removed, and still listed until Spark's status store hears of it
        self._answered: set[int] = set()
        self._ungranted_since: float | None = None
        self._listed: list[LiveExecutor] = []
        self._listed_this_turn = False  # the status store was read in this turn (task_slots reuses that reading)

    # ------------------------------------------------------------------ what Spark has

    def _read(self) -> list[LiveExecutor] | None:
        """Read Spark's status store: the executors taking tasks (None: unreadable)."""
        listed = self._live()
        if listed is None:
            return None
        self._listed = listed
        self._listed_this_turn = True
        before = len(self._leaving)
        self._leaving &= {e.id for e in listed}
        self.revision += before != len(self._leaving)
        if self.learn_cores and listed:
            cores = max(e.cores for e in listed)
            if cores >= 1 and cores != self.scaler.cores_per_executor:
                log.info("pacer: executors have %d cores each (Spark's list; was taken as %d)", cores,
                         self.scaler.cores_per_executor)
                self.scaler.cores_per_executor = cores
        return self._taking()

    def _taking(self) -> list[LiveExecutor]:
        """Of the executors last listed, those taking tasks: not removed and not named by a removal in flight."""
        going = self._leaving | set(self._removal[1] if self._removal else ())
        return [e for e in self._listed if e.id not in going]

    def task_slots(self) -> int | None:
        """Cores of the executors taking tasks (those asked to leave left out); None: unreadable or none. Right
        after a turn that read Spark's status store (the driver asks after each turn), that reading is used, with
        the removal the turn made left out: one read of the status store per turn."""
        if self._listed_this_turn:
            self._listed_this_turn = False
            running: list[LiveExecutor] | None = self._taking()
        else:
            running = self._read()
            self._listed_this_turn = False
        return (sum(e.cores for e in running) or None) if running is not None else None

    def holding(self, now: float | None = None) -> bool:
        """Whether the driver should admit no batch now: a removal is due and waits for the running batches (at most
        :data:`REMOVAL_TIMEOUT_S`), or its call is not yet answered."""
        if not self.enact:
            return False
        now = self.clock() if now is None else now
        due = self.removal_since is not None and now - self.removal_since < REMOVAL_TIMEOUT_S
        return due or (self._removal is not None and now - self._removal_at < REMOVAL_TIMEOUT_S)

    # ------------------------------------------------------------------ turns

    def start(self) -> None:
        """Ask for the initial executors (any beyond them are removed at the first turn, before a batch runs);
        watching, record the executors there are."""
        if not self.enact:
            self.target = len(self._read() or [])
            self.scaler.record(0.0, self.target, "")
            self._observe(self.target)
            return
        assert self.calls is not None
        running = self._read() or []
        if self.scaler.recommend_only:  # what runs is what is held: nothing is asked
            self.target = len(running)
            self._observe(self.target)
            return
        self.calls.request_total(self.target)
        self._asked_at = self.clock()
        self._observe(min(len(running), self.target))

    def follow(self, controller: Any, *, batches_running: bool) -> None:
        """One turn (under the driver's lock; never waits on the cluster manager): read what came of the calls and
        what Spark lists, ask the strategy when due, then ask the cluster manager for what it wants."""
        now = self.clock()
        self._listed_this_turn = False
        due = self.scaler.due(now - self.started)
        if not self.enact:
            if due:
                self._watch(now - self.started)
            return
        assert self.calls is not None
        answered = self._answers(now)
        if not (due or answered or self._excess or self._removal is not None or self._asked_at is not None):
            return
        running = self._read()
        if running is None:
            return
        self._started(now, len(running))
        if self.scaler.recommend_only:
            self.target = len(running)  # the executors as they are (Spark's allocation, or fixed)
        if due:
            pending = max(0, self.target - len(running))
            removing = max(0, len(running) - self.target)
            wanted = self.scaler.decide(controller, running=len(running), pending=pending, removing=removing,
                                        startup_s=self.startup_s, peak_tasks=sum(e.active_tasks for e in running),
                                        now=now - self.started)
            if wanted != self.target or self._request_refused:
                self._request_refused = False
                self.calls.request_total(wanted)  # fewer: executors asked for and not started are called off first
                if wanted > self.target:
                    self._asked_at, self._ungranted_since = now, None
                if wanted != self.target:
                    self.target = wanted
                    self._save()
        self._observe(self._remove(running, now, batches_running=batches_running))

    def _answers(self, now: float) -> bool:
        """Take in what came of the calls; whether any answer to this run's calls came."""
        assert self.calls is not None
        came = False
        for result in self.calls.results():
            call = result.call
            if call.run != self.calls.run or call.seq in self._answered:
                self.ignored += 1  # a previous run's, or one answered already
                continue
            self._answered.add(call.seq)
            came = True
            if call.kind == "remove":
                self._removed(result, now)
            elif not result.taken:
                self._refused(result, now)
                self._request_refused = call.total == self.target
        return came

    def _removed(self, result: CallResult, now: float) -> None:
        call = result.call
        if self._removal is not None and self._removal[0] == call.seq:
            self._removal = None
        self.revision += 1
        if not result.taken:  # the executors it named take tasks again; the next turn removes again
            self._refused(result, now)
            return
        self._leaving.update(call.ids)
        self.removed.append({"at": round(now - self.started, 3), "executors": list(call.ids), "how": self.how,
                             "between_batches": True, "took_s": round(result.took_s, 3)})  # chosen while none ran
        log.info("pacer: %s executor(s) %s (scaling strategy %r)", self.how, ", ".join(call.ids), self.scaler.name)
        assert self.calls is not None
        self.calls.request_total(self.target)  # Spark lowered its target by the executors removed: the strategy's

    def _refused(self, result: CallResult, now: float) -> None:
        call = result.call
        what = {"request": call.total} if call.kind == "request" else {"remove": list(call.ids)}
        self.refused.append({"at": round(now - self.started, 3), **what, "error": result.error})

    def _started(self, now: float, running: int) -> None:
        """Learn the start-up time once what was asked for runs; report executors not granted in time."""
        if self._asked_at is None:
            return
        if running >= self.target:
            if running > 0 and now > self._asked_at and self._ungranted_since is None:
                self.startup_s = now - self._asked_at
            self._asked_at = self._ungranted_since = None
            self.revision += 1
            return
        if self._ungranted_since is None and now - self._asked_at >= max(GRANT_TIMEOUT_S, 3 * self.startup_s):
            self._ungranted_since = now
            self.ungranted.append({"at": round(now - self.started, 3), "wanted": self.target, "running": running})
            log.warning("pacer: %d executor(s) asked for %.0f s ago are not running (the cluster manager has not "
                        "granted them: free workers or cores, spark.cores.max); pacer counts the %d running",
                        self.target - running, now - self._asked_at, running)

    def _remove(self, running: list[LiveExecutor], now: float, *, batches_running: bool) -> int:
        """Remove what runs beyond the target once no batch runs (module docstring); how many executors take tasks
        after this turn."""
        assert self.calls is not None
        if self._removal is not None and now - self._removal_at >= REMOVAL_TIMEOUT_S and \
                self.calls.cancel(self._removal[0]):  # never made (a cluster manager that does not answer)
            self._deferred(now, f"its call waited {REMOVAL_TIMEOUT_S:g} s behind others")
            running = running + [e for e in self._listed if e.id in self._removal[1]]
            self._removal = None
            self.revision += 1
        excess = len(running) - self.target
        self._excess = excess > 0
        if excess <= 0:
            self.removal_since = None
            return len(running)
        if self._removal is not None:
            return len(running)  # its answer comes at a later turn
        if batches_running:
            if now < self._retry_at:
                return len(running)  # a removal waited out its hold lately: the batches run on meanwhile
            if self.removal_since is None:
                self.removal_since = now
            elif now - self.removal_since >= REMOVAL_TIMEOUT_S:
                self._deferred(now, f"batches ran for {REMOVAL_TIMEOUT_S:g} s")
            return len(running)
        chosen = tuple(e.id for e in reversed(running) if e.active_tasks == 0)[:excess]  # newest first
        if not chosen:
            return len(running)
        call = self.calls.remove(list(chosen))
        self._removal, self._removal_at = (call.seq, chosen), now
        self.revision += 1
        if len(chosen) >= excess:
            self.removal_since = None
        return len(running) - len(chosen)

    def _save(self) -> None:
        """Keep what the scaling wants and learned at :attr:`state_path` (written whole, then renamed)."""
        if self.state_path is None:
            return
        state = {"wanted": self.target, "startup_s": round(self.startup_s, 3),
                 "cores_per_executor": self.scaler.cores_per_executor, "strategy": self.scaler.name}
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.state_path.with_suffix(".partial")
            partial.write_text(json.dumps(state) + "\n")
            os.replace(partial, self.state_path)
        except OSError as exc:  # a read-only or vanished checkpoint root: the run goes on, a restart starts anew
            log.warning("pacer: cannot keep the scaling's state at %s (%s)", self.state_path, exc)

    def _deferred(self, now: float, why: str) -> None:
        """A due removal stops holding the batches (``why``); it is made the next time none runs."""
        self.removal_since = None
        self._retry_at = now + REMOVAL_TIMEOUT_S
        self.deferrals.append({"at": round(now - self.started, 3), "why": why})
        log.info("pacer: a removal of executors waits for a moment no batch runs (%s)", why)

    def _watch(self, at: float) -> None:
        """Record the executors Spark's dynamic allocation holds now (``enact=False``)."""
        self.scaler.last_call = at
        live = self._read()
        if live is None:
            return
        self.target = len(live)
        self.scaler.record(at, self.target, "Spark's dynamic allocation")
        self._observe(self.target)

    def _observe(self, running: int) -> None:
        held = len(self._listed) if self._listed else running
        self.scaler.observe(self.clock() - self.started, running=running, held=held)

    # ------------------------------------------------------------------ what it says

    def metrics(self) -> dict[str, str]:
        """:data:`METRICS`, now."""
        running = self.scaler.timeline[-1][1] if self.scaler.timeline else 0
        recommended = self.scaler.recommended
        return {"pacerExecutorsRunning": str(running), "pacerExecutorsHeld": str(len(self._listed)),
                "pacerExecutorsWanted": str(self.target),
                "pacerExecutorsRecommended": "" if recommended is None else str(recommended),
                "pacerScalingUps": str(sum(c["to"] > c["from"] for c in self.scaler.changes)),
                "pacerScalingDowns": str(sum(c["to"] < c["from"] for c in self.scaler.changes)),
                "pacerScalingRefused": str(len(self.refused)),
                "pacerScalingUngrantedExecutors": str(self.target - running if self._ungranted_since else 0)}

    def report(self) -> dict[str, Any]:
        """The report's ``scaling`` section: the strategy's record, the start-up last observed, each removal, each
        refused call and each request not granted in time."""
        end = self.clock() - self.started
        return {**self.scaler.report(0.0, end), "startup_s": round(self.startup_s, 3), "removals": list(self.removed),
                "refused": list(self.refused), "ungranted": list(self.ungranted), "deferred": list(self.deferrals),
                "answers_ignored": self.ignored}

    def close(self) -> None:
        """Keep the state (:attr:`state_path`) and make no more cluster-manager calls."""
        if self.enact:
            self._save()
        if isinstance(self.calls, ClusterCalls):
            self.calls.close()


def saved_state(path: Path) -> dict[str, Any]:
    """What a previous run's scaling kept at ``path`` (``wanted``, ``startup_s``, ``cores_per_executor``,
    ``strategy``); empty where there is none or it cannot be read (logged: the run then starts anew)."""
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("pacer: the scaling's state at %s cannot be read (%s); the executors start anew", path, exc)
        return {}
    return state if isinstance(state, dict) else {}


class ScalingClock:
    """The executors' own clock: a daemon thread that gives the driver a turn every :data:`TICK_S` seconds, so that
    the scaling follows the load and the Controller the task slots while no source asks (the strategy is asked only
    when its period is due)."""

    def __init__(self, turn: Callable[[], None], every_s: float = TICK_S) -> None:
        self._turn = turn
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pacer-scaling-clock", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self._turn()
            except Exception as exc:  # a stopping JVM: the next turn tries again
                log.debug("pacer: a scaling turn failed: %s", exc)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)


__all__ = ["GRANT_TIMEOUT_S", "METRICS", "REMOVAL_TIMEOUT_S", "ExecutorScaling", "ScalingClock", "saved_state"]
