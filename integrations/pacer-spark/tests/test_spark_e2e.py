"""End to end on real local Spark: pacer-gen -> Controller over RPC -> foreachBatch gate -> report."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pacer import AdmissionDecision, StrategyInfo, hookimpl
from pacer.plugins import get_plugin_manager
from pacer.report import validate_report

pytestmark = pytest.mark.spark


def _lossless(report: dict[str, Any], expected: dict[str, int]) -> None:
    validate_report(report)
    assert report["runtime"] == "spark"
    for query_id, count in expected.items():
        q = report["queries"][query_id]
        assert q["datasets_in"] == count, q
        assert q["datasets_processed"] == count and q["datasets_pending"] == 0, q
        assert q["rows_processed"] == q["rows_in"]


def test_two_queries_end_to_end(spark: Any, tmp_path: Path) -> None:
    import pacer_spark
    from pacer_spark.jvm import status_store

    attached = time.time()
    pacer = pacer_spark.attach(spark, admission="asap", scheduler="fifo", deadline="8s",
                               checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr2", traffic="constant", rate=500, duration=5)
        pacer.run_workload("cm2", traffic="wave", rate=500, duration=5)
        assert pacer.await_drained(90), pacer.errors()
        dag = pacer.executed_dag("lr2")
    finally:
        pacer.stop()
    report = pacer.report({"test": "e2e"})  # after the queries stopped: every batch's tasks, the last no-data one too
    spark_s = status_store.stages_run_time_s(spark, since=attached)
    _lossless(report, {"lr2": 5, "cm2": 5})
    # busy core-seconds: the queries' tasks' run time, as Spark's own status store counts it (each task holds a core)
    assert spark_s is not None and report["cost"]["busy_core_s"] == pytest.approx(spark_s, rel=0.02)
    for q in report["queries"].values():
        assert q["cost"]["busy_batches"] == q["batches"] and q["cost"]["busy_core_s"] > 0
        assert 0 <= q["cost"]["trigger_s"] <= q["cost"]["engine_s"]
        assert 0 < q["cost"]["cpu_core_s"] <= q["cost"]["busy_core_s"]
        assert q["cost"]["no_data"]["trigger_s"] <= q["cost"]["trigger_s"]  # Spark's no-data batches, counted in it
    assert report["spark"]["no_data_batches_enabled"] == {"lr2": True, "cm2": True}  # Spark's default, kept
    # each figure is rounded to 6 digits on its own: cores × the rounded duration may be cores × 0.5e-6 short
    assert report["cost"]["busy_core_s"] < report["cost"]["allocated_core_s"] <= \
        pacer.cores * (report["duration_s"] + 1e-6)
    overhead = report["overhead"]
    assert overhead["measured"] and overhead["admission_poll_us_p99"] > 0
    assert overhead["per_batch_share_of_processing"] < 0.05
    assert report["spark"]["pacer_spark_overhead"]["rpc_requests"] >= 2
    assert report["spark"]["placement_enactment"]["enacted"] == 0  # no RAPIDS here: recorded, not enacted
    reports = pacer.controller.reports("lr2")
    assert reports and all(r.placement is not None and not r.placement.enacted for r in reports)
    timed = [m for r in reports for m in r.operator_metrics if m.time_s > 0]
    assert timed, "per-operator times come back from the plan's SQL metrics"
    assert dag is not None and {op.kind for op in dag.operators} >= {"scan", "aggregate", "shuffle", "state", "sink"}
    # the admission decided every batch: batch boundaries are what the Controller admitted
    assert sum(len(r.dataset_latencies) for r in reports) == 5


def test_strategies_selected_by_spark_confs(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    spark.conf.set("spark.pacer.admission", "static")
    spark.conf.set("spark.pacer.deadline", "20s")
    try:
        pacer = pacer_spark.attach(spark, admission_params={"interval": 2.0}, checkpoint_root=str(tmp_path))
    finally:
        spark.conf.unset("spark.pacer.admission")
        spark.conf.unset("spark.pacer.deadline")
    try:
        pacer.run_workload("lr3", traffic="constant", rate=300, duration=4)
        assert pacer.await_drained(90), pacer.errors()
        report = pacer.report()
    finally:
        pacer.stop()
    _lossless(report, {"lr3": 4})
    assert report["queries"]["lr3"]["admission"] == "static"
    assert report["queries"]["lr3"]["deadline_ms"] == 20000


def test_fair_scheduler_runs_batches_in_weighted_pools(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    pools: list[str | None] = []

    def sink(df: Any, batch_id: int) -> None:
        pools.append(df.sparkSession.sparkContext.getLocalProperty("spark.scheduler.pool"))
        df.write.format("noop").mode("overwrite").save()

    pacer = pacer_spark.attach(spark, scheduler="fair", checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr3", query_id="a", rate=300, duration=3, sink=sink)
        pacer.run_workload("cm2", query_id="b", rate=300, duration=3, sink=sink)
        assert pacer.await_drained(90), pacer.errors()
        report = pacer.report()
    finally:
        pacer.stop()
    _lossless(report, {"a": 3, "b": 3})
    assert pools and all(p is not None and p.startswith("pacer-w") for p in pools)


class RaisingAdmission:
    """An admission strategy that always raises."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="test-raiser", provides=frozenset({"admission"}), summary="raises")]

    @hookimpl
    def pacer_admit(self, ctx: Any) -> AdmissionDecision | None:
        if ctx.chosen == "test-raiser":
            raise RuntimeError("boom")
        return None


@pytest.mark.full(reason="the Spark conformance suite's test_raising_strategy_falls_back_when_asked proves it")
def test_raising_strategy_falls_back_and_the_run_goes_on(spark: Any, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    import pacer_spark

    pm = get_plugin_manager()
    pm.register(RaisingAdmission())
    pacer = pacer_spark.attach(spark, admission="test-raiser", fallback=True, plugin_manager=pm,
                               checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr3", rate=300, duration=3)
        assert pacer.await_drained(90), pacer.errors()
        report = pacer.report()
    finally:
        pacer.stop()
    _lossless(report, {"lr3": 3})
    assert report["queries"]["lr3"]["strategy_fallbacks"] > 0
    assert any("test-raiser" in r.message and "falling back" in r.message for r in caplog.records)


def test_raising_strategy_without_fallback_fails_the_query_by_name(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    pm = get_plugin_manager()
    pm.register(RaisingAdmission())
    pacer = pacer_spark.attach(spark, admission="test-raiser", fallback=False, plugin_manager=pm,
                               checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr3", rate=300, duration=2)
        assert not pacer.await_drained(60)
        errors = pacer.errors()
    finally:
        pacer.stop()
    assert "test-raiser" in errors["lr3"] and "boom" in errors["lr3"]


def test_unreachable_controller_admits_everything(spark: Any, tmp_path: Path) -> None:
    """A source whose driver is gone warns once and admits all available data: nothing stalls or is lost."""
    from pacer_spark.gen_plan import GenPlan
    from pacer_spark.sources.gen import PacerGenDataSource
    from pacer_spark.sources.rpc import ControllerServer

    spark.dataSource.register(PacerGenDataSource)
    server = ControllerServer(lambda req: {"end": req["start"]})
    host, port = server.address
    server.close()
    options = {"stream": "cluster_monitoring", "rate": "200", "duration": "3", "start": repr(time.time()),
               "pacer.query": "orphan", "pacer.address": f"{host}:{port}", "pacer.authkey": server.authkey_hex}
    expected = sum(a.rows for a in GenPlan.from_options(options).arrivals())
    seen: list[int] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        with lock:
            seen.append(df.count())

    query = (spark.readStream.format("pacer-gen").options(**options).load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="0 seconds").start())
    try:
        limit = time.time() + 60
        while sum(seen) < expected and time.time() < limit and query.isActive:
            time.sleep(0.2)
    finally:
        query.stop()
    assert sum(seen) == expected


def test_join_and_sort_workloads_run_together(spark: Any, tmp_path: Path) -> None:
    """LR1 (window self-join), LR1T and CM1 (sorted in the sink) in one session at once."""
    import pacer_spark

    pacer = pacer_spark.attach(spark, checkpoint_root=str(tmp_path))
    try:
        for workload in ("lr1", "lr1t", "cm1"):
            pacer.run_workload(workload, rate=200, duration=3)
        assert pacer.await_drained(120), pacer.errors()
        report = pacer.report()
    finally:
        pacer.stop()
    _lossless(report, {"lr1": 3, "lr1t": 3, "cm1": 3})


def _installed(name: str) -> bool:
    from importlib.metadata import entry_points

    return any(ep.name == name for ep in entry_points(group="pacer"))


@pytest.mark.skipif(not _installed("zstream"), reason="pacer-zstream is not installed")
@pytest.mark.full(reason="the Spark conformance suite runs zStream admission and EDF scheduling on Spark")
def test_zstream_admission_with_edf(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    pm = get_plugin_manager(allowed=["zstream"])
    pacer = pacer_spark.attach(spark, admission="zstream", scheduler="edf", deadline="6s", plugin_manager=pm,
                               checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr2", rate=400, duration=5)
        pacer.run_workload("cm2", rate=400, duration=5, deadline=12.0)
        assert pacer.await_drained(120), pacer.errors()
        report = pacer.report()
    finally:
        pacer.stop()
    _lossless(report, {"lr2": 5, "cm2": 5})
    assert report["scheduler"] == "edf" and report["queries"]["lr2"]["admission"] == "zstream"
    assert report["queries"]["lr2"]["strategy_fallbacks"] == 0


def test_a_plain_write_stream_on_a_pacer_source_does_not_stall(spark: Any, tmp_path: Path) -> None:
    """What a Spark user writes: ``read_stream`` then their own ``writeStream`` (not ``PacerSession.start``)."""
    import pacer_spark

    pacer = pacer_spark.attach(spark, checkpoint_root=str(tmp_path))
    try:
        pacer.register_query("plain", workload="cm2")
        frame = pacer.read_stream("plain", "pacer-gen", stream="cluster_monitoring", rate=400, duration=4)
        query = (frame.writeStream.format("parquet").option("path", str(tmp_path / "out"))
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
        try:
            assert pacer.await_drained(90), pacer.errors()
            query.processAllAvailable()
            report = pacer.report()
        finally:
            query.stop()
    finally:
        pacer.stop()
    _lossless(report, {"plain": 4})
    assert spark.read.parquet(str(tmp_path / "out")).count() == report["queries"]["plain"]["rows_in"]


def test_available_now_on_pacer_gen_reads_what_arrived_in_pacer_batches(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    sizes: list[int] = []
    pacer = pacer_spark.attach(spark, admission="asap", checkpoint_root=str(tmp_path))
    try:
        pacer.register_query("g", workload="lr2", max_rows=200)
        # the whole 8 s of traffic has arrived when the query starts
        df = pacer.read_stream("g", "pacer-gen", stream="linear_road", traffic="constant", rate=100, duration=8,
                               start=time.time() - 9, period=1, **{"traffic.noise": 0})  # exactly 100 rows a second
        query = pacer.start(df, "g", lambda frame, _: sizes.append(frame.count()), trigger="availableNow")
        assert query.awaitTermination(120), "availableNow stops once what had arrived is read"
    finally:
        pacer.stop()
    report = pacer.report()
    processed = report["queries"]["g"]["datasets_processed"]
    assert processed == 8, processed
    assert sum(sizes) == 100 * processed == report["queries"]["g"]["rows_processed"]
    assert [s for s in sizes if s] == [200, 200, 200, 200]  # pacer-sized batches (max_rows), not one of 800


def test_available_now_on_pacer_gen_with_nothing_arrived_fails_saying_so(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    pacer = pacer_spark.attach(spark, admission="asap", checkpoint_root=str(tmp_path))
    try:
        pacer.register_query("early", workload="lr2")
        df = pacer.read_stream("early", "pacer-gen", stream="linear_road", traffic="constant", rate=100, duration=60,
                               start=time.time() + 3600)
        query = pacer.start(df, "early", lambda frame, _: frame.count(), trigger="availableNow")
        with pytest.raises(Exception):  # noqa: B017 - Spark's StreamingQueryException
            query.awaitTermination(60)
        error = pacer.errors()["early"]
    finally:
        pacer.stop()
    assert error.startswith("ValueError: pacer-gen: trigger(availableNow=True) reads the datasets that have arrived")
    assert "set start in the past" in error
