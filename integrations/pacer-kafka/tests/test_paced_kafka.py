"""Spark's Kafka source read through ``format("pacer")`` and paced by the Controller, on a real broker.

``pacer.source=kafka`` wraps the source Spark's ``KafkaSourceProvider.createSource`` builds (the V1
``KafkaSource``): each change of its latest offsets is one pacer dataset, whose rows are the offset
delta summed over the partitions. The job in ``kafka_app.py`` runs in a process of its own so that it
can be killed with SIGKILL like a crashed driver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacer_kafka import testing
from pacer_kafka.broker import BrokerInfo
from pacer_kafka.testing import kafka_spark_session

pytestmark = pytest.mark.spark

APP = Path(__file__).with_name("kafka_app.py")
PARTITIONS = 2
#: The kill-and-restart test: records written in all, and the job's maxOffsetsPerTrigger.
TOTAL, CAP = 2000, 500


def new_topic(bootstrap_servers: str, prefix: str) -> str:
    """A fresh topic of PARTITIONS partitions."""
    return testing.new_topic(bootstrap_servers, prefix, PARTITIONS)


def produce(bootstrap_servers: str, topic: str, first: int, count: int) -> None:
    """Records ``first`` .. ``first + count - 1`` (key the number, value ``record-N``), round robin over PARTITIONS."""
    testing.produce_numbered(bootstrap_servers, topic, first, count, PARTITIONS)


def offsets_rows(start: str | dict[str, Any] | None, end: str | dict[str, Any]) -> int:
    """Records between two Kafka source offsets ({topic: {partition: offset}}); no start: from offset 0."""
    def parsed(offset: str | dict[str, Any] | None) -> dict[str, dict[str, int]]:
        return (json.loads(offset) if isinstance(offset, str) else offset) or {}  # progress says "null"

    before, after = parsed(start), parsed(end)
    return sum(o - before.get(t, {}).get(p, 0) for t, parts in after.items() for p, o in parts.items())


def test_session_builder_puts_the_connector_into_spark_jars() -> None:
    pacer_spark = pytest.importorskip("pacer_spark")
    from pacer_kafka.connector import spark_kafka_jars

    builder = pacer_spark.session_builder(kafka=True, rapids_jars=["/opt/rapids.jar"],
                                          conf={"spark.jars": "/opt/own.jar", "spark.ui.enabled": "false"})
    connector = [str(p) for p in spark_kafka_jars()]
    assert builder._options["spark.jars"].split(",") == ["/opt/rapids.jar", *connector, "/opt/own.jar"]
    assert builder._options["spark.plugins"] == "com.nvidia.spark.SQLPlugin"
    assert builder._options["spark.ui.enabled"] == "false"
    assert "spark.jars" not in pacer_spark.session_builder()._options


def test_session_builder_kafka_without_pacer_kafka_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    pacer_spark = pytest.importorskip("pacer_spark")
    monkeypatch.setattr("pacer_spark.connectors.entry_points", lambda **_: [])  # as if pacer-kafka were not installed
    with pytest.raises(ImportError, match="pip install ./integrations/pacer-kafka"):
        pacer_spark.session_builder(kafka=True)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local session from ``pacer_spark.session_builder(kafka=True)``: the connector's jars in ``spark.jars``."""
    yield from kafka_spark_session("pacer-kafka-paced")


@pytest.fixture(scope="module")
def paced(spark: Any) -> Iterator[Any]:
    """The session's pacer, deciding every format('pacer') query (zStream, 5 s deadline)."""
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="zstream", deadline="5s")
    yield handle
    handle.stop()


def drain(spark: Any, bootstrap_servers: str, topic: str, name: str, **options: Any) -> Any:
    """Read ``topic`` through format('pacer') with availableNow into a memory sink; the finished query."""
    reader = (spark.readStream.format("pacer").option("pacer.source", "kafka")
              .option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().selectExpr("CAST(key AS STRING) AS key").writeStream.queryName(name).format("memory")
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120), f"{name} did not drain in 120 s"
    assert query.exception() is None, query.exception()
    return query


def test_numinputrows_and_latest_offset_of_a_paced_kafka_query(
    spark: Any, paced: Any, kafka_broker: BrokerInfo
) -> None:
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers, "paced-once")
    produce(servers, topic, 0, 700)
    requests = []
    decide = paced.paced_service.decide

    def recording(request: Any) -> Any:
        requests.append(request)
        return decide(request)

    paced.paced_service.bridge.register_handler("*", recording, paced.paced_service.stopped)
    try:
        whole = drain(spark, servers, topic, "kafka_whole")
        capped = drain(spark, servers, topic, "kafka_capped", maxOffsetsPerTrigger=300)
    finally:
        paced.paced_service.bridge.register_handler("*", decide, paced.paced_service.stopped)
    end = {topic: {str(p): 700 // PARTITIONS for p in range(PARTITIONS)}}

    # no read limit: one snapshot, one batch of every record
    last = whole.lastProgress
    assert last["numInputRows"] == 700
    assert json.loads(last["sources"][0]["endOffset"]) == end
    assert json.loads(last["sources"][0]["latestOffset"]) == end
    assert last["sources"][0]["description"].startswith("PacerSource[query=kafka_whole, source=kafka")
    assert spark.sql("SELECT count(DISTINCT key) AS n, count(*) AS rows FROM kafka_whole").first() == (700, 700)

    # maxOffsetsPerTrigger stays a cap: the backlog is seen as 300-row snapshots, each batch within the cap
    ran = [p for p in capped.recentProgress if p["numInputRows"] > 0]
    assert [p["numInputRows"] for p in ran] == [300, 300, 100]
    for p in ran:
        source = p["sources"][0]
        assert p["numInputRows"] == offsets_rows(source["startOffset"], source["endOffset"])
        assert json.loads(source["latestOffset"]) == end
    assert spark.sql("SELECT count(DISTINCT key) AS n, count(*) AS rows FROM kafka_capped").first() == (700, 700)

    # the Controller decided every batch, from rows the Kafka offsets measured (the first snapshot too)
    first = next(r for r in requests if r.query == "kafka_capped")
    assert [s.rows for s in first.snapshots] == [300, 300, 100]
    assert all(s.bytes_estimated and s.bytes for s in first.snapshots)
    summary = paced.report()["spark"]["paced"]
    assert summary["kafka_whole"]["decisions"] >= 1 and summary["kafka_capped"]["decisions"] >= 3
    assert summary["kafka_capped"]["error"] is None
    assert paced.paced_service.bridge.fallback_warnings("kafka_capped") == 0


def test_a_start_with_100000_records_waiting_begins_with_a_bounded_probe(
    spark: Any, paced: Any, kafka_broker: BrokerInfo
) -> None:
    """No read cap, no fitted service model, 100 000 records waiting: the first batch is a probe within
    ``PROBE_ROWS`` (before: every record in one batch, the out-of-memory users report about Spark's default
    trigger after an outage), the next ones grow from what it measured, and every record is read once."""
    from pacer_spark.driver.protocol.paced import PROBE_ROWS

    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers, "paced-probe")
    produce(servers, topic, 0, 100_000)
    query = (spark.readStream.format("pacer").option("pacer.source", "kafka").option("pacer.deadline", "10s")
             .option("kafka.bootstrap.servers", servers).option("subscribe", topic)
             .option("startingOffsets", "earliest").load().selectExpr("CAST(key AS STRING) AS key")
             .writeStream.queryName("kafka_probe").format("memory").start())
    try:
        limit = time.monotonic() + 180
        while spark.sql("SELECT count(*) FROM kafka_probe").first()[0] < 100_000:
            assert query.exception() is None and time.monotonic() < limit, query.exception()
            time.sleep(1.0)
        query.processAllAvailable()
    finally:
        query.stop()
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert 0 < sizes[0] <= PROBE_ROWS and sizes[1] <= 2 * PROBE_ROWS, sizes
    assert sum(sizes) == 100_000 and len(sizes) >= 3, sizes
    assert spark.sql("SELECT count(DISTINCT key), count(*) FROM kafka_probe").first() == (100_000, 100_000)
    summary = paced.report()["spark"]["paced"]["kafka_probe"]
    assert summary["error"] is None and summary["failed_open"] == 0, summary


def launch(tmp: Path, servers: str, topic: str, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    """The user's job in its own process group (SIGKILL takes its JVM too)."""
    log = (tmp / f"{out.name}-{len(list(tmp.glob(out.name + '-*.log')))}.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # every installed strategy, zstream too
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen([sys.executable, str(APP), "--bootstrap-servers", servers, "--topic", topic,
                             "--out", str(out), *extra], stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)


def commits(out: Path) -> int:
    """Batches the job committed (its checkpoint's commit log)."""
    folder = out / "checkpoint" / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.is_dir() else 0


def logs(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(tmp.glob("*.log")))


def said(tmp: Path, prefix: str) -> Any:
    """The JSON the restarted job printed after ``prefix``."""
    lines = [line for p in sorted(tmp.glob("*.log")) for line in p.read_text(errors="replace").splitlines()]
    return json.loads(next(line for line in reversed(lines) if line.startswith(prefix))[len(prefix):])


def test_a_paced_kafka_query_killed_and_restarted_writes_every_record_once(
    spark: Any, kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers, "paced-kill")
    out = tmp_path / "paced"
    produce(servers, topic, 0, 400)
    written = 400
    job = launch(tmp_path, servers, topic, out, "--max-offsets", str(CAP))
    try:
        limit = time.monotonic() + 120
        while commits(out) < 2:  # records keep arriving while it runs; kill it mid-stream
            assert job.poll() is None, f"the paced job exited early:\n{logs(tmp_path)}"
            assert time.monotonic() < limit, f"no two batches committed in 120 s:\n{logs(tmp_path)}"
            if written < TOTAL - 400:
                produce(servers, topic, written, 100)
                written += 100
            time.sleep(0.5)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    produce(servers, topic, written, TOTAL - written)

    restart = launch(tmp_path, servers, topic, out, "--max-offsets", str(CAP), "--available-now")
    assert restart.wait(timeout=180) == 0, f"the restarted job failed:\n{logs(tmp_path)}"

    frame = spark.read.parquet(str(out / "data"))  # through the sink's _spark_metadata log, as a reader should
    rows = [(int(r["key"]), r["value"], r["partition"], r["offset"]) for r in frame.collect()]
    keys = sorted(key for key, *_ in rows)
    assert keys == list(range(TOTAL)), f"{len(keys)} rows, {len(set(keys))} distinct keys\n{logs(tmp_path)}"
    assert all(value == f"record-{key}" and partition == key % PARTITIONS for key, value, partition, _ in rows)
    assert len({(partition, offset) for _, _, partition, offset in rows}) == TOTAL

    paced = said(tmp_path, "pacer: ")["kafka-keys"]
    assert paced["decisions"] > 0 and paced["error"] is None  # the Controller decided, not the JVM's fallback
    progress = said(tmp_path, "progress: ")
    ran = [p for p in progress if p["rows"] > 0]
    assert ran and all(p["rows"] <= CAP for p in ran)
    assert all(p["rows"] == offsets_rows(p["start"], p["end"]) for p in ran)



#: The SIGKILL-with-a-backlog test: records waiting at the restart, the query's deadline.
BACKLOG, DEADLINE_S = 100_000, 10.0


def produce_for(servers: str, topic: str, first: int, seconds: float, per_tick: int = 50) -> int:
    """Live traffic: ``per_tick`` records every 0.25 s for ``seconds``; the next record number."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        produce(servers, topic, first, per_tick)
        first += per_tick
        time.sleep(0.25)
    return first


def late_share_in_sink(spark: Any, out: Path, from_batch: int, deadline_s: float) -> tuple[int, float]:
    """Rows of batches ``from_batch`` on, and the share of them whose record waited longer than the deadline,
    as the data sees it: from the record's own Kafka timestamp to when its batch's commit was logged."""
    checkpoint = out / "checkpoint"
    batch_of: dict[int, int] = {}  # the batch's timestamp (ms, the offset log's) -> its batch id
    for entry in (checkpoint / "offsets").iterdir():
        if entry.name.isdigit() and int(entry.name) >= from_batch:
            metadata = json.loads(entry.read_text().splitlines()[1])
            batch_of[int(metadata["batchTimestampMs"])] = int(entry.name)
    committed = {b: (checkpoint / "commits" / str(b)).stat().st_mtime for b in batch_of.values()}
    frame = spark.read.parquet(str(out / "data")).selectExpr(
        "CAST(unix_millis(batch_time) AS BIGINT) AS batch_ms", "CAST(unix_millis(timestamp) AS BIGINT) AS record_ms")
    rows = late = 0
    for batch_ms, record_ms, count in frame.groupBy("batch_ms", "record_ms").count().collect():
        if batch_ms in batch_of:
            rows += count
            late += count if committed[batch_of[batch_ms]] - record_ms / 1e3 > deadline_s else 0
    return rows, late / rows


def test_a_paced_kafka_query_killed_with_100000_records_waiting_restarts_bounded_and_reports_late_rows_as_they_were(
    spark: Any, kafka_broker: BrokerInfo, tmp_path: Path
) -> None:
    """SIGKILL with 100 000 records waiting, restart on the checkpoint with live records arriving: the service model
    saved there is restored, so the first batch is one the model predicts finishes within the deadline (it did);
    every record is written once; the report's late rows are within 1 point of what the records' own timestamps
    say (before the jump was cut by its records' times too: 2.8 points off, the burst read as spread evenly over
    the trickle behind it)."""
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers, "paced-backlog")
    out, stop = tmp_path / "backlog", tmp_path / "stop"
    model = out / "checkpoint" / "pacer" / "service-model.json"
    args = ("--max-offsets", "0", "--deadline", f"{DEADLINE_S:g}s")
    job = launch(tmp_path, servers, topic, out, *args)
    written = 0
    try:
        limit = time.monotonic() + 150
        while not (model.is_file() and json.loads(model.read_text()).get("n", 0) >= 3):
            assert job.poll() is None, f"the paced job exited early:\n{logs(tmp_path)}"
            assert time.monotonic() < limit, f"no service model saved in 150 s:\n{logs(tmp_path)}"
            written = produce_for(servers, topic, written, 1.0)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    saved_model = json.loads(model.read_text())  # what the restart restores
    killed_rows = spark.read.parquet(str(out / "data")).count()  # the first run's committed batches
    produce(servers, topic, written, BACKLOG)
    written += BACKLOG

    restart = launch(tmp_path, servers, topic, out, *args, "--stop-file", str(stop))
    try:
        written = produce_for(servers, topic, written, 20.0)  # live traffic while the backlog drains, and after
        limit = time.monotonic() + 180
        while spark.read.parquet(str(out / "data")).count() < written:
            assert restart.poll() is None, f"the restarted job exited early:\n{logs(tmp_path)}"
            assert time.monotonic() < limit, f"not every record written in 180 s:\n{logs(tmp_path)}"
            time.sleep(2.0)
    finally:
        stop.touch()
    assert restart.wait(timeout=120) == 0, f"the restarted job failed:\n{logs(tmp_path)}"

    keys = [int(r["key"]) for r in spark.read.parquet(str(out / "data")).select("key").collect()]
    assert sorted(keys) == list(range(written)), f"{len(keys)} rows, {len(set(keys))} distinct of {written}"

    paced = said(tmp_path, "pacer: ")["kafka-keys"]
    assert paced["model_restored"] and paced["error"] is None and paced["failed_open"] == 0, paced
    assert paced["source_time_missing"] == 0 and paced["source_time_clamped"] == 0, paced
    report = said(tmp_path, "report: ")
    progress = [p for p in said(tmp_path, "progress: ") if p["rows"] > 0]

    # the first batch is one the saved model predicts finishes within the deadline (what it took is the machine's:
    # on 2 loaded cores a JVM's first batch can take longer, which the late-share check below judges as the data does)
    from pacer.service_time import ServiceTimeModel

    service = ServiceTimeModel()
    service.restore(saved_model)
    service.slots = float(saved_model["slots"])  # the restarted job's slots: the same local[2]
    first = progress[0]
    predicted_s = service.predict(first["rows"] * report["bytes_in"] / report["rows_in"])
    assert predicted_s <= DEADLINE_S and first["ms"] > 0, (predicted_s, progress[:3])

    # late rows as the data saw them: from each record's Kafka timestamp to its batch's commit
    rows, late = late_share_in_sink(spark, out, first["batch"], DEADLINE_S)
    assert report["rows_processed"] == rows == written - killed_rows, (report["rows_processed"], rows)
    assert abs(report["deadline_miss_ratio_rows"] - late) <= 0.01, (report["deadline_miss_ratio_rows"], late)
