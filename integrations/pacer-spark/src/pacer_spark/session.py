"""The user's ``SparkSession.Builder`` for pacer: FAIR pools declared, and the jars asked for (RAPIDS, Kafka's
connector), set before the SparkContext starts; the connector added to a driver JVM that started without it; the
RAPIDS plugin in ``explainOnly`` mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer_spark.connectors import connector
from pacer_spark.driver.pools import DEFAULT_LADDER, write_allocation_file
from pacer_spark.jvm import classpath
from pacer_spark.plan.rapids_explain import EXPLAIN_ONLY_CONFS


def session_builder(
    master: str = "local[2]",
    app_name: str = "pacer",
    *,
    shuffle_partitions: int = 2,
    ladder: Sequence[int] = DEFAULT_LADDER,
    rapids_jars: Sequence[str] = (),
    kafka: bool = False,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A ``SparkSession.Builder`` set up for pacer.

    Sets ``spark.scheduler.mode=FAIR`` with an allocation file holding the pool ladder (these must
    be set before the SparkContext starts, which is why this is a builder), the shuffle partitions,
    and, with ``rapids_jars``, the RAPIDS Accelerator plugin (``spark.plugins``). With ``kafka``,
    Spark's Kafka connector (:func:`kafka_jars`) joins ``spark.jars`` so that ``format("kafka")``
    and ``format("pacer").option("pacer.source", "kafka")`` work; jars from ``rapids_jars`` and a
    ``spark.jars`` in ``conf`` are kept beside it.

    :raises ImportError: ``kafka`` without pacer-kafka installed (the message says what to install).
    """
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    jars = [*rapids_jars, *(kafka_jars() if kafka else ())]
    jars += [j for j in conf.pop("spark.jars", "").split(",") if j.strip() and j not in jars]

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.scheduler.mode", "FAIR")
        .config("spark.scheduler.allocation.file", str(write_allocation_file(ladder=ladder)))
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if rapids_jars:
        builder = (
            builder.config("spark.plugins", "com.nvidia.spark.SQLPlugin")
            .config("spark.rapids.sql.enabled", "true")
        )
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder


def kafka_jars() -> list[str]:
    """The jars of Spark's Kafka connector for the installed PySpark, from the ``kafka`` connector pacer-kafka
    registers (:mod:`pacer_spark.connectors`; resolved with ``mvn``, cached).

    :raises ImportError: pacer-kafka is not installed (the message says what to install).
    """
    try:
        kafka = connector("kafka")
    except ImportError as exc:
        raise ImportError("session_builder(kafka=True) puts Spark's Kafka connector on the classpath, which "
                          f"pacer-kafka resolves from Maven Central: {exc}") from exc
    return kafka.jars()


def add_kafka_connector(session: Any) -> bool:
    """Make ``format("kafka")`` work on ``session`` when its driver JVM started without Spark's Kafka connector.

    Spark puts ``spark.jars`` on the driver's classpath only when it launches the JVM. A Python process that
    already ran a SparkSession (a notebook, a test run, a job that builds a second session) keeps that JVM, and
    a new session's ``spark.jars`` then reach the executors but not the driver's data source lookup: Spark
    answers "Failed to find data source: kafka". Where the driver cannot find the ``kafka`` source, this adds
    the connector's jars (:func:`kafka_jars`) to the class loader ``spark-submit`` gave the driver, as its
    ``--jars`` would have at launch: every later session and local executor of the process finds one copy of the
    connector there. (SQL's ``ADD JAR`` is not enough: each session's loader and each local executor's would
    load the connector again, and its second copy fails on Spark's JVM-wide config registry.)

    :return: whether jars were added (False: the driver already had the connector).
    :raises ImportError: pacer-kafka is not installed.
    :raises RuntimeError: the driver's class loader is not one jars can be added to.
    """
    if classpath.finds_data_source(session, "kafka"):
        return False
    loader = classpath.driver_loader_class(session)
    if loader != "org.apache.spark.util.MutableURLClassLoader":
        raise RuntimeError("the driver JVM started without Spark's Kafka connector, and its class loader "
                           f"({loader}) takes no jars: start "
                           "the process's first session with pacer_spark.session_builder(..., kafka=True)")
    classpath.add_driver_jars(session, [str(Path(jar).resolve()) for jar in kafka_jars()])
    return True


def explain_only_builder(master: str = "local[2]", app: str = "pacer", *, jar: Path | None = None,
                         **kwargs: Any) -> Any:
    """A ``SparkSession.Builder`` (:func:`pacer_spark.session_builder`, ``kwargs`` passed on) with the RAPIDS plugin in
    ``explainOnly`` mode: the jar from Maven Central (:func:`pacer_spark.plan.rapids_jar.resolve_rapids_jar`, fetched once
    into pacer's cache) unless ``jar`` is given, ``spark.rapids.sql.explain=ALL``.

    :raises pacer_spark.plan.rapids_jar.RapidsJarError: the jar cannot be fetched, or it has no shim for the installed
        PySpark (the message names the PySpark to pin; ``nox -s rapids`` pins it).
    """
    import pyspark

    from pacer_spark.plan import rapids_jar

    jar = jar or rapids_jar.resolve_rapids_jar()
    rapids_jar.shim_for_spark(jar, str(pyspark.__version__))
    conf = {**EXPLAIN_ONLY_CONFS, **dict(kwargs.pop("conf", None) or {})}
    return session_builder(master, app, rapids_jars=[str(jar)], conf=conf, **kwargs)
