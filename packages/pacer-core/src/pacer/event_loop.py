"""The discrete-event loop that drives a Controller in virtual time: a heap of timed events and the admission polling.

The simulator (``pacer_sim``) and the conformance harness (``pacer_conformance.harness``) both run on it:
events pop in order of time, then rank, then the order they were pushed; a query with data waiting
is polled every ``poll_interval`` (10 ms, Spark's ``pollingDelay``) while it is idle, and not at all
while its batch runs. What an event means is the caller's: :meth:`EventLoop.run` hands each one to a
step function.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from pacer.controller import Controller
from pacer.model import MicroBatch

#: Virtual seconds between admission polls of an idle query with data (Spark's ``spark.sql.streaming.pollingDelay``).
POLL_INTERVAL = 0.01

#: How :meth:`EventLoop.run` ended.
FINISHED, EMPTY, PAST_LIMIT = "finished", "empty", "past-limit"

Step = Callable[[float, int, Any], bool]


class EventLoop:
    """Timed events over a virtual clock, and the polling of idle queries with data.

    :param controller: the Controller the events drive.
    :param poll_interval: virtual seconds between polls of an idle query whose data waits.
    :param poll_rank: the rank of poll events (events at equal times run by rank, then push order).
    :ivar events: events handed to the step function so far.
    """

    def __init__(self, controller: Controller, *, poll_interval: float = POLL_INTERVAL, poll_rank: int = 0) -> None:
        if not poll_interval > 0:
            raise ValueError(f"poll_interval must be > 0 seconds, got {poll_interval}")
        self.controller = controller
        self.poll_interval = poll_interval
        self.poll_rank = poll_rank
        self._heap: list[tuple[float, int, int, Any]] = []
        self._seq = 0
        self._polling: set[str] = set()

    def push(self, t: float, rank: int, payload: Any) -> None:
        """Schedule an event at virtual time ``t``."""
        heapq.heappush(self._heap, (t, rank, self._seq, payload))
        self._seq += 1

    def __len__(self) -> int:
        return len(self._heap)

    def poll_soon(self, query_id: str, t: float) -> None:
        """Poll ``query_id`` at ``t`` unless a poll of it is already due or its batch is running."""
        if query_id not in self._polling and not self.controller.busy(query_id):
            self._polling.add(query_id)
            self.push(t, self.poll_rank, query_id)

    def poll(self, query_id: str, t: float) -> MicroBatch | None:
        """A poll event of ``query_id`` at ``t``: ask its admission; poll again in ``poll_interval`` while
        data waits and nothing was admitted. Returns the admitted batch, or None."""
        self._polling.discard(query_id)
        controller = self.controller
        batch = controller.poll(query_id)
        if batch is None and controller.has_buffered(query_id) and not controller.busy(query_id):
            self._polling.add(query_id)
            self.push(t + self.poll_interval, self.poll_rank, query_id)
        return batch

    def run(self, until: float, step: Step) -> str:
        """Pop every event up to ``until`` and hand it to ``step(t, rank, payload)``; a True answer stops the loop.

        :return: :data:`FINISHED` (``step`` said so), :data:`EMPTY` (no event left) or :data:`PAST_LIMIT`
            (the next event is later than ``until``; it is dropped).
        """
        heap = self._heap
        pop = heapq.heappop
        while heap:
            t, rank, _, payload = pop(heap)
            if t > until:
                return PAST_LIMIT
            if step(t, rank, payload):
                return FINISHED
        return EMPTY
