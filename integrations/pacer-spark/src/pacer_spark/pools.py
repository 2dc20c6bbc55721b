"""FAIR scheduler pools: a ladder of fixed weights declared at session start, and the session builder.

Spark's pool weights cannot change at run time, so share-based schedulers (FAIR, RDAS) move each
batch into the pool whose weight is nearest its share of the cores.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from pacer_spark import spark_jvm

#: Pool weights; a batch with the whole cluster goes to the heaviest.
DEFAULT_LADDER: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16)
POOL_PREFIX = "pacer-w"


def pool_name(weight: int) -> str:
    """The pool of one weight of the ladder."""
    return f"{POOL_PREFIX}{weight}"


def pool_for_share(share: float, cores: int, ladder: Sequence[int] = DEFAULT_LADDER) -> str:
    """The ladder pool whose weight is nearest ``share / cores`` of the heaviest weight."""
    target = max(0.0, min(1.0, share / cores if cores else 1.0)) * max(ladder)
    weight = min(ladder, key=lambda w: (abs(w - target), w))
    return pool_name(weight)


def allocation_xml(ladder: Sequence[int] = DEFAULT_LADDER) -> str:
    """A FAIR allocation file declaring one pool per weight of ``ladder`` (FAIR inside each pool)."""
    pools = "\n".join(
        f"  <pool name={quoteattr(pool_name(w))}>\n    <schedulingMode>FAIR</schedulingMode>\n"
        f"    <weight>{w}</weight>\n    <minShare>0</minShare>\n  </pool>"
        for w in ladder
    )
    return f'<?xml version="1.0"?>\n<allocations>\n{pools}\n</allocations>\n'


def write_allocation_file(directory: str | Path | None = None, ladder: Sequence[int] = DEFAULT_LADDER) -> Path:
    """Write :func:`allocation_xml` to ``directory`` (a temporary one by default) and return its path.

    A temporary folder is removed when the Python process exits (Spark reads the file at start-up).
    """
    if directory is None:
        folder = Path(tempfile.mkdtemp(prefix="pacer-pools-"))
        atexit.register(shutil.rmtree, folder, True)
    else:
        folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pacer-fairscheduler.xml"
    path.write_text(allocation_xml(ladder))
    return path


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
    """The jars of Spark's Kafka connector for the installed PySpark, from pacer-kafka (resolved with ``mvn``, cached).

    :raises ImportError: pacer-kafka is not installed.
    """
    try:
        from pacer_kafka.connector import spark_kafka_jars
    except ImportError as exc:
        raise ImportError(
            "session_builder(kafka=True) puts Spark's Kafka connector on the classpath, which pacer-kafka "
            "resolves from Maven Central: pip install pacer-kafka (from this repository: "
            "pip install -e integrations/pacer-kafka)"
        ) from exc
    return [str(path) for path in spark_kafka_jars()]


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
    if spark_jvm.finds_data_source(session, "kafka"):
        return False
    loader = spark_jvm.driver_loader_class(session)
    if loader != "org.apache.spark.util.MutableURLClassLoader":
        raise RuntimeError("the driver JVM started without Spark's Kafka connector, and its class loader "
                           f"({loader}) takes no jars: start "
                           "the process's first session with pacer_spark.session_builder(..., kafka=True)")
    spark_jvm.add_driver_jars(session, [str(Path(jar).resolve()) for jar in kafka_jars()])
    return True
