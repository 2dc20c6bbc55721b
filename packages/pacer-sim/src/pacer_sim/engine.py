"""The discrete-event runtime: virtual clock, traffic, polling, task slots, Spark's own batches, resource changes.

It drives the same :class:`pacer.Controller` a Spark run uses; only the clock
and the processing are simulated. Same seed, same configuration: byte-identical
report (the Controller's wall-clock overhead timer is off unless asked for).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pacer import Controller, Devices, MicroBatch, OperatorDAG, QuerySpec, ScheduleDecision, arrival_dataset
from pacer.clock import ManualClock
from pacer.engine_profile import EngineProfile
from pacer.event_loop import EMPTY, FINISHED, POLL_INTERVAL, EventLoop
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.report import build_report
from pacer.report_types import Report
from pacer.scaler import Scaler
from pacer_sim.calibrated import calibrated_model, calibrated_no_data_work, calibrated_work, config_entry, profile_for
from pacer_sim.costs import BatchWork, CostModel, batch_work, no_data_work
from pacer_sim.running import RunningBatch
from pacer_sim.stateful import WATERMARK_S, Watermark, keeps_state, reload_tasks, runs_no_data_batches
from pacer_sim.waves import SlotPool, allocate_slots
from pacer_workloads import WORKLOADS, bytes_per_row, make_query, make_traffic, schedule_arrivals

# Event kinds; at equal times they run in this order (then in the order they were pushed).
_DONE, _RESOURCES, _ARRIVE, _POLL = 0, 1, 2, 3
#: Payloads of ``_RESOURCES`` events that are executors' (a resource change's have none).
_READY, _REMOVE_TIMEOUT = "executor-ready", "removal-timeout"
#: Tag of a ``_POLL`` event that is a query's first trigger after a data batch moved its watermark.
_TRIGGER = "trigger-after-watermark"
#: Seconds an executor takes from request to running, unless the run says (a container or pod starting).
EXECUTOR_STARTUP_S = 30.0
#: The finest arrival period a run may ask (:attr:`Simulation.arrival_period_s`): 20 datasets a second a query.
MIN_ARRIVAL_PERIOD_S = 0.05
#: Seconds a removal waits for the running batches to finish before it takes their cores anyway.
REMOVAL_TIMEOUT_S = 30.0


def check_arrival_period(seconds: float, name: str = "arrival period") -> float:
    """``seconds`` between a query's datasets, checked to be within :data:`MIN_ARRIVAL_PERIOD_S`-1 s (``ValueError``
    naming ``name``, the setting it was given as)."""
    if not MIN_ARRIVAL_PERIOD_S <= seconds <= 1.0:
        raise ValueError(f"{name} must be within {MIN_ARRIVAL_PERIOD_S:g}-1 s, got {seconds:g}")
    return seconds


@dataclass(frozen=True)
class ResourceChange:
    """``fraction`` of the cores is taken away from ``start`` to ``end`` (Das §5.5 takes 25 %)."""

    start: float
    end: float
    fraction: float

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end or not 0 < self.fraction < 1:
            raise ValueError(f"resource change needs 0 <= start < end and 0 < fraction < 1, got {self}")


@dataclass
class _Query:
    query_id: str
    workload: str
    arrivals: int
    spec: QuerySpec
    profile: EngineProfile | None = None  # what Spark measured it to cost, in the simulator's bytes
    model: CostModel | None = None  # the cost model with the profile's scalars (None: the run's)
    trigger_s: float | None = None  # static admission: Spark's own processing-time trigger's interval
    started: int = 0  # its batches that entered the engine


@dataclass
class Simulation:
    """A simulated micro-batch engine with ``cores`` task slots and ``gpus`` GPUs, driving a :class:`pacer.Controller`.

    Add queries with :meth:`add_query`, then call :meth:`run` once; it returns the
    ``pacer.report/1`` document (``runtime: "sim"``). Every figure in it is simulated.

    Batches run as Spark runs them (:mod:`pacer_sim.waves`, :mod:`pacer_sim.stateful`): their tasks in waves on whole
    task slots, never preempted; a query with a streaming aggregation and a watermark runs Spark's no-data batches
    (reported apart as ``cost.no_data``); a core of an executor added at run time runs its first task
    ``executor_warmup_s`` longer, and a stateful query's next batch reloads the state an executor that left held.

    :param cores: CPU task slots shared by every running batch.
    :param gpus: modelled GPUs (0: GPU placements run on the CPU).
    :param scheduler: scheduling strategy name (``fifo``, ``fair``, ``edf``, ...), global.
    :param scheduler_params: its parameters.
    :param seed: seeds the traffic (query ``i`` uses ``seed + i``) and the processing noise.
    :param cost_model: the processing-time model (:class:`CostModel` defaults).
    :param resource_changes: periods in which part of the cores is taken away.
    :param poll_interval: virtual seconds between admission polls of an idle query with data (0.01).
    :param measure_overhead: time pacer's own decisions with the wall clock (``time.perf_counter``);
        the report is then not byte-identical between runs.
    :param fallback: a raising strategy falls back to the baseline instead of stopping the run.
    :param plugin_manager: where strategies come from (default: every installed plugin).
    :param monitor_interval: seconds per row of the report's ``series``.
    :param overload: the Controller's overload policy: ``"keep"`` (the default, as the Controller's and
        ``pacer sim``'s: nothing is dropped, as in Spark, so the papers' diverging baselines diverge) or
        ``"shed"`` (datasets that can no longer meet their deadline are shed and counted).
    :param scaler: the executors' scaler (:class:`pacer.scaler.Scaler`; None: ``cores`` for the whole run). With
        one, the run starts with its initial executors; an executor asked for runs ``executor_startup_s`` later and
        is held (billed) from the request; one asked to leave goes once no batch runs, new batches waiting for it
        (at most :data:`REMOVAL_TIMEOUT_S`, then it takes its cores from the running ones).
    :param watermark_s: the queries' watermark delay (pacer-spark's workloads': 60 s); None: no watermark, so no
        no-data batches.
    :param engine_profiles: what Spark measured queries to cost (``pacer calibrate --runtime spark``): a query whose
        workload one was measured on takes its costs from it instead of from ``cost_model``'s curves
        (:mod:`pacer_sim.calibrated`).
    :param arrival_period_s: seconds between a query's datasets (each holds its traffic's rows over the period):
        1 s by default, as pacer-gen writes; finer for a source whose records arrive continuously (a Kafka topic
        that Spark's default trigger reads every few hundred ms), so that a batch may follow the last sooner.
    :ivar batches: the admitted batches not yet completed, by id (``works``: their simulated work); completed
        ones are in ``controller.reports()``, so the simulator's memory stays bounded over a long run.
    :ivar events: events simulated so far (arrivals, polls, phase ends and completions, resource changes).
    :ivar extra_config: more keys for the report's ``config`` (the CLI puts its arguments here).
    """

    cores: int = 2
    gpus: int = 0
    scheduler: str = "fifo"
    scheduler_params: Mapping[str, Any] | None = None
    seed: int = 7
    cost_model: CostModel = field(default_factory=CostModel)
    resource_changes: Sequence[ResourceChange] = ()
    poll_interval: float = POLL_INTERVAL
    measure_overhead: bool = False
    fallback: bool = False
    plugin_manager: PluginManager | None = None
    monitor_interval: float = 1.0
    overload: str = "keep"
    scaler: Scaler | None = None
    executor_startup_s: float = EXECUTOR_STARTUP_S
    watermark_s: float | None = WATERMARK_S
    engine_profiles: Sequence[EngineProfile] = ()
    arrival_period_s: float = 1.0
    events: int = 0
    extra_config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cores < 1 or self.gpus < 0:
            raise ValueError(f"need cores >= 1 and gpus >= 0, got cores={self.cores}, gpus={self.gpus}")
        if self.poll_interval <= 0 or self.monitor_interval <= 0:
            raise ValueError("poll_interval and monitor_interval must be > 0")
        if self.watermark_s is not None and self.watermark_s < 0:
            raise ValueError(f"watermark must be >= 0 s (or None), got {self.watermark_s}")
        check_arrival_period(self.arrival_period_s)
        self.clock = ManualClock()
        if self.scaler is not None:
            if self.executor_startup_s < 0:
                raise ValueError(f"executor start-up must be >= 0 s, got {self.executor_startup_s}")
            self.cores = self.scaler.initial * self.scaler.cores_per_executor
        self._executors = self.scaler.initial if self.scaler is not None else 0
        self._starting: list[float] = []  # ready times of executors asked for
        self._removing = 0
        self._remove_since: float | None = None
        self._slots = self.cores
        self._pool = SlotPool()
        self._decision = ScheduleDecision(order=())
        self._peak_tasks = 0
        self.controller = Controller(
            clock=self.clock,
            cores=self.cores,
            devices=Devices(cpu_cores=self.cores, gpus=self.gpus),
            scheduler=self.scheduler,
            scheduler_params=self.scheduler_params,
            plugin_manager=self.plugin_manager or get_plugin_manager(),
            fallback=self.fallback,
            timer=time.perf_counter if self.measure_overhead else None,
            overload=self.overload,
        )
        self._queries: dict[str, _Query] = {}
        self._loop = EventLoop(self.controller, poll_interval=self.poll_interval, poll_rank=_POLL)
        self._arrivals_left = 0
        self._running: dict[str, RunningBatch] = {}  # pacer's batches and Spark's no-data batches
        self._watermarks: dict[str, Watermark] = {}  # queries that run no-data batches
        self._triggers: set[str] = set()  # queries whose trigger after a watermark move is due
        self._no_data: dict[str, int] = {}  # no-data batches run so far, per query
        self._reload: dict[str, int] = {}  # tasks of a query's next batch that reload state
        self._ran = False
        self._duration = 0.0
        self.drained = True
        self.batches: dict[str, MicroBatch] = {}  # pending batches only: a run keeps nothing per completed batch
        self.works: dict[str, BatchWork] = {}
        self._config_queries: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ setup

    def add_query(
        self,
        workload: str,
        *,
        traffic: str = "constant",
        rate: float = 1000.0,
        traffic_params: Mapping[str, float | str] | None = None,
        admission: str = "asap",
        admission_params: Mapping[str, Any] | None = None,
        placement: str = "cpu-only",
        placement_params: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        query_id: str | None = None,
        partitions: int = 2,
        duration: float = 600.0,
        max_rows: int = 0,
        max_bytes: int = 0,
        seed: int | None = None,
    ) -> str:
        """Add a query with its traffic and strategies; its datasets arrive over ``duration`` seconds.

        One dataset per second, or per :attr:`arrival_period_s` (``pacer_workloads.schedule_arrivals``), made by
        :func:`pacer.arrival_dataset`:
        id ``{query_id}-{index}``, its rows, and bytes = rows x the stream's CSV bytes per row.

        :param workload: ``lr1``, ``lr1t``, ``lr2``, ``lr3``, ``cm1`` or ``cm2``.
        :param traffic: a ``pacer_workloads.TRAFFIC_PATTERNS`` name; ``rate`` its mean rows/s.
        :param deadline: seconds (None: the window slide).
        :param partitions: partitions per batch, the most cores one batch can use.
        :param max_rows: read cap per batch in rows (Spark's ``maxOffsetsPerTrigger``; 0: none).
        :param max_bytes: read cap per batch in bytes (Spark's ``maxBytesPerTrigger``; 0: none).
        :param seed: the traffic's seed (default ``seed + i`` for the ``i``-th query added, 0-based:
            :meth:`pacer.RunConfig.query_seed`).
        :return: the query id (``query_id`` or the workload name, suffixed ``-2``, ``-3``... when taken).
        :raises ValueError: for an unknown workload, traffic, strategy parameter or a duplicate id.
        """
        if self._ran:
            raise RuntimeError("add queries before run()")
        base = query_id or workload
        qid, n = base, 1
        while qid in self._queries:
            n += 1
            qid = f"{base}-{n}"
        spec = self._runnable(make_query(workload, query_id=qid, deadline=deadline, partitions=partitions))
        self.controller.add_query(
            spec, admission=admission, placement=placement,
            admission_params=admission_params, placement_params=placement_params,
            max_rows=max_rows, max_bytes=max_bytes,
        )
        pattern = make_traffic(traffic, rate=rate, duration=duration, **dict(traffic_params or {}))
        per_row = bytes_per_row(WORKLOADS[workload].stream)
        traffic_seed = self.seed + len(self._queries) if seed is None else seed
        arrivals = schedule_arrivals(pattern, duration=duration, seed=traffic_seed, period=self.arrival_period_s)
        push = self._loop.push
        for a in arrivals:
            push(a.time, _ARRIVE, (qid, arrival_dataset(qid, a, per_row)))
        self._arrivals_left += len(arrivals)
        profile = profile_for(self.engine_profiles, workload)
        if profile is not None:
            profile = profile.in_bytes_of(per_row)
        interval = (admission_params or {}).get("interval", 10.0) if admission == "static" else None
        self._queries[qid] = _Query(qid, workload, len(arrivals), spec, profile,
                                    None if profile is None else calibrated_model(self.cost_model, profile),
                                    None if interval is None else float(interval))
        if self.watermark_s is not None and runs_no_data_batches(spec):
            self._watermarks[qid] = Watermark(self.watermark_s)
        self._config_queries.append(
            {
                "query_id": qid, "workload": workload, "traffic": traffic, "traffic_params": pattern.params(),
                "rate": rate, "duration": duration, "admission": admission,
                "admission_params": dict(admission_params or {}), "placement": placement,
                "placement_params": dict(placement_params or {}), "deadline": spec.effective_deadline,
                "partitions": partitions, "max_rows": max_rows, "max_bytes": max_bytes,
            }
        )
        return qid

    def _runnable(self, spec: QuerySpec) -> QuerySpec:
        """``spec`` with every operator the cost model has no GPU implementation for marked ``cpu_only``,
        so placements see what the runtime can run (RAPIDS' supportedExecs.csv, :mod:`pacer_sim.rapids`)."""
        names = self.cost_model.cpu_only_operators
        if not names or not any(op.name in names and not op.cpu_only for op in spec.dag.operators):
            return spec
        operators = tuple(replace(op, cpu_only=True) if op.name in names else op for op in spec.dag.operators)
        return replace(spec, dag=OperatorDAG(operators, spec.dag.edges))

    # ------------------------------------------------------------------ run

    def cores_available(self, t: float) -> float:
        """Cores left to the engine at ``t`` after resource changes (may be fractional): its running executors'."""
        taken = sum(c.fraction for c in self.resource_changes if c.start <= t < c.end)
        return self._slots * max(0.0, 1.0 - taken)

    def allocated_core_s(self, end: float) -> float:
        """Core-seconds the engine had from 0 to ``end``: its cores over time, less those resource changes took;
        with a scaler, the cores of the executors held (starting ones included)."""
        if self.scaler is not None:
            return self.scaler.held_core_s(0.0, end)
        cuts = sorted({0.0, end, *(t for c in self.resource_changes for t in (c.start, c.end) if 0.0 < t < end)})
        return sum(self.cores_available(a) * (b - a) for a, b in itertools.pairwise(cuts))

    def run(self, duration: float, *, drain: float | None = None) -> Report:
        """Simulate ``duration`` seconds of traffic, then drain buffered and running data.

        Arrivals stop at ``duration`` (the queries' own durations); the run goes on until
        every buffered and running batch has finished, or ``drain`` more virtual seconds
        have passed. ``drained`` tells which.

        :param drain: extra virtual seconds allowed for draining (default: 10 x duration + 600).
        :return: the ``pacer.report/1`` document.
        """
        if self._ran:
            raise RuntimeError("a Simulation runs once")
        self._ran = True
        limit = duration + (drain if drain is not None else 10 * duration + 600)
        for change in self.resource_changes:
            self._loop.push(change.start, _RESOURCES, None)
            self._loop.push(change.end, _RESOURCES, None)
        if self.scaler is not None:
            self.scaler.observe(0.0, running=self._executors, held=self._executors)
        self.drained = False
        self._duration = duration
        ended = self._loop.run(limit, self._step)
        if ended == FINISHED:
            self.drained = True
        elif ended == EMPTY:
            self.drained = not self._running and not self._arrivals_left and not self._buffered()
        end = max(self.clock.now, duration)
        extra: dict[str, Any] = {"events": self.events, "drained": self.drained, "simulated": True}
        if self.scaler is not None:
            extra["scaling"] = {**self.scaler.report(0.0, end), "executor_startup_s": self.executor_startup_s}
        return build_report(
            runtime="sim", config=self.config(duration), controller=self.controller,
            start=0.0, end=end, interval=self.monitor_interval, extra=extra,
            allocated_core_s=self.allocated_core_s(end),
        )

    def _step(self, t: float, kind: int, payload: Any) -> bool:
        """One event; True once the traffic is over and everything drained."""
        if kind == _DONE:
            batch_id, version = payload
            run = self._running.get(batch_id)
            if run is None or run.version != version:
                return False  # superseded by a later rescheduling
            self.clock.now = t
            self.events += 1
            self._advance_all(t)
            if run.finished:
                self._complete(run, t)
            else:
                self._redistribute(t)
        else:
            self.clock.now = t
            self.events += 1
            if kind == _ARRIVE:
                qid, dataset = payload
                self._arrivals_left -= 1
                self.controller.arrive(qid, dataset)
                if not self._stream_held(qid):
                    self._loop.poll_soon(qid, t)
            elif kind == _POLL:
                if isinstance(payload, tuple):
                    self._trigger(payload[1], t)
                else:
                    self._poll(payload, t)
            elif payload == _READY:
                self._executor_ready(t)
            elif payload == _REMOVE_TIMEOUT:
                if self._remove_since is not None and t - self._remove_since >= REMOVAL_TIMEOUT_S - 1e-9:
                    self._try_remove(t, forced=True)
            else:
                self._reschedule(t)
        return self._over(t)

    def _over(self, t: float) -> bool:
        """True once the traffic is over and every dataset processed: a run ends where a Spark run does (pacer-spark
        stops its queries once drained), so a no-data batch due or running after the last data batch is not the
        run's (on Spark it is stopped before it reports: the fidelity run's 0 no-data batches where the model ran 1)."""
        return (t >= self._duration and not self._arrivals_left and not self._buffered()
                and all(run.no_data for run in self._running.values()))

    def _buffered(self) -> bool:
        return any(self.controller.has_buffered(q) for q in self._queries)

    def _poll(self, qid: str, t: float) -> None:
        self._scale_if_due(t)
        batch = self._loop.poll(qid, t)
        if batch is not None:
            self._start(batch, t)

    def _start(self, batch: MicroBatch, t: float) -> None:
        """An admitted batch enters the engine."""
        q = self._queries[batch.query_id]
        q.started += 1
        if q.profile is not None:
            work = calibrated_work(self.cost_model, q.profile, q.spec, batch, seed=self.seed, first=q.started == 1)
        else:
            work = batch_work(self.cost_model, q.spec, batch, gpus=self.gpus, seed=self.seed)
        self._running[batch.id] = self._run(batch, work, t)
        self.batches[batch.id] = batch
        self.works[batch.id] = work
        self._reschedule(t)

    def _run(self, batch: MicroBatch, work: BatchWork, t: float, *, no_data: bool = False) -> RunningBatch:
        """A batch entering the engine, with the state reloads its query owes and the warm-up of cold slots."""
        model = self._queries[batch.query_id].model or self.cost_model
        return RunningBatch(batch, work, last=t, no_data=no_data, reload_tasks=self._reload.pop(batch.query_id, 0),
                            reload_s=model.state_reload_s, warmup_s=model.executor_warmup_s)

    def _stream_held(self, qid: str) -> bool:
        """True while the query's stream is Spark's, not pacer's: its trigger after a watermark move is due, or its
        no-data batch runs (no admission poll then)."""
        return qid in self._triggers or any(r.no_data and r.batch.query_id == qid for r in self._running.values())

    def _trigger(self, qid: str, t: float) -> None:
        """The stream's first trigger after a data batch moved the watermark: the source is asked first (a batch
        admitted now runs, and evicts by the new watermark itself); without one, Spark runs a no-data batch."""
        self._triggers.discard(qid)
        self._scale_if_due(t)
        batch = self.controller.poll(qid)
        if batch is not None:
            self._start(batch, t)
            return
        seq = self._no_data[qid] = self._no_data.get(qid, 0) + 1
        q = self._queries[qid]
        work = None if q.profile is None else calibrated_no_data_work(self.cost_model, q.profile, q.spec, seq,
                                                                      seed=self.seed)
        if work is None:
            work = no_data_work(self.cost_model, q.spec, seq, seed=self.seed)
        run = self._run(MicroBatch(f"{qid}/no-data/{seq}", qid, seq, (), t), work, t, no_data=True)
        run.started_at = t  # Spark's own batch: no gate, its driver part runs at once
        self._running[run.batch.id] = run
        self._reschedule(t)

    # ------------------------------------------------------------------ executors

    def _held(self) -> int:
        return self._executors + len(self._starting)

    def _observe(self, t: float) -> None:
        assert self.scaler is not None
        self.scaler.observe(t, running=self._executors, held=self._held())

    def _scale_if_due(self, t: float) -> None:
        """A query's source asks (an admission poll): the scaler's turn when its interval has passed, as on Spark,
        where the driver asks it only at a source's ask (never on a timer of its own: no ask, no decision)."""
        if self.scaler is not None and self.scaler.due(t):
            self._scale(t)

    def _scale(self, t: float) -> None:
        """The scaler's turn: ask it, then ask for executors or let some go (between batches)."""
        assert self.scaler is not None
        tasks = self._tasks()
        wanted = self.scaler.decide(self.controller, running=self._executors, pending=len(self._starting),
                                    removing=self._removing, startup_s=self.executor_startup_s,
                                    peak_tasks=max(self._peak_tasks, tasks), now=t)
        self._peak_tasks = tasks
        held = self._held() - self._removing
        if wanted > held:
            back = min(wanted - held, self._removing)  # a removal not yet done is called off first
            self._removing -= back
            for _ in range(wanted - held - back):
                ready = t + self.executor_startup_s
                self._starting.append(ready)
                self._loop.push(ready, _RESOURCES, _READY)
        elif wanted < held:
            drop = held - wanted
            while drop and self._starting:  # the newest asked-for executors are called off first
                self._starting.pop()
                drop -= 1
            if drop:
                self._removing += drop
                if self._remove_since is None:
                    self._remove_since = t
                    self._loop.push(t + REMOVAL_TIMEOUT_S, _RESOURCES, _REMOVE_TIMEOUT)
                self._try_remove(t)
        self._observe(t)

    def _executor_ready(self, t: float) -> None:
        if t not in self._starting:  # called off while it started
            return
        self._starting.remove(t)
        self._executors += 1
        assert self.scaler is not None
        self._pool.added(self.scaler.cores_per_executor)
        self._resize(t)

    def _try_remove(self, t: float, *, forced: bool = False) -> None:
        """Let the executors asked to leave go: now if no batch runs, else when forced (the timeout)."""
        if not self._removing or (not forced and any(r.started_at is not None for r in self._running.values())):
            return
        assert self.scaler is not None
        for qid, q in self._queries.items():  # the leaving executors' state partitions load again
            if keeps_state(q.spec):
                owed = self._reload.get(qid, 0) + reload_tasks(q.spec.partitions, self._removing, self._executors)
                self._reload[qid] = min(q.spec.partitions, owed)
        self._pool.removed(self._removing * self.scaler.cores_per_executor)
        self._executors -= self._removing
        self._removing = 0
        self._remove_since = None
        self._resize(t)

    def _resize(self, t: float) -> None:
        assert self.scaler is not None
        self._slots = self._executors * self.scaler.cores_per_executor
        self.controller.resize(self._slots)
        self._observe(t)
        self._reschedule(t)

    def _tasks(self) -> int:
        """Tasks running or waiting now: each admitted batch's partitions (the most cores it can use)."""
        return sum(math.ceil(r.work.parallelism) for r in self._running.values())

    def _advance_all(self, t: float) -> None:
        for run in self._running.values():
            run.advance(t)

    def _reschedule(self, t: float) -> None:
        """Ask the scheduler again (admission, completion, resource change) and hand out the task slots."""
        self._advance_all(t)
        if not self._running:
            return
        if self.scaler is not None:  # what spark-dynamic reads: kept only where a scaler runs
            self._peak_tasks = max(self._peak_tasks, self._tasks())
        self._decision = self.controller.schedule()
        self._redistribute(t)

    def _redistribute(self, t: float) -> None:
        """Hand out the task slots by the last scheduling decision (:func:`pacer_sim.waves.allocate_slots`).

        Spark's no-data batches pass pacer's gate, so their jobs queue as Spark's scheduler queues jobs: under FIFO
        after the batches already running and before pacer's batches still waiting for their turn; under shares they
        take the slots the running batches do not hold, and pacer's shares divide the rest. A batch gives back slots
        only as its tasks end; a freed slot goes to the batches that want more, in that order."""
        self._advance_all(t)
        pool, running = self._pool, self._running
        pool.resize(self.cores_available(t))
        decision = self._decision
        no_data = [b for b, r in running.items() if r.no_data]
        order = [b for b in decision.order if b in running]
        if self._removing:  # an executor leaves between batches: only the batches already running get slots
            no_data = [b for b in no_data if running[b].started_at is not None]
            order = [b for b in order if running[b].started_at is not None]
        demand = {b: running[b].demand for b in (*no_data, *order)}
        started = [b for b in order if running[b].started_at is not None]
        if not decision.shares:  # Spark's FIFO: after the jobs already running, before pacer's batches at its gate
            priority = [*started, *no_data, *(b for b in order if b not in started)]
            targets = allocate_slots(priority, demand, {}, pool.total)
        else:  # the slots the running batches do not hold, then pacer's shares of the rest
            priority = [*no_data, *order]
            spare = max(0, pool.total - sum(running[b].slots for b in started))
            targets = allocate_slots(no_data, demand, {}, spare)
            shares = {b: v for b, v in decision.shares.items() if b in demand}
            targets.update(allocate_slots(order, demand, shares, pool.total - sum(targets.values())))
        held = pool.hand_out(running, targets, priority)
        for batch_id in priority:
            run = running[batch_id]
            if run.slots > 0 and run.started_at is None:
                run.started_at = t
                self.controller.start(batch_id)
        self._rerate(t, held)

    def _rerate(self, t: float, held: int) -> None:
        """Share the GPUs among batches in their GPU phase, set the tasks' speed (slower where more slots are held
        than there are, after cores were taken away), start tasks on idle slots; (re)post every batch's next event."""
        on_gpu = [r for r in self._running.values() if r.slots > 0 and r.in_gpu_phase]
        rate = min(1.0, self.gpus / len(on_gpu)) if on_gpu else 1.0
        for run in on_gpu:
            run.gpu_rate = rate
        speed = self._pool.speed * min(1.0, self._pool.total / held) if held else self._pool.speed
        for run in self._running.values():
            run.rate = speed
            run.fill()
            due = run.next_event(t)
            if due == run.due or (math.isfinite(due) and abs(due - run.due) <= 1e-12):
                continue
            run.due = due
            run.version += 1
            if math.isfinite(due):
                self._loop.push(due, _DONE, (run.batch.id, run.version))

    def _complete(self, run: RunningBatch, t: float) -> None:
        """A batch ended: pacer's is reported to the Controller, Spark's no-data batch recorded apart; then the
        query's next trigger (after a watermark move, one that may run a no-data batch) and the slots handed on."""
        qid = run.batch.query_id
        del self._running[run.batch.id]
        self._pool.give_back(run.cold)
        started = run.started_at if run.started_at is not None else t
        if run.no_data:
            self.controller.record_no_data_batch(qid, t - started, busy_core_s=run.task_core_s)
        else:
            self.batches.pop(run.batch.id, None)
            self.works.pop(run.batch.id, None)
            cores_used = run.core_s / (t - started) if t > started else float(run.slots) * run.rate
            tasks = run.work.parallelism if run.work.cpu_core_s > 0 else 0
            self.controller.reconcile.task_costs(run.batch.id, cpu_core_s=None, failed_core_s=None, tasks=tasks)
            self.controller.complete(run.batch.id, operator_metrics=run.metrics(), cores_used=cores_used,
                                     engine_s=t - started, busy_core_s=run.task_core_s)
        self._try_remove(t)
        self._reschedule(t)
        watermark = self._watermarks.get(qid)
        if not run.no_data and watermark is not None and watermark.advance(run.batch.datasets):
            self._triggers.add(qid)
            self._loop.push(self._next_trigger(qid, run.batch, t), _POLL, (_TRIGGER, qid))
        else:
            self._loop.poll_soon(qid, t)

    def _next_trigger(self, qid: str, batch: MicroBatch, t: float) -> float:
        """When the stream's next trigger runs after ``batch`` completed at ``t``: at once under pacer's admission
        (Spark's trigger is then ``processingTime=0``); under a static trigger (Spark's own ``processingTime``), at
        the tick after the one that formed the batch, or at once where the batch overran it (Spark's
        ``ProcessingTimeExecutor``): data that arrived meanwhile then forms a batch, and no no-data batch runs."""
        interval = self._queries[qid].trigger_s
        if not interval:
            return t
        tick = (math.floor(batch.admitted_at / interval + 1e-9) + 1) * interval
        return max(t, tick)

    def config(self, duration: float) -> dict[str, Any]:
        """The run's configuration, as recorded in the report."""
        calibrated = {qid: q.profile for qid, q in self._queries.items() if q.profile is not None}
        return {
            "duration": duration, "seed": self.seed, "cores": self.cores, "gpus": self.gpus,
            "scheduler": self.scheduler, "scheduler_params": dict(self.scheduler_params or {}),
            "poll_interval": self.poll_interval, "monitor_interval": self.monitor_interval,
            "measure_overhead": self.measure_overhead, "fallback": self.fallback, "overload": self.overload,
            "resource_changes": [[c.start, c.end, c.fraction] for c in self.resource_changes],
            "watermark_s": self.watermark_s,
            **({"scale": self.scaler.name, "executors": [self.scaler.min_executors, self.scaler.max_executors],
                "cores_per_executor": self.scaler.cores_per_executor, "executor_startup_s": self.executor_startup_s}
               if self.scaler is not None else {}),
            "cost_model": self.cost_model.as_config(),
            **({"calibrated": config_entry(calibrated)} if calibrated else {}),
            "queries": self._config_queries,
            **self.extra_config,
        }
