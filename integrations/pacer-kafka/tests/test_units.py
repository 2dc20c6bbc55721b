"""Pure parts: root cause of a log, jar names, release choice, the plan, encoding, the summary."""

from __future__ import annotations

import json

import pytest

from pacer_kafka.broker import root_cause, server_properties
from pacer_kafka.connector import choose_release
from pacer_kafka.distribution import jar_base_name, kafka_version
from pacer_kafka.produce import ProduceResult, check_topic_name, encode_dataset, plan_workload, summary_lines
from pacer_workloads import generate

# Lines of a real broker.log of Kafka 4.3.1 whose controller port was taken (stack frames shortened).
BIND_FAILURE_LOG = """\
[2026-11-23 01:28:16,840] INFO [SocketServer listenerType=CONTROLLER, nodeId=1] Created data-plane acceptor
[2026-11-23 01:28:16,851] ERROR Unable to start acceptor for CONTROLLER (kafka.network.DataPlaneAcceptor)
org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:40809: Address already in use.
\tat org.apache.kafka.server.ServerSocketFactory$KafkaServerSocketFactory.openServerSocket(ServerSocketFactory.java:56)
Caused by: java.net.BindException: Address already in use
\tat java.base/sun.nio.ch.Net.bind0(Native Method)
[2026-11-23 01:28:16,912] ERROR [ControllerServer id=1] Received a fatal error while waiting for all of the SocketServer Acceptors to be started (kafka.server.ControllerServer)
java.lang.RuntimeException: Unable to start acceptor for CONTROLLER
"""


def test_root_cause_of_a_kafka_log_is_the_first_exception_after_the_first_error() -> None:
    assert root_cause(BIND_FAILURE_LOG) == (
        "org.apache.kafka.common.KafkaException: Socket server failed to bind to 127.0.0.1:40809: Address already in use.")


def test_root_cause_without_an_exception_is_the_error_message() -> None:
    log = "[2026-01-01 00:00:00,000] INFO starting (kafka.Kafka$)\n[2026-01-01 00:00:01,000] ERROR disk full (kafka.log)\n"
    assert root_cause(log) == "disk full"


def test_root_cause_of_jvm_and_main_thread_failures() -> None:
    assert root_cause("Error occurred during initialization of VM\nToo small maximum heap\n") == (
        "Error occurred during initialization of VM: Too small maximum heap")
    assert root_cause('Exception in thread "main" java.lang.IllegalArgumentException: bad\n\tat x.y(Z.java:1)\n') == (
        "java.lang.IllegalArgumentException: bad")
    assert root_cause("") == "(the log is empty)"


def test_jar_base_names() -> None:
    assert jar_base_name("kafka-clients-3.9.2.jar") == "kafka-clients"
    assert jar_base_name("spark-sql-kafka-0-10_2.13-4.2.0.jar") == "spark-sql-kafka-0-10_2.13"
    assert jar_base_name("zstd-jni-1.5.6-10.jar") == "zstd-jni"
    assert jar_base_name("kafka_2.13-4.3.1.jar") == "kafka_2.13"
    assert jar_base_name("commons-pool2-2.13.1.jar") == "commons-pool2"
    assert jar_base_name("jackson-annotations-2.21.jar") == "jackson-annotations"


def test_choose_release_prefers_the_same_minor_and_never_a_preview() -> None:
    available = ["4.1.3", "4.2.0", "4.2.0-preview5", "4.3.0-preview1", "3.5.9"]
    assert choose_release("4.3.0", available) == "4.2.0"
    assert choose_release("4.2.2", available) == "4.2.0"
    assert choose_release("4.1.9", ["4.1.3", "4.2.0"]) == "4.1.3"
    assert choose_release("4.0.0", ["3.5.9"]) is None
    assert choose_release("4.3.0.dev0", available) is None


def test_kafka_version_checks_the_release_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACER_KAFKA_VERSION", "3.9.1")
    assert kafka_version() == "3.9.1" and kafka_version("4.0.0") == "4.0.0"
    with pytest.raises(Exception, match="not a release number"):
        kafka_version("latest")


def test_server_properties_listen_on_loopback_only(tmp_path: object) -> None:
    text = server_properties(port=9092, controller_port=9093, data_dir=tmp_path)  # type: ignore[arg-type]
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"


def test_plan_rejects_bad_input_with_what_to_do() -> None:
    with pytest.raises(ValueError, match="unknown workload 'nope'; known workloads: lr1"):
        plan_workload("nope", traffic="constant", rate=1, duration=1, seed=0)
    with pytest.raises(ValueError, match="--rate must be a number > 0"):
        plan_workload("lr2", traffic="constant", rate=float("nan"), duration=1, seed=0)
    with pytest.raises(ValueError, match="--duration must be a number > 0"):
        plan_workload("lr2", traffic="constant", rate=1, duration=0, seed=0)
    with pytest.raises(ValueError, match="shorter than one period"):
        plan_workload("lr2", traffic="constant", rate=1, duration=0.5, seed=0)
    with pytest.raises(ValueError, match="unknown value format 'avro'"):
        plan_workload("lr2", traffic="constant", rate=1, duration=1, seed=0, value_format="avro")
    with pytest.raises(ValueError, match="traffic 'wave' has no parameter"):
        plan_workload("lr2", traffic="wave", rate=1, duration=1, seed=0, traffic_params={"height": 3})
    for bad in ("", "a b", "x" * 250, ".."):
        with pytest.raises(ValueError, match="is not valid in Kafka"):
            check_topic_name(bad)


def test_plan_follows_the_traffic_schedule() -> None:
    plan = plan_workload("cm2", traffic="binary", rate=1000, duration=4, seed=1,
                         traffic_params={"period": 2, "noise": 0})  # the exact shape, not Poisson rows around it
    assert plan.stream == "cluster_monitoring"
    assert [rows for _, _, rows in plan.arrivals] == [1500, 500, 1500, 500]
    assert plan.asked_rate == 1000


def test_json_values_hold_the_generator_rows() -> None:
    plan = plan_workload("lr2", traffic="constant", rate=50, duration=1, seed=11)
    encoded = encode_dataset(plan, 0, 50, 1_800_000_000.0)
    frame = generate("linear_road", 50, seed=11, index=0, start_time=1_800_000_000.0, duration=1.0)
    rows = [json.loads(v) for v in encoded.values]
    assert [r["vehicle"] for r in rows] == frame["vehicle"].tolist()
    assert [r["speed"] for r in rows] == frame["speed"].tolist()
    assert [r["timestamp"] for r in rows] == [t.strftime("%Y-%m-%dT%H:%M:%S.%fZ") for t in frame["timestamp"]]
    assert encoded.timestamps_ms == [t.value // 1_000_000 for t in frame["timestamp"]]
    assert list(encoded.event_s) == sorted(encoded.event_s)


def test_summary_says_when_the_producer_cannot_keep_up() -> None:
    plan = plan_workload("lr2", traffic="constant", rate=50000, duration=10, seed=0,
                         traffic_params={"noise": 0})  # asked: exactly 50000 rows/s
    slow = ProduceResult("t", 1, True, produced=500000, achieved_rate=31000.0, elapsed_s=16.1, max_lag_s=6.0,
                         asked_rate=plan.asked_rate)
    lines = summary_lines(plan, slow)
    assert lines[1].startswith("cannot keep up: asked 50000 rows/s, achieved 31000 rows/s over 16.1 s")
    assert lines[-1] == "produced 500000 records"
    fine = ProduceResult("t", 1, True, produced=500000, achieved_rate=49900.0, elapsed_s=10.0,
                         asked_rate=plan.asked_rate)
    assert summary_lines(plan, fine)[1].startswith("kept up: asked 50000 rows/s, achieved 49900 rows/s")
