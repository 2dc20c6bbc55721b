"""Rows of ``pacer-files``: text and JSON records turned into the schema's types, bad rows set aside or failed.

A timestamp without an offset is read in the session's time zone (option ``timeZone``, as Spark's own
csv and json sources read it), not in the time zone of the machine the reader runs on.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)


def session_zone(name: str) -> tzinfo:
    """The ``tzinfo`` of a Spark time-zone name (region ids such as ``America/New_York``, ``UTC``, or
    offsets such as ``+02:00``).

    :raises ValueError: naming the option when the zone is unknown.
    """
    if name.upper() in ("UTC", "Z", "GMT"):
        return UTC
    if name[:1] in "+-":
        sign = 1 if name[0] == "+" else -1
        hours, _, minutes = name[1:].partition(":")
        from datetime import timedelta, timezone

        try:
            return timezone(sign * timedelta(hours=int(hours), minutes=int(minutes or 0)))
        except ValueError:
            pass
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"pacer-files: unknown timeZone {name!r}; use a region id such as 'UTC' or "
                         "'America/New_York', or an offset such as '+02:00'") from None


def _converter(dtype: DataType, zone: tzinfo) -> Any:
    """How to turn one text/JSON value into ``dtype``; a TIMESTAMP without an offset is read in ``zone``."""
    if isinstance(dtype, (IntegerType, LongType, ShortType, ByteType)):
        return int
    if isinstance(dtype, (DoubleType, FloatType)):
        return float
    if isinstance(dtype, DecimalType):
        from decimal import Decimal

        return Decimal
    if isinstance(dtype, BooleanType):
        return lambda v: v if isinstance(v, bool) else {"true": True, "false": False}[str(v).strip().lower()]
    if isinstance(dtype, TimestampNTZType):
        def to_local(v: Any) -> datetime:
            if isinstance(v, (int, float)):
                return datetime.fromtimestamp(float(v), tz=UTC).replace(tzinfo=None)
            return datetime.fromisoformat(str(v).strip()).replace(tzinfo=None)

        return to_local
    if isinstance(dtype, TimestampType):
        def to_instant(v: Any) -> datetime:
            if isinstance(v, (int, float)):
                return datetime.fromtimestamp(float(v), tz=UTC)
            parsed = datetime.fromisoformat(str(v).strip())
            return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=zone)

        return to_instant
    if isinstance(dtype, DateType):
        return lambda v: date.fromisoformat(str(v).strip())
    if isinstance(dtype, StringType):
        return str
    raise ValueError(f"pacer-files cannot parse column type {dtype.simpleString()}")


class MalformedRowError(ValueError):
    """A row that does not fit the schema, with ``malformed=fail``."""


class RowParser:
    """Converts text records to tuples of the schema's types; bad rows go to quarantine or raise."""

    def __init__(self, schema: StructType, mode: str, quarantine: str | None, time_zone: str = "UTC") -> None:
        self.names = [f.name for f in schema.fields]
        zone = session_zone(time_zone)
        self.convert = [_converter(f.dataType, zone) for f in schema.fields]
        self.mode = mode
        self.quarantine = Path(quarantine) if quarantine else None

    def row(self, values: Sequence[Any]) -> tuple[Any, ...]:
        """One record -> a tuple; raises ValueError with the reason when it does not fit."""
        if len(values) != len(self.names):
            raise ValueError(f"expected {len(self.names)} fields, got {len(values)}")
        out: list[Any] = []
        for name, conv, value in zip(self.names, self.convert, values, strict=True):
            if value is None or value == "":
                out.append(None)
                continue
            try:
                out.append(conv(value))
            except (ValueError, TypeError, KeyError, ArithmeticError) as exc:
                raise ValueError(f"column {name!r}: cannot parse {value!r} ({type(exc).__name__})") from None
        return tuple(out)

    def parse(self, path: Path, records: Iterator[tuple[int, str, Sequence[Any] | None]]) -> Iterator[tuple[Any, ...]]:
        """Yield good rows of ``records`` (``(line, raw, values or None when unreadable)``)."""
        bad: list[dict[str, Any]] = []
        for line, raw, values in records:
            try:
                if values is None:
                    raise ValueError("unreadable record")
                yield self.row(values)
            except ValueError as exc:
                if self.mode == "fail":
                    raise MalformedRowError(
                        f"pacer-files: malformed row in {path} line {line}: {exc}. "
                        "Fix the file, or start the stream with option malformed=quarantine (pacer run: --malformed quarantine) "
                        "to set such rows aside"
                    ) from None
                bad.append({"file": path.name, "line": line, "reason": str(exc), "raw": raw})
        if self.quarantine is not None and bad:
            # One file per dataset, rewritten whole: a replayed batch quarantines the same rows once.
            self.quarantine.mkdir(parents=True, exist_ok=True)
            tmp = self.quarantine / f".{path.name}.bad.tmp"
            tmp.write_text("".join(json.dumps(b) + "\n" for b in bad))
            tmp.replace(self.quarantine / f"{path.name}.bad")


    def missing(self, path: Path, offset: str) -> None:
        """``path`` was listed but is gone before its batch read it: under ``malformed=quarantine`` it is skipped and
        recorded (``<quarantine>/<name>.missing``, rewritten whole: a replay records it once), as Spark's
        ``ignoreMissingFiles`` would skip it; under ``fail`` the batch fails, naming it and what to do."""
        if self.mode == "fail" or self.quarantine is None:
            raise FileNotFoundError(
                f"pacer-files: {path} ({offset}) was listed, but it is gone before its batch read it. Restore the "
                "file, or start the stream with option malformed=quarantine (pacer run: --malformed quarantine) to "
                "skip such files, recorded in the quarantine folder")
        self.quarantine.mkdir(parents=True, exist_ok=True)
        tmp = self.quarantine / f".{path.name}.missing.tmp"
        tmp.write_text(json.dumps({"file": path.name, "offset": offset, "reason": "gone before its batch read it"})
                       + "\n")
        tmp.replace(self.quarantine / f"{path.name}.missing")


def csv_records(path: Path, header: bool) -> Iterator[tuple[int, str, Sequence[Any] | None]]:
    with path.open(newline="") as fh:
        for number, raw in enumerate(fh, start=1):
            if (header and number == 1) or not raw.strip():
                continue
            try:
                values = next(csv.reader([raw]))
            except csv.Error:
                values = None
            yield number, raw.rstrip("\n"), values


def json_records(path: Path, names: Sequence[str]) -> Iterator[tuple[int, str, Sequence[Any] | None]]:
    with path.open() as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
                values: Sequence[Any] | None = [obj.get(n) for n in names] if isinstance(obj, dict) else None
            except ValueError:
                values = None
            yield number, raw.rstrip("\n"), values


def arrow_table(path: Path, fmt: str, schema: StructType, *, header: bool, time_zone: str) -> Any | None:
    """The whole file as an Arrow table of ``schema``, parsed by Arrow; None when Arrow cannot parse it.

    The fast path of ``pacer-files``: Arrow's csv/json readers parse a file ~10× faster than
    :class:`RowParser`'s row-by-row Python. Any error (a malformed row, a type Arrow does not map, a
    timestamp with an offset) returns None, and the caller parses the file with :class:`RowParser`,
    which names the file and line of a bad row or quarantines it.
    """
    import pyarrow as pa

    try:
        target = pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in schema.fields])
    except TypeError:
        return None
    try:
        table = _read_arrow(path, fmt, target, header)
        columns = []
        for f in schema.fields:
            column = table.column(f.name) if f.name in table.column_names else pa.nulls(len(table), target.field(
                f.name).type)
            if isinstance(f.dataType, TimestampType):
                import pyarrow.compute as pc

                column = pc.assume_timezone(column, timezone=time_zone).cast(pa.timestamp("us", tz="UTC"))
            columns.append(column)
        out_schema = pa.schema([pa.field(f.name, c.type) for f, c in zip(schema.fields, columns, strict=True)])
        return pa.Table.from_arrays(columns, schema=out_schema)
    except (pa.ArrowException, ValueError, KeyError):
        return None


def _read_arrow(path: Path, fmt: str, target: Any, header: bool) -> Any:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        return table.select([n for n in target.names if n in table.column_names]).cast(
            _subset(target, table.column_names))
    if fmt == "json":
        import pyarrow.json as pj

        return pj.read_json(path, parse_options=pj.ParseOptions(explicit_schema=target,
                                                                unexpected_field_behavior="ignore"))
    import pyarrow.csv as pcsv

    return pcsv.read_csv(
        path,
        read_options=pcsv.ReadOptions(column_names=target.names, skip_rows=1 if header else 0),
        convert_options=pcsv.ConvertOptions(column_types=target, strings_can_be_null=True,
                                            timestamp_parsers=[pcsv.ISO8601]),
    )


def _subset(target: Any, names: Sequence[str]) -> Any:
    import pyarrow as pa

    return pa.schema([f for f in target if f.name in names])


def _arrow_type(dtype: DataType) -> Any:
    import pyarrow as pa

    simple = {IntegerType: pa.int32(), LongType: pa.int64(), ShortType: pa.int16(), ByteType: pa.int8(),
              DoubleType: pa.float64(), FloatType: pa.float32(), BooleanType: pa.bool_(), StringType: pa.string(),
              DateType: pa.date32(), TimestampType: pa.timestamp("us"), TimestampNTZType: pa.timestamp("us")}
    for kind, arrow in simple.items():
        if isinstance(dtype, kind):
            return arrow
    raise TypeError(f"no Arrow fast path for {dtype.simpleString()}")
