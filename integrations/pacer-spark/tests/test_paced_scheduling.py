"""The Controller's scheduler on the user's own queries: ``format("pacer")`` with Spark's plain sinks.

The gate sits in the wrapper's ``latestOffset`` on each query's stream thread: EDF lets the batch with
the earliest deadline go first (one at a time), RDAS/FAIR give every batch a fair-scheduler pool that
Spark really runs its tasks in. Nothing here is a ``foreachBatch`` function.
"""

from __future__ import annotations

import os
import threading
from importlib.metadata import entry_points
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

from pacer.plugins import get_plugin_manager

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not any(ep.name == "zstream" for ep in entry_points(group="pacer")),
                       reason="EDF and RDAS come from pacer-zstream, which is not installed"),
]

SCHEMA = "id INT, word STRING"
ROWS = 50


def put_csv(folder: Path, index: int) -> None:
    """One CSV file of ROWS rows, moved into ``folder`` whole."""
    staging = folder.parent / f".{folder.name}-{index}.csv"
    staging.write_text("".join(f"{index * ROWS + j},w{j % 7}\n" for j in range(ROWS)))
    os.replace(staging, folder / f"part-{index:04d}.csv")


def feed(folders: list[Path], files: int, every_s: float, stop: threading.Event) -> None:
    """``files`` files into every folder, one round every ``every_s`` seconds: the queries compete all along."""
    for index in range(files):
        for folder in folders:
            put_csv(folder, index)
        if stop.wait(every_s):
            return


def drained_report(handle: Any, queries: list[Any]) -> tuple[dict[str, Any], list[Any]]:
    """Once every query has processed what is there: the session's report and its completed batches."""
    for query in queries:
        query.processAllAvailable()
    report = handle.report()
    with handle.lock:
        return report, handle.controller.reports()


def paced_reader(spark: Any, folder: Path, deadline: str) -> Any:
    return (spark.readStream.format("pacer").option("pacer.source", "csv").option("pacer.deadline", deadline)
            .option("maxFilesPerTrigger", "2").schema(SCHEMA).load(str(folder)))


def test_edf_runs_the_earliest_deadline_first_with_parquet_sinks(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    deadlines = {"urgent": 4.0, "relaxed": 60.0, "middle": 20.0}
    folders = {name: tmp_path / "in" / name for name in deadlines}
    for folder in folders.values():
        folder.mkdir(parents=True)
    files = 8
    handle = pacer_spark.attach(spark, admission="asap", scheduler="edf", concurrency=1,
                                plugin_manager=get_plugin_manager(allowed=["zstream"]),
                                checkpoint_root=str(tmp_path / "pacer"))
    stop = threading.Event()
    feeder = threading.Thread(target=feed, args=(list(folders.values()), files, 0.7, stop), daemon=True)
    queries = []
    try:
        for name, deadline in deadlines.items():
            queries.append(
                paced_reader(spark, folders[name], f"{deadline:g}s").writeStream.queryName(name).format("parquet")
                .option("path", str(tmp_path / "out" / name))
                .option("checkpointLocation", str(tmp_path / "ck" / name)).start())
        feeder.start()
        feeder.join()
        report, batches = drained_report(handle, queries)
    finally:
        stop.set()
        for query in queries:
            query.stop()
        handle.stop()

    for name in deadlines:  # Spark's own file sink, exactly once: every row, no duplicate
        ids = sorted(r.id for r in spark.read.schema(SCHEMA).parquet(str(tmp_path / "out" / name)).collect())
        assert ids == list(range(files * ROWS)), name
    contended = 0
    for a, b in combinations(batches, 2):
        if a.query_id == b.query_id:
            continue
        if a.admitted_at < b.started_at and b.admitted_at < a.started_at:  # both waited at the gate together
            contended += 1
            first, second = (a, b) if a.started_at <= b.started_at else (b, a)
            due_first = first.earliest_arrival + deadlines[first.query_id]
            due_second = second.earliest_arrival + deadlines[second.query_id]
            assert due_first <= due_second + 1e-3, (first, second)
    assert contended >= 3, f"the queries never waited for each other ({len(batches)} batches): nothing was tested"
    waits = report["spark"]["paced"]
    assert all(waits[name]["decisions"] > 0 and waits[name]["error"] is None for name in deadlines)


def test_rdas_pools_are_where_spark_runs_a_plain_sinks_tasks(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    names = ("a", "b")
    folders = {name: tmp_path / "in" / name for name in names}
    for folder in folders.values():
        folder.mkdir(parents=True)
    seen = tmp_path / "pools"
    seen.mkdir()

    def record_pool(name: str) -> Any:
        def record(row: Any) -> None:  # Spark's foreach sink, on an executor: the task's own pool
            from pyspark import TaskContext

            context = TaskContext.get()
            pool = context.getLocalProperty("spark.scheduler.pool") if context is not None else None
            (seen / f"{name}-{row.id}.pool").write_text(str(pool))

        return record

    files = 4
    handle = pacer_spark.attach(spark, admission="asap", scheduler="rdas",
                                plugin_manager=get_plugin_manager(allowed=["zstream"]),
                                checkpoint_root=str(tmp_path / "pacer"))
    stop = threading.Event()
    queries = []
    try:
        for name in names:
            queries.append(paced_reader(spark, folders[name], "10s").writeStream.queryName(name)
                           .foreach(record_pool(name)).option("checkpointLocation", str(tmp_path / "ck" / name))
                           .start())
        feed(list(folders.values()), files, 0.5, stop)
        report, batches = drained_report(handle, queries)
    finally:
        for query in queries:
            query.stop()
        handle.stop()

    pools = [p.read_text() for p in seen.glob("*.pool")]
    for name in names:  # every row of each query, its own file: one query's lost rows cannot hide behind the other's
        assert sorted(int(p.stem.split("-")[1]) for p in seen.glob(f"{name}-*.pool")) == list(range(files * ROWS)), name
    assert all(pool.startswith("pacer-w") for pool in pools), set(pools)
    assert report["scheduler"] == "rdas"
    assert {b.query_id for b in batches} == set(names)
