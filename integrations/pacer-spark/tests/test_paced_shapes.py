"""Query shapes users write, on real Spark: two paced sources in one query, and ``processAllAvailable()``.

A union of two ``format("pacer")`` sources is one query with one deadline: each source's ask is accounted, none
withdraws the other's snapshots, and it forms about as many batches as one source alone. ``processAllAvailable()``
in a user's own test or notebook returns once every row available when it was called is written, although pacer
holds them for a long deadline (Spark ends that wait at the first trigger without new data, so a caller waiting
makes pacer drain what it holds).
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

# put_csv, feed, paced_csv, to_parquet, written_ids, wait_for, data_batches, Holding, attach_holding: shared with
# test_paced_faults.py (loaded by its path, as pytest imports test modules with --import-mode=importlib)
_spec = importlib.util.spec_from_file_location("_faults_helpers", Path(__file__).with_name("test_paced_faults.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
put_csv, paced_csv, to_parquet, feed = _helpers.put_csv, _helpers.paced_csv, _helpers.to_parquet, _helpers.feed
written_ids, wait_for, ROWS, data_batches = _helpers.written_ids, _helpers.wait_for, _helpers.ROWS, _helpers.data_batches


def test_process_all_available_returns_with_every_held_row_written(spark: Any, tmp_path: Path) -> None:
    """A strategy that never admits, a 60 s deadline: ``processAllAvailable()`` still returns promptly with every
    row written (before the change it returned at once with the held rows unwritten), and the report counts the
    batch drained on request. (Whether a file that comes afterwards is held again depends on the overload rule of a
    cold model, which serves as Spark's default trigger while the first batches look costly: not checked here.)"""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-all", None))
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    try:
        query = to_parquet(paced_csv(spark, inbox, "60s"), out, "held")
        for index in range(6):
            put_csv(inbox, index)
        wait_for(lambda: int(_helpers.source_metrics(query).get("pacerPendingSnapshots", "0") or 0) >= 1
                 if query.lastProgress else False)
        assert written_ids(spark, out) == []  # held: the deadline is far
        t0 = time.monotonic()
        query.processAllAvailable()
        waited = time.monotonic() - t0
        assert written_ids(spark, out) == list(range(6 * ROWS)), (waited, handle.paced.summary())
        assert waited < 60.0  # not the deadline's wait
        summary = handle.paced.summary()["held"]
        assert summary["drained"] >= 1 and summary["failed_open"] == 0 and summary["error"] is None, summary
        put_csv(inbox, 6)  # a caller waits again: what came since is written too
        query.processAllAvailable()
        assert written_ids(spark, out) == list(range(7 * ROWS))
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()


def _union(spark: Any, left: Path, right: Path, left_deadline: str, right_deadline: str) -> Any:
    return paced_csv(spark, left, left_deadline).union(paced_csv(spark, right, right_deadline))


def test_a_union_of_two_paced_sources_is_one_query(spark: Any, tmp_path: Path) -> None:
    """One deadline for the query: different deadlines are refused naming both; with one deadline every row is
    written once, no source's ask withdraws the other's snapshots, and the query forms about as many batches as
    one source alone (before the change: 16 where one source formed 6)."""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-four", 4))
    left, right, out = tmp_path / "left", tmp_path / "right", tmp_path / "out"
    left.mkdir()
    right.mkdir()
    try:
        put_csv(left, 0)
        put_csv(right, 1)
        refused = to_parquet(_union(spark, left, right, "20s", "30s"), tmp_path / "refused", "refused")
        with pytest.raises(Exception, match="disagree") as failed:
            refused.awaitTermination(60)
        assert "'20s'" in str(failed.value) and "'30s'" in str(failed.value)

        query = to_parquet(_union(spark, left, right, "20s", "20s"), out, "union")
        feeders = [feed(left, 8, 0.5, first=100), feed(right, 8, 0.5, first=200)]
        for feeder in feeders:
            feeder.join()
        expected = sorted([*range(2 * ROWS)] + [i for f in (100, 200) for i in range(f * ROWS, (f + 8) * ROWS)])
        query.processAllAvailable()
        wait_for(lambda: written_ids(spark, out) == expected)
        summary = handle.paced.summary()["union"]
        assert summary["sources"] == 2 and summary["withdrawn"] == 0 and summary["error"] is None, summary
        assert summary["failed_open"] == 0, summary
        # 18 files held in fours (each source's part capped at its 2 files a trigger): far from one per file
        assert len(data_batches(query)) <= 8, data_batches(query)
        with handle.lock:
            assert not handle.controller.busy("union") and not handle.controller.buffered("union")
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()


def test_a_second_attach_is_refused_and_stop_removes_pacer_s_temporary_folder(spark: Any) -> None:
    """A second ``attach()`` on one session would leave the first one's listener, RPC server and deciders running
    (before: silently); it is refused while the first runs. ``stop()`` removes the checkpoint root pacer made."""
    import pacer_spark

    first = pacer_spark.attach(spark, paced=False)
    root = first.checkpoint_root
    try:
        assert root.is_dir()
        with pytest.raises(RuntimeError, match="attached to this SparkSession already"):
            pacer_spark.attach(spark, paced=False)
    finally:
        first.stop()
    assert not root.exists()
    pacer_spark.attach(spark, paced=False).stop()  # once stopped, the session takes a new one


def test_a_pacer_gen_reader_that_gives_up_waiting_is_accounted_from_spark_s_offset_log(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FIFO, a strategy that holds five datasets and admits the oldest two; the driver's answer comes 1 s after the
    reader's 3 s timeout, so the reader admits all that is available on its own (and backs off). The batch the driver
    admitted is taken back, the range Spark logged is the batch, and every dataset is processed once (before: the
    late batch stayed in flight and the query stalled).

    Exactly one admission of the reader's own and one batch taken back, whatever the machine's speed: the six
    datasets arrive 1..6 s after the start and the driver admits once five are there, so the reader gives up at 8 s
    or later and takes all six, and nothing arrives in its back-off (before: it took the five available when it
    asked, and the sixth, arriving in the back-off, was a second Spark batch admitted without asking:
    tests/test_gen_fail_open.py). The deadline is far, so the strategy decides even when Spark starts late (with a
    backlog past the deadline, catch-up admits all six, the very range the reader took: nothing to take back). The
    3 s timeout leaves a loaded machine's answers in time (only the injected one is late)."""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-five", 5, take=2), scheduler="fifo")
    wiring = handle.source_options
    monkeypatch.setattr(handle, "source_options", lambda query_id: {**wiring(query_id), "pacer.timeout": "3"})
    answer = handle.server.handler  # the readers' RPC, through Driver.step
    late: list[tuple[int, int]] = []

    def slow(request: Any) -> Any:
        reply = answer(request)
        if not late and request.get("op") == "latest" and reply.get("end", request.get("start")) != request["start"]:
            late.append((int(request["available"]), int(reply["end"])))
            time.sleep(4.0)  # the driver admitted; the reader gave up 1 s ago
        return reply

    handle.server.handler = slow
    try:
        handle.run_workload("lr2", query_id="gen", rate=400, duration=6, deadline=3600)
        assert handle.await_drained(120), (late, handle.errors())  # a dataset left alone is held: the deadline is far
        report = handle.report({"test": "reader-fail-open"})
    finally:
        handle.stop()
    assert late, "the driver never admitted a batch"
    handle.controller.ledger.check_complete()
    q = report["queries"]["gen"]
    assert q["datasets_in"] == q["datasets_processed"] and q["rows_in"] == q["rows_processed"] > 0, q
    # asked with five or six there, the strategy's two admitted; the reader gave up with all six arrived
    assert late[0][0] >= 5 and late[0][1] == 2, late
    # one late answer injected: one admission the reader made alone, one batch of the driver's taken back
    assert report["spark"]["reader_unanswered"]["gen"] == 1, (late, report["spark"])
    assert report["spark"]["reader_retracted"]["gen"] == 1, (late, report["spark"])


def test_a_pacer_gen_query_stopped_while_its_batch_waits_for_its_turn_restarts_in_the_same_session(
    spark: Any, tmp_path: Path
) -> None:
    """FIFO, one batch at a time: query ``a``'s slow sink holds the gate, ``b``'s admitted batch waits for its turn
    and ``b`` is stopped right then. Started again on its checkpoint in the same session, ``b`` runs and every
    dataset is processed once (before: its admitted batch was never taken back, the new run offered its datasets
    again, and every restart failed with ``LedgerViolation``)."""
    import pacer_spark
    from pacer_spark.workloads import build_workload, noop_sink

    handle = pacer_spark.attach(spark, admission="asap", scheduler="fifo", gate_timeout=120.0,
                                checkpoint_root=str(tmp_path / "pacer"))

    def slow(frame: Any, batch_id: int) -> None:
        frame.write.format("noop").mode("append").save()  # runs the batch (its state stores commit)
        time.sleep(2.0)

    checkpoint = str(tmp_path / "b-checkpoint")
    try:
        handle.run_workload("cm2", query_id="a", rate=200, duration=8, sink=slow)
        b = handle.run_workload("lr2", query_id="b", rate=200, duration=6, checkpoint=checkpoint)
        def waiting() -> bool:  # b's batch admitted, not started: it waits for its turn behind a's
            with handle.lock:
                q = handle.controller.query("b")
                return q.in_flight is not None and not q.in_flight_started

        wait_for(waiting, timeout=60)
        b.stop()
        frame = handle.read_stream("b", "pacer-gen", stream="linear_road", traffic="constant", rate=200, duration=6,
                                   seed=7)
        query = build_workload("lr2", frame, watermark=60.0)
        handle.start(query.frame, "b", noop_sink(query.finish), checkpoint=checkpoint, output_mode=query.output_mode)
        assert handle.await_drained(180), handle.errors()
        report = handle.report({"test": "restart-in-gate"})
    finally:
        handle.stop()
    assert report["spark"]["reader_retracted"]["b"] == 1, report["spark"]  # the one batch b's stop left waiting
    handle.controller.ledger.check_complete()
    q = report["queries"]["b"]
    assert q["datasets_processed"] == q["datasets_in"] > 0 and q["rows_processed"] == q["rows_in"], q
