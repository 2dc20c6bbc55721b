"""One ``latestOffset`` of a ``format("pacer")`` source, as the driver's admission loop steps it.

:class:`~pacer_spark.paced.PacedQueries` answers the request; this is the request's side of the loop
(:class:`pacer_spark.driver.Ask`): register the query and take its reports, let its new snapshots arrive, record
the admitted batch and keep the gate's wait.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pacer import MicroBatch
from pacer_spark.gate import Turn
from pacer_spark.locking import Held
from pacer_spark.paced_state import PacedQuery
from pacer_spark.wrapper import DecisionRequest

if TYPE_CHECKING:
    from pacer_spark.paced import PacedQueries


class SourceAsk:
    """One ``latestOffset`` of a ``format("pacer")`` source, stepped by the driver's admission loop
    (:class:`pacer_spark.driver.Ask`). :ivar q: the query, once known; :ivar error: why the request was refused;
    :ivar index: the answer, the index of the admitted batch's last snapshot (None: wait)."""

    def __init__(self, queries: PacedQueries, request: DecisionRequest) -> None:
        self.queries = queries
        self.request = request
        self.query_id = request.query
        # availableNow ends at the first empty trigger, processAllAvailable() returns at one: take what is held
        self.drain = request.available_now or request.caller_waiting
        self.stream_id = request.query_id  # the source asks from its query's stream thread: the query runs
        self.q: PacedQuery | None = None
        self.error: str | None = None
        self.index: int | None = None

    def report(self, held: Held) -> bool:
        """Register the query on first sight, then take its reports; False without new snapshots."""
        if self.queries.stale(held, self.request):
            return False
        try:
            self.q = self.queries.query_for(held, self.request)
        except (ValueError, KeyError, LookupError) as exc:
            self.error = f"query {self.request.query!r}: {exc}"
            return False
        self.q.decisions += 1
        if self.queries.truth.take_reports(held, self.q, self.request):  # another source of the query asked first
            self.queries.arrivals.arrive(held, self.q, self.request)
            self.index = self.queries.answer(self.q, self.request)
            return False
        if not self.queries.first_ask(self.q, self.request):  # a source asked before it in this Spark batch and
            self.queries.arrivals.arrive(held, self.q, self.request)  # was answered: a batch now could not include its part
            return False
        return bool(self.request.snapshots) and not self.q.holding

    def arrive(self, held: Held) -> None:
        """The request's new snapshots arrive."""
        assert self.q is not None
        self.queries.arrivals.arrive(held, self.q, self.request)

    def admitted(self, held: Held, batch: MicroBatch) -> bool:
        """Record the batch; it always passes the gate (the JVM sets its pool on the stream thread)."""
        assert self.q is not None
        self.index = self.queries.admitted(held, self.q, self.request, batch)
        if self.request.caller_waiting and not self.request.available_now:
            self.q.drained += 1
        return True

    def passed(self, held: Held, turn: Turn) -> None:
        """Keep the gate's wait."""
        assert self.q is not None
        self.q.gate_wait_s.add(turn.waited_s)
