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
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pacer_spark.compat import SupportsTriggerAvailableNow
from pacer_spark.manifest import (
    FILES_FORMAT,
    Manifest,
    check_outside,
)
from pacer_spark.reader_offsets import shed_in
from pacer_spark.sources.file_rows import (
    MalformedRowError,
    RowParser,
    arrow_table,
    csv_records,
    json_records,
    session_zone,
)
from pacer_spark.sources.gen import AdmissionAgent, available_until, check_options, split
from pacer_spark.sources.rpc import ControllerUnavailable

__all__ = ["MalformedRowError", "RowParser"]  # re-exported: where users of pacer-files look for them

FILE_FORMATS = ("csv", "json", "parquet")
MALFORMED_MODES = ("quarantine", "fail")
log = logging.getLogger("pacer_spark.sources.files_source")

FILES_OPTIONS = frozenset({"path", "format", "header", "manifest", "malformed", "quarantine", "stream", "timezone",
                           "numpartitions"})


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
