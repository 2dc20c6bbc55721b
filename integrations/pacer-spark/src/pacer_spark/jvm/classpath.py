"""The driver's classpath through the JVM: whether its data source lookup finds a ``format()`` name, the context class
loader it searches, and jars added to it in a running driver (pacer's jar, Spark's Kafka connector)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def finds_data_source(spark: Any, name: str) -> bool:
    """Whether the driver's data source lookup (``DataSource.lookupDataSource``, as ``format(name)`` runs it, with
    ``spark``'s SQL conf) finds ``name``: False when the lookup fails naming it.

    :raises Exception: any other failure of the lookup (a Py4J error), as Spark raised it.
    """
    try:
        spark.sparkContext._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # Py4JJavaError: the driver's class loader lacks the source
        if name.lower() not in str(exc).lower():
            raise
        return False
    return True


def _driver_loader(spark: Any) -> Any:
    """The driver's context class loader (a JVM object, or None)."""
    return spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()


def driver_loader_class(spark: Any) -> str | None:
    """The class name of the driver's context class loader, where Spark looks ``format()`` names up
    (``org.apache.spark.util.MutableURLClassLoader`` when ``spark-submit`` started the driver: it takes jars,
    :func:`add_driver_jars`); None when there is none."""
    loader = _driver_loader(spark)
    return None if loader is None else str(loader.getClass().getName())


def driver_loads_class(spark: Any, class_name: str) -> bool:
    """Whether the driver's context class loader (:func:`driver_loader_class`) loads the class ``class_name``."""
    loader = _driver_loader(spark)
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(class_name, True, loader)
    except Exception:  # py4j wraps ClassNotFoundException
        return False
    return True


def add_driver_jars(spark: Any, jars: Sequence[str]) -> None:
    """Add the jar files ``jars`` to the driver's context class loader, as ``--jars`` would have at launch (it must
    be one that takes jars: :func:`driver_loader_class`).

    :raises Exception: a Py4J error, or AttributeError when the driver has no context class loader.
    """
    jvm = spark.sparkContext._jvm
    loader = _driver_loader(spark)
    for jar in jars:
        loader.addURL(jvm.java.io.File(jar).toURI().toURL())


__all__ = ["add_driver_jars", "driver_loader_class", "driver_loads_class", "finds_data_source"]
