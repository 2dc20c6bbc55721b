"""format("pacer") on real local Spark: the JVM side built from source, the Python decider, the caps."""

from __future__ import annotations

import json
import os
import time
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from pacer_spark.jvm import jar as jvm
from pacer_spark.jvm.decider import (
    Decision,
    DecisionRequest,
    FailedOpen,
    OffsetSnapshot,
    PacerBridge,
    admit_oldest,
    snapshot_spans,
)

SCHEMA = "file INT, row INT"
ROWS_PER_FILE = 10


def put_csv(folder: Path, index: int) -> None:
    """Moves a finished csv file of ROWS_PER_FILE rows into ``folder`` (atomically, as a producer should)."""
    staging = folder.parent / f".staging-{index}.csv"
    staging.write_text("".join(f"{index},{r}\n" for r in range(ROWS_PER_FILE)))
    os.replace(staging, folder / f"part-{index:04d}.csv")


def pacer_csv(spark: Any, folder: Path, **options: str) -> Any:
    """``readStream.format("pacer")`` over the csv files of ``folder``."""
    reader = spark.readStream.format("pacer").option("pacer.source", "csv").schema(SCHEMA)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(str(folder))


def to_parquet(df: Any, out: Path, name: str, **trigger: Any) -> Any:
    """Starts ``df`` into Spark's parquet sink with a checkpoint beside it."""
    writer = (
        df.writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .queryName(name)
    )
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


def rows_of(spark: Any, out: Path) -> list[tuple[int, int]]:
    """The sink's rows, sorted."""
    return sorted((r["file"], r["row"]) for r in spark.read.parquet(str(out / "data")).collect())


def batch_rows(query: Any) -> list[int]:
    """numInputRows of every progress that ran a batch with data."""
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def wait_for(predicate: Any, timeout: float = 120.0) -> None:
    """Polls ``predicate`` until it holds; fails the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the streaming query")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def bridge(spark: Any) -> Iterator[PacerBridge]:
    """The Python end, loaded into the suite's running session (the jar added at run time)."""
    b = PacerBridge(spark)
    yield b
    b.close()


@pytest.mark.jvm  # javac
def test_build_jar_compiles_once_then_reuses_the_cache(tmp_path: Path) -> None:
    first = jvm.build_jar(cache=tmp_path)
    second = jvm.build_jar(cache=tmp_path)

    assert first.compiled and not second.compiled
    assert first.jar == second.jar == tmp_path / jvm.JAR_NAME
    with zipfile.ZipFile(first.jar) as jar:
        services = jar.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister")
        assert services.decode().strip() == jvm.PROVIDER_CLASS
        assert "io/pacer/spark/PacerSource.class" in jar.namelist()


def test_pacer_csv_gives_the_rows_plain_csv_gives(spark: Any, bridge: PacerBridge, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(3):
        put_csv(inbox, i)
    bridge.register("pacer_csv_rows")
    query = to_parquet(pacer_csv(spark, inbox, maxFilesPerTrigger="2"), tmp_path / "pacer", "pacer_csv_rows")
    try:
        query.processAllAvailable()
        for i in range(3, 7):  # files arriving while the query runs
            put_csv(inbox, i)
        query.processAllAvailable()
    finally:
        query.stop()
    plain = to_parquet(
        spark.readStream.format("csv").schema(SCHEMA).load(str(inbox)),
        tmp_path / "plain",
        "plain_csv_rows",
        availableNow=True,
    )
    plain.awaitTermination()

    assert rows_of(spark, tmp_path / "pacer") == rows_of(spark, tmp_path / "plain")
    assert len(rows_of(spark, tmp_path / "pacer")) == 7 * ROWS_PER_FILE
    assert max(batch_rows(query)) <= 2 * ROWS_PER_FILE  # maxFilesPerTrigger stays a cap


def test_the_decision_function_chooses_where_the_batch_ends(spark: Any, bridge: PacerBridge, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    seen: list[list[int]] = []

    def hold_for_three(query_name: str, snapshots: Sequence[OffsetSnapshot]) -> int | None:
        seen.append([s.seq for s in snapshots])
        return 2 if len(snapshots) >= 3 else None

    bridge.register("pacer_hold", hold_for_three)
    query = to_parquet(pacer_csv(spark, inbox), tmp_path / "out", "pacer_hold")
    try:
        for i in range(3):  # one file per observation: three snapshots, held until the third
            put_csv(inbox, i)
            wait_for(lambda i=i: any(len(s) == i + 1 for s in seen))
        wait_for(lambda: sum(batch_rows(query)) == 3 * ROWS_PER_FILE)
    finally:
        query.stop()

    assert batch_rows(query) == [3 * ROWS_PER_FILE]  # plain Spark would have run three batches
    request = bridge.last_request("pacer_hold")
    assert request is not None and [s.files for s in request.snapshots] == [1, 1, 1]
    assert all(s.bytes and s.bytes > 0 for s in request.snapshots)
    ran = next(p for p in query.recentProgress if p["numInputRows"] > 0)["sources"][0]
    assert json.loads(ran["endOffset"]) == json.loads(ran["latestOffset"]) == {"logOffset": 2}
    assert "pacer_hold" in ran["description"] and "FileStreamSource" in ran["description"]


def test_available_now_drains_the_backlog_in_pacer_sized_batches(
    spark: Any, bridge: PacerBridge, tmp_path: Path
) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(5):
        put_csv(inbox, i)
    bridge.register("pacer_drain", admit_oldest)
    query = to_parquet(
        pacer_csv(spark, inbox, maxFilesPerTrigger="2"), tmp_path / "out", "pacer_drain", availableNow=True
    )
    query.awaitTermination()

    assert batch_rows(query) == [20, 20, 10]
    first = query.recentProgress[0]["sources"][0]
    assert json.loads(first["endOffset"]) == {"logOffset": 0}
    assert json.loads(first["latestOffset"]) == {"logOffset": 2}  # the backlog, as limit-sized snapshots
    assert first["metrics"]["pacerPendingSnapshots"] == "2"
    assert len(rows_of(spark, tmp_path / "out")) == 5 * ROWS_PER_FILE


def test_without_a_decider_it_admits_everything_and_warns_once(spark: Any, bridge: PacerBridge, tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(5):
        put_csv(inbox, i)
    bridge.register("pacer_orphan", admit_oldest)
    assert bridge.unregister("pacer_orphan")  # the Python side is gone
    query = to_parquet(
        pacer_csv(spark, inbox, maxFilesPerTrigger="2"), tmp_path / "out", "pacer_orphan", availableNow=True
    )
    query.awaitTermination()

    assert len(rows_of(spark, tmp_path / "out")) == 5 * ROWS_PER_FILE
    assert batch_rows(query) == [20, 20, 10]  # everything admitted, the read limit still a cap
    assert bridge.fallback_warnings("pacer_orphan") == 1
    assert query.lastProgress["sources"][0]["metrics"]["pacerFallback"] == "true"


def test_a_source_name_spark_does_not_know_is_named_in_the_error(
    spark: Any, bridge: PacerBridge, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match='pacer.source "no-such-format" is not a data source'):
        spark.readStream.format("pacer").option("pacer.source", "no-such-format").load(str(tmp_path))
    with pytest.raises(Exception, match='needs .option\\("pacer.source"'):
        spark.readStream.format("pacer").load(str(tmp_path))


def test_the_request_json_parses_into_snapshots() -> None:
    request = DecisionRequest.from_json(
        json.dumps(
            {
                "version": 5,
                "query": "q",
                "query_id": None,
                "run": "r1",
                "batch_id": 3,
                "options": {"pacer.deadline": "5s"},
                "source": "kafka",
                "start": None,
                "limit": "MaxRows: 100",
                "available_now": False,
                "now": 12.5,
                "snapshots": [
                    {
                        "seq": 4,
                        "offset": '{"t":{"0":7}}',
                        "arrival": 12.0,
                        "rows": 7,
                        "files": None,
                        "bytes": 56,
                        "bytes_estimated": True,
                        "source_time": 11.5,
                        "source_newest": 12.25,
                    }
                ],
                "spark_run_id": "sr1",
                "progress": [{"id": "q1", "runId": "sr1", "batchId": 2, "numInputRows": 5}],
                "failed_open": [{"batch_id": 1, "reason": "timed out", "snapshots": [
                    {"seq": 3, "offset": '{"t":{"0":0}}', "arrival": 11.0, "rows": 0, "files": None, "bytes": 0,
                     "bytes_estimated": True}]}],
                "failed_open_dropped": 2,
            }
        )
    )
    assert request.snapshots == (OffsetSnapshot(4, '{"t":{"0":7}}', 12.0, 7, None, 56, True, 11.5, 12.25),)
    assert request.snapshots[0].data_arrival == 11.5  # its own time: earlier than the look that saw it
    assert request.failed_open[0].snapshots[0].data_arrival == 11.0  # no time of its own: the look
    assert (request.run, request.batch_id, request.options) == ("r1", 3, {"pacer.deadline": "5s"})
    assert request.spark_run_id == "sr1" and request.progress[0]["batchId"] == 2
    assert request.failed_open == (FailedOpen(1, "timed out", (OffsetSnapshot(3, '{"t":{"0":0}}', 11.0, 0, None, 0,
                                                                                   True),)),)
    assert request.failed_open_dropped == 2
    with pytest.raises(ValueError, match="rebuild the jar"):
        DecisionRequest.from_json('{"version": 1}')


def _snapshot(seq: int, look: float, source: tuple[float, float] | None = None) -> OffsetSnapshot:
    oldest, newest = source if source is not None else (None, None)
    return OffsetSnapshot(seq, f'{{"t":{{"0":{seq}}}}}', look, 10, None, 80, True, oldest, newest)


def test_a_snapshot_with_both_ends_dated_is_spread_over_its_own_span_not_from_the_earlier_look() -> None:
    """Records produced between two looks (the previous look at 100.0, the records at 103.0-104.5) are dated by
    their own times: not from the look before them (which reported 1-2 points more misses than the records on a
    live topic), and never after the moment the decider asks."""
    produced_between_looks = _snapshot(1, 100.0, (103.0, 104.5))
    assert snapshot_spans((produced_between_looks,), 1, now=105.0) == [(103.0, 104.5)]
    clock_ahead = _snapshot(2, 100.0, (104.0, 107.0))  # a producer clock ahead of the driver's
    assert snapshot_spans((clock_ahead,), 1, now=105.0) == [(104.0, 105.0)]


def test_snapshots_without_a_newest_time_are_spread_to_the_next_one_and_past_the_read_limit_not_at_all() -> None:
    """Without the newest data's time: up to the next snapshot's oldest; the last one over the span before it;
    one alone over as long as the looks were apart; no time of its own at all: from the look. Only the
    admissible ones are dated."""
    backlog = (_snapshot(1, 90.0, (80.0, None)), _snapshot(2, 90.0, (84.0, None)), _snapshot(3, 90.0))
    assert backlog[2].data_arrival == 90.0
    assert snapshot_spans(backlog, 3, now=100.0) == [(80.0, 84.0), (84.0, 90.0), (90.0, 96.0)]
    assert snapshot_spans(backlog, 1, now=100.0) == [(80.0, 84.0)]
    assert snapshot_spans((_snapshot(4, 97.0, (95.0, None)),), 1, now=100.0) == [(95.0, 98.0)]


def test_the_decider_answers_a_seq_and_refuses_an_index_out_of_range() -> None:
    from pacer_spark.jvm.decider import _JvmDecider

    request = json.dumps(
        {
            "version": 5,
            "query": "q",
            "query_id": "id",
            "run": "r",
            "batch_id": 0,
            "options": {},
            "source": "csv",
            "start": None,
            "limit": "All Available",
            "available_now": False,
            "now": 1.0,
            "snapshots": [
                {
                    "seq": s,
                    "offset": f'{{"logOffset":{s}}}',
                    "arrival": 1.0,
                    "rows": None,
                    "files": 1,
                    "bytes": 9,
                    "bytes_estimated": False,
                }
                for s in (7, 8)
            ],
        }
    )
    assert json.loads(_JvmDecider(lambda r: Decision(1, "p2")).decide("q", request)) == {"seq": 8, "pool": "p2"}
    assert json.loads(_JvmDecider(lambda r: Decision(None)).decide("q", request)) == {"seq": -1, "pool": None}
    with pytest.raises(ValueError, match="index into the 2 pending snapshots"):
        _JvmDecider(lambda r: Decision(2)).decide("q", request)


def test_the_jvm_plan_reader_reads_what_the_py4j_walk_reads(spark: Any, bridge: PacerBridge) -> None:
    from pacer_spark.jvm.plan_reader import read_plan
    from pacer_spark.jvm.plan_reader import walk_plan as _walk_plan
    from pacer_spark.plan.dag import dag_from_plan

    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # a whole plan, as a streaming batch has
    try:
        df = spark.range(0, 5000, numPartitions=2).selectExpr("id % 7 AS k", "id").groupBy("k").count()
        assert len(df.collect()) == 7
        executed = df._jdf.queryExecution().executedPlan()
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    one_call, walked = read_plan(executed), _walk_plan(executed, True)
    assert one_call == walked  # names, metric values and types, children: the same tree
    assert any(node.metrics for node in one_call.walk_post())
    assert read_plan(executed, metrics=False) == _walk_plan(executed, False)
    assert {op.kind for op in dag_from_plan(one_call).operators} >= {"aggregate", "shuffle"}
