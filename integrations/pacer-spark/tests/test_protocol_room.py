"""The protocol is one room: a source's report goes in through ``Driver.step`` and its answer comes out, once.

Measured with a call profiler (``sys.setprofile``) on a steady-state ask of a ``format("pacer")`` source (its run
known, its previous batch completed, new snapshots that the strategy admits): the frames of the call alternate
between the transport (``pacer_spark.paced``, ``pacer_spark.sources``) and the driver (``pacer_spark.driver``) at
most twice each way (before the room, one ask switched between ``driver/`` and ``paced/`` 20 times). The readers'
RPC messages and ``foreachBatch`` reports take the same one way in.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pacer import AdmissionDecision, Controller, StrategyInfo, hookimpl
from pacer.plugins import get_plugin_manager
from pacer_spark.config import PacerConfig
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.protocol.paced import PacedQueries
from pacer_spark.driver.protocol.readers import (
    AdmissionService,
    ManifestAsk,
    ReaderAnswer,
    ReaderAsk,
    SinkReturned,
    SinkStarts,
)
from pacer_spark.driver.protocol.registry import QueryRegistry
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.jvm import stream_query
from pacer_spark.jvm.decider import DecisionRequest, OffsetSnapshot
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.paced.service import PacedService
from pacer_spark.sources.reader_calls import reader_handler, reply_of, report_of


class TakeAll:
    """Admits everything buffered at each ask."""

    @hookimpl
    def pacer_strategies(self) -> list[StrategyInfo]:
        return [StrategyInfo(name="take-all", provides=frozenset({"admission"}), summary="all")]

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> AdmissionDecision | None:
        return AdmissionDecision.admit_all(buffer, "all") if ctx.chosen == "take-all" else None


def _session() -> tuple[Driver, PacedService]:
    clock, replay = PinnedClock(), ReplayGuard()
    pm = get_plugin_manager(allowed=[])
    pm.register(replay)
    pm.register(TakeAll())
    driver = Driver(Controller(clock=clock, cores=2, plugin_manager=pm), clock, replay, concurrency=1,
                    gate_timeout=5.0, fair=False, progress_timeout=600.0)
    config = PacerConfig(admission="take-all", deadline=30.0, operator_metrics=False)
    PacedQueries(driver, None, config, QueryRegistry(driver, config, lambda: 2))
    return driver, PacedService(driver, None, timeout_s=5.0)


def _ask(run: str, spark_run: str, ask: int, batch_id: int, seqs: range, progress: tuple[dict[str, Any], ...]) \
        -> DecisionRequest:
    now = time.time()
    snapshots = tuple(OffsetSnapshot(seq=s, offset=str(s), arrival=now, rows=10, files=None, bytes=640,
                                     bytes_estimated=True) for s in seqs)
    return DecisionRequest(query="q", query_id="stream-1", run=run, batch_id=batch_id, options={}, source="model",
                           start=None, limit="ReadAllAvailable", available_now=False, admissible=len(snapshots),
                           now=now, snapshots=snapshots, spark_run_id=spark_run, progress=progress, ask=ask,
                           first_batch_id=0, trigger=batch_id, run_started=1)


def _progress(spark_run: str, batch_id: int) -> dict[str, Any]:
    return {"id": "stream-1", "runId": spark_run, "name": "q", "batchId": batch_id,
            "timestamp": "2026-11-27T10:00:00.000Z", "numInputRows": 20, "durationMs": {"triggerExecution": 100, "addBatch": 60},
            "sources": [{"numInputRows": 20, "metrics": {"pacerUnanswered": "false"}}]}


def crossings(call: Callable[[], Any]) -> tuple[int, Any]:
    """How many times the Python frames of ``call`` switch between pacer-spark's transport rooms (``paced``,
    ``sources``) and its driver room, and what ``call`` returned."""
    rooms: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        room = ("driver" if module.startswith("pacer_spark.driver.") else
                "transport" if module.startswith(("pacer_spark.paced.", "pacer_spark.sources.")) else None)
        if room is not None and (not rooms or rooms[-1] != room):
            rooms.append(room)

    sys.setprofile(profile)
    try:
        result = call()
    finally:
        sys.setprofile(None)
    # returning from the driver into the transport shows as no new "call": count each entry into the driver twice
    # (in and back out)
    return 2 * rooms.count("driver"), result


def test_a_steady_state_ask_goes_into_the_driver_once_and_comes_back() -> None:
    driver, service = _session()
    run, spark_run = str(uuid.uuid4()), str(uuid.uuid4())
    first = service.decide(_ask(run, spark_run, 1, 0, range(0, 2), ()))
    assert first.index == 1  # both admitted
    switches, answer = crossings(lambda: service.decide(_ask(run, spark_run, 2, 1, range(2, 4),
                                                              (_progress(spark_run, 0),))))
    assert answer.index == 1 and answer.error is None, answer
    assert switches <= 2, f"{switches} switches between the transport and the driver for one ask"
    assert [r.rows for r in driver.reports("q")] == [20]  # the first batch completed from the ask's progress
    # the measure sees each pass: two asks are two round trips
    twice, _ = crossings(lambda: (service.decide(_ask(run, spark_run, 3, 2, range(4, 5), (_progress(spark_run, 1),))),
                                  service.decide(_ask(run, spark_run, 4, 3, range(5, 6), (_progress(spark_run, 2),)))))
    assert twice == 4


def test_a_report_no_front_end_takes_is_refused_naming_it() -> None:
    driver, _ = _session()
    with pytest.raises(TypeError, match="ReaderAsk"):
        driver.step(ReaderAsk("q", 0))


def test_a_reader_s_rpc_messages_translate_to_reports_and_back() -> None:
    assert report_of({"op": "latest", "query": "g", "start": "3", "new": [{"index": 3}], "rtt": 0.001,
                      "until": None, "available": 9}) == ReaderAsk("g", 3, ({"index": 3},), 0.001, None, 9)
    assert report_of({"op": "manifest", "query": "g"}) == ManifestAsk("g")
    assert reply_of(ReaderAnswer(7, (5,))) == {"end": 7, "shed": [5]}
    with pytest.raises(ValueError, match="unknown request 'peek'"):
        report_of({"op": "peek", "query": "g"})
    clock, replay = PinnedClock(), ReplayGuard()
    pm = get_plugin_manager(allowed=[])
    pm.register(replay)
    driver = Driver(Controller(clock=clock, cores=2, plugin_manager=pm), clock, replay, concurrency=1,
                    gate_timeout=5.0, fair=False, progress_timeout=600.0)
    AdmissionService(driver, rapids=False)
    with pytest.raises(KeyError, match="not registered"):  # an unknown query: the RPC server returns the error
        reader_handler(driver)({"op": "latest", "query": "nobody", "start": 0})


class _Progress:
    """One entry of a query's progress buffer, as Py4J hands it (``batchId()``, ``json()``)."""

    def __init__(self, entry: dict[str, Any]) -> None:
        self.entry = entry

    def batchId(self) -> int:
        return int(self.entry["batchId"])

    def json(self) -> str:
        import json

        return json.dumps(self.entry)


class _Query:
    """A started query's handle: its ids and its own progress buffer (``recentProgress``)."""

    def __init__(self) -> None:
        self.id, self.runId = "stream-g", "run-g"
        self.buffer: list[_Progress] = []
        self._jsq = self

    def recentProgress(self) -> list[_Progress]:
        return self.buffer


def test_a_batch_the_reader_admits_alone_before_the_last_one_s_listener_event_is_accounted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark batch 0 ran pacer's batch and its sink returned; its listener event has not come when Spark begins batch
    1, which the reader admitted on its own (it backs off after a timeout, asking no one). Batch 0 completes from the
    query's progress buffer and batch 1 is accounted from the offset log, once (before: batch 1 looked like one
    pacer did not form and ran untracked)."""
    clock, replay = PinnedClock(), ReplayGuard()
    pm = get_plugin_manager(allowed=["asap"])
    pm.register(replay)
    driver = Driver(Controller(clock=clock, cores=2, plugin_manager=pm), clock, replay, concurrency=1,
                    gate_timeout=5.0, fair=False, progress_timeout=600.0)
    config = PacerConfig(admission="asap", deadline=30.0, operator_metrics=False)
    readers = AdmissionService(driver, rapids=False, collect_metrics=False)
    QueryRegistry(driver, config, lambda: 2).register("g", workload="lr2")
    readers.add("g", "pacer-gen", {"stream": "linear_road", "rate": "10", "duration": "100", "start": "0"},
                partitions=2, manifest=Path("unused"))
    handle = _Query()
    readers.started("g", handle)  # type: ignore[arg-type]
    logged = {0: ({"index": 0}, {"index": 3}), 1: ({"index": 3}, {"index": 5})}
    monkeypatch.setattr(stream_query, "logged_offsets", lambda h, b: logged[b])

    answer = driver.step(ReaderAsk("g", 0, available=3))
    assert answer == ReaderAnswer(3)  # asap admits the three available
    turn = driver.step(SinkStarts("g", 0))
    assert turn.batch_id is not None
    driver.step(SinkReturned("g", turn.batch_id, 0))
    entry = {"id": "stream-g", "runId": "run-g", "name": "g", "batchId": 0, "timestamp": "2026-11-29T10:00:00.000Z",
             "numInputRows": 30, "durationMs": {"triggerExecution": 500, "addBatch": 300}, "sources": [{"numInputRows": 30}]}
    handle.buffer.append(_Progress(entry))  # Spark keeps it before batch 1 starts; the listener's event is late

    alone = driver.step(SinkStarts("g", 1))  # datasets 3..4, admitted by the reader without asking
    assert alone.batch_id is not None, "the reader's own batch ran untracked"
    driver.on_progress(TriggerProgress.from_json(entry))  # the late event: nothing to complete twice
    assert [len(r.dataset_latencies) for r in driver.reports("g")] == [3]
    assert readers.sources["g"].unanswered == 1
