"""Which SparkSessions pacer can serve: a classic session, whose driver JVM this Python process reaches over Py4J.

pacer's Controller lives in the driver's Python process, and ``format("pacer")``'s JVM source asks it over
PySpark's Py4J gateway on every batch (:mod:`pacer_spark.jvm.decider`); the listener, the scheduling gate's pools and
the plan reader go through the same gateway (the ``pacer_spark.jvm`` adapters). A Spark Connect session
(``SparkSession.builder.remote("sc://...")``, PySpark's thin client) has no Py4J and no driver JVM in this
process: its driver is the Connect server's, which cannot call back into this Python process. :func:`require_classic`
refuses such a session by name, before anything is asked of it (a Connect session's ``sparkContext`` would raise
PySpark's ``JVM_ATTRIBUTE_NOT_SUPPORTED``, and its conf an RPC to a server that may not be there).
"""

from __future__ import annotations

from typing import Any


class UnsupportedSessionError(TypeError):
    """A session pacer cannot attach to; the message says why and what works instead."""


CONNECT_REFUSAL = (
    "pacer cannot attach to a Spark Connect session ({kind}): format('pacer') and pacer's Controller need a "
    "classic SparkSession with Py4J, whose driver JVM runs beside this Python process, because the JVM source "
    "asks the Controller in the driver's Python process on every batch, and a Connect client has no driver JVM "
    "to call back from. Run the job as a classic PySpark driver instead: pacer_spark.session_builder(MASTER) "
    "(SparkSession.builder.master(...) without .remote(...)), or spark-submit --master MASTER your_job.py, in "
    "client or cluster deploy mode; see 'Deploying' in pacer-spark's README"
)


def is_connect_session(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect client session (told from its class, without importing PySpark's
    Connect modules, which need grpcio)."""
    return any(cls.__module__.startswith("pyspark.sql.connect.") for cls in type(spark).__mro__)


def require_classic(spark: Any) -> None:
    """Return when ``spark`` is a classic PySpark ``SparkSession``; refuse anything else by name.

    :raises UnsupportedSessionError: a Spark Connect session (what to run instead), or not a SparkSession at all.
    """
    from pyspark.sql import SparkSession

    if isinstance(spark, SparkSession):
        return
    kind = f"{type(spark).__module__}.{type(spark).__qualname__}"
    if is_connect_session(spark):
        raise UnsupportedSessionError(CONNECT_REFUSAL.format(kind=kind))
    raise UnsupportedSessionError(f"pacer attaches to a classic pyspark.sql.SparkSession, got {kind}: build one with "
                                  "pacer_spark.session_builder(MASTER).getOrCreate()")


__all__ = ["CONNECT_REFUSAL", "UnsupportedSessionError", "is_connect_session", "require_classic"]
