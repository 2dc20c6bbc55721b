"""Each batch's task cost by Spark's (query id, batch id), and Spark's no-data batches counted with their cost: pacer's
``TaskTimeListener`` on real local Spark, and a watermarked paced query's report."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.jvm.task_time import TaskCost
from pacer_spark.run.kafka_run import BatchPoint, points_summary

pytestmark = pytest.mark.spark


def _listener_caught_up(spark: Any) -> None:
    """Wait until Spark's listener bus has handed every event posted so far to every listener (pacer's included)."""
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()


def test_the_listener_keys_tasks_by_query_and_batch_and_counts_failed_attempts_apart(spark: Any) -> None:
    """Jobs run with the properties Spark sets on a stream's jobs: each batch id gets its own tasks' run and CPU time;
    a failed attempt is counted apart; a job of the query without a batch id counts in the query's total only."""
    from pacer_spark.jvm import jar, task_time

    jar.ensure_loaded(spark)
    listener = task_time.add_task_time(spark)
    assert listener is not None
    sc = spark.sparkContext
    query = f"test-{uuid.uuid4()}"
    try:
        sc.setLocalProperty("sql.streaming.queryId", query)
        sc.setLocalProperty("streaming.sql.batchId", "3")
        spark.range(0, 3_000_000, 1, 2).selectExpr("sum(id * id % 7) AS s").collect()
        sc.setLocalProperty("streaming.sql.batchId", "4")
        with pytest.raises(Exception, match="boom"):
            spark.range(0, 4, 1, 1).selectExpr("if(id = 3, raise_error('boom'), id) AS v").collect()  # one task
        sc.setLocalProperty("streaming.sql.batchId", None)  # type: ignore[arg-type]
        spark.range(0, 1000, 1, 2).selectExpr("sum(id)").collect()
    finally:
        sc.setLocalProperty("sql.streaming.queryId", None)  # type: ignore[arg-type]
        sc.setLocalProperty("streaming.sql.batchId", None)  # type: ignore[arg-type]
    _listener_caught_up(spark)
    try:
        three, four, unbatched = (listener.batch_cost(query, b) for b in (3, 4, -1))
        total = listener.query_cost(query)
        after_three = listener.query_cost_after(query, 3)
    finally:
        task_time.remove_task_time(spark, listener)
    assert three is not None and four is not None and unbatched is not None and total is not None
    assert three.tasks >= 2 and three.failed_tasks == 0 and three.busy_core_s > 0 and three.cpu_core_s > 0
    assert three.cpu_core_s <= three.busy_core_s + 0.05  # CPU time is part of the run time (ms rounding aside)
    assert not three.reported  # no progress event: no stream ran these jobs
    # the one task's every attempt failed: one in local mode, spark.task.maxFailures on a cluster
    master = sc.master
    attempts = 1 if master.startswith("local") and "," not in master else int(
        sc.getConf().get("spark.task.maxFailures", "4"))
    assert four.tasks == four.failed_tasks == attempts and 0 <= four.failed_core_s <= four.busy_core_s, four
    assert unbatched.tasks >= 1
    assert total.tasks == three.tasks + four.tasks + unbatched.tasks
    assert total.busy_core_s == pytest.approx(three.busy_core_s + four.busy_core_s + unbatched.busy_core_s, abs=1e-9)
    assert total.failed_tasks == four.failed_tasks
    assert after_three is not None and (after_three.tasks, after_three.busy_core_s) == (four.tasks, four.busy_core_s)
    assert listener.batch_cost(query, 99) == TaskCost()  # a batch without tasks: all 0, not reported


def test_a_watermarked_paced_query_counts_its_no_data_batches_and_each_batch_its_own_tasks(
        spark: Any, tmp_path: Path) -> None:
    """A watermarked aggregation (LR2) paced by a 2 s static interval: after each data batch that moved the
    watermark the source has nothing new, and Spark runs a no-data batch. The report counts them with their trigger
    time and busy core-seconds (in the query's totals too), and each pacer batch's busy core-seconds are its own Spark
    batch's tasks, as the listener keyed them: none of a no-data batch's lands in the data batch after it."""
    import pacer_spark

    pacer = pacer_spark.attach(spark, admission="static", admission_params={"interval": 2.0}, deadline="8s",
                               checkpoint_root=str(tmp_path))
    try:
        query = pacer.run_workload("lr2", traffic="constant", rate=200, duration=12, watermark=1.0)
        assert pacer.await_drained(120), pacer.errors()
        listener = pacer.task_time
        assert listener is not None
        query.processAllAvailable()  # returns after a trigger with nothing to run: the last no-data batch has run
        query.stop()
        _listener_caught_up(spark)  # every progress event reached pacer's listener and the task-time listener
    finally:
        pacer.stop()
    report = pacer.report({"test": "no-data batches"})
    stream = str(query.id)
    progress = [t for t in (TriggerProgress.from_json(p) for p in query.recentProgress) if t.executed]
    data = [p.batch_id for p in progress if not p.no_data]
    empty = [p.batch_id for p in progress if p.no_data]
    assert empty, "a watermark moved by a data batch and no new data: Spark runs a no-data batch"
    listened = {b: listener.batch_cost(stream, b) for b in range(-1, max(data + empty) + 2)}
    assert all(listened[b] is not None and listened[b].reported for b in data + empty)  # type: ignore[union-attr]

    q = report["queries"]["lr2"]
    cost = q["cost"]
    nd = cost["no_data"]
    assert nd["batches"] == len(empty)
    assert nd["trigger_s"] == pytest.approx(sum(p.engine_s or 0.0 for p in progress if p.no_data), abs=1e-5)
    assert nd["trigger_s"] > 0 and nd["busy_core_s"] > 0  # a stateful no-data batch runs tasks (state eviction)
    assert nd["busy_core_s"] == pytest.approx(sum(listened[b].busy_core_s for b in empty), abs=1e-5)  # type: ignore[union-attr]
    reports = pacer.controller.reports("lr2")
    assert len(reports) == q["batches"] == len(data)
    # each pacer batch took its own Spark batch's tasks (none of the no-data batch before it)
    assert sorted(r.busy_core_s or 0.0 for r in reports) == pytest.approx(
        sorted(listened[b].busy_core_s for b in data), abs=1e-5)  # type: ignore[union-attr]
    assert all(r.cpu_core_s is not None and r.failed_core_s == 0.0 for r in reports)
    # every cost total includes the no-data batches: trigger time, and all the query's tasks (a job of no batch id
    # and a batch stopped before it reported counted beside the batches)
    assert cost["trigger_s"] == pytest.approx(sum(r.trigger_s for r in reports) + nd["trigger_s"], abs=1e-5)
    total = listener.query_cost(stream)
    assert total is not None and cost["busy_core_s"] == pytest.approx(total.busy_core_s, abs=1e-5)
    batches_s = sum(r.busy_core_s or 0.0 for r in reports) + nd["busy_core_s"]
    outside = sum(c.busy_core_s for b, c in listened.items() if b not in data and b not in empty)  # type: ignore[union-attr]
    assert total.busy_core_s == pytest.approx(batches_s + outside, abs=1e-5)
    assert report["spark"]["task_costs"]["batches_read"] == len(data) + len(empty)
    assert report["spark"]["no_data_batches_enabled"] == {"lr2": True}


def test_a_progress_says_whether_spark_formed_the_batch_without_new_data() -> None:
    """A batch that ran with no input row and every source ending where it started: a no-data batch; a pacer batch of
    zero-byte datasets still moves its source's offset, the first batch starts from no offset, and an idle
    trigger's entry (Spark keeps one every 10 s of idleness, under the next batch's id) ran no batch."""
    def progress(rows: int, *sources: tuple[Any, Any], ran: bool = True) -> TriggerProgress:
        durations = {"latestOffset": 1, "triggerExecution": 5} | ({"addBatch": 3, "walCommit": 1} if ran else {})
        return TriggerProgress.from_json({"batchId": 1, "numInputRows": rows, "durationMs": durations,
                                          "sources": [{"startOffset": a, "endOffset": b} for a, b in sources]})

    assert progress(0, ('{"index":4}', '{"index":4}')).no_data
    assert not progress(0, ('{"index":4}', '{"index":5}')).no_data  # zero-byte datasets admitted
    assert not progress(0, (None, '{"index":0}')).no_data
    assert not progress(3, ('{"index":4}', '{"index":4}')).no_data
    assert not progress(0).no_data  # no source listed: not known to be Spark's
    assert progress(0, ({"a": 1}, {"a": 1}), ('"x"', '"x"')).no_data
    idle = progress(0, ('{"index":4}', '{"index":4}'), ran=False)
    assert not idle.no_data and not idle.executed and progress(5, ('{"index":4}', '{"index":5}')).executed


def test_task_costs_parse_add_and_subtract_and_kafka_points_sum_their_no_data_batches() -> None:
    cost = TaskCost.parse("4,1500,700,1,250,1")
    assert cost == TaskCost(4, 1.5, 0.7, 1, 0.25, True)
    assert cost + cost == TaskCost(8, 3.0, 1.4, 2, 0.5, False)
    assert TaskCost(1, 1.0, 0.5, 0, 0.0) - cost == TaskCost(0, 0.0, 0.0, 0, 0.0, False)
    points = [BatchPoint(0, 100, 1.5, False, 2.0, 1.0), BatchPoint(1, 0, 0.5, True, 0.25, 0.125),
              BatchPoint(2, 0, 0.25, True)]
    summary = points_summary(points)
    assert summary["no_data"] == {"batches": 2, "trigger_s": 0.75, "busy_core_s": 0.25, "cpu_core_s": 0.125}
    assert summary["trigger_s"] == 2.25
    assert [p["batch_id"] for p in summary["per_batch"]] == [0, 1, 2]
    assert summary["per_batch"][1] == {"batch_id": 1, "rows": 0, "trigger_s": 0.5, "no_data": True,
                                       "busy_core_s": 0.25, "cpu_core_s": 0.125}


def test_the_no_data_comparison_matches_rows_by_group_and_times_append_emissions_against_the_watermark() -> None:
    """``python -m pacer_spark.run.no_data``'s comparison of two queries on the same traffic: the same rows when each
    group's last row agrees; in append mode, how long after the watermark could pass a window each first emitted it."""
    from pacer_spark.run.no_data import compare

    def run(mode: str, *emitted: tuple[tuple[Any, ...], float]) -> dict[str, Any]:
        return {"mode": mode, "emitted": [[list(key), at, 0] for key, at in emitted]}

    window = (-20.0, 10.0, 1, 0, 7)
    on = run("append", ((*window, 31.5), 21.0))
    off = run("append", ((*window, 31.5), 29.5))
    c = compare(on, off, watermark=10.0)
    assert c["same_rows"] and (c["rows"], c["rows_only_on"], c["rows_only_off"]) == (1, 0, 0)
    assert c["emit_lag_s_on"]["p50"] == 1.0 and c["emit_lag_s_off"]["max"] == 9.5
    assert c["emitted_later_when_off_s"]["p50"] == 8.5
    # update mode: a group's row is emitted again as it changes; its last value decides
    on = run("update", ((*window, 30.0), 5.0), ((*window, 31.5), 12.0))
    off = run("update", ((*window, 31.5), 12.5))
    c = compare(on, off, watermark=10.0)
    assert c["same_rows"] and c["emit_lag_s_on"]["p50"] is None
    assert not compare(on, run("update", ((*window, 30.0), 12.5)), watermark=10.0)["same_rows"]
