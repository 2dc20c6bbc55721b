"""The scheduling gate: where an admitted batch waits for its turn or learns its scheduler pool.

The Controller's scheduler answers either an order (FIFO, EDF: batches run one at a time, up to
``concurrency`` at once, in that order) or core shares (FAIR, RDAS: every batch runs now, in the
fair-scheduler pool whose weight is closest to its share, see :mod:`pacer_spark.driver.pools`). A
batch passes the gate at admission, before Spark plans it: a ``format("pacer")`` query's in its source's
``latestOffset`` on the stream thread, a ``pacer-gen``/``pacer-files`` query's in the driver's answer to
its reader's ``latestOffset``; the latter learn their pool in their ``foreachBatch`` wrapper, on the
stream thread (:mod:`pacer_spark.sources.sink_gate`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pacer import Controller
from pacer_spark.driver.locking import Guard, Held
from pacer_spark.driver.pools import pool_for_share

log = logging.getLogger("pacer_spark.driver.gate")


@dataclass(frozen=True)
class Turn:
    """A batch's pass through the gate.

    :ivar pool: the fair-scheduler pool for its jobs; None when the scheduler gives no shares or
        ``spark.scheduler.mode`` is not FAIR.
    :ivar waited_s: seconds it waited for its turn.
    :ivar timed_out: whether it gave up waiting after the gate's timeout and ran anyway.
    """

    pool: str | None
    waited_s: float
    timed_out: bool = False


class Gate:
    """Holds each admitted batch until the Controller's schedule lets it run.

    :param controller: the session's Controller.
    :param guard: the session's lock (every Controller call holds it) and its condition, notified whenever a
        batch is admitted, completes or a query dies.
    :param concurrency: batches of an ordered schedule (FIFO/EDF) that may run at once.
    :param timeout_s: seconds a batch waits at most; then it runs anyway, with a warning.
    :param fair: whether the session runs ``spark.scheduler.mode=FAIR`` (pools are enacted).
    """

    def __init__(self, controller: Controller, guard: Guard, *, concurrency: int = 1,
                 timeout_s: float = 60.0, fair: bool = False) -> None:
        if concurrency < 1:
            raise ValueError(f"gate concurrency must be >= 1, got {concurrency}")
        self.controller = controller
        self.guard = guard
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.fair = fair
        self._warned: set[str] = set()
        #: seconds each admitted, not yet completed batch waited here (inside its trigger, on Spark)
        self._waited: dict[str, float] = {}

    def pass_batch(self, batch_id: str, *, excluded: Callable[[Held, str], bool] = lambda held, b: False) -> Turn:
        """Wait until ``batch_id`` may run, mark it started and return its :class:`Turn` (takes the lock).

        :param excluded: batches the order should skip (asked with the lock held): their query died, or their
            work is done and they only wait to be reported (a sink that returned while its trigger commits).
        """
        t0 = time.monotonic()  # a wall-clock step (NTP) must not end or stretch a wait
        timed_out = False
        pool = None
        with self.guard.held() as held:
            while True:
                decision = self.controller.schedule()
                if decision.shares:
                    cores = self.controller.cores
                    pool = pool_for_share(decision.shares.get(batch_id, cores), cores)
                    break
                started = {b for b in decision.order if self.controller.batch(b).started}
                if batch_id in started:  # it passed already (at admission): its turn has come
                    break
                live = [b for b in decision.order if not excluded(held, b)]
                waiting = [b for b in live if b not in started]
                running = [b for b in live if b in started]
                if waiting and waiting[0] == batch_id and len(running) < self.concurrency:
                    break
                if batch_id not in decision.order:  # completed or never pending: nothing to wait for
                    break
                if excluded(held, batch_id):  # its own query is stopping or dead: never hold its stream thread
                    break
                if time.monotonic() - t0 > self.timeout_s:
                    timed_out = True
                    self.warn_once(f"gate-timeout-{self.controller.batch(batch_id).query_id}",
                                   "batch %s waited %.0f s for its turn; running it anyway", batch_id, self.timeout_s)
                    break
                self.guard.cond.wait(timeout=0.5)
            pending = {b.id for b in self.controller.pending()}
            if batch_id in pending:
                self.controller.start(batch_id)  # keeps the first start time when called again
                # a batch taken back never completes: its wait goes with it
                self._waited = {b: w for b, w in self._waited.items() if b in pending}
                self._waited[batch_id] = self._waited.get(batch_id, 0.0) + time.monotonic() - t0
        if pool is not None and not self.fair:
            self.warn_once("no-fair", "scheduler %r gives core shares, but spark.scheduler.mode is not FAIR: shares "
                           "are not enacted (build the session with pacer_spark.session_builder)",
                           self.controller.scheduler)
            pool = None
        return Turn(pool, time.monotonic() - t0, timed_out)

    def take_wait(self, held: Held, batch_id: str) -> float:
        """Seconds ``batch_id`` waited for its turn here, all its passes together (0 when none), forgotten now: its
        batch completes, or was taken back."""
        return self._waited.pop(batch_id, 0.0)

    def warn_once(self, key: str, message: str, *args: object) -> None:
        """Log ``message`` at WARNING the first time ``key`` is seen."""
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message, *args)
