"""The runtime-agnostic Controller: buffers, admission, scheduling, placement, feedback.

A runtime drives it with its own clock:

1. ``arrive(query_id, dataset)`` as data lands;
2. ``poll(query_id)`` every poll interval while the query is idle: the chosen
   admission strategy may form a micro-batch, which is then placed and queued;
3. ``schedule()`` to learn the order and core shares of the queued batches;
4. ``start(batch_id)`` when it runs and ``complete(batch_id, ...)`` when it is
   done: latencies are recorded, the ledger checked and every strategy told.

Everything else reads it through its public read API (:mod:`pacer.views`): ``query(id)``,
``batch(id)``, ``reports()``, ``recorder``; a runtime records how it enacted a placement with
``record_enactment``. Nobody outside the Controller touches its fields.

The Controller is composed of a few objects, each in its own module: its state
(:class:`pacer.controller_state.ControllerState`: the queries, their
:class:`~pacer.query_state.QueryState`, the pending batches), which the views read; the
:class:`pacer.dispatch.DecisionDispatcher`, which asks the plugins for each decision and validates it;
overload (:mod:`pacer.overload`) and the shedding policy (:mod:`pacer.shedding`), catch-up (:mod:`pacer.catch_up`),
the size of a batch (:mod:`pacer.batch_size`), the reconciliation with what the runtime really did
(:mod:`pacer.reconcile`) and the measurement of its own time (:func:`pacer.timing.timed`).

A query has at most one micro-batch admitted and not yet completed, as in
Spark's micro-batch execution.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pacer.batch_size import batch_size
from pacer.catch_up import CatchUp
from pacer.controller_state import ControllerState
from pacer.dispatch import DecisionDispatcher
from pacer.engine_profile import EngineProfile
from pacer.ledger import ExactlyOnceLedger
from pacer.metrics import check_non_negative
from pacer.model import (
    BatchReport,
    Dataset,
    Device,
    Devices,
    MicroBatch,
    OperatorDAG,
    OperatorMetric,
    QueryHistory,
    QuerySpec,
    ScheduleDecision,
    SystemView,
)
from pacer.overload import OverloadMonitor
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.query_state import FALLBACK, OVERLOAD_POLICIES, QueryState, RunningBatch, StrategyError
from pacer.reconcile import Reconciliation
from pacer.recorder import RECENT, RECENT_DATASETS, RunRecorder
from pacer.service_time import ServiceTimeModel
from pacer.shedding import shed_if_overloaded
from pacer.strategy import StrategyContext
from pacer.timing import Clock, Overhead, timed
from pacer.views import BatchView, QueryView, QueryViews

__all__ = ["FALLBACK", "OVERLOAD_POLICIES", "Controller", "Overhead", "StrategyError"]


class Controller:
    """Runs the chosen strategies for a set of queries on one runtime.

    :param clock: the runtime's clock in seconds (virtual or wall).
    :param cores: task slots the runtime has.
    :param devices: devices on offer (default: ``cores`` CPUs, no GPU).
    :param scheduler: the scheduling strategy's name.
    :param scheduler_params: its parameters.
    :param plugin_manager: defaults to every installed plugin plus the baselines.
    :param fallback: when a strategy raises, log it and use the baseline for that
        decision (``asap``, ``fifo``, ``cpu-only``) instead of raising :class:`StrategyError`.
    :param timer: a monotonic timer for measuring pacer's own overhead; None
        skips the measurement (the simulator does, to stay deterministic).
    :param overload: what to do when a query's offered load exceeds what any batch size can
        serve within its deadline (see :class:`pacer.overload.OverloadMonitor`): ``"shed"``
        drops, before admission, the buffered datasets that can no longer meet the deadline
        (counted in the ledger and the report, logged), so latency stays bounded for what is
        admitted; ``"keep"`` (the default: a library never drops data unless asked) drops nothing and
        only reports the overload. ``pacer run`` and ``pacer sim`` default to ``"keep"`` too.
    :param service_quantile: the safety margin of every query's service-time model (0-1).
    :param catch_up: drain data that is already past its deadline in deadline-sized batches formed by the
        Controller (:mod:`pacer.catch_up`), for every admission strategy that allows it; False: never.
    """

    def __init__(
        self,
        *,
        clock: Clock,
        cores: int,
        devices: Devices | None = None,
        scheduler: str = "fifo",
        scheduler_params: Mapping[str, Any] | None = None,
        plugin_manager: PluginManager | None = None,
        fallback: bool = False,
        timer: Clock | None = time.perf_counter,
        overload: str = "keep",
        service_quantile: float = 0.99,
        catch_up: bool = True,
    ) -> None:
        if cores < 1:
            raise ValueError(f"cores must be >= 1, got {cores}")
        if overload not in OVERLOAD_POLICIES:
            raise ValueError(f"overload policy must be one of {OVERLOAD_POLICIES}, got {overload!r}")
        ServiceTimeModel(quantile=service_quantile)  # validates the quantile before any query exists
        self.overload_policy = overload
        self.service_quantile = service_quantile
        self.catch_up = catch_up
        self.clock = clock
        self.cores = cores
        self.devices = devices or Devices(cpu_cores=cores)
        self.timer = timer
        self.ledger = ExactlyOnceLedger()
        self.overhead = Overhead()
        self.recorder = RunRecorder()
        self._state = ControllerState()
        self._dispatch = DecisionDispatcher(plugin_manager or get_plugin_manager(), scheduler=scheduler,
                                            scheduler_params=scheduler_params, fallback=fallback)
        #: what the runtime really did where it differs from what was decided (:mod:`pacer.reconcile`)
        self.reconcile = Reconciliation(self._state, self.ledger, lambda q, ds: self._admit_datasets(q, ds, self.clock()))

    @property
    def pm(self) -> PluginManager:
        """The plugin manager whose strategies decide."""
        return self._dispatch.pm

    @property
    def scheduler(self) -> str:
        """The scheduling strategy's name."""
        return self._dispatch.scheduler

    @property
    def fallback(self) -> bool:
        """Whether a raising strategy falls back to its baseline for that decision."""
        return self._dispatch.fallback

    @fallback.setter
    def fallback(self, value: bool) -> None:
        self._dispatch.fallback = value

    # ------------------------------------------------------------------ setup

    def add_query(
        self,
        spec: QuerySpec,
        *,
        admission: str = "asap",
        placement: str = "cpu-only",
        admission_params: Mapping[str, Any] | None = None,
        placement_params: Mapping[str, Any] | None = None,
        max_rows: int = 0,
        max_bytes: int = 0,
        overload: str | None = None,
        probe_rows: int = 0,
        engine_profile: EngineProfile | None = None,
    ) -> None:
        """Register a query with its admission and placement strategies (by name).

        :param max_rows: a read cap every admission honours: at most this many rows per batch
            (Spark's ``maxOffsetsPerTrigger``; 0: no cap). A batch keeps at least one dataset.
        :param max_bytes: likewise in bytes (Spark's ``maxBytesPerTrigger``; 0: no cap).
        :param overload: this query's overload policy, ``"shed"`` or ``"keep"`` (None: the Controller's).
        :param probe_rows: until the query's service-time model is fitted, every batch is a probe of at most this
            many rows, doubling with each completed batch (a restart with a backlog: nothing yet says how much
            fits a deadline, and the whole backlog at once is the batch that runs out of memory); 0: no probe
            (the whole backlog, as Spark's default trigger). A batch keeps at least one dataset.
        :param engine_profile: what the engine measured this query's batches to cost (:mod:`pacer.engine_profile`):
            its service-time model starts from it (no cold-start probe is then needed) and the scaler reads it
            until the query measured its own; one measured on another workload than the query's is refused (a query
            of no known workload, a user's own, takes the one it is given).
        :raises UnknownStrategyError: for a name no installed plugin provides.
        :raises ValueError: for a duplicate query id, an unknown parameter or overload policy, or a negative cap.
        """
        if spec.id in self._state.queries:
            raise ValueError(f"query {spec.id!r} is already registered")
        if max_rows < 0 or max_bytes < 0 or probe_rows < 0:
            raise ValueError(f"query {spec.id!r}: max_rows, max_bytes and probe_rows must be >= 0 (0: none)")
        if overload is not None and overload not in OVERLOAD_POLICIES:
            raise ValueError(f"query {spec.id!r}: overload policy must be one of {OVERLOAD_POLICIES}, got {overload!r}")
        if engine_profile is not None:
            _check_profile(spec, engine_profile)
        chosen = {"admission": admission, "placement": placement}
        params, states = self._dispatch.strategies(spec, chosen, admission_params, placement_params)
        self._state.queries[spec.id] = QueryState(
            spec=spec, selected=chosen, params=params, states=states, history=QueryHistory(maxlen=RECENT, max_datasets=RECENT_DATASETS),
            record=self.recorder.add_query(spec.id, deadline=spec.effective_deadline),
            service=ServiceTimeModel(quantile=self.service_quantile),
            overload=OverloadMonitor(deadline=spec.effective_deadline),
            max_rows=int(max_rows), max_bytes=int(max_bytes), overload_policy=overload or self.overload_policy,
            probe_rows=int(probe_rows),
            catch_up=CatchUp(deadline=spec.effective_deadline, enabled=self._catches_up(admission)),
        )
        if engine_profile is not None:
            self.take_engine_profile(spec.id, engine_profile)
        self._follow_slots(self._state.queries[spec.id])

    def take_engine_profile(self, query_id: str, profile: EngineProfile) -> None:
        """``profile`` becomes the query's prior, as :meth:`add_query`'s ``engine_profile``, before its first batch
        completes (a paced source knows how it measures a row only once its data arrives).

        :raises ValueError: for a profile of another workload, or once the query's model fitted a batch.
        """
        q = self._state.query(query_id)
        _check_profile(q.spec, profile)
        q.service.take_prior(profile)
        q.engine_profile = profile

    def resize(self, cores: int) -> bool:
        """The runtime now has ``cores`` task slots (an executor lost or added): every later decision plans for
        them (the schedule's core shares, placement's devices). True when that changed anything."""
        if cores < 1:
            raise ValueError(f"cores must be >= 1, got {cores}")
        if cores == self.cores:
            return False
        self.cores = cores
        self.devices = replace(self.devices, cpu_cores=cores)
        for q in self._state.queries.values():
            self._follow_slots(q)
        return True

    def _follow_slots(self, q: QueryState) -> None:
        """The query's service-time model predicts for the task slots its next batch has: ``min(cores,
        partitions)``."""
        q.service.slots = float(min(self.cores, q.spec.partitions))

    def reconfigure(self, spec: QuerySpec, *, admission: str, placement: str,
                    admission_params: Mapping[str, Any] | None = None,
                    placement_params: Mapping[str, Any] | None = None) -> None:
        """Give a registered query a new spec (its deadline) and strategies, as when it restarts with other options.

        Its strategies start from fresh state; its buffer, history, service-time model, record and ledger stay.
        :raises KeyError: for an unknown query; as :meth:`add_query` for strategies and parameters.
        """
        q = self._state.query(spec.id)
        chosen = {"admission": admission, "placement": placement}
        q.params, q.states = self._dispatch.strategies(spec, chosen, admission_params, placement_params)
        q.spec, q.selected = spec, chosen
        self._follow_slots(q)
        q.overload = OverloadMonitor(deadline=spec.effective_deadline)
        q.record.deadline = spec.effective_deadline
        q.catch_up.deadline, q.catch_up.enabled = spec.effective_deadline, self._catches_up(admission)

    # ------------------------------------------------------------------ data in

    def arrive(self, query_id: str, dataset: Dataset) -> None:
        """A dataset landed for ``query_id``; it waits in the query's buffer."""
        q = self._state.query(query_id)
        if dataset.bytes < 0 or dataset.rows < 0:
            raise ValueError(f"dataset {dataset.id!r}: bytes and rows must be >= 0")
        self.ledger.arrived(query_id, dataset.id)
        q.buffer.append(dataset)
        q.record.arrived(dataset)
        q.overload.arrived(dataset.arrival, dataset.bytes)

    def withdraw(self, query_id: str) -> int:
        """Take back every buffered dataset of ``query_id``: its source restarted and will offer the same data
        again (Spark restarts a source from its last committed offset). They leave the ledger and the record."""
        q = self._state.query(query_id)
        taken = q.buffer.take(len(q.buffer))
        self.ledger.withdrawn(query_id, (d.id for d in taken))
        q.record.withdrawn(taken)
        return len(taken)

    # ------------------------------------------------------------------ decisions

    def replace_dag(self, query_id: str, dag: OperatorDAG) -> None:
        """Give ``query_id`` the operator DAG it really executes, for its later placements (a query whose plan is
        known only once it ran: pacer-spark reads it from Spark's executed plan)."""
        q = self._state.query(query_id)
        q.spec = replace(q.spec, dag=dag)

    def context(self, query_id: str | None, decision: str) -> StrategyContext:
        """The :class:`StrategyContext` the chosen strategy for ``decision`` sees (``query_id`` None: the scheduler).

        For tools and benchmarks that call a hook directly; the Controller builds the same one for each call.
        """
        return self._dispatch.context(None if query_id is None else self._state.query(query_id), decision)

    def _catches_up(self, admission: str) -> bool:
        """Whether the Controller catches up for queries admitted by ``admission`` (:mod:`pacer.catch_up`)."""
        return self.catch_up and self._dispatch.allows_catch_up(admission)

    def system_view(self) -> SystemView:
        """The view a decision gets of the whole runtime right now."""
        return SystemView(
            now=self.clock(),
            cores=self.cores,
            devices=self.devices,
            scheduler=self._dispatch.scheduler,
            pending=self._state.pending_view() if self._state.order else (),
            allocated_cores=dict(self._state.allocated),
        )

    def estimate_run_s(self, query_id: str, nbytes: int) -> float:
        """Processing time estimate: the query's service-time model (fixed + per-byte, no margin)
        once it has seen two batches, else bytes / the query's average throughput (0 before history)."""
        return self._state.query(query_id).estimate_run_s(nbytes)

    def poll(self, query_id: str) -> MicroBatch | None:
        """Ask the query's admission strategy whether to form a micro-batch now.

        Does nothing (and asks nobody) while the query is busy or its buffer is empty.
        :return: the admitted, placed and queued micro-batch, or None.
        """
        q = self._state.query(query_id)
        if q.in_flight is not None or not len(q.buffer):
            return None
        with timed(self.timer, self._poll_took, q) as timing:
            now = self.clock()
            shedding = shed_if_overloaded(self.ledger, q, now)  # the overload policy first (pacer.shedding)
            if shedding and not len(q.buffer):
                timing.cancel()  # everything waiting was shed: no poll to account
                return None
            count, catching_up = batch_size(q, now, shedding, lambda: self._dispatch.admission(q, now, self.system_view()),
                                            self.ledger)
            batch = self._admit(q, count, now) if count else None
            if batch is not None and catching_up:
                q.catch_up.admitted(batch, now)
        return batch

    def _poll_took(self, seconds: float, q: QueryState) -> None:
        """A poll of ``q`` took ``seconds`` of pacer's time: charged to the batch it admitted, if any."""
        self.overhead.poll.add(seconds)
        if q.in_flight is not None:  # the poll found the query idle: a batch in flight is the one it admitted
            self._state.charge(q.in_flight, seconds)

    def _admit(self, q: QueryState, count: int, now: float) -> MicroBatch:
        """Take the ``count`` oldest datasets of ``q`` into its next batch, estimated, placed and queued."""
        return self._admit_datasets(q, q.buffer.take(count), now)

    def _admit_datasets(self, q: QueryState, datasets: tuple[Dataset, ...], now: float) -> MicroBatch:
        """``datasets`` (taken from ``q``'s buffer) form its next batch, estimated, placed and queued."""
        q.seq += 1
        estimate = q.estimate_run_s(sum(d.bytes for d in datasets))
        batch = MicroBatch(f"{q.spec.id}#{q.seq}", q.spec.id, q.seq, datasets, now, estimated_run_s=estimate)
        batch = replace(batch, placement=self._dispatch.place(q, batch, self.devices, now))
        self.ledger.admitted(q.spec.id, (d.id for d in datasets))
        self._state.admitted(q, batch, now)
        return batch

    def poll_all(self) -> list[MicroBatch]:
        """Poll every idle query with buffered data, in registration order."""
        return [batch for query_id in self._state.queries if (batch := self.poll(query_id)) is not None]

    def schedule(self) -> ScheduleDecision:
        """Ask the scheduler for the order and core shares of every pending batch."""
        view = self.system_view()
        if not view.pending:
            return ScheduleDecision(order=())
        with timed(self.timer, self._schedule_took):
            decision = self._dispatch.schedule(view)
            self._state.allocate(decision)
        return decision

    def _schedule_took(self, seconds: float) -> None:
        """A scheduling decision took ``seconds``: charged in equal parts to the batches it ordered (every pending one)."""
        share = seconds / len(self._state.order)
        for batch_id in self._state.order:
            self._state.charge(batch_id, share)

    # ------------------------------------------------------------------ execution

    def start(self, batch_id: str) -> None:
        """The runtime began processing ``batch_id``."""
        run = self._state.run(batch_id)
        if run.started_at is None:
            run.started_at = self.clock()

    def complete(
        self,
        batch_id: str,
        *,
        operator_metrics: Iterable[OperatorMetric] = (),
        cores_used: float | None = None,
        engine_s: float | None = None,
        completed_at: float | None = None,
        rows: int | None = None,
        busy_core_s: float | None = None,
        gate_wait_s: float = 0.0,
    ) -> BatchReport:
        """The runtime finished ``batch_id`` (its sink committed): record and dispatch feedback.

        :param engine_s: what the batch cost the engine, where the runtime measures it (Spark's
            ``triggerExecution``); the report's ``cost`` falls back to the processing time.
        :param completed_at: when it finished, where the runtime learns it later (Spark: the end of the
            trigger, reported by its listener); default: the clock now.
        :param rows: the rows the engine counted in the batch (Spark's ``numInputRows``), where the datasets'
            own counts were estimates (a file snapshot's, from its bytes): the report counts these instead.
        :param busy_core_s: the core-seconds the batch's tasks executed, where the runtime measures them.
        :param gate_wait_s: seconds the batch waited for its turn at pacer's gate within ``engine_s`` (left out of
            what the service-time model learns, and of the report's ``trigger_s``).
        """
        check_non_negative("seconds", engine_s=engine_s, busy_core_s=busy_core_s, gate_wait_s=gate_wait_s)
        run = self._state.run(batch_id)
        now = self.clock() if completed_at is None else completed_at
        batch = run.batch
        q = self._state.queries[batch.query_id]
        report = run.report(now, operator_metrics=operator_metrics, cores_used=cores_used, engine_s=engine_s, rows=rows,
                            busy_core_s=busy_core_s, gate_wait_s=gate_wait_s)
        self.ledger.processed(batch.query_id, (d.id for d in batch.datasets))
        self._state.completed(q, batch_id)
        q.completed(batch, report, now)
        with timed(self.timer, self._feedback_took, run):
            self._dispatch.feedback(q, report)
        return report

    def _feedback_took(self, seconds: float, run: RunningBatch) -> None:
        """The feedback on ``run`` took ``seconds``: with its polls and scheduling, pacer's time on the batch."""
        self.overhead.per_batch.add(run.overhead_s + seconds)

    def record_busy(self, query_id: str, core_s: float, *, cpu_core_s: float | None = None,
                    failed_core_s: float | None = None) -> None:
        """Core-seconds the query's tasks executed outside its completed batches (a job outside any batch, a task
        that ended after its batch was read), with their CPU time and failed attempts' run time where measured: they
        count in its report's ``busy_core_s``, ``cpu_core_s`` and ``failed_core_s``."""
        self._state.query(query_id)
        self.recorder.record(query_id).unbatched(busy_core_s=core_s, cpu_core_s=cpu_core_s,
                                                 failed_core_s=failed_core_s)

    def record_no_data_batch(self, query_id: str, trigger_s: float, *, busy_core_s: float | None = None,
                             cpu_core_s: float | None = None, failed_core_s: float | None = None) -> None:
        """A batch the engine formed itself without new data (Spark's after a watermark moved): its trigger time and
        its tasks' core-seconds count in the query's report, apart as ``cost.no_data`` too
        (:meth:`pacer.recorder.QueryRecord.no_data_batch`)."""
        self._state.query(query_id)
        self.recorder.record(query_id).no_data_batch(trigger_s, busy_core_s=busy_core_s, cpu_core_s=cpu_core_s,
                                                     failed_core_s=failed_core_s)

    def record_enactment(self, batch_id: str, enacted: bool, note: str = "",
                         ran: Mapping[str, Device] | None = None) -> None:
        """Record whether the runtime enacted the placement of pending batch ``batch_id``, and why (not); ``ran``:
        per operator, the device the engine planned it on where it may differ from the placement (None: as placed).

        The batch's report then carries ``placement.enacted``, ``placement.note`` and ``placement.ran``, and its
        ``gpu_operator_ratio`` counts what ran on the GPU (:attr:`pacer.Placement.ran_gpu_ratio`).

        :raises KeyError: for an unknown or completed batch.
        """
        run = self._state.run(batch_id)
        if run.batch.placement is not None:
            run.batch = replace(run.batch, placement=replace(run.batch.placement, enacted=enacted, note=note,
                                                             ran=dict(ran) if ran is not None else None))

    # ------------------------------------------------------------------ reading (pacer.views)

    def query_ids(self) -> list[str]:
        """Registered query ids, in registration order."""
        return list(self._state.queries)

    def query(self, query_id: str) -> QueryView:
        """A read-only view of ``query_id``.

        :raises KeyError: for an unregistered query, listing the registered ones.
        """
        return QueryView(self._state.query(query_id), self._state)

    @property
    def queries(self) -> Mapping[str, QueryView]:
        """Query id -> :meth:`query` view, read only, in registration order."""
        return QueryViews(self._state)

    def batch(self, batch_id: str) -> BatchView:
        """A read-only view of an admitted batch that has not completed.

        :raises KeyError: for an unknown or completed batch.
        """
        return BatchView.of(self._state.run(batch_id))

    def busy(self, query_id: str) -> bool:
        """True while the query has an admitted batch that has not completed."""
        return self._state.query(query_id).in_flight is not None

    def pending(self) -> list[MicroBatch]:
        """Admitted batches not yet completed, in admission order."""
        return self._state.pending()

    def buffered(self, query_id: str) -> Sequence[Dataset]:
        """Datasets of ``query_id`` still waiting for admission."""
        return tuple(self._state.query(query_id).buffer)

    def has_buffered(self, query_id: str) -> bool:
        """True when datasets of ``query_id`` wait for admission (no copy of the buffer is made)."""
        return len(self._state.query(query_id).buffer) > 0

    def reports(self, query_id: str | None = None) -> list[BatchReport]:
        """Completed batch reports of one query, or of all queries in completion order."""
        if query_id is not None:
            self._state.query(query_id)
        return self.recorder.reports(query_id)


def _check_profile(spec: QuerySpec, profile: EngineProfile) -> None:
    """Refuse a profile measured on another workload than the query's (one of no known workload takes any)."""
    if spec.workload and not profile.applies_to(spec.workload):
        raise ValueError(f"query {spec.id!r} runs {spec.workload!r}; the engine profile given was measured on "
                         f"{profile.workload!r}: calibrate this query (`pacer calibrate --runtime "
                         f"{profile.runtime} --workload {spec.workload}`)")
