"""Reading a user's own traffic from a file, for the ``trace`` traffic pattern.

Two forms, one record per line (blank lines and lines starting with ``#`` are skipped; a first line
with no number or time in it, such as ``second,rate`` or ``timestamp``, is a header and skipped too):

- **rates**: one rate in rows/s per line, for seconds 0, 1, 2, ..., or ``SECOND,RATE`` per line, where
  ``SECOND`` is a time in seconds (any origin, e.g. epoch seconds) or an ISO-8601 date-time. The
  trace starts at the first line's second; seconds must increase by whole seconds, and a second that
  is skipped had no rows.
- **timestamps**: one timestamp per record, epoch seconds or ISO-8601 (a time without a zone is read
  as UTC), in any order. The trace starts at the whole second of the earliest one.

A trace spans at most :data:`MAX_TRACE_SECONDS` (a week): a longer one, a stray time far from the others or an
epoch time in milliseconds among seconds is refused, naming the line, rather than filling memory.

Fields may be separated by a comma, a semicolon, a tab or spaces.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

#: The forms :func:`read_trace` reads (``auto`` detects which: :func:`read_trace`).
TRACE_FORMATS: tuple[str, ...] = ("auto", "rates", "timestamps")
#: A lone number at least this large is an epoch second (1973-03-03), not a rate, when ``format=auto``.
EPOCH_THRESHOLD = 1e8
#: The most seconds a trace may span (a week: "last Tuesday", or a whole weekly cycle). A trace is held as one
#: rate per second from its start, so the span, not the file's size, sets the memory: a stray time a year off, or
#: an epoch time in milliseconds among seconds (10^12 seconds on), would otherwise be a MemoryError. A week of
#: seconds is a few tens of MB, read in about a second; a longer trace is split into files of a week or less.
MAX_TRACE_SECONDS = 7 * 86_400
#: Units an epoch time in a trace may be given in by mistake, as (times an epoch second, name).
_FINER_UNITS: tuple[tuple[float, str], ...] = ((1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds"))

_SPLIT = re.compile(r"[,;\t ]+")
_HELP = ("a trace file holds one rate (rows/s) per line, SECOND,RATE per line, or one timestamp per record "
         "(epoch seconds or ISO-8601); see pacer-workloads' README, 'Traces'")


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, the line and what to do."""


@dataclass(frozen=True)
class Trace:
    """Traffic read from a file: rows per whole second from the trace's start.

    :ivar path: the file, as given.
    :ivar format: ``rates`` or ``timestamps``, the form the file was read as.
    :ivar rates: rows/s of second ``i`` (``rates``: as written; ``timestamps``: the records that second).
    :ivar offsets: ``timestamps`` only: each record's time in seconds since the trace's start, sorted.
    """

    path: str
    format: str
    rates: tuple[float, ...]
    offsets: tuple[float, ...] = ()
    _cumulative: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cumulative = [0.0]
        for r in self.rates:
            cumulative.append(cumulative[-1] + r)
        object.__setattr__(self, "_cumulative", tuple(cumulative))

    @property
    def seconds(self) -> int:
        """The trace's length in whole seconds."""
        return len(self.rates)

    def rate(self, t: float) -> float:
        """Rows/s at ``t`` seconds since the trace's start (0 before it and after its last second)."""
        i = math.floor(t)
        return self.rates[i] if 0 <= i < len(self.rates) else 0.0

    def rows(self, t0: float, t1: float) -> float:
        """Rows over ``[t0, t1)``: the records stamped in it (``timestamps``), the rates integrated (``rates``)."""
        if self.format == "timestamps":
            return float(bisect.bisect_left(self.offsets, t1) - bisect.bisect_left(self.offsets, t0))
        return self._integral(t1) - self._integral(t0)

    def _integral(self, t: float) -> float:
        if t <= 0:
            return 0.0
        i = math.floor(t)
        if i >= len(self.rates):
            return self._cumulative[-1]
        return self._cumulative[i] + self.rates[i] * (t - i)


def _time(text: str) -> float | None:
    """Seconds since the epoch of a number or an ISO-8601 date-time (no zone: UTC); None if it is neither."""
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        return value if math.isfinite(value) else None
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return stamp.timestamp()


def _span(seconds: float) -> str:
    """A span for a message: in days from a day up (the limit is a week), else in seconds."""
    return f"{seconds / 86_400:,.1f} days" if seconds >= 86_400 else f"{seconds:,.0f} s"


def _finer_unit(value: float, seconds: float) -> tuple[float, str] | None:
    """The unit ``value`` looks to be in if ``seconds`` is an epoch second: about 1000, 10^6 or 10^9 times it."""
    if seconds < EPOCH_THRESHOLD:
        return None  # not an epoch time: a ratio says nothing about units
    for factor, unit in _FINER_UNITS:
        if factor / 3 <= value / seconds <= factor * 3:
            return factor, unit
    return None


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_trace(path: str | Path, fmt: str = "auto") -> Trace:
    """Read a trace file (module docstring: its two forms).

    :param fmt: ``rates``, ``timestamps``, or ``auto``: ``SECOND,RATE`` lines and lone numbers are rates,
        unless every lone number is an epoch second (>= :data:`EPOCH_THRESHOLD`, i.e. after 1973-03-03)
        or the file holds ISO-8601 date-times one per line: then they are timestamps.
    :raises TraceError: for a missing or unreadable file, one with no data, a malformed line (named by its
        number), a negative rate, seconds that do not increase by whole seconds, or a trace that spans more than
        :data:`MAX_TRACE_SECONDS` (naming the line past it, and saying when a time looks like milliseconds).
    """
    name = str(path)
    if fmt not in TRACE_FORMATS:
        raise TraceError(f"traffic 'trace': format must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TraceError(f"traffic 'trace': file {name!r} does not exist; give file=PATH of a trace "
                         f"({_HELP})") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TraceError(f"traffic 'trace': cannot read file {name!r} ({reason}); give file=PATH of a readable "
                         "text file") from None
    lines = [(n, _SPLIT.split(line.strip())) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if lines and all(_time(f) is None for f in lines[0][1]):  # a first line with no number or time is a header
        lines = lines[1:]
    if not lines:
        raise TraceError(f"traffic 'trace': file {name!r} has no data lines; {_HELP}")
    for n, fields in lines:
        if len(fields) > 2:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: {len(fields)} fields "
                             f"({','.join(fields)!r}); a line holds RATE, SECOND,RATE or one TIMESTAMP")
    if fmt == "auto":
        fmt = _detect(lines)
    if fmt == "timestamps":
        return _timestamps(name, lines)
    return _rates(name, lines)


def _detect(lines: list[tuple[int, list[str]]]) -> str:
    if any(len(fields) == 2 for _, fields in lines):
        return "rates"
    numbers = [_number(fields[0]) for _, fields in lines]
    if all(v is None for v in numbers):
        return "timestamps"  # ISO-8601 date-times (anything else is refused by line below)
    if all(v is not None and v >= EPOCH_THRESHOLD for v in numbers):
        return "timestamps"
    return "rates"


def _rates(name: str, lines: list[tuple[int, list[str]]]) -> Trace:
    rates: list[float] = []
    first: float | None = None
    first_line = (0, "")  # the first SECOND,RATE line: its number and its SECOND, for messages
    for n, fields in lines:
        rate_text = fields[-1]
        rate = _number(rate_text)
        if rate is None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: rate {rate_text!r} is not a number; "
                             "fix or remove that line (a rate is rows/s, e.g. 1200)")
        if rate < 0:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: rate {rate:g} is negative; "
                             "a rate is rows/s >= 0")
        if len(fields) == 1:
            if first is not None:
                raise TraceError(f"traffic 'trace': file {name!r} line {n}: a lone rate after SECOND,RATE lines; "
                                 "give every line as SECOND,RATE or every line as RATE")
            if len(rates) >= MAX_TRACE_SECONDS:
                raise TraceError(f"traffic 'trace': file {name!r} line {n}: more than {MAX_TRACE_SECONDS:,} rates, "
                                 f"so the trace spans more than {_span(MAX_TRACE_SECONDS)}, the most a trace may "
                                 f"span; split the file into traces of at most {MAX_TRACE_SECONDS:,} lines")
            rates.append(rate)
            continue
        if rates and first is None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: SECOND,RATE after lone rates; "
                             "give every line as SECOND,RATE or every line as RATE")
        second = _time(fields[0])
        if second is None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: second {fields[0]!r} is neither a "
                             "number of seconds nor an ISO-8601 date-time; fix or remove that line")
        if first is None:
            first, first_line = second, (n, fields[0])
        offset = second - first
        index = round(offset)
        if abs(offset - index) > 1e-6:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: second {fields[0]!r} is not a whole "
                             "number of seconds after the first line's; give one line per whole second")
        if index < len(rates):
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: second {fields[0]!r} does not come "
                             "after the previous line's; sort the lines by second, one line per second")
        if index >= MAX_TRACE_SECONDS:
            unit = _finer_unit(second, first)
            if unit is not None:
                raise TraceError(f"traffic 'trace': file {name!r} line {n}: second {fields[0]!r} looks like epoch "
                                 f"{unit[1]} (about {unit[0]:,.0f} times line {first_line[0]}'s {first_line[1]!r}); "
                                 f"SECOND must be epoch seconds on every line: divide it by {unit[0]:,.0f}")
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: second {fields[0]!r} is {_span(offset)} "
                             f"after line {first_line[0]}'s {first_line[1]!r}, more than the {_span(MAX_TRACE_SECONDS)}"
                             " a trace may span; split the file into traces of at most that, or fix that line")
        rates.extend([0.0] * (index - len(rates)))
        rates.append(rate)
    return Trace(name, "rates", tuple(rates))


def _timestamps(name: str, lines: list[tuple[int, list[str]]]) -> Trace:
    stamps: list[tuple[float, int, str]] = []  # each record's time, line number and text
    for n, fields in lines:
        if len(fields) != 1:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: {','.join(fields)!r} is not one "
                             "timestamp; a timestamps trace holds one timestamp per record, one per line")
        value = _time(fields[0])
        if value is None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: {fields[0]!r} is neither epoch seconds "
                             "nor an ISO-8601 date-time; fix or remove that line")
        stamps.append((value, n, fields[0]))
    _check_span(name, stamps)
    origin = math.floor(min(s for s, _, _ in stamps))
    offsets = sorted(s - origin for s, _, _ in stamps)
    rates = [0.0] * (math.floor(offsets[-1]) + 1)
    for o in offsets:
        rates[math.floor(o)] += 1.0
    return Trace(name, "timestamps", tuple(rates), tuple(offsets))


def _check_span(name: str, stamps: list[tuple[float, int, str]]) -> None:
    """Refuse timestamps that span more than :data:`MAX_TRACE_SECONDS`, naming a line that is off.

    A time about 1000 (10^6, 10^9) times the median one, or the median about that many times it, is named as in
    another unit; otherwise the earliest record past the limit is named, with the earliest record of all.
    """
    ordered = sorted(stamps)
    origin = math.floor(ordered[0][0])
    if math.floor(ordered[-1][0]) - origin < MAX_TRACE_SECONDS:
        return
    median, median_line, median_text = ordered[(len(ordered) - 1) // 2]
    for value, n, text in stamps:  # in the file's order: the first line in another unit
        unit = _finer_unit(value, median)
        if unit is not None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: timestamp {text!r} looks like epoch "
                             f"{unit[1]} (about {unit[0]:,.0f} times line {median_line}'s {median_text!r}); timestamps "
                             f"must all be epoch seconds: divide it by {unit[0]:,.0f}")
        unit = _finer_unit(median, value)
        if unit is not None:
            raise TraceError(f"traffic 'trace': file {name!r} line {n}: timestamp {text!r} is epoch seconds but most "
                             f"look like epoch {unit[1]} (e.g. line {median_line}'s {median_text!r}); timestamps "
                             f"must all be epoch seconds: divide the others by {unit[0]:,.0f}")
    _, first_line, first_text = ordered[0]
    value, n, text = next(s for s in ordered if math.floor(s[0]) - origin >= MAX_TRACE_SECONDS)
    raise TraceError(f"traffic 'trace': file {name!r} line {n}: timestamp {text!r} is {_span(value - ordered[0][0])} "
                     f"after the earliest, line {first_line}'s {first_text!r}, more than the "
                     f"{_span(MAX_TRACE_SECONDS)} a trace may span; split the file into traces of at most that, "
                     "or remove a stray timestamp")
