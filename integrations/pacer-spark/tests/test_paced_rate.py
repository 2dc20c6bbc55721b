"""format("pacer") over a DataSource V2 micro-batch source: Spark's ``rate``, through the JVM side's V2 path.

``rate`` has no V1 streaming source: ``format("pacer")`` hands Spark a V2 table whose scan wraps rate's
``MicroBatchStream`` (``PacerTable``, ``PacerMicroBatchStream``); a V1 delegate (csv) still goes the V1 way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pacer_spark.driver.protocol.progress_metrics import METRICS
from pacer_spark.jvm.decider import OffsetSnapshot, PacerBridge

pytestmark = pytest.mark.spark

ROWS_PER_SECOND = 20


def pacer_rate(spark: Any) -> Any:
    """``readStream.format("pacer")`` over Spark's rate source."""
    return (spark.readStream.format("pacer").option("pacer.source", "rate")
            .option("rowsPerSecond", ROWS_PER_SECOND).option("numPartitions", 1).load())


def batch_rows(query: Any) -> list[int]:
    """numInputRows of every progress that ran a batch with data."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def wait_for(predicate: Any, timeout: float = 25.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the streaming query")
        time.sleep(0.2)


def test_a_paced_rate_query_runs_batches_the_controller_decides(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="asap")
    query = None
    try:
        query = (pacer_rate(spark).writeStream.format("memory").queryName("pacer_rate")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="0 seconds").start())
        wait_for(lambda: len(batch_rows(query)) >= 3)
        query.stop()
        paced = handle.report()["spark"]["paced"]["pacer_rate"]
    finally:
        if query is not None:
            query.stop()
        handle.stop()

    assert query.exception() is None
    assert paced["decisions"] > 0 and paced["error"] is None  # the Controller decided, not the JVM's fallback
    values = sorted(r.value for r in spark.table("pacer_rate").collect())
    assert values == list(range(len(values))) and len(values) == sum(batch_rows(query))  # none lost, none twice
    source = next(p for p in query.recentProgress if p["numInputRows"] > 0)["sources"][0]
    assert source["description"].startswith("PacerMicroBatchStream[query=pacer_rate, source=rate")
    assert source["metrics"]["pacerFallback"] == "false"


def test_each_batch_reads_the_rows_of_the_snapshots_it_admitted(spark: Any, tmp_path: Path) -> None:
    admitted: list[int | None] = []

    def one_second_at_a_time(query_name: str, snapshots: Sequence[OffsetSnapshot]) -> int | None:
        admitted.append(snapshots[0].rows)
        return 0

    bridge = PacerBridge(spark)
    bridge.register("pacer_rate_rows", one_second_at_a_time)
    query = (pacer_rate(spark).writeStream.format("noop").queryName("pacer_rate_rows")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        wait_for(lambda: len(batch_rows(query)) >= 3)
    finally:
        query.stop()
        bridge.close()

    ran = batch_rows(query)
    assert ran == admitted[: len(ran)]  # rows per snapshot: rate's own valueAtSecond between the offsets
    assert all(rows % ROWS_PER_SECOND == 0 for rows in ran)  # whole seconds of rate
    assert bridge.decisions("pacer_rate_rows") >= 3 and bridge.fallback_warnings("pacer_rate_rows") == 0


def test_a_v1_delegate_still_goes_through_the_v1_source(spark: Any, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(2):
        (inbox / f"part-{i}.csv").write_text("".join(f"{i},{r}\n" for r in range(5)))
    bridge = PacerBridge(spark)
    bridge.register("pacer_csv_v1")
    query = (spark.readStream.format("pacer").option("pacer.source", "csv").schema("file INT, row INT")
             .load(str(inbox)).writeStream.format("memory").queryName("pacer_csv_v1")
             .option("checkpointLocation", str(tmp_path / "ck")).start())
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        bridge.close()

    assert spark.table("pacer_csv_v1").count() == 10
    ran = next(p for p in query.recentProgress if p["numInputRows"] > 0)["sources"][0]
    assert ran["description"].startswith("PacerSource[query=pacer_csv_v1, source=csv")


def test_a_user_schema_on_rate_is_refused_as_spark_refuses_it(spark: Any) -> None:
    with pytest.raises(Exception, match="(?i)schema"):
        (spark.readStream.format("pacer").option("pacer.source", "rate").schema("value LONG").load())


def test_a_source_with_neither_v1_nor_v2_streaming_is_named_in_the_error(spark: Any) -> None:
    with pytest.raises(Exception, match='pacer.source "jdbc"'):
        spark.readStream.format("pacer").option("pacer.source", "jdbc").load()


def _admitted_rows(spark: Any, name: str, options: dict[str, Any], tmp_path: Path,
                   until: Any) -> tuple[list[Any], list[int | None]]:
    """Run ``format("pacer")`` with ``options`` into a memory sink named ``name``, a decider admitting one
    snapshot at a time; return the rows and each admitted snapshot's measured rows."""
    admitted: list[int | None] = []

    def oldest(query_name: str, snapshots: Sequence[OffsetSnapshot]) -> int | None:
        admitted.append(snapshots[0].rows)
        return 0

    bridge = PacerBridge(spark)  # loads the JVM side
    bridge.register(name, oldest)
    reader = spark.readStream.format("pacer").options(**{k: str(v) for k, v in options.items()}).load()
    query = (reader.writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name)).start())
    try:
        wait_for(lambda: until(query))
    finally:
        query.stop()
        bridge.close()
    assert query.exception() is None and bridge.fallback_warnings(name) == 0
    ran = batch_rows(query)
    assert ran == [rows for rows in admitted if rows][: len(ran)]  # each batch read what its snapshot measured
    return spark.table(name).collect(), admitted


def test_rate_micro_batch_through_the_v2_path(spark: Any, tmp_path: Path) -> None:
    options = {"pacer.source": "rate-micro-batch", "rowsPerBatch": 7, "numPartitions": 1}
    rows, admitted = _admitted_rows(spark, "pacer_rmb", options, tmp_path, lambda q: len(batch_rows(q)) >= 3)
    values = sorted(r.value for r in rows)
    assert values == list(range(len(values))) and len(values) >= 21  # none lost, none twice
    assert all(a == 7 for a in admitted if a)


def test_socket_through_the_v2_path(spark: Any, tmp_path: Path) -> None:
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    lines = [f"line-{i}" for i in range(30)]

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            for start in range(0, len(lines), 10):
                conn.sendall("".join(f"{line}\n" for line in lines[start:start + 10]).encode())
                time.sleep(1.0)
            time.sleep(30)  # keep the connection open while the query reads

    threading.Thread(target=serve, daemon=True).start()
    options = {"pacer.source": "socket", "host": "127.0.0.1", "port": port}
    try:
        rows, admitted = _admitted_rows(spark, "pacer_socket", options, tmp_path,
                                        lambda q: sum(batch_rows(q)) >= len(lines))
    finally:
        server.close()
    assert sorted(r.value for r in rows) == sorted(lines)  # every line once
    assert sum(a for a in admitted if a) >= len(lines)


def test_a_paced_query_gets_its_dag_and_operator_metrics_from_the_executed_plan(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="asap")
    query = None
    try:
        counts = pacer_rate(spark).selectExpr("value % 3 AS k").groupBy("k").count()
        query = (counts.writeStream.format("memory").queryName("pacer_counts").outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="0 seconds").start())
        wait_for(lambda: len(batch_rows(query)) >= 3, timeout=60)
        query.stop()
        handle.stop()  # settles the last progress events
        dag = handle.controller.query("pacer_counts").spec.dag
        reports = handle.controller.reports("pacer_counts")
    finally:
        if query is not None:
            query.stop()
        handle.stop()
    # the minimal scan -> project -> sink chain it was registered with became the plan's operators
    assert {op.kind for op in dag.operators} >= {"scan", "aggregate", "shuffle", "state", "sink"}
    timed = [m for r in reports for m in r.operator_metrics if m.time_s > 0]
    assert timed and {m.operator_id for m in timed} <= {op.id for op in dag.operators}
    assert any(m.rows_in > 0 for r in reports for m in r.operator_metrics if m.operator_id.startswith("aggregate"))
    # a format("pacer") batch's core-seconds: its tasks', found by the streaming query's id on Spark's jobs
    busy = [r.busy_core_s for r in reports if r.engine_s is not None]
    assert busy and all(b is not None for b in busy) and sum(b or 0.0 for b in busy) > 0


def test_every_batchs_progress_carries_pacers_figures_of_it(spark: Any, tmp_path: Path) -> None:
    """pacer's figures in the query's own progress (``lastProgress["sources"][0]["metrics"]``), as a Spark user's
    monitoring reads them."""
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="asap", deadline="1 minute")
    query = None
    try:
        query = (pacer_rate(spark).writeStream.format("noop").queryName("pacer_progress_metrics")
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="0 seconds").start())
        wait_for(lambda: len(batch_rows(query)) >= 4)
        query.stop()
    finally:
        if query is not None:
            query.stop()
        handle.stop()
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 4
    for i, progress in enumerate(batches):
        metrics = progress["sources"][0]["metrics"]
        previous = {k for k in METRICS if k.startswith("pacerPreviousBatch")}
        assert set(METRICS) - previous <= set(metrics), sorted(metrics)
        if i:  # every batch after the first carries its predecessor's outcome
            assert previous <= set(metrics), sorted(metrics)
            assert int(metrics["pacerPreviousBatchRowsLate"]) == 0  # no row of a 1-row/s rate waits a minute
            assert float(metrics["pacerPreviousBatchTriggerMs"]) > 0
        assert metrics["pacerDeadlineMs"] == "60000" and metrics["pacerAdmission"] == "asap"
        assert metrics["pacerReason"] in ("deadline", "catch-up", "read cap")
        assert int(metrics["pacerBatchRows"]) == progress["numInputRows"]  # pacer's batch is the batch Spark read
        assert int(metrics["pacerBatchDatasets"]) >= 1 and int(metrics["pacerRowsHeld"]) >= 0
        assert int(metrics["pacerOldestHeldAgeMs"]) >= 0 and int(metrics["pacerPredictedBatchMs"]) >= 0
