"""``pacer produce`` against a real broker: counts, traffic shape, values, timestamps, bad inputs, Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from pacer_kafka.broker import BrokerInfo
from pacer_kafka.produce import plan_workload, produce
from pacer_kafka.testing import read_topic
from pacer_workloads import generate, spark_schema_ddl


def last_line(text: str) -> str:
    """The last non-empty line of ``text``."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def test_produce_writes_the_schedule_and_a_consumer_reads_it_back(produced_topic: Any) -> None:
    assert last_line(produced_topic.stdout) == "produced 2000 records"
    assert "topic lr2-binary: 2 partition(s) (created)" in produced_topic.stdout
    records: list[Any] = read_topic(produced_topic.bootstrap_servers, produced_topic.topic, 2000)
    assert len(records) == 2000
    assert {r.partition() for r in records} <= {0, 1}
    columns = [c.split()[0] for c in spark_schema_ddl("linear_road").split(", ")]
    rows = [json.loads(r.value()) for r in records]
    assert all(list(row) == columns for row in rows)
    # the Kafka timestamp is the row's event time, truncated to milliseconds
    for record, row in zip(records, rows, strict=True):
        event_us = round(_epoch_s(row["timestamp"]) * 1e6)
        assert record.timestamp()[1] == event_us // 1000
    # binary traffic: 1500 rows in the first second, 500 in the second
    start_ms = min(r.timestamp()[1] for r in records) // 1000 * 1000
    per_second = Counter((r.timestamp()[1] - start_ms) // 1000 for r in records)
    assert per_second == {0: 1500, 1: 500}


def _epoch_s(iso: str) -> float:
    from datetime import datetime

    assert iso.endswith("Z") and "T" in iso
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def test_values_are_the_generator_rows(kafka_broker: BrokerInfo) -> None:
    plan = plan_workload("cm1", traffic="constant", rate=150, duration=2, seed=3, value_format="csv",
                         traffic_params={"noise": 0})  # exactly 150 rows a second
    start = float(int(time.time()) + 1)
    result = produce(kafka_broker.bootstrap_servers, "cm1-csv", plan, start_time=start)
    assert (result.produced, result.failed, result.created) == (300, 0, True)
    records: list[Any] = read_topic(kafka_broker.bootstrap_servers, "cm1-csv", 300)
    got = sorted((r.value().decode().split(",") for r in records), key=lambda f: (f[0], f[1], f[2]))
    expected = []
    for index in range(2):
        frame = generate("cluster_monitoring", 150, seed=3, index=index, start_time=start + index, duration=1.0)
        expected.extend(frame.itertuples(index=False))
    expected.sort(key=lambda row: (row.timestamp, str(row.jobId), str(row.taskIndex)))
    assert len(got) == len(expected) == 300
    for fields, row in zip(got, expected, strict=True):
        assert fields[0] == row.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        assert [int(fields[1]), int(fields[2]), int(fields[3]), int(fields[4])] == [
            row.jobId, row.taskIndex, row.machineId, row.eventType]
        assert fields[5] == row.userId
        assert [float(x) for x in fields[8:]] == [row.cpu, row.ram, row.disk]


def test_existing_topic_keeps_its_partitions(kafka_broker: BrokerInfo) -> None:
    plan = plan_workload("lr1", traffic="constant", rate=20, duration=1, seed=1, traffic_params={"noise": 0})  # 20 rows
    first = produce(kafka_broker.bootstrap_servers, "reused", plan, partitions=3)
    second = produce(kafka_broker.bootstrap_servers, "reused", plan, partitions=5)
    assert (first.partitions, first.created, second.partitions, second.created) == (3, True, 3, False)
    assert len(read_topic(kafka_broker.bootstrap_servers, "reused", 40)) == 40


def test_unknown_workload_is_a_usage_error(run_pacer: Any) -> None:
    proc = run_pacer("produce", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", "--workload", "lr9",
                     "--rate", "10", "--duration", "1")
    assert proc.returncode == 2
    assert "unknown workload 'lr9'; known workloads: lr1, lr1t, lr2, lr3, cm1, cm2" in proc.stderr


def test_rate_must_be_positive(run_pacer: Any) -> None:
    for rate in ("0", "-5"):
        proc = run_pacer("produce", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", "--workload", "lr2",
                         "--rate", rate, "--duration", "1")
        assert proc.returncode == 2
        assert f"--rate must be a number > 0, got {float(rate):g}" in proc.stderr


def test_unknown_traffic_and_bad_topic_are_usage_errors(run_pacer: Any) -> None:
    proc = run_pacer("produce", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t", "--workload", "lr2",
                     "--traffic", "tsunami", "--rate", "1", "--duration", "1")
    assert proc.returncode == 2 and "unknown traffic pattern 'tsunami'" in proc.stderr
    proc = run_pacer("produce", "--bootstrap-servers", "127.0.0.1:9", "--topic", "a topic", "--workload", "lr2",
                     "--rate", "1", "--duration", "1")
    assert proc.returncode == 2 and "topic name 'a topic' is not valid" in proc.stderr


def test_unreachable_bootstrap_server_fails_with_a_clear_error(run_pacer: Any) -> None:
    from pacer_kafka.broker import free_port

    port = free_port()  # nothing listens there
    proc = run_pacer("produce", "--bootstrap-servers", f"127.0.0.1:{port}", "--topic", "t", "--workload", "lr2",
                     "--rate", "10", "--duration", "1", timeout=60)
    assert proc.returncode == 1
    assert f"no Kafka broker answered at 127.0.0.1:{port} within 5 s" in proc.stderr
    assert "pacer kafka up --dir DIR" in proc.stderr


def test_ctrl_c_stops_cleanly_with_the_count_so_far(kafka_broker: BrokerInfo) -> None:
    child = subprocess.Popen(
        [str(Path(sys.executable).with_name("pacer")), "produce", "--bootstrap-servers", kafka_broker.bootstrap_servers,
         "--topic", "interrupted", "--workload", "lr2", "--rate", "200", "--duration", "600", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = read_topic(kafka_broker.bootstrap_servers, "interrupted", 50, timeout_s=120)
        assert len(seen) >= 50
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "interrupted after" in out
    produced = int(last_line(out).removeprefix("produced ").removesuffix(" records"))
    assert last_line(out) == f"produced {produced} records" and produced >= 50
    assert len(read_topic(kafka_broker.bootstrap_servers, "interrupted", produced + 1, timeout_s=5)) == produced
