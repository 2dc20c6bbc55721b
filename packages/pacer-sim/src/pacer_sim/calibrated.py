"""A query's costs taken from what Spark measured it to cost: the engine profile ``pacer calibrate --runtime spark``
writes (:mod:`pacer.engine_profile`), in place of the built-in operator curves (``--calibrated FILE``).

A calibrated query's batch of ``b`` bytes costs (:func:`calibrated_work`):

- the driver's part, holding no core: the tiny batch's engine seconds less its tasks' part,
  ``fixed_s x (1 - fixed_task_share)``;
- its tasks, one per partition: each ``fixed_task_share x fixed_s`` (their fixed part, busy core-seconds), plus an
  equal share of ``core_s_per_byte x b`` (the per-byte part, with the run's per-batch noise);

so on the calibration's slots a tiny batch takes ``fixed_s`` and its tasks ``fixed_core_s`` core-seconds, as
measured, and a batch's tasks run in waves on whatever slots the run has. A query's first batch costs the profile's
``first_batch_s`` and ``first_batch_core_s`` more where it measured them (Spark compiles the new query's plan and
opens its state stores then: 1.5-2.9 s against 0.5-1.0 s for its later batches, ``bench-results/fidelity-spark``). Spark's no-data batch costs the
profile's no-data figures the same way (:func:`calibrated_no_data_work`). The per-byte costs are rescaled to the
simulator's bytes per row (:meth:`pacer.engine_profile.EngineProfile.in_bytes_of`): a batch costs what its rows
cost. Executor warm-up and state reload come from the profile where it measured them, else from the cost model
(:func:`calibrated_model`); the report's ``config.calibrated`` says which figure came from where.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer import MicroBatch, QuerySpec
from pacer.engine_profile import EngineProfile, load
from pacer_sim.costs import BatchWork, CostModel, OperatorWork, batch_work, noise_factor

#: The simulator's scalars a profile may give (``CostModel`` field -> what the profile calls it).
PROFILE_SCALARS = ("fixed_task_share", "executor_warmup_s", "state_reload_s")


def load_profiles(paths: str | Sequence[str] | None) -> list[EngineProfile]:
    """The engine profiles ``--calibrated`` names (one path or several), each measured on Spark.

    :raises ValueError: a file that does not read as a profile (naming it and what to do), or one measured on
        another runtime, or two for one workload.
    """
    files = [paths] if isinstance(paths, str) else list(paths or ())
    profiles = [load(Path(f)) for f in files]
    for path, profile in zip(files, profiles, strict=True):
        if profile.runtime != "spark":
            raise ValueError(f"--calibrated {path!r} was measured on {profile.runtime!r}; the simulator stands for "
                             "Spark: calibrate there (pacer calibrate --runtime spark)")
    workloads = [p.workload for p in profiles]
    twice = sorted({str(w) for w in workloads if workloads.count(w) > 1})
    if twice:
        raise ValueError(f"--calibrated: two profiles for {', '.join(twice)}; give one per workload")
    return profiles


def profile_for(profiles: Iterable[EngineProfile], workload: str) -> EngineProfile | None:
    """The profile measured on ``workload``, else one measured on any query (``workload`` None), else None."""
    chosen = [p for p in profiles if p.applies_to(workload)]
    chosen.sort(key=lambda p: p.workload is None)
    return chosen[0] if chosen else None


def calibrated_model(model: CostModel, profile: EngineProfile) -> CostModel:
    """``model`` with the scalars ``profile`` measured: its fixed part as the batch overhead, the tasks' share of it,
    and executor warm-up and state reload where measured (the rest stays ``model``'s: its defaults)."""
    measured: dict[str, Any] = {"batch_overhead": profile.fixed_s, "fixed_task_share": task_share_of(profile)}
    for name in ("executor_warmup_s", "state_reload_s"):
        value = getattr(profile, name)
        if value is not None:
            measured[name] = value
    return dataclasses.replace(model, **measured)


def task_share_of(profile: EngineProfile) -> float:
    """Each task's share of the profile's fixed part (0 where it recorded none)."""
    return float(profile.fixed_task_share or 0.0)


def provenance(profile: EngineProfile) -> dict[str, Any]:
    """What a calibrated query's costs came from, for the report: the profile's workload and costs and, per simulator
    scalar, whether it was measured or is the simulator's default (and why)."""
    scalars = {}
    for name in PROFILE_SCALARS:
        value = getattr(profile, name)
        scalars[name] = ({"measured": True, "value": value} if value is not None
                         else {"measured": False, "why": profile.not_measured.get(name, "not in the profile")})
    return {"workload": profile.workload, "fixed_s": profile.fixed_s,
            "fixed_core_s": profile.fixed_core_s, "core_s_per_mb": profile.core_s_per_byte * 1e6,
            "no_data_s": profile.no_data_s, "no_data_core_s": profile.no_data_core_s,
            "first_batch_s": profile.first_batch_s, "first_batch_core_s": profile.first_batch_core_s,
            "scalars": scalars}


def _work(model: CostModel, spec: QuerySpec, batch: MicroBatch, *, driver_s: float, task_core_s: float,
          work_core_s: float, seed: int, noise_key: str, tasks: int | None = None) -> BatchWork:
    """A batch whose driver holds ``driver_s`` seconds, whose ``tasks`` (default: one per partition) run
    ``task_core_s`` core-seconds of fixed part and ``work_core_s`` more (times the batch's noise); the work is split
    over the operators as the built-in curves split it (so per-operator metrics keep their shape), all on the CPU."""
    partitions = max(1, tasks if tasks is not None else spec.partitions)
    shape = batch_work(dataclasses.replace(model, noise=0.0), spec, batch, gpus=0, seed=seed)
    factor = noise_factor(model, seed, noise_key, batch.seq)
    work = work_core_s * factor
    total = sum(op.cpu_core_s for op in shape.operators) or 1.0
    ops = tuple(OperatorWork(op.operator_id, "cpu", work * op.cpu_core_s / total, 0.0, 0.0, op.bytes_in, op.rows_in)
                for op in shape.operators)
    return BatchWork(max(0.0, driver_s), 0.0, task_core_s + work, partitions, ops, True, task_core_s / partitions)


def calibrated_work(model: CostModel, profile: EngineProfile, spec: QuerySpec, batch: MicroBatch, *,
                    seed: int, first: bool = False) -> BatchWork:
    """The cost of ``batch`` of ``spec`` under ``profile`` (module docstring), its noise drawn as the built-in model
    draws it (seed, query, batch number); ``first``: the query's first batch, with the profile's first-batch excess
    (its core-seconds on the tasks, the rest of its seconds on the driver). ``profile`` is in the simulator's bytes
    (:meth:`EngineProfile.in_bytes_of`)."""
    share = task_share_of(profile)
    partitions = max(1, spec.partitions)
    count = tasks_of(profile, spec, batch)
    driver = profile.fixed_s * (1.0 - share)
    tasks = share * profile.fixed_s * partitions if count is None else \
        (profile.batch_core_s or 0.0) + (profile.task_core_s or 0.0) * count
    if first:
        extra_core = profile.first_batch_core_s or 0.0
        driver += max(0.0, (profile.first_batch_s or 0.0) - extra_core / min(profile.slots, partitions))
        tasks += extra_core
    return _work(model, spec, batch, driver_s=driver, task_core_s=tasks,
                 work_core_s=profile.core_s_per_byte * batch.bytes, seed=seed, noise_key=spec.id, tasks=count)


def tasks_of(profile: EngineProfile, spec: QuerySpec, batch: MicroBatch) -> int | None:
    """The tasks a batch runs where ``profile`` measured them per dataset (a running query's, observe mode; their
    fixed part is ``batch_core_s`` a batch and ``task_core_s`` a task, :func:`pacer.engine_profile.fit_batches`): its
    datasets times the tasks each ran, up to the partitions (a file source runs one task per file until Spark packs
    several into one partition; a Kafka source one per topic partition whatever it holds). None: one per partition,
    as the built-in model."""
    if profile.task_core_s is None or profile.tasks_per_dataset is None:
        return None
    wanted = math.ceil(profile.tasks_per_dataset * len(batch.datasets) - 1e-9)
    return min(max(1, spec.partitions), max(1, wanted))


def calibrated_no_data_work(model: CostModel, profile: EngineProfile, spec: QuerySpec, seq: int, *,
                            seed: int) -> BatchWork | None:
    """The cost of Spark's no-data batch ``seq`` of ``spec`` under ``profile``: its measured engine seconds, of which
    its tasks' core-seconds spread over the slots they could use (as a tiny batch's); None where the profile
    measured none (the built-in model's no-data batch then stands)."""
    if profile.no_data_s is None:
        return None
    partitions = max(1, spec.partitions)
    core_s = profile.no_data_core_s or 0.0
    driver = profile.no_data_s - core_s / min(profile.slots, partitions)
    batch = MicroBatch(f"{spec.id}/no-data/{seq}", spec.id, seq, (), 0.0)
    return _work(model, spec, batch, driver_s=driver, task_core_s=core_s, work_core_s=0.0, seed=seed,
                 noise_key=f"{spec.id}/no-data")


def config_entry(profiles: Mapping[str, EngineProfile]) -> dict[str, Any]:
    """The report's ``config.calibrated``: per query, :func:`provenance` of the profile its costs came from."""
    return {qid: provenance(profile) for qid, profile in sorted(profiles.items())}


__all__ = ["PROFILE_SCALARS", "calibrated_model", "calibrated_no_data_work", "calibrated_work", "config_entry",
           "load_profiles", "profile_for", "provenance"]
