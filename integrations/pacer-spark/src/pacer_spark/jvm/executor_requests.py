"""Asking Spark's cluster manager for executors, through the JVM: the calls Spark's own dynamic allocation makes.

``SparkContext.requestTotalExecutors`` sets how many executors the application wants (standalone, YARN and
Kubernetes honour it) and ``SparkContext.killExecutors`` removes named ones, lowering that target (both developer
APIs, refused by Spark while ``spark.dynamicAllocation.enabled`` is on). Where the session has
``spark.decommission.enabled`` on, :func:`remove` decommissions instead (the scheduler backend's
``decommissionExecutor``, as dynamic allocation does then): the executor takes no new task, finishes its running
ones, hands its blocks on where storage decommissioning is on too, and exits (:func:`decommission`; the scaling
chooses it once, :func:`decommissions`). :func:`scaling_refusal` says why a session
cannot scale at all. The live executors are read from the status store (:func:`pacer_spark.jvm.status_store.live_executors`).
"""

from __future__ import annotations

from typing import Any

#: ``spark.dynamicAllocation.maxExecutors`` where it is not set: Scala's ``Int.MaxValue``.
NO_MAX_EXECUTORS = 2**31 - 1


def scaling_refusal(spark: Any, strategy: str, *, recommend_only: bool = False) -> str | None:
    """Why ``strategy`` cannot scale this session's executors (None: it can).

    - local mode: one JVM, no cluster manager to ask;
    - ``spark-dynamic`` hands the executors to Spark's dynamic allocation, which must then be on;
    - any other strategy asks for executors itself, which Spark refuses while dynamic allocation is on (unless
      ``recommend_only``: it asks for nothing, and says what it would hold beside Spark's allocation).
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
    if dynamic and not recommend_only:
        return (f"scale={strategy!r} asks for executors itself, and Spark's dynamic allocation is on "
                "(spark.dynamicAllocation.enabled=true): both would change them. Turn dynamic allocation off, or "
                "use scale='spark-dynamic', or see what it would hold with spark.pacer.scale.recommendOnly=true")
    return None


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


def decommissions(spark: Any) -> bool:
    """Whether this session removes executors by decommissioning them (``spark.decommission.enabled``)."""
    value = spark.sparkContext.getConf().get("spark.decommission.enabled", "false")
    return str(value).lower() == "true"


def decommission(spark: Any, ids: list[str]) -> bool:
    """Decommission the executors ``ids`` (module docstring), lowering the application's target by as many; True when
    the cluster manager took every one."""
    sc = spark.sparkContext
    jvm = sc._jvm
    backend = sc._jsc.sc().schedulerBackend()
    taken = True
    for executor_id in ids:
        info = jvm.org.apache.spark.scheduler.ExecutorDecommissionInfo("pacer: scaled down", jvm.scala.Option.empty())
        # (executor, why, adjustTargetNumExecutors, triggeredByExecutor)
        taken = bool(backend.decommissionExecutor(str(executor_id), info, True, False)) and taken
    return taken


__all__ = ["NO_MAX_EXECUTORS", "decommission", "decommissions", "kill", "request_total",
           "scaling_refusal"]
