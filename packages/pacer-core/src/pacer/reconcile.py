"""What the runtime really did where it differs from what the Controller decided, and what it kept of it.

A runtime whose source can admit data without the Controller's answer (pacer-spark's ``format("pacer")`` source
when its decider fails or answers late, a reader that gives up waiting) reports what it really read: exactly those
datasets form the batch (:meth:`Reconciliation.admit_exactly`), and a batch the Controller admitted that the runtime
never ran is taken back (:meth:`Reconciliation.retract`). A runtime that keeps a query's fitted service-time model
across restarts reads and restores it here, and one that measures more of a batch's task time than
``Controller.complete`` takes (``busy_core_s``) records it here before the batch completes
(:meth:`Reconciliation.task_costs`). Composed into the Controller as ``controller.reconcile``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pacer.controller_state import ControllerState
from pacer.ledger import ExactlyOnceLedger
from pacer.metrics import check_non_negative
from pacer.model import Dataset, MicroBatch
from pacer.query_state import QueryState


class Reconciliation:
    """The Controller's state brought in line with what its runtime did (module docstring).

    :param state: the Controller's state; ``ledger`` its exactly-once ledger.
    :param admit: forms, places and queues a batch of the given datasets, taken from the query's buffer (the
        Controller's own admission, without asking a strategy).
    """

    def __init__(self, state: ControllerState, ledger: ExactlyOnceLedger,
                 admit: Callable[[QueryState, tuple[Dataset, ...]], MicroBatch]) -> None:
        self._state = state
        self.ledger = ledger
        self._admit = admit

    def admit_exactly(self, query_id: str, dataset_ids: Sequence[str]) -> MicroBatch:
        """Admit exactly the buffered datasets ``dataset_ids`` of ``query_id`` as its next batch, without asking its
        strategy and without read caps: the runtime already read them (a source that admitted without the
        Controller's answer). The batch is placed and queued like any other.

        :raises RuntimeError: while the query has a batch in flight; ``KeyError``: for an id not buffered.
        """
        q = self._state.query(query_id)
        if q.in_flight is not None:
            raise RuntimeError(f"query {query_id!r} has batch {q.in_flight} in flight: complete or retract it first")
        if not dataset_ids:
            raise ValueError("a batch needs at least one dataset")
        return self._admit(q, q.buffer.take_ids(dataset_ids))

    def retract(self, batch_id: str) -> MicroBatch:
        """Take back the admitted batch ``batch_id`` that its runtime never ran (it admitted other data, or stopped
        before the batch began): its datasets wait again at the front of the query's buffer, in order, and the
        query is idle. :raises KeyError: for an unknown or completed batch."""
        run = self._state.run(batch_id)
        batch = run.batch
        q = self._state.queries[batch.query_id]
        self.ledger.retracted(batch.query_id, (d.id for d in batch.datasets))
        self._state.completed(q, batch_id)
        q.catch_up.retracted(batch)
        q.buffer.put_back(batch.datasets)
        return batch

    def service_state(self, query_id: str) -> dict[str, object]:
        """The query's fitted service-time model as plain values (:meth:`pacer.ServiceTimeModel.state`)."""
        return self._state.query(query_id).service.state()

    def restore_service(self, query_id: str, state: dict[str, object]) -> None:
        """Give the query the service-time model a previous run saved (a restart predicts from its first batch).

        :raises ValueError: for a model this pacer cannot take (:meth:`pacer.ServiceTimeModel.restore`).
        """
        self._state.query(query_id).service.restore(state)

    def task_costs(self, batch_id: str, *, cpu_core_s: float | None, failed_core_s: float | None,
                   tasks: int | None = None) -> None:
        """What the runtime measured of pending batch ``batch_id``'s tasks beside their busy time: their CPU time,
        the run time of attempts that failed or were killed and how many attempts ran, carried into its report
        (:attr:`pacer.BatchReport.cpu_core_s`, :attr:`~pacer.BatchReport.failed_core_s`,
        :attr:`~pacer.BatchReport.tasks`) when it completes.

        :raises KeyError: for an unknown or completed batch; ``ValueError``: for a negative or NaN figure.
        """
        check_non_negative("core-seconds", cpu_core_s=cpu_core_s, failed_core_s=failed_core_s)
        run = self._state.run(batch_id)
        if tasks is not None and tasks < 0:
            raise ValueError(f"tasks must be >= 0, got {tasks}")
        run.cpu_core_s, run.failed_core_s, run.tasks = cpu_core_s, failed_core_s, tasks
