"""Spark's status store through the JVM: the executors that ran each query's tasks, and the task slots of the live
executors. Empty or None when it cannot be read: the report then says nothing rather than fail."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pacer_spark.jvm import executors

log = logging.getLogger("pacer_spark.jvm.status_store")


def query_executors(spark: Any, *, max_jobs: int = executors.MAX_JOBS,
                    sampled: int = executors.SAMPLED_JOBS) -> dict[str, list[str]]:
    """``{query name (or id when unnamed): sorted ids of the executors that ran its tasks}``.

    Reads the descriptions of the newest ``max_jobs`` jobs of the SparkContext and, per query, the executors of
    every stage of ``sampled`` of its jobs spread over the run (its oldest and newest retained ones among them): an
    executor that ran only a few batches in between may be left out. ``"driver"`` is the id in local mode. Empty
    when the status store cannot be read (an internal API that moved): the report then says nothing rather than fail.
    """
    try:
        sc = spark.sparkContext
        convert = sc._jvm.scala.jdk.javaapi.CollectionConverters
        store = sc._jsc.sc().statusStore()
        jobs = convert.asJava(store.jobsList(None))  # newest first
        by_query: dict[str, list[Any]] = {}
        iterator = jobs.iterator()
        for _ in range(min(int(jobs.size()), max_jobs)):
            job = iterator.next()
            description = str(job.description())  # Scala's "Some(...)" or "None"
            key = executors.query_key(description[5:-1]) if description.startswith("Some(") else None
            if key is not None:
                by_query.setdefault(key, []).append(job)
        found: dict[str, list[str]] = {}
        for key, its_jobs in by_query.items():
            ran: set[str] = set()
            for job in executors.spread(its_jobs, sampled):
                for stage in convert.asJava(job.stageIds()):
                    ran.update(str(e) for e in convert.asJava(store.executorSummary(int(stage), 0).keySet()))
            found[key] = sorted(ran)
    except Exception as exc:  # the store or an API of it is not there: no executors in the report
        log.debug("cannot read the executors from Spark's status store: %s", exc)
        return {}
    return found


@dataclass(frozen=True)
class LiveExecutor:
    """An executor Spark lists as active: its id (``driver`` in local mode), task slots and tasks running now."""

    id: str
    cores: int
    active_tasks: int


def active_executors(spark: Any) -> list[LiveExecutor] | None:
    """The status store's active executors, the driver included, oldest first by id; None when it cannot be read
    (an internal API that moved, or a stopping JVM: the caller keeps what it had)."""
    try:
        convert = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
        listed = convert.asJava(spark.sparkContext._jsc.sc().statusStore().executorList(True))  # active only
        found = [LiveExecutor(str(e.id()), int(e.totalCores()), int(e.activeTasks())) for e in listed]
    except Exception as exc:
        log.debug("cannot read the active executors from Spark's status store: %s", exc)
        return None
    return sorted(found, key=lambda e: (len(e.id), e.id))


def live_executors(spark: Any) -> list[LiveExecutor] | None:
    """The active executors that run tasks on a cluster, the driver left out (None: unreadable)."""
    found = active_executors(spark)
    return None if found is None else [e for e in found if e.id != "driver"]


def task_slots(spark: Any) -> int | None:
    """How many tasks Spark can run at once now: the cores of the live executors (the driver's own in local mode),
    from the status store's executor list. None when it cannot be read (the caller keeps what it had)."""
    found = active_executors(spark)
    if found is None:
        return None
    executors_only = [e.cores for e in found if e.id != "driver"]
    total = sum(executors_only) if executors_only else sum(e.cores for e in found if e.id == "driver")
    return total or None


def executor_spans(spark: Any, *, driver: bool = False) -> list[dict[str, Any]] | None:
    """Every executor the status store lists, removed ones too (as far as it keeps them): ``id``, ``cores``,
    ``added`` and ``removed`` (epoch seconds; None while it runs); the driver's own entry only with ``driver``. None
    when it cannot be read (an internal API that moved, or a stopping JVM)."""
    try:
        convert = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
        listed = convert.asJava(spark.sparkContext._jsc.sc().statusStore().executorList(False))  # dead ones too
        spans = []
        for e in listed:
            removed = e.removeTime()
            spans.append({"id": str(e.id()), "cores": int(e.totalCores()), "added": int(e.addTime().getTime()) / 1000.0,
                          "removed": int(removed.get().getTime()) / 1000.0 if removed.isDefined() else None})
    except Exception as exc:  # an internal API that moved, or a stopping JVM
        log.debug("cannot read the executors' lifetimes from Spark's status store: %s", exc)
        return None
    return [span for span in spans if driver or span["id"] != "driver"]


def allocated_core_s(spark: Any, start: float, end: float) -> float | None:
    """Core-seconds the application held from ``start`` to ``end`` (epoch seconds): each executor's cores times the
    part of that span it was alive (removed executors included, as far as the status store keeps them), the driver's
    own cores in local mode. None when the status store cannot be read."""
    spans = executor_spans(spark, driver=True)
    if spans is None:
        return None
    held = [s for s in spans if s["id"] != "driver"] or [s for s in spans if s["id"] == "driver"]
    return float(sum(s["cores"] * max(0.0, min(end if s["removed"] is None else s["removed"], end)
                                        - max(s["added"], start)) for s in held))


def stages_run_time_s(spark: Any, *, since: float = 0.0) -> float | None:
    """Seconds of executor run time of the stages Spark's status store keeps that were submitted at ``since`` (epoch
    seconds) or later: Spark's own count of its tasks' time, to compare with pacer's."""
    try:
        sc = spark.sparkContext
        convert = sc._jvm.scala.jdk.javaapi.CollectionConverters
        no_quantiles = sc._gateway.new_array(sc._gateway.jvm.double, 0)
        # (statuses: all, details, withSummaries, unsortedQuantiles, taskStatus: all)
        stages = convert.asJava(sc._jsc.sc().statusStore().stageList(None, False, False, no_quantiles, None))
        total = 0
        for stage in stages:
            submitted = stage.submissionTime()
            if submitted.isDefined() and int(submitted.get().getTime()) >= 1000.0 * since:
                total += int(stage.executorRunTime())
        return total / 1000.0
    except Exception as exc:
        log.debug("cannot read the stages from Spark's status store: %s", exc)
        return None


__all__ = ["allocated_core_s", "executor_spans", "query_executors", "stages_run_time_s", "task_slots"]
