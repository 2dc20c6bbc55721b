"""The discrete-event runtime: virtual clock, traffic, polling, core sharing, resource changes.

It drives the same :class:`pacer.Controller` a Spark run uses; only the clock
and the processing are simulated. Same seed, same configuration: byte-identical
report (the Controller's wall-clock overhead timer is off unless asked for).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer import Controller, Dataset, Devices, MicroBatch, ScheduleDecision
from pacer.clock import ManualClock
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.report import build_report
from pacer_sim.costs import BatchWork, CostModel, batch_work
from pacer_workloads import WORKLOADS, bytes_per_row, make_query, make_traffic, schedule_arrivals

POLL_INTERVAL = 0.01  # Spark's spark.sql.streaming.pollingDelay


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
class _Running:
    batch: MicroBatch
    work: BatchWork
    serial_left: float
    cpu_left: float
    cores: float = 0.0
    last: float = 0.0
    version: int = 0
    started: bool = False

    def advance(self, now: float) -> None:
        dt = now - self.last
        self.last = now
        if dt <= 0 or self.cores <= 0:
            return
        used = min(dt, self.serial_left)
        self.serial_left -= used
        dt -= used
        if dt > 0:
            self.cpu_left = max(0.0, self.cpu_left - dt * min(self.cores, self.work.parallelism))

    def finish_time(self, now: float) -> float:
        if self.cores <= 0:
            return math.inf
        return now + self.serial_left + self.cpu_left / min(self.cores, self.work.parallelism)


@dataclass
class _Query:
    query_id: str
    workload: str
    arrivals: int
    polling: bool = False


@dataclass
class Simulation:
    """A simulated micro-batch engine with ``cores`` task slots and ``gpus`` GPUs.

    :param scheduler: scheduling strategy name (``fifo``, ``fair``, ``edf``, ...).
    :param seed: seeds traffic and processing noise.
    :param cost_model: the processing-time model (:class:`CostModel` defaults).
    :param resource_changes: periods in which part of the cores is taken away.
    :param measure_overhead: time pacer's own decisions with the wall clock
        (the report is then not byte-identical between runs).
    :param fallback: a raising strategy falls back to the baseline instead of stopping the run.
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
    events: int = 0

    def __post_init__(self) -> None:
        self.clock = ManualClock()
        self.controller = Controller(
            clock=self.clock,
            cores=self.cores,
            devices=Devices(cpu_cores=self.cores, gpus=self.gpus),
            scheduler=self.scheduler,
            scheduler_params=self.scheduler_params,
            plugin_manager=self.plugin_manager or get_plugin_manager(),
            fallback=self.fallback,
            timer=time.perf_counter if self.measure_overhead else None,
        )
        self._queries: dict[str, _Query] = {}
        self._heap: list[tuple[float, int, str, Any]] = []
        self._seq = 0
        self._running: dict[str, _Running] = {}
        self.batches: dict[str, MicroBatch] = {}
        self._config_queries: list[dict[str, Any]] = []

    # ------------------------------------------------------------------ setup

    def add_query(
        self,
        workload: str,
        *,
        traffic: str = "constant",
        rate: float = 1000.0,
        traffic_params: Mapping[str, float] | None = None,
        admission: str = "asap",
        admission_params: Mapping[str, Any] | None = None,
        placement: str = "cpu-only",
        placement_params: Mapping[str, Any] | None = None,
        deadline: float | None = None,
        query_id: str | None = None,
        partitions: int = 2,
        duration: float = 600.0,
    ) -> str:
        """Add a query with its traffic and strategies; its datasets are scheduled for ``duration`` seconds.

        :return: the query id (the workload name, suffixed when taken).
        """
        base = query_id or workload
        qid, n = base, 1
        while qid in self._queries:
            n += 1
            qid = f"{base}-{n}"
        spec = make_query(workload, query_id=qid, deadline=deadline, partitions=partitions)
        self.controller.add_query(
            spec, admission=admission, placement=placement,
            admission_params=admission_params, placement_params=placement_params,
        )
        pattern = make_traffic(traffic, rate=rate, duration=duration, **dict(traffic_params or {}))
        per_row = bytes_per_row(WORKLOADS[workload].stream)
        arrivals = schedule_arrivals(pattern, duration=duration, seed=self.seed + len(self._queries))
        for a in arrivals:
            self._push(a.time, "arrive", (qid, Dataset(f"{qid}-{a.index}", a.time, round(a.rows * per_row), a.rows)))
        self._queries[qid] = _Query(qid, workload, len(arrivals))
        self._config_queries.append(
            {
                "query_id": qid, "workload": workload, "traffic": traffic, "traffic_params": pattern.params(),
                "rate": rate, "admission": admission, "admission_params": dict(admission_params or {}),
                "placement": placement, "placement_params": dict(placement_params or {}),
                "deadline": spec.effective_deadline, "partitions": partitions,
            }
        )
        return qid

    def _push(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self._heap, (t, self._seq, kind, payload))
        self._seq += 1

    # ------------------------------------------------------------------ run

    def cores_available(self, t: float) -> float:
        """Cores left to the engine at ``t`` after resource changes."""
        taken = sum(c.fraction for c in self.resource_changes if c.start <= t < c.end)
        return self.cores * max(0.0, 1.0 - taken)

    def run(self, duration: float, *, drain: float | None = None) -> dict[str, Any]:
        """Simulate ``duration`` seconds of traffic, then drain buffered and running data.

        :param drain: extra virtual seconds allowed for draining (default: 10 × duration + 600).
        :return: the ``pacer.report/1`` document.
        """
        limit = duration + (drain if drain is not None else 10 * duration + 600)
        for change in self.resource_changes:
            self._push(change.start, "resources", None)
            self._push(change.end, "resources", None)
        while self._heap:
            t, _, kind, payload = heapq.heappop(self._heap)
            if t > limit:
                break
            self.clock.now = max(self.clock.now, t)
            self.events += 1
            if kind == "arrive":
                qid, dataset = payload
                self.controller.arrive(qid, dataset)
                self._poll_soon(qid, t)
            elif kind == "poll":
                self._poll(payload, t)
            elif kind == "done":
                batch_id, version = payload
                run = self._running.get(batch_id)
                if run is not None and run.version == version:
                    self._complete(run, t)
            elif kind == "resources":
                self._reschedule(t)
            if not self._running and not self._pending_work() and t >= duration:
                break
        end = max(self.clock.now, duration)
        return build_report(
            runtime="sim", config=self.config(duration), controller=self.controller,
            start=0.0, end=end, interval=self.monitor_interval, extra={"events": self.events},
        )

    def _pending_work(self) -> bool:
        return any(self.controller.buffered(q) for q in self._queries) or any(
            kind == "arrive" for _, _, kind, _ in self._heap
        )

    def _poll_soon(self, qid: str, t: float) -> None:
        q = self._queries[qid]
        if not q.polling and not self.controller.busy(qid):
            q.polling = True
            self._push(t, "poll", qid)

    def _poll(self, qid: str, t: float) -> None:
        self._queries[qid].polling = False
        batch = self.controller.poll(qid)
        if batch is not None:
            spec = self.controller.queries[qid].spec
            work = batch_work(self.cost_model, spec, batch, gpus=self.gpus, seed=self.seed)
            self._running[batch.id] = _Running(batch, work, work.serial_s, work.cpu_core_s, last=t)
            self.batches[batch.id] = batch
            self._reschedule(t)
        elif self.controller.buffered(qid) and not self.controller.busy(qid):
            self._queries[qid].polling = True
            self._push(t + self.poll_interval, "poll", qid)

    def _allocate(self, decision: ScheduleDecision, available: float) -> dict[str, float]:
        runs = [self._running[b] for b in decision.order]
        if not decision.shares:  # FIFO: in order, each takes what it can use
            out, left = {}, available
            for run in runs:
                take = min(left, run.work.parallelism)
                out[run.batch.id] = take
                left -= take
            return out
        # Shares by weight, scaled to the cores available, capped at each batch's parallelism
        # and the excess handed on to the others (water-filling), as Spark's FAIR pools do.
        weights = {b: max(0.0, decision.shares.get(b, 0.0)) for b in decision.order}
        out = dict.fromkeys(decision.order, 0.0)
        left, open_ = available, [b for b in decision.order if weights[b] > 0]
        while left > 1e-12 and open_:
            total = sum(weights[b] for b in open_)
            grant = {b: left * weights[b] / total for b in open_}
            left = 0.0
            still = []
            for b in open_:
                cap = self._running[b].work.parallelism
                give = min(grant[b], cap - out[b])
                out[b] += give
                left += grant[b] - give
                if out[b] < cap - 1e-12:
                    still.append(b)
            open_ = still
        return out

    def _reschedule(self, t: float) -> None:
        for run in self._running.values():
            run.advance(t)
        if not self._running:
            return
        decision = self.controller.schedule()
        cores = self._allocate(decision, self.cores_available(t))
        for batch_id in decision.order:
            run = self._running[batch_id]
            run.cores = cores.get(batch_id, 0.0)
            if run.cores > 0 and not run.started:
                run.started = True
                self.controller.start(batch_id)
            run.version += 1
            finish = run.finish_time(t)
            if math.isfinite(finish):
                self._push(finish, "done", (batch_id, run.version))

    def _complete(self, run: _Running, t: float) -> None:
        run.advance(t)
        del self._running[run.batch.id]
        report = self.controller.complete(run.batch.id, operator_metrics=run.work.metrics, cores_used=run.cores)
        self._reschedule(t)
        self._poll_soon(report.query_id, t)

    def config(self, duration: float) -> dict[str, Any]:
        """The run's configuration, as recorded in the report."""
        return {
            "duration": duration, "seed": self.seed, "cores": self.cores, "gpus": self.gpus,
            "scheduler": self.scheduler, "scheduler_params": dict(self.scheduler_params or {}),
            "poll_interval": self.poll_interval,
            "resource_changes": [[c.start, c.end, c.fraction] for c in self.resource_changes],
            "cost_model": {
                "batch_overhead": self.cost_model.batch_overhead, "join_superlinear": self.cost_model.join_superlinear,
                "join_exponent": self.cost_model.join_exponent,
                "pcie_init": self.cost_model.pcie_init, "pcie_bandwidth": self.cost_model.pcie_bandwidth,
                "noise": self.cost_model.noise,
            },
            "queries": self._config_queries,
        }
