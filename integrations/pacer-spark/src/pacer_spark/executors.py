"""Which executors ran each streaming query: read from Spark's status store (what the web UI shows, kept with the UI
off too), for the report's ``spark.executors``.

This is JVM-boundary code like :mod:`pacer_spark.spark_jvm` (it returns plain Python values and never raises): every
job of a streaming query's batch is described by Spark as ``<name>\\nid = <query id>\\nrunId = ...\\nbatch = N``;
each of its stages' per-executor summary names the executors that ran its tasks.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pacer_spark.executors")

#: The newest jobs whose descriptions are read (Spark keeps ``spark.ui.retainedJobs``, 1000 by default).
MAX_JOBS = 500
#: The jobs of one query whose stages are looked up, spread evenly over its retained jobs: each lookup scans Spark's
#: in-memory status store (about 50 ms with 600 stages stored on 2 cores), so the report's cost stays bounded.
SAMPLED_JOBS = 4


def _query_key(description: str) -> str | None:
    """The query a streaming job belongs to: its name (the description's first line), else its id; None when the
    job is not a streaming batch's."""
    lines = description.split("\n")
    ids = [line[len("id = "):] for line in lines[1:] if line.startswith("id = ")]
    if not ids:
        return None
    return lines[0] or ids[0]


def _spread(items: list[Any], count: int) -> list[Any]:
    """``count`` of ``items`` evenly spaced, the first and the last among them (all of them when fewer)."""
    if len(items) <= count:
        return items
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


def query_executors(spark: Any, *, max_jobs: int = MAX_JOBS, sampled: int = SAMPLED_JOBS) -> dict[str, list[str]]:
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
            key = _query_key(description[5:-1]) if description.startswith("Some(") else None
            if key is not None:
                by_query.setdefault(key, []).append(job)
        found: dict[str, list[str]] = {}
        for key, its_jobs in by_query.items():
            executors: set[str] = set()
            for job in _spread(its_jobs, sampled):
                for stage in convert.asJava(job.stageIds()):
                    executors.update(str(e) for e in convert.asJava(store.executorSummary(int(stage), 0).keySet()))
            found[key] = sorted(executors)
    except Exception as exc:  # the store or an API of it is not there: no executors in the report
        log.debug("cannot read the executors from Spark's status store: %s", exc)
        return {}
    return found


__all__ = ["MAX_JOBS", "SAMPLED_JOBS", "query_executors"]
