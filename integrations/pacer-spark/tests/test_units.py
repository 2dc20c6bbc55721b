"""Pure-Python parts of pacer-spark: no SparkSession."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType, TimestampType

from pacer import Placement
from pacer_spark.compat import SparkVersionError, check_spark_version, parse_version
from pacer_spark.driver.pools import allocation_xml, pool_for_share
from pacer_spark.gen_plan import GenPlan
from pacer_spark.manifest import Manifest
from pacer_spark.plan.dag import PlanNode, dag_from_plan, kind_of, operator_metrics, rapids_confs
from pacer_spark.runtime import parse_seconds
from pacer_spark.sources.files_source import MalformedRowError, RowParser
from pacer_spark.sources.gen import AdmissionAgent, split
from pacer_spark.sources.rpc import ControllerClient, ControllerServer, ControllerUnavailable
from pacer_workloads import WORKLOADS


def test_spark_version_check() -> None:
    assert parse_version("4.3.0") == (4, 3)
    assert check_spark_version("4.2.0") == "4.2.0"
    with pytest.raises(SparkVersionError, match=r"Spark >= 4.2.*found PySpark 4.1.1.*pip install"):
        check_spark_version("4.1.1")
    with pytest.raises(ValueError):
        parse_version("four")


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("500ms", 0.5), ("2min", 120.0), ("3", 3.0),
                                               ("1.5 seconds", 1.5), (4, 4.0)])
def test_parse_seconds(text: str, seconds: float) -> None:
    assert parse_seconds(text) == pytest.approx(seconds)


def test_parse_seconds_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="10s, 500ms"):
        parse_seconds("soon")


def test_pool_ladder() -> None:
    assert pool_for_share(2.0, 2) == "pacer-w16"
    assert pool_for_share(1.0, 2) == "pacer-w8"
    assert pool_for_share(0.05, 2) == "pacer-w1"
    xml = allocation_xml((1, 4))
    assert '<pool name="pacer-w4">' in xml and "<weight>4</weight>" in xml


def test_split_is_contiguous_and_complete() -> None:
    assert split(list(range(5)), 2) == [[0, 1, 2], [3, 4]]
    assert split([1], 4) == [[1]]
    assert split([], 2) == []


def test_gen_plan_availability_follows_the_wall_clock() -> None:
    plan = GenPlan.from_options({"stream": "linear_road", "rate": "100", "duration": "5", "start": "1000"})
    assert len(plan.arrivals()) == 5
    assert plan.available_end(1000.5) == 0
    assert plan.available_end(1001.0) == 1
    assert plan.available_end(2000.0) == 5
    with pytest.raises(ValueError, match="unknown stream"):
        GenPlan.from_options({"stream": "nope"})


def test_rpc_round_trip_and_unreachable() -> None:
    server = ControllerServer(lambda req: {"echo": req["x"]})
    client = ControllerClient(server.address, server.authkey)
    assert client.call({"x": 3}) == {"echo": 3}
    server.close()
    client.close()
    dead = ControllerClient(server.address, server.authkey, timeout=0.5)
    host, port = server.address
    # the error names the Controller, the cause and what to do; the next call, not tried, repeats the cause
    with pytest.raises(ControllerUnavailable, match=rf"^pacer Controller at {host}:{port} did not answer "
                                                    r"\(ConnectionRefusedError: .*\)\. The driver's pacer session "
                                                    r"stopped .* raise the source's pacer\.timeout$"):
        dead.call({"x": 1})
    with pytest.raises(ControllerUnavailable, match=r"did not answer its last call \(ConnectionRefusedError: .*\); "
                                                    r"not asked again for 5 s after it\. The driver's"):
        dead.call({"x": 1})


def test_rpc_close_leaves_each_socket_to_its_own_thread() -> None:
    """close() with readers still connected: every connection thread ends, having closed its own socket."""
    import threading

    before = set(threading.enumerate())
    server = ControllerServer(lambda req: {"ok": True})
    clients = [ControllerClient(server.address, server.authkey) for _ in range(4)]
    for client in clients:
        assert client.call({}) == {"ok": True}
    server.close()
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("pacer-rpc")]
    for client in clients:  # the server side hung up: the next call fails cleanly, it does not hang
        client.timeout = 1.0
        with pytest.raises(ControllerUnavailable):
            client.call({})
    server.close()  # a second close is a no-op


def test_agent_admits_everything_when_the_driver_is_gone(caplog: pytest.LogCaptureFixture) -> None:
    server = ControllerServer(lambda req: {"end": req["start"]})
    host, port = server.address
    server.close()
    agent = AdmissionAgent({"pacer.query": "q", "pacer.address": f"{host}:{port}",
                            "pacer.authkey": server.authkey_hex}, "pacer-gen")
    assert agent.end_offset(3, 9) == 9
    assert agent.end_offset(9, 12) == 12
    assert sum("admitting every available dataset" in r.message for r in caplog.records) == 1  # warned once


def test_agent_raises_on_a_strategy_error() -> None:
    server = ControllerServer(lambda req: {"error": "admission strategy 'x' failed"})
    agent = AdmissionAgent({"pacer.query": "q", "pacer.address": "{}:{}".format(*server.address),
                            "pacer.authkey": server.authkey_hex}, "pacer-gen")
    with pytest.raises(RuntimeError, match="strategy 'x' failed"):
        agent.end_offset(0, 5)
    server.close()


def test_manifest_keeps_offsets_and_arrivals_across_restarts(tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    (data / "b.csv").write_text("1\n2\n")
    (data / "_ignored").write_text("x\n")
    manifest = Manifest(tmp_path / "m.jsonl")
    first = manifest.refresh(data, "csv", False, time.time())
    assert [(e.index, e.name, e.rows) for e in first] == [(0, "b.csv", 2)]
    (data / "a.csv").write_text("3\n")
    assert [e.name for e in manifest.refresh(data, "csv", False, time.time())] == ["a.csv"]
    again = Manifest(tmp_path / "m.jsonl")
    assert [(e.index, e.name, e.arrival) for e in again.entries] == [(e.index, e.name, e.arrival) for e in manifest.entries]
    assert again.refresh(data, "csv", False, time.time()) == []


def test_row_parser_quarantines_or_fails(tmp_path: Path) -> None:
    schema = StructType([StructField("id", IntegerType()), StructField("v", DoubleType())])
    quarantine = tmp_path / "q"
    parser = RowParser(schema, "quarantine", str(quarantine))
    records = [(1, "1,2.5", ["1", "2.5"]), (2, "x,1", ["x", "1"]), (3, "4", ["4"])]
    assert list(parser.parse(tmp_path / "f.csv", iter(records))) == [(1, 2.5)]
    bad = [json.loads(line) for line in (quarantine / "f.csv.bad").read_text().splitlines()]
    assert [b["line"] for b in bad] == [2, 3]
    strict = RowParser(schema, "fail", None)
    with pytest.raises(MalformedRowError, match=r"f.csv line 2.*malformed=quarantine"):
        list(strict.parse(tmp_path / "f.csv", iter(records)))


def _plan() -> PlanNode:
    scan = PlanNode("MicroBatchScan", {"numOutputRows": (100.0, "sum")})
    stage = PlanNode("WholeStageCodegen", {"pipelineTime": (40.0, "timing")}, [
        PlanNode("HashAggregate", {"aggTime": (10.0, "timing"), "numOutputRows": (5.0, "sum")}, [
            PlanNode("Filter", {"numOutputRows": (50.0, "sum")}, [PlanNode("InputAdapter", {}, [scan])])])])
    return PlanNode("Exchange", {"shuffleWriteTime": (2e6, "nsTiming"), "dataSize": (800.0, "size")}, [stage])


def test_plan_to_dag_and_metrics() -> None:
    assert kind_of("GpuHashAggregate") == "aggregate" and kind_of("WholeStageCodegen") is None
    dag = dag_from_plan(_plan())
    assert [op.kind for op in dag.operators] == ["scan", "filter", "aggregate", "shuffle", "sink"]
    placement = Placement({op.id: "cpu" for op in dag.operators}, enacted=False)
    metrics = {m.operator_id: m for m in operator_metrics(_plan(), dag, placement, batch_bytes=1000, batch_rows=100)}
    assert metrics["aggregate#2"].time_s == pytest.approx(0.010)
    assert metrics["filter#1"].time_s == pytest.approx(0.040)  # its codegen stage's time
    assert metrics["filter#1"].rows_in == 100 and metrics["filter#1"].bytes_in == 1000
    assert metrics["shuffle#3"].time_s == pytest.approx(0.002)
    assert all(m.device == "cpu" for m in metrics.values())


def test_rapids_confs_coarsen_to_operator_types() -> None:
    dag = WORKLOADS["lr2"].dag
    aggs = [op.id for op in dag.operators if op.name == "HashAggregate"]
    devices = {op.id: ("gpu" if op.id == aggs[0] or op.name == "Filter" else "cpu") for op in dag.operators}
    confs, note = rapids_confs(Placement(devices), dag)
    assert confs["spark.rapids.sql.exec.FilterExec"] == "true"
    assert confs["spark.rapids.sql.exec.HashAggregateExec"] == "false"
    assert confs["spark.rapids.sql.enabled"] == "true"
    assert "HashAggregateExec" in note


def test_root_cause_picks_the_users_error_out_of_sparks_text() -> None:
    from pacer_spark.errors import root_cause

    spark_text = "\n".join([
        "py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: Traceback (most recent "
        "call last):",
        '  File "/venv/pyspark/sql/utils.py", line 163, in call',
        "    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)",
        "pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python worker:",
        "Traceback (most recent call last):",
        '  File "/src/pacer_spark/sources/gen.py", line 367, in parse',
        "pacer_spark.sources.gen.MalformedRowError: pacer-files: malformed row in /in/p.csv line 201: column 'speed'",
        "\tat org.apache.spark.sql.execution.streaming.MicroBatchExecution.runBatch(MicroBatchExecution.scala:1)",
    ])
    assert root_cause(spark_text) == ("pacer_spark.sources.gen.MalformedRowError: pacer-files: malformed row in "
                                      "/in/p.csv line 201: column 'speed'")
    java_only = "org.apache.spark.SparkException: Job aborted.\n\tat x.y(Z.java:1)\nCaused by: java.io.IOException: " \
                "disk full\n\tat a.b(C.java:2)"
    assert root_cause(java_only) == "java.io.IOException: disk full"
    user = "Traceback (most recent call last):\n  File \"app.py\", line 3, in sink\n    raise Crash('x')\n" \
           "app.Crash: sink crashed on batch 2\n\tat org.apache.spark.Foo.bar(Foo.scala:1)"
    assert root_cause(user) == "app.Crash: sink crashed on batch 2"
    assert root_cause("just one line") == "just one line"
    assert root_cause("") == ""


def test_an_interrupted_sink_becomes_a_short_stop_spark_recognises() -> None:
    from pacer_spark.errors import stop_error

    class FakePy4JError(Exception):  # what Py4JJavaError's str looks like when the stream thread is stopped
        pass

    interrupted = FakePy4JError("An error occurred while calling o1480.save.\n: java.lang.InterruptedException\n"
                                + "\tat java.base/x.y(Z.java:1)\n" * 500)
    short = stop_error(interrupted)
    assert short is not None
    # Spark's StreamExecution.PROXY_ERROR pattern must still match, over a few characters only
    assert re.search(r"py4j\.protocol\.Py4JJavaError: An error occurred while calling(.|\n)*java\.lang\."
                     r"InterruptedException", str(short))
    assert len(str(short)) < 200
    assert stop_error(ValueError("column 'speed': cannot parse 'fast'")) is None


def test_pacer_files_reads_timestamps_in_the_session_time_zone() -> None:
    from datetime import UTC, datetime

    schema = StructType([StructField("ts", TimestampType()), StructField("v", IntegerType())])
    new_york = RowParser(schema, "fail", None, "America/New_York")
    (ts, v), = list(new_york.parse(Path("f.csv"), iter([(1, "2026-01-01 00:00:00,1", ["2026-01-01 00:00:00", "1"])])))
    # Spark's csv source with spark.sql.session.timeZone=America/New_York reads this as 05:00 UTC
    assert ts.astimezone(UTC) == datetime(2026, 1, 1, 5, 0, tzinfo=UTC) and v == 1
    assert RowParser(schema, "fail", None).row(["2026-01-01T00:00:00+02:00", "1"])[0].astimezone(UTC).hour == 22
    with pytest.raises(ValueError, match="unknown timeZone 'Mars/Olympus'"):
        RowParser(schema, "fail", None, "Mars/Olympus")


@pytest.mark.parametrize(
    ("reader", "options", "named"),
    [
        ("files", {"path": ".", "sep": ";", "maxFilesPerTrigger": "2"}, ["'maxFilesPerTrigger'", "'sep'",
                                                                        "format('pacer')"]),
        ("files", {"path": ".", "latestFirst": "true", "cleanSource": "delete"}, ["'cleanSource'", "'latestFirst'"]),
        ("gen", {"rowsPerSecond": "100"}, ["'rowsPerSecond'", "option rate"]),
    ],
)
def test_pacer_sources_refuse_options_they_would_ignore(reader: str, options: dict[str, str],
                                                         named: list[str]) -> None:
    from pacer_spark.sources.files_source import FilesStreamReader
    from pacer_spark.sources.gen import GenStreamReader

    schema = StructType([StructField("v", IntegerType())])
    with pytest.raises(ValueError, match="does not honour") as refused:
        FilesStreamReader(options, schema) if reader == "files" else GenStreamReader(options)
    assert all(name in str(refused.value) for name in named), str(refused.value)
    GenStreamReader({"rate": "5", "traffic": "wave", "Duration": "10", "pacer.query": "q"})  # known options pass


def test_pacer_files_never_writes_its_manifest_into_the_watched_folder(tmp_path: Path) -> None:
    from pacer_spark.sources.files_source import FilesStreamReader

    schema = StructType([StructField("v", IntegerType())])
    with pytest.raises(ValueError, match="needs option manifest=<a file beside your checkpoint>"):
        FilesStreamReader({"path": str(tmp_path)}, schema)
    (tmp_path / "a.csv").write_text("1\n")
    reader = FilesStreamReader({"path": str(tmp_path), "manifest": str(tmp_path.parent / "ck-manifest.jsonl")},
                               schema)
    reader.latestOffset({"index": 0}, None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv"]  # nothing of pacer's in the input folder


def test_kafka_latency_from_timestamp_quantiles() -> None:
    from pacer_spark.run.kafka_run import KafkaBatch, batch_of, latency_summary

    # 2100 records whose Kafka timestamps spread evenly over 80-100 s; the batch ends at 100 s
    batch = KafkaBatch(0, 2100, tuple(80_000.0 + 1000 * i for i in range(21)), ended_at=100.0, engine_s=1.5)
    summary = latency_summary([batch], deadline_s=5.0)
    assert summary["records"] == 2100 and summary["engine_s"] == 1.5
    assert summary["miss_share"] == pytest.approx(0.75)  # timestamps before 95 s: three quarters
    assert summary["latency_ms"]["max"] == pytest.approx(20_000)
    assert summary["latency_ms"]["p50"] == pytest.approx(10_000, abs=1000)
    assert latency_summary([batch], deadline_s=30.0)["miss_share"] == 0.0
    progress = {"batchId": 4, "timestamp": "2026-01-01T00:00:00.000Z", "durationMs": {"triggerExecution": 2500},
                "observedMetrics": {"pacer_kafka_timestamps": {"records": 3, "quantiles": [1.0, 2.0, 3.0]}}}
    parsed = batch_of(progress)
    assert parsed is not None and parsed.records == 3 and parsed.engine_s == 2.5
    assert parsed.ended_at == pytest.approx(datetime(2026, 1, 1, tzinfo=UTC).timestamp() + 2.5)
    assert batch_of({**progress, "observedMetrics": {}}) is None  # a trigger that read nothing


def test_kafka_recovery_from_a_backlog_by_the_records_timestamps() -> None:
    from pacer_spark.run.kafka_run import KafkaBatch, recovery_summary

    def spread(first_s: float, last_s: float) -> tuple[float, ...]:
        return tuple(1000 * (first_s + (last_s - first_s) * i / 20) for i in range(21))

    backlog = KafkaBatch(0, 6000, spread(0.0, 60.0), ended_at=70.0, engine_s=8.0)  # started at 62 s
    behind = KafkaBatch(1, 1000, spread(60.0, 70.0), ended_at=73.0, engine_s=3.0)  # oldest 13 s old: missed
    steady = KafkaBatch(2, 500, spread(70.0, 75.0), ended_at=78.0, engine_s=1.0)   # oldest 8 s old: caught up
    later = KafkaBatch(3, 400, spread(75.0, 79.0), ended_at=84.5, engine_s=1.0)    # 9.5 to 5.5 s old
    summary = recovery_summary([later, backlog, behind, steady], deadline_s=10.0)
    assert summary["catch_up_s"] == pytest.approx(78.0 - 62.0)
    # produced after 78 s: the last quarter of `later` (78-79 s), 100 records, none over 10 s
    assert summary["records_after"] == 100 and summary["miss_share_after"] == 0.0
    on_time = recovery_summary([steady, later], deadline_s=10.0)
    assert on_time["catch_up_s"] == 0.0 and on_time["records_after"] == 900 and on_time["miss_share_after"] == 0.0
    assert recovery_summary([], 10.0)["catch_up_s"] is None


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_pacer_files_arrow_fast_path_reads_what_the_row_parser_reads(tmp_path: Path, fmt: str) -> None:
    from pacer_spark.sources.file_rows import arrow_table

    schema = StructType([StructField("ts", TimestampType()), StructField("v", IntegerType()),
                         StructField("name", StringType())])
    rows = [("2026-01-01 00:00:00.250000", 1, "a"), ("2026-01-01 00:00:01", 2, "")]
    path = tmp_path / f"f.{fmt}"
    if fmt == "csv":
        path.write_text("".join(f"{ts},{v},{n}\n" for ts, v, n in rows))
        records = [(i + 1, "", [ts, str(v), n]) for i, (ts, v, n) in enumerate(rows)]
    else:
        path.write_text("".join(json.dumps({"ts": ts.replace(" ", "T"), "v": v, "name": n or None}) + "\n"
                                for ts, v, n in rows))
        records = [(i + 1, "", [ts.replace(" ", "T"), v, n or None]) for i, (ts, v, n) in enumerate(rows)]
    table = arrow_table(path, fmt, schema, header=False, time_zone="America/New_York")
    assert table is not None
    by_rows = list(RowParser(schema, "fail", None, "America/New_York").parse(path, iter(records)))
    assert [(r["ts"], r["v"], r["name"]) for r in table.to_pylist()] == by_rows
    path.write_text(path.read_text() + ("oops,3,c\n" if fmt == "csv" else '{"ts": "soon", "v": 3}\n'))
    assert arrow_table(path, fmt, schema, header=False, time_zone="UTC") is None  # the row parser names the line
