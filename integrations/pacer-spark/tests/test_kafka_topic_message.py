"""A ``format("pacer")`` query on a Kafka topic that does not exist: the JVM source's message (``KafkaTopicCheck``)
and ``pacer run``'s (:func:`pacer_spark.run.kafka_run.missing_topic_message`) say the same, and
:func:`~pacer_spark.run.kafka_run.explain_failure` gives the JVM's line from Spark's error text (no Spark here;
the real query is ``pacer-kafka``'s ``test_a_query_on_a_missing_topic_fails_naming_it``)."""

from __future__ import annotations

import re
from pathlib import Path

from pacer_spark.run.kafka_run import explain_failure, missing_topic_message

JAVA = (Path(__file__).resolve().parents[1] / "jvm" / "src" / "main" / "java" / "io" / "pacer" / "spark"
        / "KafkaTopicCheck.java")


def _java_message(servers: str, topic: str, existing: list[str]) -> str:
    """KafkaTopicCheck.missingMessage's text, its Java string concatenation evaluated for these values."""
    body = JAVA.read_text().split("static String missingMessage(", 1)[1].split("\n  }\n", 1)[0]
    expression = body.split("return ", 1)[1].rsplit(";", 1)[0]
    others = sorted(t for t in existing if not t.startswith("__"))
    listed = f" (it has {len(others)}: {', '.join(others)})" if others else " (it has no topic yet)"
    values = {"servers": servers, "topic": topic, "listed": listed}
    parts = re.findall(r'"((?:[^"\\]|\\.)*)"|\b(servers|topic|listed)\b', expression)
    return "".join(literal if name == "" else values[name] for literal, name in parts)


def test_the_jvm_check_says_what_pacer_run_says() -> None:
    jvm = _java_message("localhost:9092", "orders", ["clicks", "__consumer_offsets"])
    python = missing_topic_message("localhost:9092", "orders", ["clicks", "__consumer_offsets"])
    assert jvm.startswith("Kafka topic 'orders' does not exist on the cluster at localhost:9092 (it has 1: clicks); "
                          "create it with `pacer kafka create-topic --bootstrap-servers localhost:9092 --topic orders "
                          "--partitions N` (no records), or fill it with `pacer produce --bootstrap-servers "
                          "localhost:9092 --topic orders --workload W --rate R --duration S` (creates it)"), jvm
    assert python.split(", then run again")[0] == jvm.split(", or correct the query's subscribe option")[0]
    assert jvm.endswith("or correct the query's subscribe option, then start the query again")


def test_explain_failure_gives_the_jvm_check_s_line() -> None:
    line = _java_message("h:1", "orders", [])
    trace = ("org.apache.spark.sql.streaming.StreamingQueryException: [STREAM_FAILED] Query [id = 1] terminated "
             f"with exception: {line}\n\tat org.apache.spark.sql.execution.streaming.StreamExecution.run\n"
             f"Caused by: java.lang.IllegalArgumentException: {line}\n\tat io.pacer.spark.KafkaTopicCheck.check")
    assert explain_failure(trace, bootstrap_servers="h:1", topic="orders") == line
    assert line.startswith("Kafka topic 'orders' does not exist on the cluster at h:1 (it has no topic yet); ")


def test_the_topics_nearest_the_name_asked_for_are_listed_first() -> None:
    """A typo's target leads the list, however many other topics sort before it (ten are listed)."""
    existing = [f"a{i:02d}" for i in range(20)] + ["orders", "order-audit", "__consumer_offsets"]
    message = missing_topic_message("h:1", "order", existing)
    assert "(it has 22: order-audit, orders, a00, a01, " in message and message.count(", a") == 8
    assert "..." in message.split(";")[0]
