"""A batch in the simulated engine: its remaining work in three phases and how it progresses under sharing."""

from __future__ import annotations

import math
from dataclasses import dataclass

from pacer import MicroBatch, OperatorMetric
from pacer_sim.costs import BatchWork

_EPS = 1e-9


@dataclass
class RunningBatch:
    """A batch in the engine: its remaining work in three phases (fixed, GPU, CPU) and its current rates.

    Progress is processor sharing: between two events the rates (cores, GPU share) are constant.
    """

    batch: MicroBatch
    work: BatchWork
    fixed_left: float
    gpu_left: float
    cpu_left: float
    cores: float = 0.0
    gpu_rate: float = 1.0
    last: float = 0.0
    due: float = math.inf
    version: int = 0
    started_at: float | None = None
    core_s: float = 0.0  # cores allocated, integrated over time since start
    task_core_s: float = 0.0  # cores running its tasks (GPU and CPU phases, at most its parallelism), over time
    gpu_wall: float = 0.0  # seconds spent in the GPU phase
    cpu_wall: float = 0.0  # seconds spent in the CPU phase

    @property
    def in_gpu_phase(self) -> bool:
        """True while the fixed phase is done and GPU work remains."""
        return self.fixed_left <= _EPS and self.gpu_left > _EPS

    @property
    def finished(self) -> bool:
        """True when every phase is done."""
        return self.fixed_left <= _EPS and self.gpu_left <= _EPS and self.cpu_left <= _EPS

    def advance(self, now: float) -> None:
        """Progress from ``last`` to ``now`` at the current rates (constant in between, by construction)."""
        dt = now - self.last
        self.last = now
        if dt <= 0 or self.cores <= 0:
            return
        self.core_s += dt * self.cores
        if self.fixed_left > 0:
            used = min(dt, self.fixed_left)
            self.fixed_left -= used
            dt -= used
        tasks = min(self.cores, self.work.parallelism)  # a task holds its core on the GPU too, as Spark's slot
        if dt > 0 and self.gpu_left > 0:
            used = min(dt, self.gpu_left / self.gpu_rate)
            self.gpu_left = max(0.0, self.gpu_left - used * self.gpu_rate)
            self.gpu_wall += used
            self.task_core_s += used * tasks
            dt -= used
        if dt > 0 and self.cpu_left > 0:
            used = min(dt, self.cpu_left / tasks)
            self.cpu_left = max(0.0, self.cpu_left - used * tasks)
            self.cpu_wall += used
            self.task_core_s += used * tasks

    def next_event(self, now: float) -> float:
        """When this batch next finishes or enters/leaves its GPU phase (which changes the GPU's sharing)."""
        if self.cores <= 0:
            return math.inf
        cpu = self.cpu_left / min(self.cores, self.work.parallelism) if self.cpu_left > _EPS else 0.0
        if self.fixed_left > _EPS:
            return now + self.fixed_left + (0.0 if self.gpu_left > _EPS else cpu)
        if self.gpu_left > _EPS:
            return now + self.gpu_left / self.gpu_rate
        return now + cpu

    def metrics(self) -> tuple[OperatorMetric, ...]:
        """Per-operator times as observed: CPU work at the cores it got, GPU work at the share it got."""
        work = self.work
        cpu_speed = work.cpu_core_s / self.cpu_wall if self.cpu_wall > 0 else float(work.parallelism)
        gpu_slowdown = self.gpu_wall / work.gpu_s if work.gpu_s > 0 else 1.0
        return tuple(
            OperatorMetric(
                op.operator_id, op.device,
                op.transfer_s + op.cpu_core_s / max(cpu_speed, 1e-12) + op.gpu_s * gpu_slowdown,
                op.bytes_in, op.rows_in,
            )
            for op in work.operators
        )
