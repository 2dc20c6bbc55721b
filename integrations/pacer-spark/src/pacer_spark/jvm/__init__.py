"""Spark's JVM, reached through Py4J: the only room that reads PySpark's private handles (``_jvm``, ``_jsparkSession``...).

One adapter per Java concern reads Spark's Java objects and returns plain Python values (the value types are
``progress``, ``plans`` and ``executors``): ``stream_query`` (a query's progress buffer, offset log and executed
plan, read by ``plan_reader``), ``session_confs`` (a session's confs and its streams'), ``status_store`` (the executors and
their task slots), ``log4j`` (a logger copied to a file), ``classpath`` (the driver's data source lookup and class
loader), ``callback`` (the decider registry and Py4J's callback server), ``executor_requests`` (executors asked
of and given back to the cluster manager), ``task_time`` (each batch's task time from pacer's listener). ``jar``
builds, packages and loads the JVM half of ``format("pacer")``; ``decider`` is
the Python end of that source's wire protocol (the callback the JVM asks "where does this batch end?"). Imports
pacer-core and pacer-spark's shared top-level modules only.
"""

__all__ = [
    "callback",
    "classpath",
    "decider",
    "executor_requests",
    "executors",
    "jar",
    "log4j",
    "plan_reader",
    "plans",
    "progress",
    "session_confs",
    "status_store",
    "stream_query",
    "task_time",
]
