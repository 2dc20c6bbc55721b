"""pacer-files: exactly once across a crash and a restart from the checkpoint; malformed rows."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

SCHEMA = "id INT, file STRING, value DOUBLE"


def _drop(directory: Path, name: str, ids: range, *, bad: str = "", mtime: float | None = None) -> None:
    """Write a CSV file atomically (write aside, then rename into the watched folder), optionally with an older
    ``mtime`` (a late file)."""
    tmp = directory.parent / f".{name}"
    tmp.write_text("".join(f"{i},{name},{i * 0.5}\n" for i in ids) + bad)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, directory / name)


def _wait(predicate: Any, timeout: float = 60.0) -> bool:
    limit = time.time() + timeout
    while time.time() < limit:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _processed(pacer: Any, query_id: str) -> int:
    with pacer.lock:
        return sum(len(r.dataset_latencies) for r in pacer.controller.reports(query_id))


class Crash(RuntimeError):
    """The simulated failure of the sink."""


def test_kill_and_restart_from_checkpoint_is_exactly_once(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    incoming, out, root = tmp_path / "in", tmp_path / "out", tmp_path / "pacer"
    incoming.mkdir()
    crash_on = {"f2.csv"}

    def sink(df: Any, batch_id: int) -> None:
        files = {r.file for r in df.select("file").distinct().collect()}
        if files & crash_on:
            raise Crash(f"sink crashed on batch {batch_id}")
        # idempotent: a replayed batch id overwrites its own output
        df.write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))

    def start() -> Any:
        pacer = pacer_spark.attach(spark, checkpoint_root=str(root))
        pacer.register_query("files")
        df = pacer.read_stream("files", "pacer-files", schema=SCHEMA, path=str(incoming), format="csv")
        pacer.start(df, "files", sink, checkpoint=str(root / "ck"))
        return pacer

    first = start()
    try:
        for n, name in enumerate(("f0.csv", "f1.csv")):
            _drop(incoming, name, range(10 * n, 10 * n + 10))
            assert _wait(lambda n=n: _processed(first, "files") == n + 1), first.errors()
        _drop(incoming, "f2.csv", range(20, 30))
        assert _wait(lambda: "files" in first.errors()), "the sink crash stops the query"
        assert "sink crashed" in first.errors()["files"]
    finally:
        first.stop()
    _drop(incoming, "f3.csv", range(30, 40))  # lands while the query is down
    crash_on.clear()
    second = start()
    try:
        assert _wait(lambda: _processed(second, "files") == 2), second.errors()
        report = second.report()
    finally:
        second.stop()
    rows = spark.read.parquet(str(out)).select("id").collect()
    ids = sorted(r.id for r in rows)
    assert ids == list(range(40)), "every row exactly once across the crash and the restart"
    q = report["queries"]["files"]
    assert q["datasets_in"] == q["datasets_processed"] == 2  # f2 replayed from the offset log, then f3
    assert q["rows_processed"] == 20


@pytest.mark.parametrize("mode", ["quarantine", "fail"])
def test_malformed_rows(spark: Any, tmp_path: Path, mode: str) -> None:
    import pacer_spark

    incoming = tmp_path / "in"
    incoming.mkdir()
    _drop(incoming, "good.csv", range(5))
    _drop(incoming, "bad.csv", range(5, 8), bad="oops,bad.csv,1.0\n9,bad.csv\n")
    seen: list[int] = []

    def sink(df: Any, batch_id: int) -> None:
        seen.append(df.count())

    pacer = pacer_spark.attach(spark, checkpoint_root=str(tmp_path / "pacer"))
    try:
        pacer.register_query("m")
        df = pacer.read_stream("m", "pacer-files", schema=SCHEMA, path=str(incoming), malformed=mode,
                               quarantine=str(tmp_path / "quarantine"))
        pacer.start(df, "m", sink)
        if mode == "quarantine":
            assert _wait(lambda: _processed(pacer, "m") == 2), pacer.errors()
            report = pacer.report()
        else:
            assert _wait(lambda: "m" in pacer.errors())
    finally:
        pacer.stop()
    if mode == "quarantine":
        assert sum(seen) == 8
        assert report["spark"]["quarantined_rows"]["m"] == 2
    else:
        error = pacer.errors()["m"]
        assert "malformed row" in error and "bad.csv line 4" in error and "malformed=quarantine" in error
        assert error.startswith("pacer_spark.sources.file_rows.MalformedRowError") and "\n" not in error  # root cause, one line
        assert "Traceback" in pacer.error_traces()["m"]  # the whole text stays available


@pytest.mark.parametrize(("admission", "max_rows", "batches"), [
    ("asap", 10, [10, 10, 10]),  # the read cap makes pacer-sized batches of one file
    ("min-rows", 0, [30]),  # it would wait for 1000 rows; none come, so what it holds is drained
])
def test_available_now_processes_the_folder_in_pacer_batches_and_stops(
        spark: Any, tmp_path: Path, admission: str, max_rows: int, batches: list[int]) -> None:
    import pacer_spark

    incoming = tmp_path / "in"
    incoming.mkdir()
    for n in range(3):
        _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10))
    seen: list[list[int]] = []
    pacer = pacer_spark.attach(spark, checkpoint_root=str(tmp_path / "pacer"))
    try:
        pacer.register_query("now", admission=admission, deadline=60.0, max_rows=max_rows,
                             admission_params={"min_rows": 1000, "max_delay": 600} if admission == "min-rows" else None)
        df = pacer.read_stream("now", "pacer-files", schema=SCHEMA, path=str(incoming))
        query = pacer.start(df, "now", lambda frame, _: seen.append([r.id for r in frame.collect()]),
                            trigger="availableNow")
        assert _wait(lambda: bool(seen), 120)
        _drop(incoming, "late.csv", range(100, 110))  # after the run fixed its target: not read by it
        assert query.awaitTermination(120), "availableNow stops by itself once the folder is read"
    finally:
        pacer.stop()  # settles the last trigger's progress event
    report = pacer.report()
    assert sorted(i for batch in seen for i in batch) == list(range(30))
    assert [len(batch) for batch in seen if batch] == batches
    assert report["queries"]["now"]["datasets_processed"] == 3
