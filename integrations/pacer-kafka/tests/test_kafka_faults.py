"""Faults around a paced Kafka query, on real Spark and a real broker: what a user sees, and that no record is lost or repeated.

- A broker stopped and started again mid-stream (``pacer kafka down`` / ``pacer kafka up --port``, a
  broker of the test's own): a query on Kafka's default timeouts waits and reads on; one whose offset
  requests give up sooner fails naming Kafka's timeout, and a restart from its checkpoint reads the rest.
- One checkpoint moved from plain ``format("kafka")`` (Spark's V2 ``KafkaMicroBatchStream``) to
  ``format("pacer")`` over Kafka (the V1 ``KafkaSource`` underneath) and back, each time with a
  batch logged but not committed, as a driver that died between the two writes leaves it.
- ``pacer run --source kafka`` on a topic that does not exist: it says so, and how to create it.

Every check compares the sink's rows with the records produced: each (key, value, partition, offset) once.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pacer_kafka import testing
from pacer_kafka.broker import BrokerInfo, start_broker, stop_broker
from pacer_kafka.testing import kafka_spark_session, read_topic, require_kafka

pytestmark = pytest.mark.spark

PARTITIONS = 2
#: Offset requests that give up after about 3 s: a query on them fails while the broker is down.
IMPATIENT = {"kafka.default.api.timeout.ms": "3000", "kafka.request.timeout.ms": "1000",
             "fetchOffset.numRetries": "1", "fetchOffset.retryIntervalMs": "100"}
#: The driver JVM with the C1 compiler only (as ``kafka_app.py``): a faster start on 2 shared cores.
FAST_START = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}
#: The same for the driver of a ``pacer run`` child process.
FAST_SUBMIT = "--conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 pyspark-shell"


def new_topic(bootstrap_servers: str, prefix: str) -> str:
    """A fresh topic of PARTITIONS partitions."""
    return testing.new_topic(bootstrap_servers, prefix, PARTITIONS)


def produce(bootstrap_servers: str, topic: str, first: int, count: int) -> None:
    """Records ``first`` .. ``first + count - 1`` (key the number, value ``record-N``), round robin over PARTITIONS."""
    testing.produce_numbered(bootstrap_servers, topic, first, count, PARTITIONS)


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Future[BrokerInfo]]:
    """A broker of this module's own, to stop and start again: started in the background while the Spark
    session starts (a test lists it before ``spark``), stopped at the end wherever the test left it."""
    require_kafka()
    directory = tmp_path_factory.mktemp("fault-broker")
    with ThreadPoolExecutor(1, thread_name_prefix="fault-broker") as pool:
        try:
            yield pool.submit(start_broker, directory)
        finally:
            stop_broker(directory)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local session with Spark's Kafka connector in ``spark.jars``."""
    yield from kafka_spark_session("pacer-kafka-faults", FAST_START)


@pytest.fixture(scope="module")
def paced(spark: Any) -> Iterator[Any]:
    """The session's pacer, deciding every format('pacer') query (zStream, 2 s deadline)."""
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="zstream", deadline="2s")
    yield handle
    handle.stop()


def start(spark: Any, fmt: str, servers: str, topic: str, out: Path, name: str, *, available_now: bool = False,
          options: Mapping[str, str] | None = None) -> Any:
    """``topic`` through ``fmt`` ("pacer" over kafka, or plain "kafka") into a parquet sink at ``out``, with the
    reader's extra ``options``."""
    reader = spark.readStream.format(fmt)
    if fmt == "pacer":
        reader = reader.option("pacer.source", "kafka")
    reader = (reader.option("kafka.bootstrap.servers", servers).option("subscribe", topic)
              .option("startingOffsets", "earliest").options(**(options or {})))
    writer = (reader.load().selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                                       "offset")
              .writeStream.queryName(name).format("parquet").option("path", str(out / "data"))
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0 seconds")
    return writer.start()


def drained(query: Any, timeout: float = 120) -> list[dict[str, Any]]:
    """Wait for an availableNow query; its batches (id, rows, start and end offsets as dicts)."""
    assert query.awaitTermination(timeout), f"{query.name} did not drain in {timeout:g} s"
    assert query.exception() is None, query.exception()
    return [{"batch": p["batchId"], "rows": p["numInputRows"], "start": _offsets(p["sources"][0]["startOffset"]),
             "end": _offsets(p["sources"][0]["endOffset"])} for p in query.recentProgress
            if p["sources"][0]["endOffset"] not in (None, p["sources"][0]["startOffset"])]


def _offsets(text: str | None) -> dict[str, dict[str, int]]:
    return json.loads(text) if text and text != "null" else {}


def read_up_to(query: Any, records: int, timeout: float) -> None:
    """Wait until ``query`` committed batches ending at ``records`` offsets (summed over partitions)."""
    limit = time.monotonic() + timeout
    while True:
        assert query.exception() is None, query.exception()
        ends = [_offsets(p["sources"][0]["endOffset"]) for p in query.recentProgress]
        if any(sum(o for parts in end.values() for o in parts.values()) >= records for end in ends):
            return
        assert time.monotonic() < limit, f"{query.name} did not read {records} records in {timeout:g} s: " \
                                         f"{query.status}"
        time.sleep(0.3)


def assert_each_record_once(spark: Any, out: Path, total: int) -> None:
    """The parquet sink at ``out`` holds records 0 .. total-1, each once, at its own partition and offset."""
    rows = [(int(r["key"]), r["value"], r["partition"], r["offset"])
            for r in spark.read.parquet(str(out / "data")).collect()]  # through the sink's _spark_metadata log
    keys = sorted(key for key, *_ in rows)
    assert keys == list(range(total)), f"{len(keys)} rows, {len(set(keys))} distinct keys of {total}"
    assert all(value == f"record-{key}" and partition == key % PARTITIONS for key, value, partition, _ in rows)
    assert sorted((p, o) for *_, p, o in rows) == sorted((p, o) for p in range(PARTITIONS)
                                                         for o in range(total // PARTITIONS))


def test_a_broker_stopped_and_started_again_mid_stream_loses_and_repeats_nothing(
    own_broker: Future[BrokerInfo], spark: Any, paced: Any, run_pacer: Any, tmp_path: Path
) -> None:
    from pacer_spark.errors import root_cause
    from pacer_spark.run.kafka_run import explain_failure

    broker = own_broker.result(timeout=300)
    directory, servers = Path(broker.directory), broker.bootstrap_servers
    patient, impatient = tmp_path / "patient", tmp_path / "impatient"
    try:
        topic = new_topic(servers, "fault-broker")
        produce(servers, topic, 0, 100)
        waits = start(spark, "pacer", servers, topic, patient, "broker_waits")
        fails = start(spark, "pacer", servers, topic, impatient, "broker_fails", options=IMPATIENT)
        read_up_to(waits, 100, 120)
        read_up_to(fails, 100, 120)

        down = run_pacer("kafka", "down", "--dir", str(directory), timeout=60)
        assert down.returncode == 0 and "stopped the broker" in down.stdout, down.stderr
        limit = time.monotonic() + 60  # the broker stays down until the impatient query gave up
        while fails.isActive and time.monotonic() < limit:
            time.sleep(0.2)
        assert not fails.isActive, f"the query with 3 s offset requests still runs: {fails.status}"
        error = str(fails.exception())
        # Spark's own text starts with Kafka's cause, on one line, and pacer's reading of it names the broker
        assert root_cause(error).startswith("org.apache.kafka.common.errors.TimeoutException: Timed out waiting")
        said = explain_failure(error, bootstrap_servers=servers, topic=topic, checkpoint=str(impatient))
        assert said is not None and said.startswith(f"no Kafka broker answered at {servers}"), said
        assert waits.isActive and waits.exception() is None  # Kafka's default: wait up to 60 s per request

        # the same directory and client port, right after `down` (its connections still in TIME_WAIT)
        up = run_pacer("kafka", "up", "--dir", str(directory), "--port", str(broker.port), timeout=180)
        assert up.returncode == 0, up.stderr
        assert up.stdout.splitlines()[-1] == f"bootstrap.servers={servers}"
        produce(servers, topic, 100, 100)

        read_up_to(waits, 200, 120)  # the waiting query read on by itself
        restarted = start(spark, "pacer", servers, topic, impatient, "broker_fails_restarted", available_now=True)
        drained(restarted)  # the failed one, restarted from its checkpoint
        waits.stop()
        assert_each_record_once(spark, patient, 200)
        assert_each_record_once(spark, impatient, 200)
    finally:
        for query in spark.streams.active:
            query.stop()


def uncommit_last_batch(out: Path) -> int:
    """Delete the newest commit of the checkpoint at ``out``: as a driver that died after logging the batch's
    offsets and writing its output, before committing it, leaves it. Returns that batch's id."""
    commits = out / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)
    return last


def test_a_checkpoint_moved_from_kafka_to_pacer_and_back_reads_every_record_once(
    spark: Any, paced: Any, kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers, "fault-switch")
    out, cap = tmp_path / "switch", {"maxOffsetsPerTrigger": "70"}
    uncommitted: dict[str, Any] | None = None
    for i, fmt in enumerate(("kafka", "pacer", "kafka")):
        produce(servers, topic, 100 * i, 100)
        batches = drained(start(spark, fmt, servers, topic, out, f"switch_{i}_{fmt}", available_now=True, options=cap))
        if uncommitted is not None:  # the batch the other source logged and did not commit comes first, its
            # offsets as logged (the file sink, which holds its output already, skips it: 0 rows in progress)
            assert {**batches[0], "rows": None} == {**uncommitted, "rows": None}, (uncommitted, batches)
        assert batches[-1]["end"] == {topic: {str(p): 50 * (i + 1) for p in range(PARTITIONS)}}, batches
        assert all(b["rows"] <= 70 for b in batches), batches
        last = uncommit_last_batch(out)
        uncommitted = next(b for b in batches if b["batch"] == last)
    assert_each_record_once(spark, out, 300)
    assert paced.report()["spark"]["paced"]["switch_1_pacer"]["decisions"] >= 1


def test_a_query_on_a_missing_topic_fails_naming_it(spark: Any, paced: Any, kafka_broker: BrokerInfo,
                                                    tmp_path: Path) -> None:
    """A ``format("pacer")`` query on a topic that does not exist fails as it starts, naming the topic, the servers
    and how to create it (the JVM source asks the cluster, as ``pacer run`` does), where Spark's Kafka source fails
    only once its offset requests timed out (minutes by default), with an exception that names no topic."""
    from pacer_spark.run.kafka_run import explain_failure

    servers = kafka_broker.bootstrap_servers
    there = new_topic(servers, "there")
    produce(servers, there, 0, 1)
    topic = there[:-1]  # a typo: the topic the query meant leads the ones listed, whatever else the broker holds
    started = time.monotonic()
    query = start(spark, "pacer", servers, topic, tmp_path / "missing", "missing_topic")  # Spark's default patience
    limit = started + 60
    while query.isActive and time.monotonic() < limit:
        time.sleep(0.2)
    assert not query.isActive, f"a query on a missing topic still runs after 60 s: {query.status}"
    error = str(query.exception())
    said = f"Kafka topic '{topic}' does not exist on the cluster at {servers} (it has "
    assert error.splitlines()[0].split(f"{said}")[1].split(": ", 1)[1].startswith(there), error[:2000]
    assert f"pacer kafka create-topic --bootstrap-servers {servers} --topic {topic}" in error
    assert "UnknownTopicOrPartitionException" not in error
    explained = explain_failure(error, bootstrap_servers=servers, topic=topic)
    assert explained is not None and explained.startswith(said), explained

    # Spark's own error for a topic deleted while a query ran (or a check that could not be made) is explained alike
    spark_error = ("org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] ...\n"
                   "Caused by: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not "
                   "host this topic-partition.")
    again = explain_failure(spark_error, bootstrap_servers=servers, topic=topic)
    assert again is not None and again.startswith(f"Kafka topic '{topic}' does not exist on the cluster at {servers}")
    assert f"pacer kafka create-topic --bootstrap-servers {servers} --topic {topic}" in again


def test_pacer_run_on_a_topic_that_does_not_exist_says_so_and_how_to_create_it(
    kafka_broker: BrokerInfo, run_pacer: Any
) -> None:
    pytest.importorskip("pacer_spark")
    servers, topic = kafka_broker.bootstrap_servers, f"absent-{uuid.uuid4().hex[:8]}"
    proc = run_pacer("run", "--source", "kafka", "--bootstrap-servers", servers, "--topic", topic,
                     "--workload", "lr2", "--admission", "zstream", "--deadline", "5s", "--duration", "2",
                     "--drain-timeout", "10", "--no-warm-up", "--progress-every", "0", timeout=300,
                     env={**os.environ, "PYSPARK_SUBMIT_ARGS": FAST_SUBMIT})
    assert proc.returncode == 2, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"pacer run: error: Kafka topic '{topic}' does not exist on the cluster at {servers}"), last
    create = f"pacer kafka create-topic --bootstrap-servers {servers} --topic {topic} --partitions N"
    assert create in last and f"pacer produce --bootstrap-servers {servers} --topic {topic}" in last
    assert "\tat " not in proc.stderr and "UnknownTopicOrPartitionException" not in proc.stderr

    # the command it names creates the topic, empty; a second call keeps it as it is
    made = run_pacer(*create.split()[1:-1], "2", timeout=60)
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == f"topic {topic}: 2 partition(s) (created)"
    again = run_pacer(*create.split()[1:-2], timeout=60)
    assert again.returncode == 0 and again.stdout.strip() == f"topic {topic}: 2 partition(s) (exists)"
    assert read_topic(servers, topic, 0, timeout_s=1) == []
