"""The driver's books: everything a front end may read or change of the Controller and of batch completion.

The front ends (``paced/``, ``sources/``), the plan enactment and the session's surface never call a Controller
method: they get a :class:`Books` from the driver, either handed to them inside the driver's own steps (an ask, a
listener event, a completion) or from :meth:`pacer_spark.driver.loop.Driver.books`, which takes the lock for a
``with`` block. A ``Books`` exists only while the driver's lock is held, so taking one is the proof of holding it
(as :class:`~pacer_spark.driver.locking.Held` is inside ``driver/``), and each operation here is one the driver
allows: the list below is every way the world outside ``driver/`` touches the Controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, final

from pacer import BatchReport, Controller, Dataset, MicroBatch, OperatorDAG, OperatorMetric, QuerySpec
from pacer.engine_profile import EngineProfile
from pacer.report import build_report
from pacer.views import BatchView, QueryView
from pacer_spark.driver.completion import BatchCompletion, SinkDone
from pacer_spark.driver.locking import Held
from pacer_spark.jvm.progress import TriggerProgress


@final
class Books:
    """The Controller and batch completion, open while the driver's lock is held (module docstring).

    Made only by the :class:`~pacer_spark.driver.loop.Driver`; never kept past the step or ``with`` block that
    handed it out (:meth:`check` says so at run time).
    """

    __slots__ = ("_controller", "_engine", "_held")

    def __init__(self, controller: Controller, engine: BatchCompletion, held: Held) -> None:
        self._controller = controller
        self._engine = engine
        self._held = held

    # ------------------------------------------------------------------ the lock

    def opened_by(self, held: Held) -> bool:
        """Whether these books were opened by the lock proof ``held`` (the driver keeps them for its lock)."""
        return self._held is held

    def check(self) -> None:
        """Raise RuntimeError when the calling thread does not hold the driver's lock (books kept too long)."""
        self._held.check()

    def notify_all(self) -> None:
        """Wake every thread waiting on the driver (an admission, a completion, a termination, a stop)."""
        self._held.notify_all()

    # ------------------------------------------------------------------ queries

    def add_query(self, spec: QuerySpec, **strategies: Any) -> None:
        """Register a query (:meth:`pacer.Controller.add_query`'s keywords: strategies, read caps, overload)."""
        self._controller.add_query(spec, **strategies)

    def reconfigure(self, spec: QuerySpec, *, admission: str, placement: str,
                    admission_params: Mapping[str, Any], placement_params: Mapping[str, Any]) -> None:
        """Give a registered query new options (a restart with other ``pacer.*`` options, a second paced source)."""
        self._controller.reconfigure(spec, admission=admission, placement=placement,
                                     admission_params=admission_params, placement_params=placement_params)

    def take_engine_profile(self, query_id: str, profile: EngineProfile) -> None:
        """The query's prior, before its model fits a batch (:meth:`pacer.Controller.take_engine_profile`)."""
        self._controller.take_engine_profile(query_id, profile)

    def replace_dag(self, query_id: str, dag: OperatorDAG) -> None:
        """The query's real operator DAG, read from the plan Spark executed."""
        self._controller.replace_dag(query_id, dag)

    def dated_by(self, query_id: str, clock: str) -> None:
        """What dates the query's arrivals in its report (``"source-time"`` or ``"first-seen"``)."""
        self._controller.recorder.record(query_id).dated_by(clock)

    def query_ids(self) -> list[str]:
        """The registered queries."""
        return self._controller.query_ids()

    def query(self, query_id: str) -> QueryView:
        """A registered query's state, read-only (KeyError for an unknown one)."""
        return self._controller.query(query_id)

    def batch(self, batch_id: str) -> BatchView:
        """An admitted, not yet completed batch, read-only (KeyError for an unknown or completed one)."""
        return self._controller.batch(batch_id)

    def buffered(self, query_id: str) -> Sequence[Dataset]:
        """The query's datasets that arrived and wait for admission, oldest first."""
        return self._controller.buffered(query_id)

    def finished(self, query_id: str, dataset_id: str) -> bool:
        """Whether the dataset's batch completed (the exactly-once ledger's word)."""
        return self._controller.ledger.finished(query_id, dataset_id)

    def reports(self, query_id: str | None = None) -> list[BatchReport]:
        """The recent completed batches' reports: of ``query_id``, or of every query merged in completion order."""
        return self._controller.reports(query_id)

    def service_state(self, query_id: str) -> dict[str, object]:
        """The query's service-time model, to keep in its checkpoint."""
        return self._controller.reconcile.service_state(query_id)

    def restore_service(self, query_id: str, state: dict[str, object]) -> None:
        """Take over a service-time model a checkpoint kept (ValueError, KeyError, TypeError: not usable)."""
        self._controller.reconcile.restore_service(query_id, state)

    def report(self, **fields: Any) -> dict[str, Any]:
        """The run as a ``pacer.report/1`` document (:func:`pacer.report.build_report`'s keywords)."""
        return build_report(controller=self._controller, **fields)

    # ------------------------------------------------------------------ batches

    def arrive(self, query_id: str, dataset: Dataset) -> None:
        """A dataset of the query arrived."""
        self._controller.arrive(query_id, dataset)

    def withdraw(self, query_id: str) -> int:
        """Give back what the query holds, never admitted (its run ended); the number of datasets withdrawn."""
        return self._controller.withdraw(query_id)

    def admit_exactly(self, query_id: str, dataset_ids: Sequence[str]) -> MicroBatch:
        """Admit exactly these buffered datasets as one batch: what Spark ran without an answer, or replayed."""
        return self._controller.reconcile.admit_exactly(query_id, dataset_ids)

    def take_back(self, query_id: str, batch_id: str) -> MicroBatch:
        """Take back admitted batch ``batch_id`` of ``query_id``, which Spark never ran: the wait for its trigger's
        progress ends, its datasets wait again at the front of the query's buffer, and whoever waits on the driver
        (the gate) is woken. The one sequence every front end takes a batch back with."""
        self._engine.forget(self._held, query_id)
        batch = self._controller.reconcile.retract(batch_id)
        self.notify_all()
        return batch

    def start(self, batch_id: str) -> None:
        """The batch began running."""
        self._controller.start(batch_id)

    def complete(self, batch_id: str, *, operator_metrics: Iterable[OperatorMetric] = (),
                 engine_s: float | None = None, completed_at: float | None = None) -> BatchReport:
        """The batch completed (its sink committed), with its engine time where known."""
        return self._controller.complete(batch_id, operator_metrics=operator_metrics, engine_s=engine_s,
                                         completed_at=completed_at)

    def record_enactment(self, batch_id: str, enacted: bool, note: str = "",
                         ran: Mapping[str, Any] | None = None) -> None:
        """Whether the batch's placement was enacted on Spark, why not, and where its operators ran."""
        self._controller.record_enactment(batch_id, enacted, note, ran=ran)

    # ------------------------------------------------------------------ batch completion

    def waiting_spark_batch(self, query_id: str) -> int | None:
        """Spark's batch id of the query's batch whose sink is done and whose progress has not come (else None)."""
        return self._engine.waiting_spark_batch(self._held, query_id)

    def awaiting(self, batch_id: str) -> bool:
        """Whether the batch's sink is done and its progress has not come."""
        return self._engine.awaiting(self._held, batch_id)

    def on_progress(self, progress: TriggerProgress, *, event: bool = True, query_id: str | None = None,
                    complete: bool = True) -> SinkDone | None:
        """Complete the batch a trigger's progress reports (:meth:`BatchCompletion.on_progress`)."""
        return self._engine.on_progress(self._held, progress, event=event, query_id=query_id, complete=complete)

    def expire(self, query_id: str, now: float) -> SinkDone | None:
        """Complete the query's sink-done batch without engine time when its progress is overdue."""
        return self._engine.expire(self._held, query_id, now)

    def give_up(self, query_id: str) -> SinkDone | None:
        """Complete the query's sink-done batch without a progress event (its query ended)."""
        return self._engine.give_up(self._held, query_id)


__all__ = ["Books"]
