"""The deadline as the data sees it, on a user's own ``format("pacer")`` query (real Spark, Spark's own sources).

A snapshot is dated by the data's own time where the source has one (a file's modification time, the rate
source's ``timestamp`` column; Kafka record timestamps are checked in pacer-kafka's tests), so data that waited
before pacer saw it counts as late; data already past its deadline is caught up by the Controller whatever the
admission strategy would hold; and the report says how the arrivals were dated.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

# put_csv, paced_csv, to_parquet, written_ids, wait_for, Holding, attach_holding: shared with test_paced_faults.py (loaded by its path, as
# pytest imports test modules with --import-mode=importlib)
_spec = importlib.util.spec_from_file_location("_faults_helpers", Path(__file__).with_name("test_paced_faults.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
put_csv, paced_csv, to_parquet = _helpers.put_csv, _helpers.paced_csv, _helpers.to_parquet
written_ids, wait_for, ROWS = _helpers.written_ids, _helpers.wait_for, _helpers.ROWS


def _attach(spark: Any, tmp_path: Path, admission: str) -> Any:
    """A session with ``test-hold`` (an admission that never admits) registered; ``admission`` chosen."""
    return _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold", None), admission=admission)


def test_files_older_than_the_deadline_are_late_by_their_mtime_and_caught_up(spark: Any, tmp_path: Path) -> None:
    handle = _attach(spark, tmp_path, "test-hold")
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    old = time.time() - 120.0
    for index in range(6):  # two minutes old when the query starts: far past the 60 s deadline
        put_csv(inbox, index)
        os.utime(inbox / f"part-{index:05d}.csv", (old, old))
    try:
        # 60 s, not less: the fresh file below must stay within its deadline until the report is taken, or the
        # Controller rightly catches it up too (a loaded machine took > 10 s between the two)
        query = to_parquet(paced_csv(spark, inbox, "60s"), out, "old")
        wait_for(lambda: written_ids(spark, out) == list(range(6 * ROWS)), 120)
        # the rows are in the sink before the driver has seen the last batch complete; a file written in between
        # waited through a batch that missed its deadline, and the Controller rightly catches it up as well
        wait_for(lambda: handle.report()["queries"]["old"]["datasets_processed"] == 3, 60)
        put_csv(inbox, 6)  # fresh: the holding strategy decides for it again, and holds it
        wait_for(lambda: handle.report()["queries"]["old"]["datasets_in"] == 4, 60)  # Spark listed it, pacer holds it
        asked = handle.paced.summary()["old"]["decisions"]
        wait_for(lambda: handle.paced.summary()["old"]["decisions"] >= asked + 2, 60)  # two more triggers held it
        assert len(written_ids(spark, out)) == 6 * ROWS
        assert query.isActive
        report = handle.report()
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()
    q = report["queries"]["old"]
    assert q["arrival"] == "source-time"
    # a csv snapshot's rows are estimated from its bytes; each batch's are then Spark's own count
    seen = {k: q.get(k) for k in ("datasets_in", "datasets_processed", "rows_processed", "batches", "catch_up_rows",
                                  "catch_up_episodes", "strategy_fallbacks")}
    assert q["datasets_processed"] == 3 and q["rows_processed"] == 6 * ROWS, (seen, handle.paced.summary())
    assert q["catch_up_rows"] == q["rows_processed"] and q["catch_up_episodes"] == 1 and q["catch_up_s"] > 0
    assert q["miss_rows"] == q["rows_processed"]  # late by the files' own time, not fresh when Spark listed them
    assert q["latency_ms"]["p50"] >= 120_000


def test_rate_rows_are_dated_by_their_timestamp_column(spark: Any, tmp_path: Path) -> None:
    handle = _attach(spark, tmp_path, "asap")
    frame = (spark.readStream.format("pacer").option("pacer.source", "rate").option("rowsPerSecond", "50")
             .option("pacer.deadline", "10s").load())
    try:
        query = frame.writeStream.format("noop").queryName("ticks").start()
        wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 100, 60)
        report = handle.report()
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()
    q = report["queries"]["ticks"]
    assert q["arrival"] == "source-time"
    assert 0 < q["latency_ms"]["p50"] and q["rows_processed"] >= 100
