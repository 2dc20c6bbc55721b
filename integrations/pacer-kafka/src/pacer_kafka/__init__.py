"""pacer with Apache Kafka: a local KRaft broker from Maven Central's jars, a traffic-shaped producer, Spark's connector.

- :func:`start_broker` / :func:`stop_broker` (``pacer kafka up|down``): a single-node broker on 127.0.0.1.
- :func:`plan_workload` + :func:`produce` (``pacer produce``): a workload's rows at a traffic pattern.
- :func:`spark_kafka_jars`: the ``spark.jars`` that make ``format("kafka")`` work on the installed PySpark.
"""

from pacer_kafka.broker import BrokerError, BrokerInfo, running_broker, start_broker, stop_broker
from pacer_kafka.clients import KafkaConnectionError
from pacer_kafka.connector import spark_kafka_jars
from pacer_kafka.distribution import KAFKA_VERSION, KafkaSetupError, kafka_classpath
from pacer_kafka.produce import ProducePlan, ProduceResult, ensure_topic, plan_workload, produce

__all__ = [
    "KAFKA_VERSION",
    "BrokerError",
    "BrokerInfo",
    "KafkaConnectionError",
    "KafkaSetupError",
    "ProducePlan",
    "ProduceResult",
    "ensure_topic",
    "kafka_classpath",
    "plan_workload",
    "produce",
    "running_broker",
    "spark_kafka_jars",
    "start_broker",
    "stop_broker",
]
