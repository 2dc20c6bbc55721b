"""``pacer-gen`` and ``pacer-files``: thin streaming sources whose end offsets the driver's Controller decides.

Offsets are dataset indices (``{"index": n}``: datasets ``0 .. n-1`` are consumed).
``latestOffset(start, limit)`` asks the driver over the loopback RPC which end
offset to return (``start`` means "no batch now"); when the driver cannot be
reached, the reader admits everything available and warns once, so a stream never
stalls and never drops data. ``read(partition)`` rebuilds rows from the seed and
offsets (``pacer-gen``) or from the files named in the partition (``pacer-files``).
Datasets the Controller shed inside an admitted offset range are named in its reply and never
read (a replay after a restart reads them: the reader process that knew is gone).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pacer_spark.file_rows import (
    MalformedRowError,
    RowParser,
    arrow_table,
    csv_records,
    json_records,
    session_zone,
)
from pacer_spark.options import OPT_ADDRESS, OPT_AUTHKEY, OPT_QUERY, OPT_TIMEOUT, GenPlan, parse_address
from pacer_spark.rpc import ControllerClient, ControllerUnavailable

__all__ = ["MalformedRowError", "RowParser"]  # re-exported: where users of pacer-files look for them

log = logging.getLogger("pacer_spark.sources")

GEN_FORMAT = "pacer-gen"
FILES_FORMAT = "pacer-files"
FILE_FORMATS = ("csv", "json", "parquet")
MALFORMED_MODES = ("quarantine", "fail")

#: Options of every pacer source (the wiring :meth:`pacer_spark.PacerSession.read_stream` fills in).
_WIRING = frozenset({OPT_QUERY, OPT_ADDRESS, OPT_AUTHKEY, OPT_TIMEOUT})
GEN_OPTIONS = frozenset({"stream", "traffic", "rate", "duration", "seed", "start", "period", "numpartitions",
                         "partitions"})
FILES_OPTIONS = frozenset({"path", "format", "header", "manifest", "malformed", "quarantine", "stream", "timezone",
                           "numpartitions"})
_HINTS = {
    "rowspersecond": "pacer-gen's mean rate is option rate (rows/s); its shape is option traffic",
    "maxfilespertrigger": "the Controller decides how many files a batch takes; cap it with the query's max_rows/"
                          "max_bytes, or read Spark's own source through format('pacer'), which keeps this limit",
}


def check_options(source: str, options: Iterable[str], known: frozenset[str],
                  prefixes: tuple[str, ...] = ()) -> None:
    """Refuse an option the source would silently ignore, naming it and what to do.

    :raises ValueError: for every unknown option (case-insensitive, as Spark's options are).
    """
    wiring = {k.lower() for k in _WIRING}
    unknown = sorted(k for k in options
                     if k.lower() not in known | wiring and not k.lower().startswith(prefixes))
    if not unknown:
        return
    hints = "; ".join(f"{k}: {_HINTS[k.lower()]}" for k in unknown if k.lower() in _HINTS)
    raise ValueError(
        f"{source} does not honour option(s) {', '.join(repr(k) for k in unknown)}; it understands "
        f"{', '.join(sorted(known | set(p + '*' for p in prefixes)))}. "
        + (hints + ". " if hints else "")
        + "For Spark's own sources and all their options, read spark.readStream.format('pacer')"
        ".option('pacer.source', 'csv'|'json'|'parquet'|'kafka'|...)"
    )



class AdmissionAgent:
    """The reader's proxy to the driver's Controller, with the "admit all available" fallback."""

    def __init__(self, options: Mapping[str, str], source: str) -> None:
        self.source = source
        self.query_id = options.get(OPT_QUERY, "")
        self._client: ControllerClient | None = None
        self._warned = False
        self._last_rtt_s: float | None = None
        self.shed: set[int] = set()  # datasets the Controller shed: in an admitted offset range, never read
        if OPT_ADDRESS in options and OPT_AUTHKEY in options:
            self._client = ControllerClient(
                parse_address(options[OPT_ADDRESS]),
                bytes.fromhex(options[OPT_AUTHKEY]),
                timeout=float(options.get(OPT_TIMEOUT, "10")),
            )

    def end_offset(self, start: int, available_end: int, new: Sequence[Mapping[str, Any]] = ()) -> int:
        """The end offset for a batch starting at ``start``.

        :param available_end: one past the newest dataset available (the fallback answer).
        :param new: datasets the driver has not been told about yet (``pacer-files``).
        :raises RuntimeError: when the driver answers with an error (a strategy failed without fallback).
        """
        if self._client is None:
            return available_end
        request = {"op": "latest", "query": self.query_id, "start": start, "new": list(new), "rtt": self._last_rtt_s}
        t0 = time.perf_counter()
        try:
            reply = self._client.call(request)
        except ControllerUnavailable as exc:
            if not self._warned:
                self._warned = True
                log.warning(
                    "%s source of query %r: %s; admitting every available dataset until it answers again",
                    self.source, self.query_id, exc,
                )
            return available_end
        self._last_rtt_s = time.perf_counter() - t0
        if "error" in reply:
            raise RuntimeError(f"pacer admission for query {self.query_id!r} failed: {reply['error']}")
        end = int(reply["end"])
        self.shed.update(int(i) for i in reply.get("shed", ()))
        return max(start, min(end, available_end)) if reply.get("bounded", True) else max(start, end)

    def close(self) -> None:
        """Drop the connection."""
        if self._client is not None:
            self._client.close()


# --------------------------------------------------------------------------- pacer-gen


@dataclass
class GenPartition(InputPartition):
    """Datasets ``(index, rows, event_start)`` of one stream to rebuild on an executor."""

    stream: str
    seed: int
    period: float
    items: tuple[tuple[int, int, float], ...]


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """Split ``items`` into at most ``parts`` contiguous, nearly equal, non-empty slices."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out: list[list[Any]] = []
    pos = 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(list(items[pos : pos + n]))
        pos += n
    return [p for p in out if p]


def _utc(table: Any) -> Any:
    """Mark naive timestamps (epoch-based) as UTC: Spark's TIMESTAMP arrives as ``timestamp[us, tz=UTC]``."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) and f.type.tz is None else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


class GenStreamReader(DataSourceStreamReader):
    """Reader of ``pacer-gen``: datasets arrive on the wall clock per the traffic schedule."""

    def __init__(self, options: Mapping[str, str]) -> None:
        check_options(GEN_FORMAT, options.keys(), GEN_OPTIONS, ("traffic.",))
        self.plan = GenPlan.from_options(options)
        self.agent = AdmissionAgent(options, GEN_FORMAT)

    def initialOffset(self) -> dict[str, int]:
        """The first dataset."""
        return {"index": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        """Ask the driver how far the next micro-batch reaches."""
        begin = int(start["index"])
        available = max(begin, self.plan.available_end(time.time()))
        return {"index": self.agent.end_offset(begin, available)}

    def reportLatestOffset(self) -> dict[str, int]:
        """What has arrived so far (``query.lastProgress``'s ``latestOffset``: the backlog is the gap)."""
        return {"index": self.plan.available_end(time.time())}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """Split datasets ``[start, end)`` over the configured number of partitions."""
        arrivals = self.plan.arrivals()
        items = [
            (i, arrivals[i].rows, self.plan.start + arrivals[i].time - self.plan.period)
            for i in range(int(start["index"]), int(end["index"]))
            if i not in self.agent.shed
        ]
        return [GenPartition(self.plan.stream, self.plan.seed, self.plan.period, tuple(p))
                for p in split(items, self.plan.partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Rebuild the partition's rows from the seed and the dataset indices."""
        from pacer_workloads import generate_arrow

        assert isinstance(partition, GenPartition)
        for index, rows, event_start in partition.items:
            if rows <= 0:
                continue
            table = generate_arrow(
                partition.stream, rows, seed=partition.seed, index=index, start_time=event_start,
                duration=partition.period,
            )
            yield from _utc(table).to_batches()

    def stop(self) -> None:
        """Close the RPC connection."""
        self.agent.close()


class PacerGenDataSource(DataSource):
    """``spark.readStream.format("pacer-gen")``: deterministic Linear Road / Cluster Monitoring traffic.

    Options: ``stream`` (``linear_road``/``cluster_monitoring``), ``traffic`` (a pattern of
    :data:`pacer_workloads.TRAFFIC_PATTERNS`), ``rate`` (mean rows/s), ``traffic.<param>``,
    ``duration`` (s), ``period`` (s per dataset), ``seed``, ``start`` (epoch s the traffic starts;
    set it for a restart to see the same schedule), ``numPartitions``; plus the ``pacer.*`` options
    that :meth:`pacer_spark.PacerSession.read_stream` fills in. Any other option is refused by name.

    Datasets arrive on the wall clock from ``start`` on, so ``trigger(availableNow=True)`` reads what
    has arrived when the query starts: nothing with the default ``start`` (now). Set ``start`` in the
    past to replay a stretch of traffic in one go.
    """

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return GEN_FORMAT

    def schema(self) -> str:
        """The stream's schema (DDL)."""
        from pacer_workloads import spark_schema_ddl

        return spark_schema_ddl(self.options.get("stream", "linear_road"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A :class:`GenStreamReader`."""
        return GenStreamReader(self.options)


# --------------------------------------------------------------------------- pacer-files


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


def ignored_name(name: str) -> bool:
    """Hidden, temporary and bookkeeping files (``_x``, ``.x``, ``*.tmp``, ``*.crc``) are not datasets."""
    return name.startswith(("_", ".")) or name.endswith((".tmp", ".crc", ".inprogress"))


class Manifest:
    """The durable record of which file got which offset and when it arrived (JSON lines, append-only).

    A restart reads it back, so offsets and arrival times stay stable across restarts.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[ManifestEntry] = []
        self._names: set[str] = set()
        if path.exists():
            for line in path.read_text().splitlines():
                if line.strip():
                    try:
                        entry = ManifestEntry(**json.loads(line))
                    except (ValueError, TypeError):
                        continue  # a torn last line from a crash: the file is listed again
                    if entry.index == len(self.entries):
                        self.entries.append(entry)
                        self._names.add(entry.name)

    def refresh(self, directory: Path, fmt: str, header: bool, now: float) -> list[ManifestEntry]:
        """List ``directory``, give new files the next offsets (oldest mtime first) and persist them."""
        try:
            names = [e for e in os.scandir(directory) if e.is_file() and not ignored_name(e.name)]
        except FileNotFoundError:
            return []
        fresh = sorted(
            ((e.stat().st_mtime, e.name, e.stat().st_size) for e in names if e.name not in self._names),
            key=lambda t: (t[0], t[1]),
        )
        added = []
        for mtime, name, size in fresh:
            entry = ManifestEntry(len(self.entries), name, min(mtime, now), size, count_rows(directory / name, fmt, header))
            self.entries.append(entry)
            self._names.add(name)
            added.append(entry)
        if added:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                for entry in added:
                    fh.write(json.dumps(entry.as_json()) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return added


@dataclass
class FilesPartition(InputPartition):
    """Files (absolute paths) to read on an executor."""

    paths: tuple[str, ...]


class FilesStreamReader(DataSourceStreamReader):
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
        if not options.get("manifest"):
            raise ValueError(
                "pacer-files needs option manifest=<a file beside your checkpoint>: it records which file got which "
                "offset, so it belongs with the query's state, not in the watched folder "
                "(PacerSession.read_stream sets it for you)")
        self.manifest = Manifest(Path(options["manifest"]))
        self.agent = AdmissionAgent(options, FILES_FORMAT)
        self._told = 0  # entries already sent to the driver

    def initialOffset(self) -> dict[str, int]:
        """The first file."""
        return {"index": 0}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        """List new files, tell the driver about them, and ask it how far the next micro-batch reaches."""
        begin = int(start["index"])
        self.manifest.refresh(self.directory, self.format, self.header, time.time())
        self._told = max(self._told, begin)
        new = [e.as_json() for e in self.manifest.entries[self._told :]]
        end = self.agent.end_offset(begin, max(begin, len(self.manifest.entries)), new)
        self._told = len(self.manifest.entries)
        return {"index": end}

    def reportLatestOffset(self) -> dict[str, int]:
        """Files listed so far (``query.lastProgress``'s ``latestOffset``: the backlog is the gap)."""
        return {"index": len(self.manifest.entries)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """The files of ``[start, end)`` in ``numPartitions`` partitions (default 2; files the Controller shed
        are skipped): one Python task per file cost a worker round trip each (3.3x Spark's csv source)."""
        entries = self.manifest.entries[int(start["index"]) : int(end["index"])]
        paths = [str(self.directory / e.name) for e in entries if e.index not in self.agent.shed]
        return [FilesPartition(tuple(group)) for group in split(paths, self.task_count)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Parse the partition's files (Arrow first, rows by row where Arrow fails); malformed rows are
        quarantined or fail the batch (option ``malformed``)."""
        assert isinstance(partition, FilesPartition)
        parser = RowParser(self.schema, self.malformed, self.quarantine if self.malformed == "quarantine" else None,
                           self.time_zone)
        for name in partition.paths:
            path = Path(name)
            table = arrow_table(path, self.format, self.schema, header=self.header, time_zone=self.time_zone)
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
    parquet), ``header`` (CSV), ``manifest`` (required: where offsets and arrival times are recorded; keep it
    beside the checkpoint, one per query), ``malformed`` (``fail`` or ``quarantine``) and
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
