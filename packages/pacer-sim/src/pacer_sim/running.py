"""A batch in the simulated engine: its remaining work in three phases and how it progresses on its task slots."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pacer import MicroBatch, OperatorMetric
from pacer_sim.costs import BatchWork

_EPS = 1e-9


@dataclass
class RunningBatch:
    """A batch in the engine: its driver part, its GPU part, then its tasks, on the task slots it holds.

    The engine sets ``slots`` (whole slots it holds, :mod:`pacer_sim.waves`), ``rate`` (each running task's speed)
    and ``gpu_rate``; they are constant between two events. Its driver part and GPU part progress while it holds a
    slot; its tasks (one per partition, ``work.task_s`` each) start on its idle slots, a wave at a time, and a task
    ends before its slot can go to another batch.

    :param no_data: Spark's no-data batch (:mod:`pacer_sim.stateful`), not one pacer formed: it waits at no gate,
        so its driver part runs from its formation, slot or not.
    :param reload_tasks: how many of its first tasks load their state again (an executor that held it left), each
        ``reload_s`` longer.
    :param warmup_s: how much longer a task runs on a cold slot (the first on a core of a new executor).
    """

    batch: MicroBatch
    work: BatchWork
    last: float = 0.0
    no_data: bool = False
    reload_tasks: int = 0
    reload_s: float = 0.0
    warmup_s: float = 0.0
    slots: int = 0  # task slots held
    cold: int = 0  # of which cold and never used
    rate: float = 1.0  # each running task's speed: core-seconds of its work per second
    gpu_rate: float = 1.0
    due: float = math.inf
    version: int = 0
    started_at: float | None = None
    core_s: float = 0.0  # slots held x their speed, integrated over time since start
    task_core_s: float = 0.0  # run time of its tasks (GPU phase: its slots, up to its partitions): busy core-seconds
    gpu_wall: float = 0.0  # seconds spent in the GPU phase
    task_wall: float = 0.0  # seconds spent with tasks running
    fixed_left: float = field(init=False)
    gpu_left: float = field(init=False)
    tasks_left: int = field(init=False)  # tasks not yet started
    running: list[float] = field(init=False)  # work left of each running task (core-seconds at full speed)

    def __post_init__(self) -> None:
        self.fixed_left = self.work.fixed_s
        self.gpu_left = self.work.gpu_s
        self.tasks_left = self.work.parallelism if self.work.cpu_core_s > 0 else 0
        self.running = []

    @property
    def in_gpu_phase(self) -> bool:
        """True while the fixed phase is done and GPU work remains."""
        return self.fixed_left <= _EPS and self.gpu_left > _EPS

    @property
    def in_task_phase(self) -> bool:
        """True once the driver part and the GPU part are done: its tasks run or wait for slots."""
        return self.fixed_left <= _EPS and self.gpu_left <= _EPS

    @property
    def finished(self) -> bool:
        """True when every phase is done."""
        return self.in_task_phase and not self.tasks_left and not self.running

    @property
    def demand(self) -> int:
        """Task slots it can use now: its partitions until its tasks start, then its tasks not yet done."""
        if not self.in_task_phase:
            return self.work.parallelism
        return self.tasks_left + len(self.running)

    @property
    def pinned(self) -> int:
        """Slots it cannot give back now: those its running tasks hold (on the CPU, or on the GPU in its GPU phase)."""
        if self.in_gpu_phase:
            return self.slots
        return len(self.running)

    def fill(self) -> None:
        """Start tasks on its idle slots (warm ones first; a cold one adds the warm-up to its first task)."""
        if not self.in_task_phase:
            return
        for extra in self._starting():
            self.running.append(self.work.task_s + extra)

    def _starting(self, *, dry: bool = False) -> list[float]:
        """The extra seconds of each task that would start now on its idle slots (taken unless ``dry``)."""
        reload, cold, tasks = self.reload_tasks, self.cold, self.tasks_left
        extras = []
        for busy in range(len(self.running), self.slots):
            if not tasks:
                break
            extra = 0.0
            if reload:
                extra += self.reload_s
                reload -= 1
            if self.slots - cold - busy <= 0 and cold:  # no idle warm slot left
                extra += self.warmup_s
                cold -= 1
            extras.append(extra)
            tasks -= 1
        if not dry:
            self.reload_tasks, self.cold, self.tasks_left = reload, cold, tasks
        return extras

    def advance(self, now: float) -> None:
        """Progress from ``last`` to ``now`` at the current rates (constant in between, by construction: the engine
        posts an event at every phase change and task end)."""
        dt = now - self.last
        self.last = now
        if dt <= 0 or (self.slots <= 0 and not self.no_data):
            return
        self.core_s += dt * self.slots * self.rate
        if self.fixed_left > 0:  # a no-data batch's driver part runs without a slot: it waits at no gate
            used = min(dt, self.fixed_left)
            self.fixed_left -= used
            dt -= used
        if self.slots <= 0:
            return
        if dt > 0 and self.gpu_left > 0:  # a task holds its slot on the GPU too, as Spark's does
            used = min(dt, self.gpu_left / self.gpu_rate)
            self.gpu_left = max(0.0, self.gpu_left - used * self.gpu_rate)
            self.gpu_wall += used
            self.task_core_s += used * min(self.slots, self.work.parallelism)
            dt -= used
        if dt > 0 and self.in_task_phase:
            if not self.running:
                self.fill()
            while dt > _EPS and self.running:
                used = min(dt, min(self.running) / self.rate)
                self.running = [w - used * self.rate for w in self.running]
                self.task_wall += used
                self.task_core_s += used * len(self.running)
                self.running = [w for w in self.running if w > _EPS]
                dt -= used

    def next_event(self, now: float) -> float:
        """When this batch next changes: enters or leaves its GPU phase (which changes the GPU's sharing), a task of
        it ends (its slot may go elsewhere), or it finishes."""
        if self.slots <= 0:
            return now + self.fixed_left if self.no_data and self.fixed_left > _EPS else math.inf
        start = now
        if self.fixed_left > _EPS:
            if self.gpu_left > _EPS:
                return now + self.fixed_left
            start += self.fixed_left
        elif self.gpu_left > _EPS:
            return now + self.gpu_left / self.gpu_rate
        tasks = self.running or [self.work.task_s + extra for extra in self._starting(dry=True)]
        return start + min(tasks, default=0.0) / self.rate

    def metrics(self) -> tuple[OperatorMetric, ...]:
        """Per-operator times as observed: each CPU operator its share of its tasks' run time (their fixed part is no
        operator's), GPU work at the share it got."""
        work = self.work
        per_core_s = self.task_wall / work.cpu_core_s if self.task_wall > 0 else 1.0 / work.parallelism
        gpu_slowdown = self.gpu_wall / work.gpu_s if work.gpu_s > 0 else 1.0
        return tuple(
            OperatorMetric(
                op.operator_id, op.device,
                op.transfer_s + op.cpu_core_s * per_core_s + op.gpu_s * gpu_slowdown,
                op.bytes_in, op.rows_in,
            )
            for op in work.operators
        )
