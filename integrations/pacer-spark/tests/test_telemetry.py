"""Batches complete at their trigger's end with Spark's triggerExecution: a real Controller, no SparkSession."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime

import pytest
from pyspark.sql.streaming.listener import StreamingQueryProgress

from pacer import Controller, Dataset
from pacer.plugins import get_plugin_manager
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.completion import BatchCompletion, SinkDone
from pacer_spark.driver.locking import Guard
from pacer_spark.jvm.progress import TriggerProgress, parse_progress_timestamp
from pacer_spark.sources.gen import GenStreamReader
from pacer_spark.sources.rpc import ControllerServer
from pacer_workloads import make_query


def _progress(batch_id: int, started_at: float, trigger_ms: float, *, delivered_at: float,
              query: str = "q") -> TriggerProgress:
    return TriggerProgress(query=query, batch_id=batch_id, started_at=started_at,
                           durations_ms={"triggerExecution": trigger_ms, "walCommit": 40.0}, rows=10,
                           delivered_at=delivered_at)


class Run:
    """A real Controller on a pinned clock, one LR2 query with asap admission, and its BatchCompletion."""

    def __init__(self, timeout_s: float = 10.0) -> None:
        self.clock = PinnedClock()
        self.controller = Controller(clock=self.clock, cores=2, plugin_manager=get_plugin_manager(allowed=[]))
        self.controller.add_query(make_query("lr2", query_id="q", deadline=10.0), admission="asap")
        self.guard = Guard()
        self.completed: list[tuple[str, str]] = []
        self.completion = BatchCompletion(self.controller, self.guard, self.clock,
                                          lambda held, q, b: self.completed.append((q, b)), timeout_s)

    def awaiting(self, batch_id: str) -> bool:
        with self.guard.held() as held:
            return self.completion.awaiting(held, batch_id)

    def progress(self, progress: TriggerProgress, *, event: bool = True) -> SinkDone | None:
        with self.guard.held() as held:  # the listener's thread, or the next poll, holds the driver's lock
            return self.completion.on_progress(held, progress, event=event)

    def admit(self, index: int, *, arrival: float, at: float) -> str:
        self.controller.arrive("q", Dataset(str(index), arrival, 1000, 10, handle=index))
        with self.clock.pinned(at):
            batch = self.controller.poll("q")
        assert batch is not None
        with self.clock.pinned(at + 0.3):  # walCommit and queryPlanning, then the gate lets it run
            self.controller.start(batch.id)
        return batch.id


def test_progress_timestamp_is_read_as_utc() -> None:
    expected = datetime(2025, 1, 31, 10, 0, 0, 123000, tzinfo=UTC).timestamp()
    assert parse_progress_timestamp("2025-01-31T10:00:00.123Z") == pytest.approx(expected)
    assert parse_progress_timestamp("not a time") is None
    assert parse_progress_timestamp(None) is None


def test_trigger_progress_from_a_spark_progress_event() -> None:
    event = StreamingQueryProgress(
        id=uuid.uuid4(), runId=uuid.uuid4(), name="lr2", timestamp="2025-01-31T10:00:00.000Z", batchId=7,
        batchDuration=1250, durationMs={"triggerExecution": 1250, "commitOffsets": 90, "addBatch": 800},
        eventTime={}, stateOperators=[], sources=[], sink=None, numInputRows=2000,  # type: ignore[arg-type]
        inputRowsPerSecond=0.0, processedRowsPerSecond=0.0, observedMetrics={},
    )
    progress = TriggerProgress.from_event(event, now=0.0)
    start = datetime(2025, 1, 31, 10, tzinfo=UTC).timestamp()
    assert (progress.query, progress.batch_id, progress.rows) == ("lr2", 7, 2000)
    assert progress.engine_s == pytest.approx(1.25)
    assert progress.ended_at == pytest.approx(start + 1.25)
    assert progress.as_json()["durationMs"]["commitOffsets"] == 90.0


def test_batch_completes_at_its_trigger_end_with_trigger_execution_as_engine_time() -> None:
    run = Run()
    batch_id = run.admit(0, arrival=95.0, at=100.0)
    run.completion.sink_done("q", SinkDone(batch_id, 3, at=101.0))
    assert run.awaiting(batch_id)
    # until the trigger has reported, the query is busy: its next latestOffset gets no batch
    run.controller.arrive("q", Dataset("1", 100.5, 1000, 10, handle=1))
    with run.clock.pinned(101.1):
        assert run.controller.poll("q") is None
    # the progress event of a no-data trigger of the same query completes nothing
    assert run.progress(_progress(2, 99.0, 50.0, delivered_at=99.06)) is None
    assert run.awaiting(batch_id)
    done = run.progress(_progress(3, 99.99, 1250.0, delivered_at=101.25))
    assert done is not None and done.batch_id == batch_id
    (report,) = run.controller.reports("q")
    assert report.completed_at == pytest.approx(101.24)  # trigger start + triggerExecution, after commitOffsets
    assert report.engine_s == pytest.approx(1.25) and report.cost_s == pytest.approx(1.25)
    assert report.service_s == pytest.approx(1.24)  # admission -> end of the trigger
    assert report.dataset_latencies == (("0", pytest.approx(6.24)),)
    assert run.completed == [("q", batch_id)] and not run.awaiting(batch_id)
    with run.clock.pinned(101.3):
        assert run.controller.poll("q") is not None  # the next batch is admitted once the previous one completed
    summary = run.completion.summary()
    assert summary["batches_completed_on_progress"] == 1 and summary["batches_completed_without_progress"] == 0
    assert summary["trigger_execution_s_total"] == {"q": pytest.approx(1.3)}  # the no-data trigger counts too
    assert summary["progress_delivery_ms_avg"] == pytest.approx(10.0)


def test_a_batch_whose_trigger_never_reports_completes_at_its_sink_end_without_engine_time() -> None:
    run = Run(timeout_s=5.0)
    batch_id = run.admit(0, arrival=95.0, at=100.0)
    run.completion.sink_done("q", SinkDone(batch_id, 0, at=101.0))
    with run.guard.held() as held:
        assert run.completion.expire(held, "q", now=105.0) is None  # still within the timeout
        assert run.completion.expire(held, "q", now=106.5) is not None
    (report,) = run.controller.reports("q")
    assert report.completed_at == pytest.approx(101.0) and report.engine_s is None
    assert report.cost_s == pytest.approx(0.7)  # its processing time, start -> sink end
    assert run.completion.summary()["batches_completed_without_progress"] == 1
    assert run.controller.ledger.counts["q"]["processed"] == 1  # exactly once either way


def test_settle_gives_up_on_batches_still_waiting() -> None:
    run = Run()
    batch_id = run.admit(0, arrival=95.0, at=100.0)
    run.completion.sink_done("q", SinkDone(batch_id, 0, at=101.0))
    run.completion.settle(0.05)
    assert run.completion.waiting() == 0
    assert [r.batch_id for r in run.controller.reports("q")] == [batch_id]


def test_pinned_clock_reads_the_pinned_instant_only_in_the_pinning_thread() -> None:
    clock = PinnedClock()
    seen: list[float] = []
    with clock.pinned(5.0):
        assert clock() == 5.0
        other = threading.Thread(target=lambda: seen.append(clock()))
        other.start()
        other.join()
    assert seen[0] > 1e9 and clock() > 1e9


def test_gen_reader_never_reads_datasets_the_controller_shed() -> None:
    server = ControllerServer(lambda req: {"end": 5, "shed": [1, 2]})
    host, port = server.address
    try:
        reader = GenStreamReader({"stream": "linear_road", "rate": "100", "duration": "10", "start": "0",
                                  "numPartitions": "2", "pacer.query": "q", "pacer.address": f"{host}:{port}",
                                  "pacer.authkey": server.authkey_hex})
        assert reader.latestOffset({"index": 0}, None) == {"index": 5, "shed": [[1, 3]]}  # in the offset: a replay skips them too
        parts = reader.partitions({"index": 0}, {"index": 5, "shed": [[1, 3]]})
        assert sorted(i for p in parts for i, _, _ in p.items) == [0, 3, 4]  # type: ignore[attr-defined]
        reader.stop()
    finally:
        server.close()


def test_progress_read_at_the_next_poll_completes_once_and_the_late_event_only_counts() -> None:
    run = Run()
    batch_id = run.admit(0, arrival=95.0, at=100.0)
    run.completion.sink_done("q", SinkDone(batch_id, 4, at=101.0))
    with run.guard.held() as held:
        assert run.completion.waiting_spark_batch(held, "q") == 4
    from_buffer = _progress(4, 99.99, 1250.0, delivered_at=101.3)
    assert run.progress(from_buffer, event=False) is not None
    assert run.progress(_progress(4, 99.99, 1250.0, delivered_at=102.24)) is None  # the listener, late
    (report,) = run.controller.reports("q")
    assert report.completed_at == pytest.approx(101.24) and report.engine_s == pytest.approx(1.25)
    summary = run.completion.summary()
    assert summary["batches_completed_on_progress"] == 1 and summary["progress_read_at_next_poll"] == 1
    assert summary["trigger_execution_s_total"] == {"q": pytest.approx(1.25)}  # counted once, from the event
    assert summary["progress_delivery_ms_max"] == pytest.approx(1000.0)
