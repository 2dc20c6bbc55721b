"""Every paced source of a query drains, on real Spark: a union of a busy and an idle ``format("pacer")`` source, and a
stream-stream join of two.

Spark ends ``processAllAvailable()`` and ``trigger(availableNow=True)`` at the first trigger in which no source
reads anything, and ``trigger(once=True)`` after one batch. pacer holds data for a deadline, so a trigger that
waits would end them with rows unread; the driver drains instead. In a union the sources are asked one after the
other in each trigger: an idle source that only reports its last batch's progress must not take the trigger's
first ask (its "nothing" would make the busy source wait, and the drain end early), and a source asked after the
batch was formed joins it with everything it holds (else ``availableNow`` admitted one snapshot a batch through
the fail-open path, and ``once`` read none of its data). The strategy here never admits: whatever is written was
drained. Both orders of the union (the idle source asked first, then last), each with two rounds.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

_spec = importlib.util.spec_from_file_location("_faults_helpers", Path(__file__).with_name("test_paced_faults.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
put_csv, paced_csv, written_ids, ROWS = _helpers.put_csv, _helpers.paced_csv, _helpers.written_ids, _helpers.ROWS


def _union(spark: Any, busy: Path, idle: Path, idle_first: bool) -> Any:
    frames = [paced_csv(spark, idle, "60s"), paced_csv(spark, busy, "60s")]
    first, second = frames if idle_first else frames[::-1]
    return first.union(second)


def _both_sources_drained(handle: Any, query: str) -> dict[str, Any]:
    """The query's summary, once checked: two sources, none admitted without an answer, no error, nothing held."""
    summary: dict[str, Any] = handle.paced.summary()[query]
    assert summary["failed_open"] == 0 and summary["error"] is None and summary["sources"] == 2, summary
    with handle.lock:
        assert not handle.controller.buffered(query)
    return summary


def _ids(*files: int) -> list[int]:
    return sorted(i for f in files for i in range(f * ROWS, (f + 1) * ROWS))


@pytest.mark.parametrize("idle_first", [True, False], ids=["idle-first", "idle-last"])
def test_process_all_available_writes_every_row_of_a_union_with_an_idle_source(
    spark: Any, tmp_path: Path, idle_first: bool
) -> None:
    """Round one: a file in each source; then rounds with files in the busy source only (the idle one asks with no
    snapshots, reporting the previous batch). Each ``processAllAvailable()`` returns with every row written, nothing
    admitted without an answer, and every batch the trigger drained counted."""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-union", None))
    busy, idle, out = tmp_path / "busy", tmp_path / "idle", tmp_path / "out"
    busy.mkdir()
    idle.mkdir()
    try:
        put_csv(idle, 0)
        put_csv(busy, 1)
        query = _helpers.to_parquet(_union(spark, busy, idle, idle_first), out, "union-wait")
        query.processAllAvailable()
        assert written_ids(spark, out) == _ids(0, 1), handle.paced.summary()
        files = [0, 1]
        for rnd in range(2):
            new = [2 + 3 * rnd + k for k in range(3)]  # three files: past the source's 2 files a trigger
            for index in new:
                put_csv(busy, index)
            files += new
            query.processAllAvailable()
            assert written_ids(spark, out) == _ids(*files), (rnd, handle.paced.summary())
        summary = _both_sources_drained(handle, "union-wait")
        assert summary["drained"] >= 3, summary  # at least one drained batch per call
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()


def test_process_all_available_writes_every_match_of_a_stream_stream_join_of_two_paced_sources(
    spark: Any, tmp_path: Path
) -> None:
    """A stream-stream inner join of two ``format("pacer")`` sources (Spark asks both in every trigger, as in a
    union; each side's rows wait in the join's state for their match). Files with the same ids come to both sides,
    three at a time (past each source's 2 files a trigger), then to one side only, then its match: each
    ``processAllAvailable()`` returns with every match written (none admitted without an answer), so both sides
    drained."""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-join", None))
    left_dir, right_dir, out = tmp_path / "left", tmp_path / "right", tmp_path / "out"
    left_dir.mkdir()
    right_dir.mkdir()
    left = paced_csv(spark, left_dir, "60s").withColumnRenamed("word", "word_left")
    right = paced_csv(spark, right_dir, "60s").withColumnRenamed("word", "word_right")
    try:
        joined = left.join(right, "id").selectExpr("id", "word_left AS word")  # the sink's schema: the helpers' own
        query = _helpers.to_parquet(joined, out, "join-wait")
        matched: list[int] = []
        for to_left, to_right, now_matched in [([0, 1, 2], [0, 1, 2], [0, 1, 2]), ([3], [], []), ([], [3], [3])]:
            for index in to_left:
                put_csv(left_dir, index)
            for index in to_right:
                put_csv(right_dir, index)
            matched += now_matched
            query.processAllAvailable()
            assert written_ids(spark, out) == _ids(*matched), handle.paced.summary()
        _both_sources_drained(handle, "join-wait")
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()


def _run_once(spark: Any, frame: Any, out: Path, trigger: dict[str, bool]) -> Any:
    query = (frame.writeStream.format("parquet").option("path", str(out / "data"))
             .option("checkpointLocation", str(out / "checkpoint")).queryName("union-now").trigger(**trigger).start())
    assert query.awaitTermination(180), "the run did not end"
    assert query.exception() is None, query.exception()
    return query


@pytest.mark.parametrize("trigger", [{"availableNow": True}, {"once": True}], ids=["availableNow", "once"])
def test_available_now_and_once_read_every_row_of_both_sources_of_a_union(
    spark: Any, tmp_path: Path, trigger: dict[str, bool]
) -> None:
    """Three runs on one checkpoint (the idle source first in the union): files in both sources, then in the busy
    one only, then in both again. Each run ends with every row written and none admitted without an answer; under
    ``once`` its one batch holds every file of both (the read limit is Spark's to ignore there)."""
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-now", None))
    busy, idle, out = tmp_path / "busy", tmp_path / "idle", tmp_path / "out"
    busy.mkdir()
    idle.mkdir()
    files: list[int] = []
    try:
        for rnd, (to_idle, to_busy) in enumerate([(2, 3), (0, 3), (1, 1)]):
            new_idle = [100 + 10 * rnd + k for k in range(to_idle)]
            new_busy = [200 + 10 * rnd + k for k in range(to_busy)]
            for index in new_idle:
                put_csv(idle, index)
            for index in new_busy:
                put_csv(busy, index)
            files += new_idle + new_busy
            query = _run_once(spark, _union(spark, busy, idle, idle_first=True), out, trigger)
            assert written_ids(spark, out) == _ids(*files), (rnd, handle.paced.summary())
            rows = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
            if "once" in trigger:
                assert rows == [ROWS * (to_idle + to_busy)], rows
            summary = handle.paced.summary()["union-now"]
            assert summary["failed_open"] == 0 and summary["error"] is None, summary
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()
