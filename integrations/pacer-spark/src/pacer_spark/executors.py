"""Which executors ran each streaming query: read from Spark's status store (what the web UI shows, kept with the UI
off too), for the report's ``spark.executors``.

This is JVM-boundary code like :mod:`pacer_spark.spark_jvm` (it returns plain Python values and never raises): every
job of a streaming query's batch is described by Spark as ``<name>\\nid = <query id>\\nrunId = ...\\nbatch = N``;
each of its stages' per-executor summary names the executors whose tasks succeeded there.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pacer_spark.executors")

#: The newest jobs looked at (Spark keeps ``spark.ui.retainedJobs``, 1000 by default): bounds the report's cost.
MAX_JOBS = 300


def _query_key(description: str) -> str | None:
    """The query a streaming job belongs to: its name (the description's first line), else its id; None when the
    job is not a streaming batch's."""
    lines = description.split("\n")
    ids = [line[len("id = "):] for line in lines[1:] if line.startswith("id = ")]
    if not ids:
        return None
    return lines[0] or ids[0]


def query_executors(spark: Any, *, max_jobs: int = MAX_JOBS) -> dict[str, list[str]]:
    """``{query name (or id when unnamed): sorted ids of the executors that succeeded a task of it}``.

    Looks at the newest ``max_jobs`` jobs of the SparkContext; ``"driver"`` is the id in local mode. Empty when the
    status store cannot be read (an internal API that moved): the report then says nothing rather than fail.
    """
    try:
        sc = spark.sparkContext
        convert = sc._jvm.scala.jdk.javaapi.CollectionConverters
        store = sc._jsc.sc().statusStore()
        jobs = sorted(convert.asJava(store.jobsList(None)), key=lambda job: int(job.jobId()))[-max_jobs:]
        found: dict[str, set[str]] = {}
        for job in jobs:
            description = job.description()
            key = _query_key(str(description.get())) if description.isDefined() else None
            if key is None:
                continue
            executors = found.setdefault(key, set())
            for stage in convert.asJava(job.stageIds()):
                for attempt in range(4):
                    summary = convert.asJava(store.executorSummary(int(stage), attempt))
                    if not summary and attempt:
                        break
                    executors.update(str(e) for e, s in summary.items() if int(s.succeededTasks()) > 0)
    except Exception as exc:  # the store or an API of it is not there: no executors in the report
        log.debug("cannot read the executors from Spark's status store: %s", exc)
        return {}
    return {key: sorted(ids) for key, ids in found.items()}


__all__ = ["MAX_JOBS", "query_executors"]
