"""``pacer-files``: one dataset per file of a watched directory, each batch's end offset decided by the driver.

Offsets are file indices in the order files were first listed (``{"index": n}``: files ``0 .. n-1`` are
consumed), recorded in a manifest that lives inside the query's checkpoint (:func:`manifest_in_checkpoint`),
so a restart on the same checkpoint, from any driver, gives every file the same offset: a file moved away
or a late file with an older mtime shifts nothing. With a pacer session the reader asks the driver where
its manifest is (the checkpoint is known once :meth:`~pacer_spark.PacerSession.start` has it, before
Spark's first ``latestOffset``); without one, option ``manifest`` names it.
The reader tells the driver about new files and asks it how far the next micro-batch reaches
(:class:`~pacer_spark.sources.gen.AdmissionAgent`); ``read`` parses a partition's files with Arrow, falling
back to :class:`~pacer_spark.sources.file_rows.RowParser` to name or quarantine a malformed row.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pacer_spark.checkpoint import local_checkpoint
from pacer_spark.compat import SupportsTriggerAvailableNow
from pacer_spark.sources.file_rows import (
    MalformedRowError,
    RowParser,
    arrow_table,
    csv_records,
    json_records,
    session_zone,
)
from pacer_spark.sources.gen import AdmissionAgent, available_until, check_options, shed_in, split
from pacer_spark.sources.rpc import ControllerUnavailable

__all__ = ["MalformedRowError", "RowParser"]  # re-exported: where users of pacer-files look for them

FILES_FORMAT = "pacer-files"
FILE_FORMATS = ("csv", "json", "parquet")
MALFORMED_MODES = ("quarantine", "fail")
log = logging.getLogger("pacer_spark.sources.files_source")

#: Where a query's manifest lives inside its checkpoint directory (Spark ignores what it does not know there).
MANIFEST_IN_CHECKPOINT = ("pacer-files", "manifest.jsonl")
FILES_OPTIONS = frozenset({"path", "format", "header", "manifest", "malformed", "quarantine", "stream", "timezone",
                           "numpartitions"})


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a watched directory: its offset, name, arrival (its mtime) and size."""

    index: int
    name: str
    arrival: float
    bytes: int
    rows: int

    def as_json(self) -> dict[str, Any]:
        """The manifest line."""
        return {"index": self.index, "name": self.name, "arrival": self.arrival, "bytes": self.bytes, "rows": self.rows}


def count_rows(path: Path, fmt: str, header: bool) -> int:
    """Rows in a data file (lines for CSV/JSON lines, metadata for Parquet)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    with path.open("rb") as fh:
        lines = sum(1 for line in fh if line.strip())
    return max(0, lines - (1 if header and fmt == "csv" else 0))


def manifest_in_checkpoint(checkpoint: str, legacy: Path | None = None) -> Path | None:
    """The manifest of a query checkpointed at ``checkpoint``: ``<checkpoint>/pacer-files/manifest.jsonl``, so it
    moves with the checkpoint. None for a checkpoint that is not a local path (``hdfs://``, ``s3a://``...).

    :param legacy: where an older pacer kept it (``<checkpoint_root>/<query>/pacer-manifest.jsonl``): copied into
        a checkpoint Spark has written offsets to but that has no manifest yet, so such a query keeps its offsets
        (a new checkpoint starts a new manifest).
    """
    root = local_checkpoint(checkpoint)
    if root is None:
        return None
    manifest = root.joinpath(*MANIFEST_IN_CHECKPOINT)
    if legacy is not None and legacy.is_file() and (root / "offsets").is_dir() and not manifest.exists():
        manifest.parent.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_name(f".{manifest.name}.tmp")
        shutil.copyfile(legacy, tmp)
        os.replace(tmp, manifest)
    return manifest


def check_outside(manifest: Path, directory: Path) -> None:
    """Refuse a manifest inside the watched folder: pacer never writes there (it would be read as data).

    :raises ValueError: naming both.
    """
    if manifest.resolve().is_relative_to(directory.resolve()):
        raise ValueError(f"pacer-files: its manifest {manifest} would be inside the watched folder {directory}; "
                         "keep the query's checkpoint (or option manifest) outside the folder it watches")


def ignored_name(name: str) -> bool:
    """Hidden, temporary and bookkeeping files (``_x``, ``.x``, ``*.tmp``, ``*.crc``) are not datasets."""
    return name.startswith(("_", ".")) or name.endswith((".tmp", ".crc", ".inprogress"))


class ManifestDamaged(ValueError):
    """A manifest line other than a torn last one cannot be read back: which file holds which offset is unknown."""


def _line(entry: ManifestEntry) -> str:
    """One manifest line: the entry and a CRC-32 of its canonical JSON, newline-terminated."""
    body = json.dumps(entry.as_json(), sort_keys=True)
    return json.dumps({**entry.as_json(), "crc": zlib.crc32(body.encode())}, sort_keys=True) + "\n"


def _entry(line: str) -> ManifestEntry:
    """The entry of a manifest line; ``ValueError`` for a line that is not one, or whose checksum differs (a
    line without ``crc`` is an older pacer's, taken as it is)."""
    raw = json.loads(line)
    crc = raw.pop("crc", None)
    entry = ManifestEntry(**raw)
    if crc is not None and crc != zlib.crc32(json.dumps(entry.as_json(), sort_keys=True).encode()):
        raise ValueError("its checksum does not match")
    return entry


class Manifest:
    """The durable record of which file got which offset and when it arrived (JSON lines, append-only).

    A restart reads it back, so offsets and arrival times stay stable across restarts. Each line is written
    whole (one write of a newline-terminated line with its CRC-32, flushed and fsynced before the offsets that
    name it are answered). On load, a last line without its newline was torn by a crash before any offset named
    it: it is cut off (the file is listed again at the next look, under the same offset). Any other line that
    cannot be read, a checksum that does not match, or offsets out of order refuse the load
    (:class:`ManifestDamaged`): skipping it would shift every later file to another offset.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[ManifestEntry] = []
        self._names: set[str] = set()
        if not path.exists():
            return
        text = path.read_text()
        if text and not text.endswith("\n"):  # a torn append: never acknowledged, so never in an offset
            whole = text[: text.rfind("\n") + 1]
            log.warning("pacer-files: the last line of the manifest %s was torn by a crash (%d bytes); it is cut "
                        "off and its file listed again", path, len(text) - len(whole))
            tmp = path.with_name(f".{path.name}.repair")
            tmp.write_text(whole)
            os.replace(tmp, path)
            text = whole
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = _entry(line)
            except (ValueError, TypeError) as exc:
                raise ManifestDamaged(self._damaged(number, f"line {number} cannot be read ({exc})")) from exc
            if entry.index != len(self.entries):
                raise ManifestDamaged(self._damaged(number, f"line {number} holds offset {entry.index} where "
                                                            f"{len(self.entries)} was due"))
            self.entries.append(entry)
            self._names.add(entry.name)

    def _damaged(self, number: int, what: str) -> str:
        return (f"pacer-files: the manifest {self.path} is damaged: {what}. It records which file holds which offset "
                "of the query's checkpoint; reading on would read some files twice or never. Restore it from a "
                "backup of the checkpoint, or start the query on a new checkpoint (every file in the folder is then "
                "read again)")

    def check_covers(self, index: int) -> None:
        """Refuse a checkpoint whose offsets reach past the files the manifest names (it was lost or replaced).

        :raises ManifestDamaged: naming both counts and what to do.
        """
        if index > len(self.entries):
            raise ManifestDamaged(f"pacer-files: the query's checkpoint has read up to file offset {index}, but its "
                                  f"manifest {self.path} names {len(self.entries)} files: the manifest was lost, cut "
                                  "or is not this checkpoint's (it lives in <checkpoint>/pacer-files/). Restore it "
                                  "with the checkpoint, or start the query on a new checkpoint")

    def refresh(self, directory: Path, fmt: str, header: bool, now: float) -> list[ManifestEntry]:
        """List ``directory``, give new files the next offsets (oldest mtime first) and persist them. A file that
        vanishes between the listing and its measuring is left out (it is no dataset)."""
        try:
            names = [e for e in os.scandir(directory) if e.is_file() and not ignored_name(e.name)]
        except FileNotFoundError:
            return []
        fresh = []
        for e in names:
            if e.name in self._names:
                continue
            try:
                st = e.stat()
            except FileNotFoundError:
                continue
            fresh.append((st.st_mtime, e.name, st.st_size))
        fresh.sort(key=lambda t: (t[0], t[1]))
        added = []
        for mtime, name, size in fresh:
            try:
                rows = count_rows(directory / name, fmt, header)
            except FileNotFoundError:
                continue
            entry = ManifestEntry(len(self.entries), name, min(mtime, now), size, rows)
            self.entries.append(entry)
            self._names.add(name)
            added.append(entry)
        if added:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                fh.write("".join(_line(entry) for entry in added))  # whole lines, in one write
                fh.flush()
                os.fsync(fh.fileno())
        return added


@dataclass
class FilesPartition(InputPartition):
    """Files (absolute paths) to read on an executor."""

    paths: tuple[str, ...]


class FilesStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reader of ``pacer-files``: one dataset per file of a watched directory."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        if "path" not in options:
            raise ValueError("pacer-files needs option path=<directory to watch>")
        check_options(FILES_FORMAT, options.keys(), FILES_OPTIONS)
        self.directory = Path(options["path"]).resolve()
        self.time_zone = options.get("timeZone", "UTC")
        self.task_count = max(1, int(options.get("numPartitions", "2")))
        session_zone(self.time_zone)  # an unknown zone fails when the stream starts, not in a task
        self.format = options.get("format", "csv").lower()
        if self.format not in FILE_FORMATS:
            raise ValueError(f"pacer-files: format must be one of {FILE_FORMATS}, got {self.format!r}")
        self.header = options.get("header", "false").lower() == "true"
        self.malformed = options.get("malformed", "fail").lower()
        if self.malformed not in MALFORMED_MODES:
            raise ValueError(f"pacer-files: malformed must be one of {MALFORMED_MODES}, got {self.malformed!r}")
        self.quarantine = options.get("quarantine") or str(self.directory / "_pacer_quarantine")
        self.schema = schema
        self.agent = AdmissionAgent(options, FILES_FORMAT)
        if not options.get("manifest") and not self.agent.wired:
            raise ValueError(
                "pacer-files needs option manifest=<a file beside your checkpoint>: it records which file got which "
                "offset, so it belongs with the query's state, not in the watched folder "
                "(with a pacer session it lives in the query's checkpoint, PacerSession.start tells the reader)")
        self._manifest_option = options.get("manifest")
        self._manifest: Manifest | None = None
        self._told = 0  # entries already sent to the driver
        self.target: int | None = None  # availableNow: one past the last file this run reads

    @property
    def manifest(self) -> Manifest:
        """The query's manifest, read on first use: option ``manifest``, or where the driver keeps it (in the
        query's checkpoint), asked once (a replayed batch's ``partitions`` may come before any ``latestOffset``).

        :raises RuntimeError: when the driver cannot be reached to say where it is.
        :raises ValueError: for a manifest inside the watched folder.
        """
        if self._manifest is None:
            location = self._manifest_option
            if not location:
                try:
                    location = str(self.agent.ask({"op": "manifest"})["manifest"])
                except ControllerUnavailable as exc:
                    raise RuntimeError(
                        f"pacer-files: cannot learn where query {self.agent.query_id!r} records its files' offsets "
                        f"({exc}); guessing could skip or re-read files, so the query stops. Restart it with its "
                        "pacer session running, or pass option manifest=") from exc
            check_outside(Path(location), self.directory)
            self._manifest = Manifest(Path(location))
        return self._manifest

    def initialOffset(self) -> dict[str, int]:
        """The first file."""
        return {"index": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read the files there now, in the Controller's batches, then stop."""
        self.manifest.refresh(self.directory, self.format, self.header, time.time())
        self.target = len(self.manifest.entries)

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        """List new files, tell the driver about them, and ask it how far the next micro-batch reaches (the
        files it shed in that range are recorded in the offset: :func:`pacer_spark.sources.gen.offset_with_shed`)."""
        begin = int(start["index"])
        self.manifest.check_covers(begin)
        if self.target is None:  # availableNow lists once, in prepareForTriggerAvailableNow
            self.manifest.refresh(self.directory, self.format, self.header, time.time())
        available = max(begin, available_until(len(self.manifest.entries), self.target))
        self._told = max(self._told, begin)
        new = [e.as_json() for e in self.manifest.entries[self._told : available]]
        offset = self.agent.next_offset(start, available, new, until=self.target)
        self._told = max(self._told, available)
        return offset

    def reportLatestOffset(self) -> dict[str, int]:
        """Files listed so far (``query.lastProgress``'s ``latestOffset``: the backlog is the gap)."""
        return {"index": len(self.manifest.entries)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The files of ``[start, end)`` in ``numPartitions`` partitions (default 2; files the Controller shed,
        recorded in ``end``, are skipped, in a replay too): one Python task per file would cost a worker round trip
        each (pacer-spark's README, pacer-files).

        :raises RuntimeError: when the manifest does not name every file of the range (it was lost or replaced):
            reading fewer files would lose rows without a word.
        """
        entries = self.manifest.entries[int(start["index"]) : int(end["index"])]
        if len(entries) < int(end["index"]) - int(start["index"]):
            raise RuntimeError(
                f"pacer-files: the manifest {self.manifest.path} names {len(self.manifest.entries)} files but the "
                f"checkpoint's batch reads files {int(start['index'])}..{int(end['index']) - 1}: the manifest was lost "
                "or is not the one of this checkpoint (it lives in <checkpoint>/pacer-files/)")
        shed = shed_in(end)
        paths = [str(self.directory / e.name) for e in entries if e.index not in shed]
        return [FilesPartition(tuple(group)) for group in split(paths, self.task_count)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Parse the partition's files (Arrow first, rows by row where Arrow fails); malformed rows are
        quarantined or fail the batch (option ``malformed``)."""
        assert isinstance(partition, FilesPartition)
        parser = RowParser(self.schema, self.malformed, self.quarantine if self.malformed == "quarantine" else None,
                           self.time_zone)
        for name in partition.paths:
            path = Path(name)
            try:
                table = arrow_table(path, self.format, self.schema, header=self.header, time_zone=self.time_zone)
            except FileNotFoundError:  # deleted between its listing and this read: skipped or failed, named
                parser.missing(path, f"listed in {self._manifest_option or 'the manifest'}")
                continue
            if table is not None:  # the fast path; a file Arrow cannot parse is parsed row by row below
                yield from table.to_batches()
                continue
            if self.format == "parquet":
                import pyarrow.parquet as pq

                table = pq.read_table(path)
                rows = table.select([n for n in parser.names if n in table.column_names]).to_pylist()
                yield from parser.parse(
                    path, ((i + 1, json.dumps(r, default=str), [r.get(n) for n in parser.names]) for i, r in enumerate(rows))
                )
            elif self.format == "json":
                yield from parser.parse(path, json_records(path, parser.names))
            else:
                yield from parser.parse(path, csv_records(path, self.header))

    def stop(self) -> None:
        """Close the RPC connection."""
        self.agent.close()


class PacerFilesDataSource(DataSource):
    """``spark.readStream.format("pacer-files").schema(ddl)``: one dataset per file of a directory.

    Options: ``path`` (directory; move finished files in atomically), ``format`` (csv, json lines,
    parquet), ``header`` (CSV), ``manifest`` (where offsets and arrival times are recorded, one per query;
    required without a pacer session, whose driver keeps it in the query's checkpoint:
    :func:`manifest_in_checkpoint`), ``malformed`` (``fail`` or ``quarantine``) and
    ``quarantine`` (directory for set-aside rows), ``timeZone`` (of timestamps without an offset:
    :meth:`pacer_spark.PacerSession.read_stream` passes ``spark.sql.session.timeZone``; UTC otherwise);
    the schema comes from ``.schema(...)`` or option ``stream`` (a pacer workload stream). Any other
    option is refused by name (see :func:`check_options`).
    """

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return FILES_FORMAT

    def schema(self) -> str:
        """The schema of option ``stream`` (when ``.schema(...)`` is not given)."""
        from pacer_workloads import spark_schema_ddl

        if "stream" not in self.options:
            raise ValueError("pacer-files needs a schema: .schema('a INT, ...') or option stream=linear_road")
        return spark_schema_ddl(self.options["stream"])

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A :class:`FilesStreamReader`."""
        return FilesStreamReader(self.options, schema)
