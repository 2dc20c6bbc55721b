"""Kafka client settings shared by pacer's producer, admin calls and readiness checks (confluent-kafka)."""

from __future__ import annotations

import logging
from typing import Any

from pacer_kafka.distribution import KafkaSetupError

#: librdkafka's own log lines (connection refused, retries) go here, not to stderr.
LIBRDKAFKA_LOGGER = logging.getLogger("pacer_kafka.librdkafka")


class KafkaConnectionError(RuntimeError):
    """No Kafka broker answered at the bootstrap servers in time; the message says where and what to do."""


def client_config(bootstrap_servers: str, **overrides: Any) -> dict[str, Any]:
    """A confluent-kafka configuration for ``bootstrap_servers``, logging through :data:`LIBRDKAFKA_LOGGER`.

    :raises ValueError: for an empty bootstrap list.
    """
    servers = bootstrap_servers.strip()
    if not servers:
        raise ValueError("bootstrap servers are empty; give host:port[,host:port...], e.g. 127.0.0.1:9092")
    return {"bootstrap.servers": servers, "logger": LIBRDKAFKA_LOGGER, "socket.connection.setup.timeout.ms": 5000,
            **overrides}


def require_client() -> None:
    """Import confluent-kafka or say how to install it."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError as exc:  # pragma: no cover - it is a dependency of pacer-kafka
        raise KafkaSetupError("the Kafka client is missing: pip install confluent-kafka") from exc


def cluster_metadata(bootstrap_servers: str, *, timeout_s: float = 5.0) -> Any:
    """The cluster's metadata (brokers, topics and partitions), fetched with a real metadata request.

    :raises KafkaConnectionError: no broker answered within ``timeout_s``, with what to check.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(client_config(bootstrap_servers))
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise KafkaConnectionError(
            f"no Kafka broker answered at {bootstrap_servers} within {timeout_s:g} s ({exc.args[0].str()}); check "
            "--bootstrap-servers, or start a broker with `pacer kafka up --dir DIR`"
        ) from None
    if not metadata.brokers:
        raise KafkaConnectionError(f"the Kafka cluster at {bootstrap_servers} lists no broker yet; retry in a moment")
    return metadata
