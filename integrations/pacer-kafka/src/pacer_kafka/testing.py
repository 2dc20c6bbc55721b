"""pytest plugin (entry point ``pytest11``): a real Kafka broker for a test session.

Any test that takes the ``kafka_broker`` fixture gets one single-node KRaft broker on 127.0.0.1,
started once per session by the same code as ``pacer kafka up`` and stopped at the end::

    def test_roundtrip(kafka_broker):
        producer = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})

The test is skipped, with the reason, only where the machine has no JDK, or has no Maven and no
cached Kafka jars; any other failure to start the broker fails the test with the broker's root cause.
"""

from __future__ import annotations

from collections.abc import Iterator

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
