"""What the JVM calls pacer's Python deciders through: pacer's decider registry, the JVM session it keys registrations
by, and PySpark's Py4J callback server."""

from __future__ import annotations

from typing import Any


def decider_registry(spark: Any, registry_class: str) -> Any:
    """pacer's JVM decider registry (``io.pacer.spark.PacerRegistry``) for ``spark``'s JVM."""
    return getattr(spark.sparkContext._jvm, registry_class)


def java_session(spark: Any) -> Any:
    """The JVM ``SparkSession`` of ``spark`` (the registry prefers registrations made for it)."""
    return spark._jsparkSession


def start_callback_server(spark: Any) -> None:
    """Start PySpark's Py4J callback server on ``spark``'s gateway, through which the JVM calls pacer's Python
    deciders; nothing when it runs already."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]


__all__ = ["decider_registry", "java_session", "start_callback_server"]
