"""The user's ``SparkSession.Builder`` for pacer: FAIR pools declared, and the jars asked for (RAPIDS, Kafka's
connector), set before the SparkContext starts; the connector added to a driver JVM that started without it; the
RAPIDS plugin in ``explainOnly`` mode."""

from __future__ import annotations

import logging
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer_spark.connectors import connector
from pacer_spark.driver.pools import DEFAULT_LADDER, write_allocation_file
from pacer_spark.jvm import classpath
from pacer_spark.plan.rapids_explain import EXPLAIN_ONLY_CONFS

log = logging.getLogger("pacer_spark.session")

#: The master :func:`session_builder` runs when none is given anywhere (its argument, ``spark.master`` in ``conf``,
#: spark-submit's ``--master``, ``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf``).
DEFAULT_MASTER = "local[2]"


def session_builder(
    master: str | None = None,
    app_name: str = "pacer",
    *,
    shuffle_partitions: int | None = None,
    ladder: Sequence[int] = DEFAULT_LADDER,
    rapids_jars: Sequence[str] = (),
    kafka: bool = False,
    conf: Mapping[str, str] | None = None,
) -> Any:
    """A ``SparkSession.Builder`` set up for pacer.

    What it sets beyond the user's own settings (``conf``, and ``master``/``shuffle_partitions`` where given), each
    named with its reason in one INFO line of the ``pacer_spark.session`` logger when called; a key ``conf`` gives
    is the user's and is never replaced:

    * ``spark.scheduler.mode=FAIR`` and ``spark.scheduler.allocation.file`` (the pool ladder ``ladder``, written to
      a file): pacer runs each batch in the pool its scheduler picks. These must be set before the SparkContext
      starts, which is why this is a builder.
    * ``spark.sql.streaming.stateStore.stateSchemaCheck=true`` (Spark's default, kept on: a restarted stateful query
      whose state no longer fits its checkpoint fails at once).
    * ``spark.master=local[2]`` only where no master is given anywhere: ``master=None`` (the default) leaves the
      master to spark-submit (``--master``, ``--conf spark.master``), ``PYSPARK_SUBMIT_ARGS``, ``spark-defaults.conf``
      or ``conf["spark.master"]`` when one of them names it.
    * with ``rapids_jars``, the RAPIDS Accelerator plugin (``spark.plugins``, ``spark.rapids.sql.enabled``); with
      ``kafka``, Spark's Kafka connector (:func:`kafka_jars`) joins ``spark.jars`` so that ``format("kafka")`` and
      ``format("pacer").option("pacer.source", "kafka")`` work; jars from ``rapids_jars`` and a ``spark.jars`` in
      ``conf`` are kept beside it.

    ``spark.sql.shuffle.partitions`` is set only when ``shuffle_partitions`` is given (Spark's own, or the user's,
    otherwise): a stateful query keeps the number it started with in its checkpoint for good, so pacer does not
    choose it silently. ``shuffle_partitions=2`` suits a laptop's ``local[2]``.

    :raises ImportError: ``kafka`` without pacer-kafka installed (the message says what to install).
    """
    from pyspark.sql import SparkSession

    conf = dict(conf or {})
    jars = [*rapids_jars, *(kafka_jars() if kafka else ())]
    jars += [j for j in conf.pop("spark.jars", "").split(",") if j.strip() and j not in jars]

    pool_file = str(write_allocation_file(ladder=ladder))
    sets: dict[str, tuple[str, str]] = {  # what pacer sets: key -> (value, why)
        "spark.scheduler.mode": ("FAIR", "pacer runs each batch in its scheduler's pool"),
        "spark.scheduler.allocation.file": (pool_file, f"pacer's pool ladder {list(ladder)}"),
        "spark.sql.streaming.stateStore.stateSchemaCheck": ("true", "Spark's default, kept on"),
    }
    if shuffle_partitions is not None:
        sets["spark.sql.shuffle.partitions"] = (str(shuffle_partitions), "shuffle_partitions given")
    if rapids_jars:
        sets["spark.plugins"] = ("com.nvidia.spark.SQLPlugin", "rapids_jars given")
        sets["spark.rapids.sql.enabled"] = ("true", "rapids_jars given")
    if jars:
        sets["spark.jars"] = (",".join(jars), "jars asked for (rapids_jars, kafka, conf's spark.jars)")
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif not submitted_master(conf):
        sets["spark.master"] = (DEFAULT_MASTER, "no master given (argument, spark-submit, PYSPARK_SUBMIT_ARGS, "
                                                "spark-defaults.conf or conf)")
    sets = {key: value for key, value in sets.items() if key not in conf}
    for key, (value, _) in sets.items():
        builder = builder.config(key, value)
    for key, value in conf.items():
        builder = builder.config(key, value)
    log.info("pacer_spark.session_builder sets %s", "; ".join(f"{key}={value} ({why})"
                                                              for key, (value, why) in sets.items()))
    return builder


def submitted_master(conf: Mapping[str, str] | None = None) -> str | None:
    """The master the user named outside :func:`session_builder`'s ``master``: ``conf["spark.master"]``, the one
    spark-submit launched this driver with (``--master`` or ``--conf spark.master``), ``--master`` in
    ``PYSPARK_SUBMIT_ARGS``, or ``spark.master`` in ``spark-defaults.conf`` (``SPARK_CONF_DIR``, else
    ``SPARK_HOME/conf``); None when none does."""
    if conf and conf.get("spark.master"):
        return conf["spark.master"]
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # launched by spark-submit: its JVM holds the driver's conf
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        master = SparkConf().get("spark.master", None)
        if master:
            return master
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for flag, value in zip(args, [*args[1:], ""], strict=True):
        if flag == "--master" and value:
            return value
        if flag.startswith("--master="):
            return flag.partition("=")[2]
    folder = os.environ.get("SPARK_CONF_DIR") or (os.path.join(os.environ["SPARK_HOME"], "conf")
                                                  if os.environ.get("SPARK_HOME") else None)
    defaults = Path(folder, "spark-defaults.conf") if folder else None
    if defaults is not None and defaults.is_file():
        for line in defaults.read_text(errors="replace").splitlines():
            key, _, value = line.strip().replace("=", " ", 1).partition(" ")
            if key == "spark.master" and value.strip():
                return value.strip()
    return None


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


def explain_only_builder(master: str | None = None, app: str = "pacer", *, jar: Path | None = None,
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
