"""pacer's own sources keep Spark's checkpoint contract across a driver restart (a new PacerSession, a new
``checkpoint_root``, the same checkpoint): the pacer-files manifest moves with the checkpoint, the first batch
after a restart honours the read cap, and what a batch shed is shed again when Spark replays it."""

from __future__ import annotations

import importlib.util
import json
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pacer import AdmissionDecision, StrategyInfo, hookimpl
from pacer.plugins import get_plugin_manager

pytestmark = pytest.mark.spark

# The folder's helpers (_drop, _wait, _processed), shared with test_files_reliability.py: pytest imports tests with
# --import-mode=importlib, so a sibling test module is loaded by its path.
_spec = importlib.util.spec_from_file_location("_files_helpers", Path(__file__).with_name("test_files_reliability.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
_drop, _processed, _wait = _helpers._drop, _helpers._processed, _helpers._wait

SCHEMA = "id INT, file STRING, value DOUBLE"


def _between_batches(checkpoint: Path | str) -> bool:
    """Every batch file of the checkpoint's offset log has its commit. A write in flight (Spark's temp file) is not
    seen: a stop may still interrupt the first offsets write (a held backlog's empty batch 0), which pacer.start
    clears on restart (:func:`pacer_spark.checkpoint.clear_interrupted_first_batch`)."""
    def batches(folder: str) -> set[str]:
        path = Path(checkpoint) / folder
        return {p.name for p in path.iterdir() if p.name.isdigit()} if path.is_dir() else set()

    return batches("offsets") <= batches("commits")


class Batches:
    """A ``foreachBatch`` sink keeping each non-empty batch's ids; it raises on a batch holding ``crash_on``."""

    def __init__(self, crash_on: int | None = None) -> None:
        self.seen: list[list[int]] = []
        self.crash_on = crash_on
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        ids = sorted(r.id for r in df.select("id").collect())
        if not ids:
            return
        with self.lock:
            self.seen.append(ids)
        if self.crash_on is not None and self.crash_on in ids:
            raise RuntimeError(f"sink crashed on batch {batch_id}")

    def ids(self) -> list[int]:
        with self.lock:
            return sorted(i for batch in self.seen for i in batch)


def _files_query(spark: Any, root: Path, incoming: Path, checkpoint: Path, sink: Batches, **register: Any) -> Any:
    """A new PacerSession (its own ``checkpoint_root``) running a pacer-files query on ``checkpoint``."""
    import pacer_spark

    pm = register.pop("plugin_manager", None)
    pacer = pacer_spark.attach(spark, checkpoint_root=str(root), paced=False, deadline=30.0,
                               **({"plugin_manager": pm} if pm is not None else {}))
    pacer.register_query("files", **register)
    df = pacer.read_stream("files", "pacer-files", schema=SCHEMA, path=str(incoming))
    pacer.start(df, "files", sink, checkpoint=str(checkpoint))
    return pacer


def _first_run(spark: Any, tmp_path: Path) -> tuple[Path, Path, Path, Batches]:
    """Three files read by a first session's pacer-files query, which then stops: its inbox, an empty archive,
    its checkpoint and its sink."""
    incoming, archive, checkpoint = tmp_path / "in", tmp_path / "archive", tmp_path / "ck"
    incoming.mkdir()
    archive.mkdir()
    for n in range(3):
        _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10))
    sink = Batches()
    first = _files_query(spark, tmp_path / "root1", incoming, checkpoint, sink)
    try:
        assert _wait(lambda: len(sink.ids()) == 30, 30), first.errors()
    finally:
        first.stop()
    return incoming, archive, checkpoint, sink


def test_restart_from_a_new_session_reads_every_file_once(spark: Any, tmp_path: Path) -> None:
    """Files moved away and a late file with an older mtime shift no offset: the manifest is the checkpoint's."""
    incoming, archive, checkpoint, sink = _first_run(spark, tmp_path)
    shutil.move(incoming / "f0.csv", archive / "f0.csv")  # processed files are archived
    _drop(incoming, "late.csv", range(30, 40), mtime=time.time() - 3600)  # older than every file seen
    _drop(incoming, "g.csv", range(40, 50))
    second = _files_query(spark, tmp_path / "root2", incoming, checkpoint, sink)
    try:
        _wait(lambda: len(sink.ids()) >= 50, 15)
        second.await_drained(5)
    finally:
        second.stop()
    assert sink.ids() == list(range(50)), "every file's rows once: none skipped, none read again"
    assert (checkpoint / "pacer-files" / "manifest.jsonl").is_file(), "the manifest lives in the checkpoint"
    assert not (tmp_path / "root2" / "files").exists(), "not under the new session's checkpoint_root"


def test_a_manifest_torn_by_a_crash_mid_append_restarts_twice_and_reads_every_file_once(spark: Any,
                                                                                       tmp_path: Path) -> None:
    """A crash while the manifest appended a new file's line leaves that line torn (never acknowledged, so in no
    offset). Restarted, the torn tail is cut off and the file gets its offset again; a read file archived and new
    ones added, restarted a second time: every file's rows once (before: the torn line and every later one were
    skipped and the next append was glued onto it)."""
    incoming, archive, checkpoint, sink = _first_run(spark, tmp_path)
    manifest = checkpoint / "pacer-files" / "manifest.jsonl"
    with manifest.open("a") as torn:  # the crash: half of the next file's line, no newline
        torn.write('{"arrival": 1764000000.0, "bytes": 120, "crc": 12')
    _drop(incoming, "g.csv", range(30, 40))
    second = _files_query(spark, tmp_path / "root2", incoming, checkpoint, sink)
    try:
        assert _wait(lambda: len(sink.ids()) >= 40, 30), second.errors()
    finally:
        second.stop()
    shutil.move(incoming / "f1.csv", archive / "f1.csv")
    _drop(incoming, "h.csv", range(40, 50))
    third = _files_query(spark, tmp_path / "root3", incoming, checkpoint, sink)
    try:
        assert _wait(lambda: len(sink.ids()) >= 50, 30), third.errors()
        third.await_drained(5)
    finally:
        third.stop()
    assert sink.ids() == list(range(50)), "every file's rows once: none skipped, none read again"
    lines = manifest.read_text().splitlines()
    assert manifest.read_text().endswith("\n") and [json.loads(line)["index"] for line in lines] == list(range(5))


class HoldAll:
    """An admission strategy that holds everything (a backlog builds up while it runs)."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        # holds even data past its deadline: the Controller's catch-up (pacer.catch_up) must not take over
        return [StrategyInfo(name="test-hold", provides=frozenset({"admission"}), summary="never admits",
                             catch_up=False)]

    @hookimpl
    def pacer_admit(self, ctx: Any) -> AdmissionDecision | None:
        return AdmissionDecision(0, 0, "holding") if ctx.chosen == "test-hold" else None


def test_first_batch_after_a_restart_honours_the_read_cap(spark: Any, tmp_path: Path) -> None:
    """A backlog held when the driver stopped comes back in batches within ``max_rows``, the first one too."""
    incoming, checkpoint = tmp_path / "in", tmp_path / "ck"
    incoming.mkdir()
    pm = get_plugin_manager()
    pm.register(HoldAll())
    sink = Batches()
    first = _files_query(spark, tmp_path / "root1", incoming, checkpoint, sink, admission="test-hold", max_rows=20,
                         plugin_manager=pm)
    try:
        for n in range(8):
            _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10))
        assert _wait(lambda: first.controller.query("files").buffered_count == 8 and _between_batches(checkpoint),
                     20), first.errors()
    finally:
        first.stop()
    assert sink.seen == [], "the backlog was held"
    second = _files_query(spark, tmp_path / "root2", incoming, checkpoint, sink, admission="asap", max_rows=20)
    try:
        assert _wait(lambda: len(sink.ids()) == 80, 30), second.errors()
    finally:
        second.stop()
    assert [len(batch) for batch in sink.seen] == [20, 20, 20, 20], "each batch within max_rows, the first too"
    assert sink.ids() == list(range(80))


class HoldWhile:
    """An admission strategy that holds everything while ``holding``, then leaves the decision to ``asap``."""

    holding = True

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="test-hold-while", provides=frozenset({"admission"}), summary="holds, then asap",
                             catch_up=False)]

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> AdmissionDecision | None:
        if ctx.chosen != "test-hold-while":
            return None
        return AdmissionDecision(0 if self.holding else len(buffer), 0, "test")


def test_a_query_restarted_in_its_session_gets_its_held_backlog_once_within_the_cap(spark: Any,
                                                                                   tmp_path: Path) -> None:
    """Stopped with a backlog the Controller held, restarted in the same session: the new reader offers the files
    again from the committed offset, and the Controller takes them once (what it held is given back), capped."""
    import pacer_spark

    incoming, checkpoint = tmp_path / "in", str(tmp_path / "ck")
    incoming.mkdir()
    hold = HoldWhile()
    pm = get_plugin_manager()
    pm.register(hold)
    sink = Batches()
    pacer = pacer_spark.attach(spark, checkpoint_root=str(tmp_path / "root"), paced=False, plugin_manager=pm)
    try:
        pacer.register_query("files", admission="test-hold-while", max_rows=20)
        query = pacer.start(pacer.read_stream("files", "pacer-files", schema=SCHEMA, path=str(incoming)), "files",
                            sink, checkpoint=checkpoint)
        for n in range(6):
            _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10))
        assert _wait(lambda: pacer.controller.query("files").buffered_count == 6 and _between_batches(checkpoint),
                     20), pacer.errors()
        query.stop()
        assert _wait(lambda: pacer.sources["files"].dead, 10), "the old run's termination is seen first"
        hold.holding = False
        pacer.start(pacer.read_stream("files", "pacer-files", schema=SCHEMA, path=str(incoming)), "files", sink,
                    checkpoint=checkpoint)
        assert _wait(lambda: len(sink.ids()) == 60, 30), pacer.errors()
    finally:
        pacer.stop()
    assert [len(batch) for batch in sink.seen] == [20, 20, 20], "each batch within max_rows, the first too"
    assert sink.ids() == list(range(60))


def test_a_checkpoint_whose_first_offsets_write_was_interrupted_starts(spark: Any, tmp_path: Path) -> None:
    """``query.stop()`` while Spark logs batch 0 (an empty one when the Controller holds every file) can leave the
    write's temp file (and its checksum) in ``offsets/`` and no batch: Spark 4.1+ refuses such a checkpoint
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY). ``PacerSession.start`` clears them: the run reads every file once."""
    incoming, checkpoint = tmp_path / "in", tmp_path / "ck"
    incoming.mkdir()
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "commits").mkdir()
    temp = ".0.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.tmp"
    (checkpoint / "offsets" / temp).write_text('v1\n{"batchWatermarkMs":0')  # cut short
    (checkpoint / "offsets" / f".{temp}.crc").write_bytes(b"crc")
    for n in range(3):
        _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10))
    sink = Batches()
    pacer = _files_query(spark, tmp_path / "root", incoming, checkpoint, sink)
    try:
        assert _wait(lambda: len(sink.ids()) == 30 or bool(pacer.errors()), 30), pacer.errors()
        assert not pacer.errors()
    finally:
        pacer.stop()
    assert sink.ids() == list(range(30))
    assert not any(p.name.endswith((".tmp", ".tmp.crc")) for p in (checkpoint / "offsets").iterdir())


def test_only_an_interrupted_first_offsets_write_is_cleared(tmp_path: Path) -> None:
    """What :func:`clear_interrupted_first_batch` removes (no Spark): Spark's temp files while no batch is logged;
    never a logged checkpoint, a file it does not know, a remote checkpoint or a running query's checkpoint."""
    from pacer_spark.checkpoint import clear_interrupted_first_batch, is_interrupted_write

    temp = ".0.0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0.tmp"
    assert is_interrupted_write(temp) and is_interrupted_write(f".{temp}.crc")
    assert not any(is_interrupted_write(n) for n in ("0", ".0.crc", "metadata", ".0.tmp", f"{temp}.crc"))

    def checkpoint(name: str, *files: str) -> Path:
        root = tmp_path / name
        for rel in ("offsets/x", "commits/x", *files):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            if not rel.endswith("/x"):
                (root / rel).write_text("")
        (root / "metadata").write_text('{"id":"q-1"}\n')
        return root

    fresh = checkpoint("fresh", f"offsets/{temp}", f"offsets/.{temp}.crc", f"commits/{temp}")
    assert sorted(p.name for p in clear_interrupted_first_batch(f"file://{fresh}")) == sorted([temp, temp, f".{temp}.crc"])
    assert not any((fresh / "offsets").iterdir()) and not any((fresh / "commits").iterdir())
    logged = checkpoint("logged", "offsets/0", "offsets/.0.crc", f"offsets/{temp.replace('.0.', '.1.')}")
    odd = checkpoint("odd", f"offsets/{temp}", "offsets/notes.txt")
    running = checkpoint("running", f"offsets/{temp}")
    assert clear_interrupted_first_batch(str(logged)) == clear_interrupted_first_batch(str(odd)) == []
    assert clear_interrupted_first_batch(str(running), active=["q-1"]) == []
    assert clear_interrupted_first_batch("hdfs://nn/ck") == []
    assert len(list((logged / "offsets").iterdir())) == 3 and len(list((odd / "offsets").iterdir())) == 2
    assert (running / "offsets" / temp).exists()


def test_first_pacer_gen_batch_after_a_restart_honours_the_read_cap(spark: Any, tmp_path: Path) -> None:
    """pacer-gen's held backlog (8 datasets of 10 rows, all arrived) comes back in batches within ``max_rows``."""
    import pacer_spark

    pm = get_plugin_manager()
    pm.register(HoldAll())
    sizes: list[int] = []
    start = repr(time.time() - 10)  # the whole 8 s schedule has arrived; the restart keeps it (option start)

    def run(root: Path, admission: str, **extra: Any) -> Any:
        pacer = pacer_spark.attach(spark, checkpoint_root=str(root), paced=False, **extra)
        pacer.register_query("gen", admission=admission, max_rows=20)
        df = pacer.read_stream("gen", "pacer-gen", stream="cluster_monitoring", rate=10, duration=8, start=start,
                               **{"traffic.noise": 0})  # exactly 10 rows a dataset
        pacer.start(df, "gen", lambda frame, _: sizes.append(frame.count()), checkpoint=str(tmp_path / "ck"))
        return pacer

    first = run(tmp_path / "root1", "test-hold", plugin_manager=pm)
    try:
        assert _wait(lambda: first.controller.query("gen").buffered_count == 8 and _between_batches(tmp_path / "ck"),
                     20), first.errors()
    finally:
        first.stop()
    second = run(tmp_path / "root2", "asap")
    try:
        assert second.await_drained(30), second.errors()
    finally:
        second.stop()
    assert [n for n in sizes if n] == [20, 20, 20, 20], "each batch within max_rows, the first too"


class ShedFirst:
    """An admission strategy that, once three datasets wait, sheds the oldest and admits the other two."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="test-shed-first", provides=frozenset({"admission"}), summary="sheds the oldest",
                             catch_up=False)]

    @hookimpl
    def pacer_admit(self, ctx: Any, buffer: Any) -> AdmissionDecision | None:
        if ctx.chosen != "test-shed-first":
            return None
        return AdmissionDecision(len(buffer) - 1, 1, "test: shed the oldest") if len(buffer) >= 3 else None


def test_a_replayed_batch_sheds_what_its_first_attempt_shed(spark: Any, tmp_path: Path) -> None:
    """The shed files are recorded in the batch's end offset: Spark's replay after a crash skips them too."""
    incoming, checkpoint = tmp_path / "in", tmp_path / "ck"
    incoming.mkdir()
    for n in range(3):
        _drop(incoming, f"f{n}.csv", range(10 * n, 10 * n + 10), mtime=time.time() - 30 + n)
    pm = get_plugin_manager()
    pm.register(ShedFirst())
    crashing = Batches(crash_on=15)
    first = _files_query(spark, tmp_path / "root1", incoming, checkpoint, crashing, admission="test-shed-first",
                         plugin_manager=pm)
    try:
        assert _wait(lambda: "files" in first.errors(), 30), "the sink crash stops the query"
    finally:
        first.stop()
    assert crashing.ids() == list(range(10, 30)), "f0 was shed"
    replayed = Batches()
    # the same checkpoint_root: what this test checks holds with a manifest kept beside it, as before
    second = _files_query(spark, tmp_path / "root1", incoming, checkpoint, replayed)
    try:
        assert _wait(lambda: bool(replayed.seen), 30), second.errors()
        _wait(lambda: _processed(second, "files") >= 2, 10)
        report = second.report()
    finally:
        second.stop()
    assert replayed.seen == [list(range(10, 30))], "the replay reads what the first attempt read, not f0"
    assert report["queries"]["files"]["datasets_processed"] == 2


def test_pacer_gen_partitions_leave_out_what_the_end_offset_records_as_shed() -> None:
    """pacer-gen's replay is stateless too: the shed datasets come from the offset, not the reader's memory."""
    from pacer_spark.sources.gen import GenStreamReader

    end = {"index": 6, "shed": [[1, 3], [4, 5]]}  # as a first attempt's latestOffset recorded it in the offset log
    reader = GenStreamReader({"rate": "10", "duration": "10", "start": "0", "numPartitions": "1"})  # a new reader
    (partition,) = reader.partitions({"index": 0}, end)
    assert [item[0] for item in partition.items] == [0, 3, 5]

    from pacer_spark.reader_offsets import offset_with_shed, shed_in

    assert offset_with_shed(6, [4, 1, 2]) == end and shed_in(end) == {1, 2, 4}
    assert offset_with_shed(6, []) == {"index": 6}


def test_the_manifest_lives_in_a_local_checkpoint_and_never_in_the_watched_folder(tmp_path: Path) -> None:
    """Where the driver puts a pacer-files manifest (no Spark): inside a local checkpoint, an older pacer's manifest
    copied in once; none for a remote checkpoint; never inside the folder the source watches."""
    from pyspark.sql.types import IntegerType, StructField, StructType

    from pacer_spark.manifest import check_outside, manifest_in_checkpoint
    from pacer_spark.sources.files_source import FilesStreamReader

    inside = tmp_path / "ck" / "pacer-files" / "manifest.jsonl"
    assert manifest_in_checkpoint(str(tmp_path / "ck")) == inside
    assert manifest_in_checkpoint(f"file://{tmp_path}/ck") == manifest_in_checkpoint(f"file:{tmp_path}/ck") == inside
    assert manifest_in_checkpoint("hdfs://nn/ck") is None
    legacy = tmp_path / "root" / "q" / "pacer-manifest.jsonl"
    legacy.parent.mkdir(parents=True)
    legacy.write_text('{"index": 0, "name": "a.csv", "arrival": 1.0, "bytes": 2, "rows": 1}\n')
    assert manifest_in_checkpoint(str(tmp_path / "ck"), legacy=legacy) == inside and not inside.exists()  # a new query
    (tmp_path / "ck" / "offsets").mkdir(parents=True)  # a checkpoint an older pacer wrote
    assert manifest_in_checkpoint(str(tmp_path / "ck"), legacy=legacy) == inside
    assert inside.read_text() == legacy.read_text()
    with pytest.raises(ValueError, match="inside the watched folder"):
        check_outside(tmp_path / "in" / "_state" / "manifest.jsonl", tmp_path / "in")
    schema = StructType([StructField("v", IntegerType())])
    reader = FilesStreamReader({"path": str(tmp_path / "in"), "manifest": str(tmp_path / "in" / "m.jsonl")}, schema)
    with pytest.raises(ValueError, match="inside the watched folder"):
        reader.latestOffset({"index": 0}, None)
