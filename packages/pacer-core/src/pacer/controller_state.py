"""Where the Controller's state lives: its queries, its admitted batches until they complete, their order and
the cores the last schedule gave each query.

:class:`ControllerState` is private to the Controller, which changes it; its read API (:mod:`pacer.views`)
reads it. Per query it holds a :class:`~pacer.query_state.QueryState`, per admitted batch a
:class:`~pacer.query_state.RunningBatch`.
"""

from __future__ import annotations

from pacer.model import MicroBatch, PendingBatch, ScheduleDecision
from pacer.query_state import QueryState, RunningBatch


class ControllerState:
    """The Controller's queries and pending batches (module docstring).

    :ivar queries: query id -> its state, in registration order.
    :ivar running: batch id -> every admitted batch that has not completed.
    :ivar order: the ids of ``running``, in admission order.
    :ivar allocated: query id -> the cores the last schedule gave its batches.
    """

    __slots__ = ("allocated", "order", "queries", "running")

    def __init__(self) -> None:
        self.queries: dict[str, QueryState] = {}
        self.running: dict[str, RunningBatch] = {}
        self.order: list[str] = []
        self.allocated: dict[str, float] = {}

    def query(self, query_id: str) -> QueryState:
        """The state of ``query_id``.

        :raises KeyError: for an unregistered query, listing the registered ones.
        """
        try:
            return self.queries[query_id]
        except KeyError:
            raise KeyError(f"unknown query {query_id!r}; registered: {sorted(self.queries)}") from None

    def run(self, batch_id: str) -> RunningBatch:
        """The admitted batch ``batch_id``.

        :raises KeyError: for an unknown or completed batch.
        """
        try:
            return self.running[batch_id]
        except KeyError:
            raise KeyError(f"no pending micro-batch {batch_id!r}") from None

    def admitted(self, q: QueryState, batch: MicroBatch, now: float) -> None:
        """``batch`` of ``q`` was admitted at ``now``: in flight for the query, pending until it completes."""
        interval = now - q.last_admitted_at if q.last_admitted_at is not None else now - batch.earliest_arrival
        q.last_admitted_at = now
        q.in_flight = batch.id
        self.running[batch.id] = RunningBatch(batch=batch, interval_s=interval)
        self.order.append(batch.id)

    def completed(self, q: QueryState, batch_id: str) -> None:
        """``batch_id`` of ``q`` completed: no longer pending, the query idle."""
        del self.running[batch_id]
        self.order.remove(batch_id)
        q.in_flight = None

    def pending(self) -> list[MicroBatch]:
        """Admitted batches not yet completed, in admission order."""
        return [self.running[b].batch for b in self.order]

    def pending_view(self) -> tuple[PendingBatch, ...]:
        """Every pending batch as a decision sees it (:attr:`pacer.model.SystemView.pending`), in admission order."""
        pending = []
        for batch_id in self.order:
            run = self.running[batch_id]
            spec = self.queries[run.batch.query_id].spec
            pending.append(
                PendingBatch(
                    batch=run.batch,
                    deadline_at=run.batch.earliest_arrival + spec.effective_deadline,
                    estimated_run_s=run.batch.estimated_run_s or 0.0,
                    running=run.started_at is not None,
                    started_at=run.started_at,
                )
            )
        return tuple(pending)

    def allocate(self, decision: ScheduleDecision) -> None:
        """Sum ``decision``'s core shares per query (:attr:`allocated`)."""
        allocated: dict[str, float] = {}
        for batch_id, share in decision.shares.items():
            query_id = self.running[batch_id].batch.query_id
            allocated[query_id] = allocated.get(query_id, 0.0) + share
        self.allocated = allocated

    def charge(self, batch_id: str, seconds: float) -> None:
        """Add ``seconds`` of pacer's own time to the pending batch ``batch_id``."""
        self.running[batch_id].overhead_s += seconds
