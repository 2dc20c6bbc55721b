"""A restart whose old run's stop event comes late, on real Spark: every row once, the new run paced.

The JVM source waits at most 5 s for the driver to take a run's stop event, then goes on; Python handles it later. Here
the driver takes the first run's stop event 8 s late (its ``Driver.step`` sleeps on Py4J's callback thread), while
the query is restarted on its checkpoint at once: the new run asks, admits and writes before the old run's stop is
heard. The old run's stop must then settle only what that run left (here: a snapshot it held, withdrawn; the new
run observes the file again from Spark's last committed offset), never make the old run current again, and the new
run must go on pacing (it holds a file until its strategy's second one comes).
"""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pacer_spark.jvm.decider import DecisionRequest, StopEvent

pytestmark = pytest.mark.spark

_spec = importlib.util.spec_from_file_location("_faults_helpers", Path(__file__).with_name("test_paced_faults.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
put_csv, paced_csv, to_parquet, written_ids = _helpers.put_csv, _helpers.paced_csv, _helpers.to_parquet, _helpers.written_ids
wait_for, ROWS = _helpers.wait_for, _helpers.ROWS

#: Seconds the driver takes the first stop event late: past the JVM's 5 s wait for it.
LATE_S = 8.0


def test_a_restart_whose_old_stop_event_comes_late_writes_every_row_once_and_stays_paced(
    spark: Any, tmp_path: Path
) -> None:
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-two", 2))
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    step = handle.driver.step
    heard: list[tuple[str, str | None]] = []  # (what, Spark run id) in the order the driver took them
    late_done = threading.Event()

    def late_stop(report: Any) -> Any:
        if isinstance(report, StopEvent) and not late_done.is_set():
            time.sleep(LATE_S)  # on Py4J's callback thread: the JVM gave up waiting 3 s ago
            try:
                return step(report)
            finally:
                heard.append(("stop", report.spark_run_id))
                late_done.set()
        if isinstance(report, DecisionRequest) and report.snapshots:
            heard.append(("ask", report.spark_run_id))
        return step(report)

    def held_one(query: Any, index: int) -> None:
        """Put file ``index`` and wait until the source holds it (its own snapshot: the strategy counts them)."""
        put_csv(inbox, index)
        wait_for(lambda: query.lastProgress is not None
                 and int(_helpers.source_metrics(query).get("pacerPendingSnapshots", "0") or 0) >= 1)

    handle.driver.step = late_stop  # what PacedService hands every JVM call to
    try:
        first = to_parquet(paced_csv(spark, inbox, "30s"), out, "late-stop")
        held_one(first, 0)
        put_csv(inbox, 1)
        wait_for(lambda: written_ids(spark, out) == list(range(2 * ROWS)))
        held_one(first, 2)  # one file: the strategy holds it
        first_run = str(first.runId)
        first.stop()  # returns after the JVM's 5 s wait; the driver takes the stop event 3 s later
        before = _helpers.accounting(handle, "late-stop")[0]
        second = to_parquet(paced_csv(spark, inbox, "30s"), out, "late-stop")
        wait_for(lambda: second.lastProgress is not None)  # file 2 observed anew from the last committed offset
        put_csv(inbox, 3)  # its second snapshot: admitted with file 2
        wait_for(lambda: written_ids(spark, out) == list(range(4 * ROWS)), timeout=120)
        assert late_done.wait(30), "the first run's stop event never reached the driver"
        second_run = str(second.runId)
        assert ("ask", second_run) in heard and heard.index(("stop", first_run)) > heard.index(("ask", second_run)), \
            heard  # the old run's stop came after the new run asked and admitted
        held_one(second, 4)  # the new run still paces: one file is held ...
        assert written_ids(spark, out) == list(range(4 * ROWS))
        put_csv(inbox, 5)  # ... until the second comes
        wait_for(lambda: written_ids(spark, out) == list(range(6 * ROWS)))
        summary = handle.paced.summary()["late-stop"]
        assert summary["error"] is None and summary["failed_open"] == 0, summary
        assert second.isActive and not _helpers._dead(handle, "late-stop")
        _helpers.assert_exact(handle, second, "late-stop", before)  # what the first run completed, counted once
    finally:
        handle.driver.step = step
        for active in spark.streams.active:
            active.stop()
        handle.stop()
