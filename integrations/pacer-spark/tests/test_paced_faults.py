"""A user's own ``format("pacer")`` query off the happy path, on real Spark: what production throws at it.

Unnamed queries and queries on another session, a decider that raises or answers too late (with a held backlog
too), ``query.stop()`` while a batch waits for its turn, a restart in the same session with other options, and a
SIGKILL while pacer holds a backlog of 500 files. (The Py4J callback server going away is not tested: in PySpark's
pinned-thread mode ``shutdown_callback_server()`` blocks in Py4J's socket close; a decider that raises, answers
late or is unregistered takes the same fail-open path.) Every case checks
what the user relies on: each row comes out once, the query keeps forming paced batches, and the
driver's accounting (every snapshot the source observed is a dataset completed once) stays exact.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from pacer import AdmissionDecision, StrategyInfo, hookimpl
from pacer.plugins import get_plugin_manager

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not any(ep.name == "zstream" for ep in entry_points(group="pacer")),
                       reason="zStream comes from pacer-zstream, which is not installed"),
]

APP = Path(__file__).with_name("faults_app.py")
SCHEMA = "id INT, word STRING"
ROWS = 20


def put_csv(folder: Path, index: int, rows: int = ROWS) -> None:
    """One csv file of ``rows`` rows (ids ``index * rows ...``), moved into ``folder`` whole."""
    staging = folder.parent / f".{folder.name}-{index}.csv"
    staging.write_text("".join(f"{index * rows + j},w{j % 7}\n" for j in range(rows)))
    os.replace(staging, folder / f"part-{index:05d}.csv")


def feed(folder: Path, files: int, every_s: float, first: int = 0) -> threading.Thread:
    """Write ``files`` files into ``folder``, one every ``every_s`` seconds, on a thread."""
    def run() -> None:
        for index in range(first, first + files):
            put_csv(folder, index)
            time.sleep(every_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _dead(handle: Any, query_id: str) -> bool:
    """Whether the session's driver holds ``query_id``'s current run for dead (read under the driver's lock)."""
    with handle.driver.books() as books:
        return bool(handle.paced.dead(books, query_id))


def wait_for(condition: Callable[[], bool], timeout: float = 90.0) -> None:
    limit = time.time() + timeout
    while not condition():
        assert time.time() < limit, "timed out waiting"
        time.sleep(0.2)


def paced_csv(spark: Any, folder: Path, deadline: str, **options: str) -> Any:
    reader = (spark.readStream.format("pacer").option("pacer.source", "csv").option("pacer.deadline", deadline)
              .option("maxFilesPerTrigger", "2"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.schema(SCHEMA).load(str(folder))


def to_parquet(frame: Any, out: Path, name: str | None = None) -> Any:
    writer = frame.writeStream.format("parquet").option("path", str(out / "data"))
    writer = writer.option("checkpointLocation", str(out / "checkpoint"))
    return (writer.queryName(name) if name else writer).start()


def written_ids(spark: Any, out: Path) -> list[int]:
    """The ids the parquet sink committed, sorted; none before its first batch committed (no entry in its
    ``_spark_metadata`` log yet). Any other read error raises: read as nothing, it would pass a check that the
    query held its data."""
    if not any((out / "data" / "_spark_metadata").glob("[0-9]*")):
        return []
    return sorted(r.id for r in spark.read.schema(SCHEMA).parquet(str(out / "data")).collect())


def data_batches(query: Any) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]


def source_metrics(query: Any) -> dict[str, str]:
    return dict((query.lastProgress or {}).get("sources", [{}])[0].get("metrics", {}))


def accounting(handle: Any, query_id: str) -> tuple[int, bool, int]:
    """Datasets the Controller completed for ``query_id``, whether a batch is still in flight, and how many wait."""
    with handle.lock:
        done = sum(len(r.dataset_latencies) for r in handle.controller.reports() if r.query_id == query_id)
        return done, handle.controller.busy(query_id), len(handle.controller.buffered(query_id))


def assert_exact(handle: Any, query: Any, query_id: str, before: int = 0) -> None:
    """Every snapshot this run of the source observed and admitted is one dataset completed once (``before``:
    datasets completed by earlier runs); nothing is left in flight. The source's counters are its last trigger's:
    read again until a batch still running (its rows may be written already) has ended and reported them."""
    limit = time.time() + 20
    while True:
        metrics = source_metrics(query)
        observed, pending = int(metrics["pacerObservedSnapshots"]), int(metrics["pacerPendingSnapshots"])
        done, busy, buffered = accounting(handle, query_id)
        if (done - before == observed - pending and not busy) or time.time() >= limit:
            break
        time.sleep(0.2)
    assert done - before == observed - pending and not busy, (done, before, busy, buffered, metrics,
                                                              handle.paced.summary())


def attach(spark: Any, tmp_path: Path, **options: Any) -> Any:
    import pacer_spark

    return pacer_spark.attach(spark, plugin_manager=get_plugin_manager(allowed=["zstream"]),
                              checkpoint_root=str(tmp_path / "pacer"), **options)


def test_an_unnamed_query_on_another_session_and_a_named_one_share_the_gate(spark: Any, tmp_path: Path) -> None:
    """Completion is matched by run id and batch id, not the name: no batch stalls, no gate wait times out."""
    handle = attach(spark, tmp_path, admission="asap", scheduler="fifo", gate_timeout=15.0)
    other = spark.newSession()  # most streaming code never names its queries, and sessions come and go
    inboxes = {name: tmp_path / "in" / name for name in ("named", "unnamed")}
    for inbox in inboxes.values():
        inbox.mkdir(parents=True)
    files = 10
    try:
        named = to_parquet(paced_csv(spark, inboxes["named"], "5s"), tmp_path / "named", "named")
        unnamed = to_parquet(paced_csv(other, inboxes["unnamed"], "5s"), tmp_path / "unnamed")
        feeders = [feed(inbox, files, 0.5) for inbox in inboxes.values()]
        for thread in feeders:
            thread.join()
        expected = list(range(files * ROWS))
        wait_for(lambda: written_ids(spark, tmp_path / "named") == expected
                 and written_ids(spark, tmp_path / "unnamed") == expected)
        assert len(data_batches(named)) >= 5 and len(data_batches(unnamed)) >= 5
        paced = handle.paced.summary()
        assert set(paced) == {"named", str(unnamed.id)}  # an unnamed query is paced under its id
        for query_id, query in (("named", named), (str(unnamed.id), unnamed)):
            assert_exact(handle, query, query_id)
            assert paced[query_id]["gate_wait_ms_max"] < 15_000, paced[query_id]
            assert paced[query_id]["failed_open"] == 0
    finally:
        for query in spark.streams.active + other.streams.active:
            query.stop()
        handle.stop()


class Holding:
    """A test admission strategy named ``name``: it holds snapshots until ``admit_at`` wait, then admits them all
    (``take``: only the oldest ``take``);
    with ``admit_at`` None it never admits (only the Controller's catch-up moves late data). Unlike zStream's, its
    holding does not depend on the machine's speed (on a slow one zStream admitted each file at once, over 80)."""

    def __init__(self, name: str, admit_at: int | None, take: int | None = None) -> None:
        self.name, self.admit_at, self.take = name, admit_at, take

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name=self.name, provides=frozenset({"admission"}), summary="holds snapshots")]

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> AdmissionDecision | None:
        if ctx.chosen != self.name:
            return None
        if self.admit_at is not None and len(buffer) >= self.admit_at:
            if self.take is not None:  # only the oldest few
                return AdmissionDecision(min(self.take, len(buffer)), 0, f"{self.admit_at} wait, {self.take} taken")
            return AdmissionDecision.admit_all(buffer, f"{self.admit_at} wait")
        return AdmissionDecision(0, 0, "holding")


def attach_holding(spark: Any, tmp_path: Path, holding: Holding, **options: Any) -> Any:
    """``pacer_spark.attach`` with ``holding`` registered (no other plugin), its admission unless ``options`` names
    another."""
    import pacer_spark

    pm = get_plugin_manager(entry_points=False)
    pm.register(holding)
    options.setdefault("admission", holding.name)
    return pacer_spark.attach(spark, plugin_manager=pm, checkpoint_root=str(tmp_path / "pacer"), **options)


def test_a_decider_that_raises_or_answers_late_fails_open_and_the_driver_accounts_it(
    spark: Any, tmp_path: Path
) -> None:
    """One exception while the admission holds >= 3 snapshots, then one answer past the timeout: the source admits
    without an answer both times, reports it, and the query goes on forming paced batches, every row once."""
    handle = attach_holding(spark, tmp_path, Holding("test-hold-three", 3), decide_timeout=2.0)
    inbox = tmp_path / "in"
    inbox.mkdir()
    faults: list[str] = []
    decide = handle.paced_service.decide

    def flaky(request: Any) -> Any:
        if not faults and len(request.snapshots) >= 3:
            faults.append("raised")
            raise RuntimeError("injected decider failure")
        if faults == ["raised"] and request.snapshots and not request.failed_open:
            faults.append("slow")
            time.sleep(2.5)  # 0.5 s past the 2 s the source waits: it admits without this answer
        return decide(request)

    handle.paced_service.bridge.register_handler("*", flaky, handle.paced_service.stopped)
    files = 0
    try:
        query = to_parquet(paced_csv(spark, inbox, "10s"), tmp_path / "out", "flaky")
        while faults != ["raised", "slow"]:  # files arrive until both faults have happened
            assert files < 40, f"the decider never saw 3 held snapshots in one request over {files} files: {faults}"
            put_csv(inbox, files)
            files += 1
            time.sleep(0.4)
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range(files * ROWS)))
        before = len(data_batches(query))
        feed(inbox, 6, 0.3, first=files).join()  # after both faults, the admission still paces the query
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range((files + 6) * ROWS)))
        assert len(data_batches(query)) > before
        summary = handle.paced.summary()["flaky"]
        # exactly the two faults: the late answer's batch is taken back, the source's admission accounted once
        assert summary["failed_open"] == 2 and summary["error"] is None, summary
        assert_exact(handle, query, "flaky")
        assert query.exception() is None
    finally:
        for query in spark.streams.active:
            query.stop()
        handle.stop()


def test_a_decider_failure_with_a_held_backlog_keeps_the_query_paced(spark: Any, tmp_path: Path) -> None:
    """zStream with its model fitted, then a backlog of 20 one-file snapshots, late by their files' times, and one
    decider exception while >= 16 are pending: the source admits one (its read cap) without an answer, the driver
    accounts exactly that whatever catch-up would take, and the query goes on forming batches it decides. (This
    passed before the change too: the stall needs a fail-open larger than catch-up's batch, which a read cap of one
    file never gives; ``test_paced_protocol.py`` reaches that case.)"""
    handle = attach(spark, tmp_path, admission="zstream")
    inbox = tmp_path / "in"
    inbox.mkdir()
    faults: list[int] = []
    decide = handle.paced_service.decide

    def flaky(request: Any) -> Any:
        if not faults and len(request.snapshots) >= 16:
            faults.append(len(request.snapshots))
            raise RuntimeError("injected decider failure")
        return decide(request)

    handle.paced_service.bridge.register_handler("*", flaky, handle.paced_service.stopped)
    try:
        query = to_parquet(paced_csv(spark, inbox, "4s", maxFilesPerTrigger="1"), tmp_path / "out", "backlog")
        feed(inbox, 6, 0.5).join()  # zStream fits its model on these
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range(6 * ROWS)))
        old = time.time() - 60.0  # a backlog that waited: late by its files' own times, so catch-up drains it
        for index in range(6, 26):  # one look sees them all: 20 snapshots of one file
            put_csv(inbox, index)
            os.utime(inbox / f"part-{index:05d}.csv", (old, old))
        wait_for(lambda: bool(faults))
        decisions = handle.paced.summary()["backlog"]["decisions"]
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range(26 * ROWS)))
        summary = handle.paced.summary()["backlog"]
        assert faults[0] >= 16 and summary["failed_open"] == 1 and summary["error"] is None, (faults, summary)
        assert summary["decisions"] > decisions + 5, summary  # the driver went on deciding the backlog's batches
        assert_exact(handle, query, "backlog")
        assert query.exception() is None
    finally:
        for query in spark.streams.active:
            query.stop()
        handle.stop()


def test_stop_returns_at_once_while_a_batch_waits_for_its_turn(spark: Any, tmp_path: Path) -> None:
    """FIFO, one batch at a time: a query whose batch waits behind a slow one stops in seconds, not after the
    gate's timeout; its run's end reaches the driver, which lets the other query go on."""
    handle = attach(spark, tmp_path, admission="asap", scheduler="fifo", gate_timeout=60.0)
    slow_in, waiting_in = tmp_path / "in" / "slow", tmp_path / "in" / "waiting"
    for inbox in (slow_in, waiting_in):
        inbox.mkdir(parents=True)
    started = threading.Event()

    def slow_sink(batch: Any, batch_id: int) -> None:
        started.set()
        time.sleep(15.0)
        batch.count()

    try:
        slow = (paced_csv(spark, slow_in, "60s").writeStream.queryName("slow").foreachBatch(slow_sink)
                .option("checkpointLocation", str(tmp_path / "slow-ck")).start())
        waiting = to_parquet(paced_csv(spark, waiting_in, "60s"), tmp_path / "waiting", "waiting")
        put_csv(slow_in, 0)
        assert started.wait(60)
        put_csv(waiting_in, 0)

        def at_the_gate() -> bool:
            """Its batch is admitted and waits for its turn, behind the slow one (not started)."""
            with handle.lock:
                if "waiting" not in handle.controller.query_ids():
                    return False
                q = handle.controller.query("waiting")
                return q.in_flight is not None and not q.in_flight_started

        wait_for(at_the_gate, timeout=30)
        t0 = time.time()
        waiting.stop()
        stopped_in = time.time() - t0
        assert stopped_in < 5.0, f"stop() took {stopped_in:.1f} s"  # before: until the slow batch ended
        wait_for(lambda: _dead(handle, "waiting"), timeout=10)
        slow.processAllAvailable()
    finally:
        for query in spark.streams.active:
            query.stop()
        handle.stop()


def test_a_query_restarted_in_the_same_session_gets_its_new_options(spark: Any, tmp_path: Path) -> None:
    """Stopped and started again on its checkpoint with another deadline: the new deadline holds, and the first
    run's termination event (which arrives after the second run started) does not end the second run."""
    handle = attach(spark, tmp_path, admission="zstream")
    inbox = tmp_path / "in"
    inbox.mkdir()
    try:
        first = to_parquet(paced_csv(spark, inbox, "30s"), tmp_path / "out", "again")
        put_csv(inbox, 0)
        wait_for(lambda: handle.paced.summary().get("again", {}).get("decisions", 0) > 0)
        assert handle.controller.query("again").spec.deadline == 30.0
        # stopped between batches: a batch logged but not committed would make Spark refuse the restart
        # (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), which a loaded machine hit
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range(ROWS)))
        first.stop()
        before = accounting(handle, "again")[0]
        second = to_parquet(paced_csv(spark, inbox, "3s"), tmp_path / "out", "again")
        for index in range(1, 6):
            put_csv(inbox, index)
            time.sleep(0.4)
        wait_for(lambda: written_ids(spark, tmp_path / "out") == list(range(6 * ROWS)))
        assert handle.controller.query("again").spec.deadline == 3.0
        assert not _dead(handle, "again") and second.isActive
        assert_exact(handle, second, "again", before)
    finally:
        for query in spark.streams.active:
            query.stop()
        handle.stop()


def test_shed_is_refused_for_a_format_pacer_source(spark: Any, tmp_path: Path) -> None:
    """Spark reads every offset the source logged: pacer cannot drop rows of it, and says so."""
    handle = attach(spark, tmp_path, admission="asap")
    inbox = tmp_path / "in"
    inbox.mkdir()
    put_csv(inbox, 0)
    try:
        query = to_parquet(paced_csv(spark, inbox, "5s", **{"pacer.overload": "shed"}), tmp_path / "out", "shed")
        with pytest.raises(Exception, match="pacer.overload=shed is refused"):
            query.awaitTermination(60)
    finally:
        handle.stop()


def _launch(scenario: str, inbox: Path, out: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.Popen([sys.executable, str(APP), scenario, "--input", str(inbox), "--out", str(out)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def test_a_held_backlog_of_500_files_killed_and_restarted_honours_the_read_cap(spark: Any, tmp_path: Path) -> None:
    """SIGKILL while zStream holds a backlog of 500 files, of which Spark's file source logged over a hundred (two
    per log batch): after the restart each batch still reads at most maxFilesPerTrigger = 2 files, not the whole
    logged backlog."""
    inbox, out = tmp_path / "in", tmp_path / "out"
    inbox.mkdir()
    for index in range(500):
        put_csv(inbox, index, rows=5)
    log = tmp_path / "hold.log"
    job = _launch("hold", inbox, out, log)
    try:
        sources_log = out / "checkpoint" / "sources" / "0"
        # the source looks at most 100 limit-sized snapshots ahead: 100 log batches of 2 files held
        wait_for(lambda: sources_log.is_dir() and len(list(sources_log.iterdir())) >= 60, timeout=120)
        commits = out / "checkpoint" / "commits"
        committed = len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    assert committed < 10, f"{committed} batches committed before the kill: the backlog was not held"
    handle = attach(spark, tmp_path, admission="asap")
    try:
        restarted = to_parquet(paced_csv(spark, inbox, "120s"), out, "held")
        wait_for(lambda: len(data_batches(restarted)) >= 3, timeout=60)
        restarted.stop()
        assert max(data_batches(restarted)) <= 2 * 5, data_batches(restarted)
        ids = written_ids(spark, out)  # exactly once: no id twice, every file read whole
        assert len(ids) == len(set(ids)) and all(i // 5 * 5 + j in set(ids) for i in ids for j in range(5)), ids
    finally:
        for query in spark.streams.active:
            query.stop()
        handle.stop()

