"""Asking Spark's cluster manager for executors, through the JVM: the calls Spark's own dynamic allocation makes.

``SparkContext.requestTotalExecutors`` sets how many executors the application wants (standalone, YARN and
Kubernetes honour it) and ``SparkContext.killExecutors`` removes named ones, lowering that target (both developer
APIs, refused by Spark while ``spark.dynamicAllocation.enabled`` is on). :func:`scaling_refusal` says why a session
cannot scale at all. The live executors come from the status store (what the UI lists), the driver left out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("pacer_spark.jvm.executor_requests")


class ScalingRefused(ValueError):
    """pacer cannot change this session's executors: the message says why and what to do."""


@dataclass(frozen=True)
class LiveExecutor:
    """An executor Spark lists as active: its id, task slots and tasks running now."""

    id: str
    cores: int
    active_tasks: int


def scaling_refusal(spark: Any, strategy: str) -> str | None:
    """Why ``strategy`` cannot scale this session's executors (None: it can).

    - local mode: one JVM, no cluster manager to ask;
    - ``spark-dynamic`` hands the executors to Spark's dynamic allocation, which must then be on;
    - any other strategy asks for executors itself, which Spark refuses while dynamic allocation is on.
    """
    master = str(spark.sparkContext.master)
    dynamic = str(spark.conf.get("spark.dynamicAllocation.enabled", "false")).lower() == "true"
    if master.startswith("local"):
        return (f"scale={strategy!r} changes the application's executors, which needs a cluster manager "
                f"(standalone, YARN, Kubernetes); this session runs {master}: start a cluster (`pacer cluster up "
                f"--workers 3`, then --master spark://...) or leave scale at 'fixed'")
    if strategy == "spark-dynamic":
        if not dynamic:
            return ("scale='spark-dynamic' hands the executors to Spark's dynamic allocation, which is off: start "
                    "the session with spark.dynamicAllocation.enabled=true and "
                    "spark.dynamicAllocation.shuffleTracking.enabled=true (or an external shuffle service)")
        return None
    if dynamic:
        return (f"scale={strategy!r} asks for executors itself, and Spark's dynamic allocation is on "
                "(spark.dynamicAllocation.enabled=true): both would change them. Turn dynamic allocation off, or "
                "use scale='spark-dynamic'")
    return None


def live_executors(spark: Any) -> list[LiveExecutor] | None:
    """The active executors (not the driver), oldest first by id; None when the status store cannot be read."""
    try:
        convert = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
        listed = convert.asJava(spark.sparkContext._jsc.sc().statusStore().executorList(True))
        found = [LiveExecutor(str(e.id()), int(e.totalCores()), int(e.activeTasks())) for e in listed]
    except Exception as exc:  # an internal API that moved, or a stopping JVM
        log.debug("cannot read the live executors from Spark's status store: %s", exc)
        return None
    found = [e for e in found if e.id != "driver"]
    return sorted(found, key=lambda e: (len(e.id), e.id))


def request_total(spark: Any, executors: int) -> bool:
    """Ask the cluster manager for ``executors`` in all (Spark starts or stops asking for more; it removes none)."""
    sc = spark.sparkContext
    none = sc._jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(sc._jvm.java.util.HashMap())
    return bool(sc._jsc.sc().requestTotalExecutors(int(executors), 0, none))


def kill(spark: Any, ids: list[str]) -> bool:
    """Remove the executors ``ids`` now (their running tasks fail and are re-run elsewhere: call it between
    batches), lowering the application's target by as many."""
    sc = spark.sparkContext
    listed = sc._jvm.java.util.ArrayList()
    for executor_id in ids:
        listed.add(str(executor_id))
    seq = sc._jvm.org.apache.spark.api.python.PythonUtils.toSeq(listed)
    return bool(sc._jsc.sc().killExecutors(seq))


__all__ = ["LiveExecutor", "ScalingRefused", "kill", "live_executors", "request_total", "scaling_refusal"]
