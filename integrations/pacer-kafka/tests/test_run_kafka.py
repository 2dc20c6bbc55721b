"""``pacer run --source kafka``: a workload's query on Spark's Kafka source through ``format("pacer")``,
latency measured from each record's Kafka timestamp (a real broker, real Spark, the CLI as a user runs it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


@pytest.mark.full(reason="the live-topic and asap-stop runs below read a topic with pacer run and check its report "
                 "against the records; test_paced_kafka.py the read cap")
def test_pacer_run_reads_a_topic_paced_and_measures_latency_from_kafka(
    produced_topic: Any, run_pacer: Any, tmp_path: Path
) -> None:
    pytest.importorskip("pacer_zstream")
    out = tmp_path / "report.json"
    proc = run_pacer("run", "--source", "kafka", "--bootstrap-servers", produced_topic.bootstrap_servers,
                     "--topic", produced_topic.topic, "--workload", "lr2", "--admission", "zstream",
                     "--deadline", "10s", "--duration", "3", "--drain-timeout", "120", "--max-offsets", "800",
                     "--progress-every", "0", "--report", str(out), timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    kafka = report["kafka"]["lr2"]
    # every record of the topic, read once, in batches no larger than maxOffsetsPerTrigger allows
    assert kafka["records"] == produced_topic.records == 2000
    assert kafka["batches"] >= 3 and 0 < kafka["records_max"] <= 800, kafka  # --max-offsets 800 bounds every batch
    lat = kafka["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["max"]
    assert 0.0 <= kafka["miss_share"] <= 1.0 and kafka["engine_s"] > 0
    # the Controller paced it: its ledger saw the same rows the Kafka offsets tell
    q = report["queries"]["lr2"]
    assert q["admission"] == "zstream" and q["rows_processed"] == 2000 and q["datasets_pending"] == 0
    # dated by the records' own Kafka timestamps, the report's misses are the records' misses
    assert q["arrival"] == "source-time"
    assert abs(q["deadline_miss_ratio"] - kafka["miss_share"]) <= 0.01, (q["deadline_miss_ratio"], kafka)
    assert report["config"]["source"] == "kafka"
    assert "latency from the Kafka timestamp" in proc.stdout
    # the query's tasks' core-seconds, read for the Kafka section from the same listener as the Controller's per batch
    assert kafka["busy_core_s"] > 0
    assert abs(kafka["busy_core_s"] - q["cost"]["busy_core_s"]) <= 0.02 * kafka["busy_core_s"], (kafka, q["cost"])


def _run_on_a_live_topic(broker: Any, run_pacer: Any, tmp_path: Path, topic: str, *, produce_s: int, behind_s: float,
                         admission: str, duration_s: int) -> dict[str, Any]:
    """``pacer run --source kafka`` (lr2, 5 s deadline) on ``topic`` while ``pacer produce`` writes it at 400 rows/s
    for ``produce_s`` seconds, started ``behind_s`` after the producer; its report."""
    pacer = str(Path(sys.executable).with_name("pacer"))
    produce = subprocess.Popen([pacer, "produce", "--bootstrap-servers", broker.bootstrap_servers, "--topic",
                                topic, "--workload", "lr2", "--traffic", "constant", "--rate", "400", "--duration",
                                str(produce_s), "--partitions", "2", "--quiet"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(behind_s)
        out = tmp_path / "report.json"
        proc = run_pacer("run", "--source", "kafka", "--bootstrap-servers", broker.bootstrap_servers,
                         "--topic", topic, "--workload", "lr2", "--admission", admission, "--deadline", "5s",
                         "--duration", str(duration_s), "--progress-every", "0", "--report", str(out), timeout=400)
    finally:
        produce.terminate()
        produce.wait(timeout=30)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def test_on_a_live_topic_the_report_counts_the_misses_the_records_see(kafka_broker: Any, run_pacer: Any,
                                                                        tmp_path: Path) -> None:
    """A live topic the query starts behind (its backlog older than the deadline, the producer still writing): some
    records are late, most are not, and the report's miss ratio (rows, dated by the records' own Kafka timestamps and
    spread over each snapshot's span) is the records' own within 1 point."""
    pytest.importorskip("pacer_zstream")
    # the query starts 8 s behind (plus Spark's start-up): its backlog is older than the deadline
    report = _run_on_a_live_topic(kafka_broker, run_pacer, tmp_path, f"lr2-live-{int(time.time())}", produce_s=75,
                                  behind_s=8.0, admission="zstream", duration_s=25)
    kafka, q = report["kafka"]["lr2"], report["queries"]["lr2"]
    assert 0.02 < kafka["miss_share"] < 0.9, kafka  # the backlog late, what came after on time: a mixed case
    assert q["arrival"] == "source-time" and q["rows_processed"] == kafka["records"]
    assert abs(q["deadline_miss_ratio"] - kafka["miss_share"]) <= 0.01, (q["deadline_miss_ratio"], kafka)


def test_an_asap_run_stops_between_batches_and_its_records_are_the_reports_rows(kafka_broker: Any, run_pacer: Any,
                                                                                 tmp_path: Path) -> None:
    """asap on a topic still being written triggers back to back. ``pacer run`` stops it between two batches (pacer
    admits nothing more, then the running batch ends): no batch is interrupted, so the report counts no row that
    Spark did not commit, and the batches that ended while it stopped are in the record-level figures too."""
    report = _run_on_a_live_topic(kafka_broker, run_pacer, tmp_path, f"lr2-asap-stop-{int(time.time())}",
                                  produce_s=60, behind_s=2.0, admission="asap", duration_s=10)
    kafka, q = report["kafka"]["lr2"], report["queries"]["lr2"]
    assert q["admission"] == "asap" and kafka["records"] > 0
    assert q["rows_processed"] == kafka["records"], (q["rows_processed"], kafka["records"])
    assert q["batches"] == kafka["batches"], (q["batches"], kafka["batches"])
    assert abs(q["deadline_miss_ratio"] - kafka["miss_share"]) <= 0.01, (q["deadline_miss_ratio"], kafka)
    # one point per Spark batch: its rows, trigger time, whether it was a no-data batch, and its own tasks'
    # core-seconds from pacer's listener (together at most the query's, which counts tasks outside any batch too)
    points = kafka["per_batch"]
    assert sum(1 for p in points if p["rows"] > 0) == kafka["batches"]
    assert kafka["no_data"]["batches"] == sum(1 for p in points if p["no_data"])
    assert all(p["busy_core_s"] is not None and p["cpu_core_s"] is not None for p in points)
    assert sum(p["busy_core_s"] for p in points) <= kafka["busy_core_s"] + 1e-6
    assert kafka["no_data_batches_enabled"] is True  # Spark's default, kept
