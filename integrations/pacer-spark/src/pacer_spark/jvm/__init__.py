"""Spark's JVM, reached through Py4J: the only room that reads PySpark's private handles (``_jvm``, ``_jsparkSession``...).

``spark_jvm`` reads Spark's Java objects and returns plain Python values (the value types are ``progress``,
``plans`` and ``executors``); ``jar`` builds, packages and loads the JVM half of ``format("pacer")``; ``decider`` is
the Python end of that source's wire protocol (the callback the JVM asks "where does this batch end?"). Imports
pacer-core and pacer-spark's shared top-level modules only.
"""

__all__ = [
    "decider",
    "executors",
    "jar",
    "plans",
    "progress",
    "spark_jvm",
]
