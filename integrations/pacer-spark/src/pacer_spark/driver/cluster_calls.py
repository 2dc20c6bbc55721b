"""The cluster manager's calls, off the driver's lock: asked on one worker thread, answered as events.

Spark's ``requestTotalExecutors`` and ``killExecutors`` wait for the cluster manager up to
``spark.rpc.askTimeout`` (120 s). Made under the driver's lock, one slow call held every paced source's admission
(each timed out and admitted all it held) and Spark's listener thread. :class:`ClusterCalls` takes each call in a
queue and makes it on its own thread; the executor scaling (:mod:`pacer_spark.driver.scaling`) reads what came of
each, a :class:`CallResult`, at its next turn. A request for a total replaces one still queued (only the newest
total matters); removals are made in the order asked. Each call carries a number, so that the scaling can tell an
answer to a call it made from a late one, a repeated one or one of a previous run (the protocol:
``docs/architecture.md``, "Executors"). :class:`QueuedCalls` is the same interface with no thread: the caller (a
protocol test) makes the calls and delivers their results in whatever order it draws.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("pacer_spark.driver.cluster_calls")


@dataclass(frozen=True)
class Call:
    """One call to the cluster manager: ``request`` a total of ``total`` executors, or ``remove`` the executors
    ``ids``; ``seq`` numbers it within its run (``run``: the :class:`ClusterCalls`' own id)."""

    seq: int
    kind: str
    total: int = 0
    ids: tuple[str, ...] = ()
    run: str = ""


@dataclass(frozen=True)
class CallResult:
    """What came of a :class:`Call`: ``taken`` (the cluster manager said yes), else ``error`` (what it raised, or
    why it said no); ``at`` when it answered (the caller's clock) and ``took_s`` how long the call waited."""

    call: Call
    taken: bool
    error: str = ""
    at: float = 0.0
    took_s: float = 0.0


class Calls(Protocol):
    """What the executor scaling needs of the cluster manager's calls."""

    run: str

    def request_total(self, total: int) -> Call: ...

    def remove(self, ids: list[str]) -> Call: ...

    def results(self) -> list[CallResult]: ...

    def cancel(self, seq: int) -> bool: ...

    def in_flight(self) -> int: ...


class QueuedCalls:
    """The calls asked and not yet made, with no thread: :meth:`make` makes the oldest (or a drawn) one and keeps
    its result for :meth:`results` (a protocol test delivers them late, twice or out of order with :meth:`deliver`).

    :param request: asks the cluster manager for a total of executors; ``kill`` removes named ones (True: taken).
    :param clock: the caller's clock, stamped on each result.
    """

    def __init__(self, request: Callable[[int], bool], kill: Callable[[list[str]], bool], *,
                 clock: Callable[[], float] = time.monotonic, run: str = "") -> None:
        self._request, self._kill, self._clock = request, kill, clock
        self.run = run or f"calls-{id(self):x}"
        self.queue: deque[Call] = deque()
        self._seq = 0
        self._done: list[CallResult] = []
        self._lock = threading.Lock()

    def _next(self, kind: str, *, total: int = 0, ids: tuple[str, ...] = ()) -> Call:
        self._seq += 1
        return Call(self._seq, kind, total, ids, self.run)

    def request_total(self, total: int) -> Call:
        """Queue a request for ``total`` executors in all, replacing one still queued."""
        with self._lock:
            call = self._next("request", total=int(total))
            self.queue = deque(c for c in self.queue if c.kind != "request")
            self.queue.append(call)
            return call

    def remove(self, ids: list[str]) -> Call:
        """Queue the removal of the executors ``ids``."""
        with self._lock:
            call = self._next("remove", ids=tuple(str(i) for i in ids))
            self.queue.append(call)
            return call

    def cancel(self, seq: int) -> bool:
        """Drop the call ``seq`` if it is still queued (not being made); whether it was."""
        with self._lock:
            for call in self.queue:
                if call.seq == seq:
                    self.queue.remove(call)
                    return True
            return False

    def make(self, index: int = 0) -> CallResult | None:
        """Make the ``index``-th queued call (the oldest by default) and keep its result; None when none waits."""
        with self._lock:
            if not self.queue:
                return None
            call = self.queue[index % len(self.queue)]
            self.queue.remove(call)
        started = self._clock()
        try:
            taken = bool(self._request(call.total) if call.kind == "request" else self._kill(list(call.ids)))
            error = "" if taken else "the cluster manager said no"
        except Exception as exc:  # a refused call, an RPC timeout, a stopping JVM: an answer like any other
            taken, error = False, f"{type(exc).__name__}: {exc}"
        result = CallResult(call, taken, error, at=self._clock(), took_s=self._clock() - started)
        self.deliver(result)
        return result

    def deliver(self, result: CallResult) -> None:
        """Keep ``result`` for the next :meth:`results` (a test hands in late, repeated or stale ones)."""
        with self._lock:
            self._done.append(result)

    def results(self) -> list[CallResult]:
        """The results come since the last look, in the order they came."""
        with self._lock:
            done, self._done = self._done, []
            return done

    def in_flight(self) -> int:
        """Calls asked and not yet answered (queued)."""
        with self._lock:
            return len(self.queue)


class ClusterCalls(QueuedCalls):
    """:class:`QueuedCalls` made on one daemon thread as soon as they are asked (module docstring)."""

    def __init__(self, request: Callable[[int], bool], kill: Callable[[list[str]], bool], *,
                 clock: Callable[[], float] = time.monotonic, run: str = "") -> None:
        super().__init__(request, kill, clock=clock, run=run)
        self._wake = threading.Condition(self._lock)
        self._making = 0
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="pacer-cluster-calls", daemon=True)
        self._thread.start()

    def request_total(self, total: int) -> Call:
        call = super().request_total(total)
        with self._wake:
            self._wake.notify()
        return call

    def remove(self, ids: list[str]) -> Call:
        call = super().remove(ids)
        with self._wake:
            self._wake.notify()
        return call

    def in_flight(self) -> int:
        """Calls queued or being made."""
        with self._lock:
            return len(self.queue) + self._making

    def _work(self) -> None:
        while True:
            with self._wake:
                while not self.queue and not self._closed:
                    self._wake.wait()
                if self._closed:
                    return
                self._making += 1
            try:
                result = self.make()
                if result is not None and not result.taken:
                    log.warning("pacer: the cluster manager did not take %s: %s", _said(result.call), result.error)
            finally:
                with self._lock:
                    self._making -= 1

    def close(self, timeout: float = 5.0) -> None:
        """Make no more calls; wait up to ``timeout`` s for the one being made (calls still queued are dropped)."""
        with self._wake:
            self._closed = True
            self.queue.clear()
            self._wake.notify_all()
        self._thread.join(timeout)


def _said(call: Call) -> str:
    return f"a request for {call.total} executors" if call.kind == "request" else \
        f"the removal of executor(s) {', '.join(call.ids)}"


__all__ = ["Call", "CallResult", "Calls", "ClusterCalls", "QueuedCalls"]
