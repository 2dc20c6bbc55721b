"""pacer-spark's ``kafka`` connector (entry point group ``pacer_spark.connectors``): the jars of Spark's Kafka
connector (:mod:`pacer_kafka.connector`) and the topics a cluster serves (:mod:`pacer_kafka.clients`)."""

from __future__ import annotations

from pacer_kafka.clients import KafkaConnectionError, cluster_metadata
from pacer_kafka.connector import spark_kafka_jars


class KafkaConnector:
    """What ``session_builder(kafka=True)`` and ``pacer run --source kafka`` ask of Kafka."""

    def jars(self) -> list[str]:
        """Spark's Kafka connector for the installed PySpark, resolved with ``mvn`` and cached."""
        return [str(path) for path in spark_kafka_jars()]

    def partitions(self, bootstrap_servers: str, timeout_s: float) -> dict[str, int]:
        """Each topic the cluster serves without error, with its partition count.

        :raises ConnectionError: no broker answered within ``timeout_s``.
        """
        try:
            metadata = cluster_metadata(bootstrap_servers, timeout_s=timeout_s)
        except KafkaConnectionError as exc:
            raise ConnectionError(str(exc)) from None
        return {name: len(topic.partitions) for name, topic in metadata.topics.items()
                if topic.error is None and topic.partitions}


#: The object the ``pacer_spark.connectors`` entry point ``kafka`` names.
CONNECTOR = KafkaConnector()
