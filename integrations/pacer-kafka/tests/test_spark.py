"""Spark's own Kafka connector, resolved from Maven Central, reads what ``pacer produce`` wrote."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pacer_kafka.connector import pyspark_jar_names, spark_kafka_jars
from pacer_kafka.distribution import jar_base_name
from pacer_workloads import spark_schema_ddl

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A small local SparkSession with the connector's jars in ``spark.jars``."""
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    jars = spark_kafka_jars()
    session = (SparkSession.builder.master("local[1]").appName("pacer-kafka-test")
               .config("spark.jars", ",".join(str(p) for p in jars)).config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "1").config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())
    yield session
    session.stop()


def test_connector_jars_leave_out_what_pyspark_ships() -> None:
    pytest.importorskip("pyspark")
    names = [p.name for p in spark_kafka_jars()]
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-") for n in names)
    assert any(n.startswith("kafka-clients-") for n in names)
    shipped = {jar_base_name(n) for n in pyspark_jar_names()}
    assert not [n for n in names if jar_base_name(n) in shipped]


def test_spark_batch_read_counts_what_was_produced(spark: Any, produced_topic: Any) -> None:
    from pyspark.sql import functions as F

    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", produced_topic.bootstrap_servers)
             .option("subscribe", produced_topic.topic).option("startingOffsets", "earliest")
             .option("endingOffsets", "latest").load())
    rows = frame.select(F.from_json(F.col("value").cast("string"), spark_schema_ddl("linear_road")).alias("row"),
                        F.col("timestamp").alias("kafka_ts"), "partition")
    summary = rows.agg(
        F.count("*").alias("records"),
        F.countDistinct("partition").alias("partitions"),
        F.sum(F.when(F.col("row.timestamp").isNull() | F.col("row.vehicle").isNull(), 1).otherwise(0)).alias("bad"),
        F.sum(F.when(F.date_trunc("millisecond", F.col("row.timestamp")) != F.col("kafka_ts"), 1).otherwise(0))
        .alias("mismatched"),
    ).first()
    assert summary is not None
    assert summary["records"] == produced_topic.records == 2000
    assert (summary["partitions"], summary["bad"], summary["mismatched"]) == (2, 0, 0)


SECOND_SESSION = """
import sys
import pacer_spark
from pyspark.sql import SparkSession

bootstrap, topic, out = sys.argv[1:4]
first = SparkSession.builder.master("local[1]").appName("first").config("spark.ui.enabled", "false").getOrCreate()
first.range(3).count()
first.stop()  # the JVM stays, started without the connector
spark = pacer_spark.session_builder("local[1]", "second", kafka=True).config("spark.ui.enabled", "false").getOrCreate()
print("added", pacer_spark.add_kafka_connector(spark))
stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
          .option("startingOffsets", "earliest").load())
query = (stream.selectExpr("CAST(value AS STRING) AS value").writeStream.format("parquet").trigger(availableNow=True)
         .option("path", out + "/data").option("checkpointLocation", out + "/ck").start())
query.awaitTermination(120)
print("records", spark.read.parquet(out + "/data").count())
spark.stop()
"""


def test_a_second_session_in_a_process_gets_the_connector_its_jvm_started_without(
        produced_topic: Any, tmp_path: Any) -> None:
    """Spark puts spark.jars on the driver's classpath only when it launches the JVM: a session built after an
    earlier one in the same process finds no ``kafka`` source (the README's notebook case) until
    ``add_kafka_connector``; then a Kafka stream reads every record. In a child process, for a JVM of its own."""
    pytest.importorskip("pyspark")
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", SECOND_SESSION, produced_topic.bootstrap_servers,
                           produced_topic.topic, str(tmp_path)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "added True" in proc.stdout and f"records {produced_topic.records}" in proc.stdout, proc.stdout
