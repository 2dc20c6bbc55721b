"""pytest plugin (entry point ``pytest11``): a real Kafka broker for a test session.

Any test that takes the ``kafka_broker`` fixture gets one single-node KRaft broker on 127.0.0.1,
started once per session by the same code as ``pacer kafka up`` and stopped at the end::

    def test_roundtrip(kafka_broker):
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})

The test is skipped, with the reason, only where the machine has no JDK, or has no Maven and no
cached Kafka jars; any other failure to start the broker fails the test with the broker's root cause.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pacer_kafka.broker import BrokerInfo, start_broker, stop_broker
from pacer_kafka.distribution import kafka_unavailable_reason


def require_kafka() -> None:
    """Skip the calling test, with the reason, when this machine cannot run a Kafka broker."""
    reason = kafka_unavailable_reason()
    if reason is not None:
        pytest.skip(f"cannot run Apache Kafka here: {reason}")


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerInfo]:
    """A running single-node Kafka broker for the whole session (``.bootstrap_servers``, ``.directory``)."""
    require_kafka()
    directory = tmp_path_factory.mktemp("kafka-broker")
    info = start_broker(directory)
    try:
        yield info
    finally:
        stop_broker(directory)


def read_topic(bootstrap_servers: str, topic: str, expected: int, *, timeout_s: float = 60.0) -> list[Any]:
    """Every record of ``topic`` from its start, read with a real consumer in a fresh group.

    Reads until ``expected`` records came or ``timeout_s`` passed, then once more for a second, so
    that records beyond ``expected`` are returned too (a test can see a duplicate). A topic that does
    not exist yet is waited for.
    """
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": f"pacer-test-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(_checked(consumer.consume(num_messages=1000, timeout=0.5)))
        records.extend(_checked(consumer.consume(num_messages=1000, timeout=1.0)))
    finally:
        consumer.close()
    return records


def _checked(messages: list[Any]) -> list[Any]:
    """The records among ``messages``; a topic that does not exist yet is waited for, any other error raised."""
    from confluent_kafka import KafkaError

    records = []
    for message in messages:
        error = message.error()
        if error is None:
            records.append(message)
        elif error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise AssertionError(f"the consumer got an error: {error}")
    return records


def kafka_spark_session(app_name: str, conf: dict[str, str] | None = None) -> Iterator[Any]:
    """A local SparkSession with Spark's Kafka connector in ``spark.jars`` (``pacer_spark.session_builder(kafka=True)``),
    for a module-scoped ``spark`` fixture to ``yield from`` (``pacer_spark.add_kafka_connector`` where the driver's
    JVM started earlier without it); skips when pyspark or pacer-spark is missing, or when another session
    without the connector is already active in this process."""
    pytest.importorskip("pyspark")
    pacer_spark = pytest.importorskip("pacer_spark")
    session = (pacer_spark.session_builder("local[2]", app_name, kafka=True, shuffle_partitions=2,
                                           **({"conf": conf} if conf else {}))
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    if "spark-sql-kafka-0-10" not in session.sparkContext.getConf().get("spark.jars", ""):
        session.stop()
        pytest.skip("another SparkSession without Spark's Kafka connector is active in this process")
    pacer_spark.add_kafka_connector(session)  # the JVM may have started for an earlier session, without it
    yield session
    session.stop()


def new_topic(bootstrap_servers: str, prefix: str, partitions: int = 2) -> str:
    """A fresh topic ``<prefix>-<random>`` of ``partitions`` partitions, created and ready."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})  # alive until the futures are done
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=30)
    return topic


def produce_numbered(bootstrap_servers: str, topic: str, first: int, count: int, partitions: int = 2) -> None:
    """Records ``first`` .. ``first + count - 1``: key the number, value ``record-N``, round robin over the
    ``partitions`` partitions; every one delivered."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    for i in range(first, first + count):
        producer.produce(topic, key=str(i).encode(), value=f"record-{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0, "the producer could not deliver every record"
