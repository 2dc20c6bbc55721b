"""The fourth decision on Spark: the session's :class:`pacer.scaler.Scaler`, asked between admissions, enacted
through the cluster manager (:mod:`pacer_spark.jvm.executor_requests`).

The driver calls :meth:`ExecutorScaling.follow` under its lock at every ask, before the ask's admission; it reads
Spark's executors and asks the strategy only once its period passed (or while a removal waits). More executors
are asked for at once (``requestTotalExecutors``). Fewer are called off first where
they have not started (``requestTotalExecutors`` with the lower total), then removed only between batches: while any admitted batch
of a paced query has not completed, the removal waits (the driver's lock keeps the next batch from being admitted
while it is made), at most :data:`REMOVAL_TIMEOUT_S`, after which only executors running no task are removed. The
start-up time the strategy sees is the last one observed from a request to the executors running. An executor asked
to leave is no longer counted, though Spark's status store lists it until its removal is processed (asked again,
it was recorded as a second removal).

With ``enact=False`` (``spark-dynamic``: Spark's own dynamic allocation decides) it only watches: at each period the
executors running are recorded, and each change in them is kept as a change of the strategy's record, so that a
report shows Spark's allocation beside pacer's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from pacer.scaler import Scaler
from pacer_spark.jvm import executor_requests, status_store
from pacer_spark.jvm.status_store import LiveExecutor

log = logging.getLogger("pacer_spark.driver.scaling")

#: Seconds a removal waits for the running batches before it takes only executors running no task.
REMOVAL_TIMEOUT_S = 30.0
#: Seconds an executor is taken to need to start before one was seen to (a standalone worker: a few).
DEFAULT_STARTUP_S = 10.0


class ExecutorScaling:
    """A scaling strategy run on a Spark session (module docstring).

    :param scaler: the strategy's runner (bounds, cores per executor, period, record).
    :param spark: the session whose executors change.
    :param clock: seconds, monotonic (the Controller's clock).
    :param live: reads the active executors (default: Spark's status store).
    :param request: asks for a total of executors; ``kill`` removes named ones (defaults: the JVM calls; removal
        decommissions where the session has ``spark.decommission.enabled`` on).
    :param enact: False: only watch the executors Spark's dynamic allocation holds (module docstring).
    :param startup_s: seconds an executor is taken to need to start until one is seen to (None:
        :data:`DEFAULT_STARTUP_S`; an engine profile's measured start-up).
    :ivar target: the executors the strategy wants now (the cluster manager's target too).
    :ivar removal_since: when a removal still to be made was decided (None: none waits).
    """

    def __init__(self, scaler: Scaler, spark: Any, *, clock: Callable[[], float] = time.monotonic,
                 live: Callable[[], list[LiveExecutor] | None] | None = None,
                 request: Callable[[int], bool] | None = None, kill: Callable[[list[str]], bool] | None = None,
                 enact: bool = True, startup_s: float | None = None) -> None:
        self.scaler = scaler
        self.enact = enact
        self.clock = clock
        self.started = clock()
        self._live = live or (lambda: status_store.live_executors(spark))
        self._request = request or (lambda n: executor_requests.request_total(spark, n))
        gently = kill is None and spark is not None and executor_requests.decommissions(spark)
        remove = executor_requests.decommission if gently else executor_requests.kill
        self._kill = kill or (lambda ids: remove(spark, ids))
        self.how = "decommissioned" if gently else "killed"
        self.target = scaler.initial
        self.startup_s = DEFAULT_STARTUP_S if startup_s is None else startup_s
        self._asked_at: float | None = None
        self.removal_since: float | None = None
        self.removed: list[dict[str, Any]] = []
        self._leaving: set[str] = set()  # removed, and still listed until Spark's status store hears of it

    def _running(self) -> list[LiveExecutor] | None:
        """The executors running and not asked to leave (None: the status store cannot be read)."""
        live = self._live()
        if live is None:
            return None
        self._leaving &= {e.id for e in live}
        return [e for e in live if e.id not in self._leaving]

    def start(self) -> None:
        """Ask for the initial executors, and let any beyond them go (no batch has run yet); watching, record the
        executors there are."""
        if not self.enact:
            self.target = len(self._running() or [])
            self.scaler.record(0.0, self.target, "")
            self._observe(self.target)
            return
        self._request(self.target)
        self._asked_at = self.clock()
        live = self._running() or []
        if len(live) > self.target:
            self._remove(live, len(live) - self.target, idle_only=False)
        self._observe(len(live[: self.target]) if live else 0)

    def follow(self, controller: Any, *, batches_running: bool) -> None:
        """The driver's turn (under its lock, between admissions): ask the strategy when due, then enact."""
        now = self.clock()
        if not self.scaler.due(now - self.started) and self.removal_since is None:
            return
        if not self.enact:
            self._watch(now - self.started)
            return
        live = self._running()
        if live is None:
            return
        running = len(live)
        if self._asked_at is not None and running >= self.target:
            if running > 0 and now > self._asked_at:
                self.startup_s = now - self._asked_at
            self._asked_at = None
        if self.scaler.due(now - self.started):
            pending = max(0, self.target - running)
            removing = max(0, running - self.target)
            wanted = self.scaler.decide(controller, running=running, pending=pending, removing=removing,
                                        startup_s=self.startup_s, peak_tasks=sum(e.active_tasks for e in live),
                                        now=now - self.started)
            if wanted != self.target:
                self._request(wanted)  # fewer: executors asked for and not started are called off first
                if wanted > self.target:
                    self._asked_at = now
                self.target = wanted
        if running <= self.target:
            self.removal_since = None
        else:  # more run than wanted, whichever way the target last moved
            since = self.removal_since = now if self.removal_since is None else self.removal_since
            timed_out = now - since >= REMOVAL_TIMEOUT_S
            if not batches_running or timed_out:
                running -= self._remove(live, running - self.target, idle_only=batches_running)
        self._observe(running)  # after a removal, without the executors just removed

    def _watch(self, at: float) -> None:
        """Record the executors Spark's dynamic allocation holds now (``enact=False``)."""
        self.scaler.last_call = at
        live = self._running()
        if live is None:
            return
        self.target = len(live)
        self.scaler.record(at, self.target, "Spark's dynamic allocation")
        self._observe(self.target)

    def _remove(self, live: list[LiveExecutor], count: int, *, idle_only: bool) -> int:
        """Remove ``count`` executors, the newest first (only those running no task when ``idle_only``); how many."""
        chosen = [e.id for e in reversed(live) if not idle_only or e.active_tasks == 0][:count]
        if not chosen:
            return 0
        self._kill(chosen)
        self._leaving.update(chosen)
        self._request(self.target)  # Spark lowers its target by the executors killed: set it to the strategy's
        at = self.clock() - self.started
        self.removed.append({"at": round(at, 3), "executors": chosen, "between_batches": not idle_only, "how": self.how})
        log.info("pacer: removed executor(s) %s (scaling strategy %r)", ", ".join(chosen), self.scaler.name)
        if len(live) - len(chosen) <= self.target:
            self.removal_since = None
        return len(chosen)

    def _observe(self, running: int) -> None:
        self.scaler.observe(self.clock() - self.started, running=running, held=max(running, self.target))

    def report(self) -> dict[str, Any]:
        """The report's ``scaling`` section: the strategy's record, the start-up last observed, each removal."""
        end = self.clock() - self.started
        return {**self.scaler.report(0.0, end), "startup_s": round(self.startup_s, 3), "removals": list(self.removed)}


__all__ = ["REMOVAL_TIMEOUT_S", "ExecutorScaling"]
