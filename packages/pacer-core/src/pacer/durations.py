"""The one duration parser of pacer: ``"10s"``, ``"500ms"``, ``"2min"``, ``"1.5h"``, ``"5 minutes"``, ``"10"`` or a
number -> seconds; and its one boolean reader, :func:`parse_boolean` (``true``/``false``, as Spark reads its own).

Every command-line flag, run configuration, Spark conf and source option that takes a duration reads it here:
:func:`parse_duration` for a value that must be one, :func:`parse_seconds` for an optional one (None stays None),
named after the option it was given for so that an error says which option and what a valid value looks like.
A leaf module: it imports nothing of pacer's. Library code gets ``ValueError``; a command turns it into a usage
error (:func:`pacer.cli.run_command.seconds_flag` does for a duration flag; :func:`flag_seconds` is an ``argparse``
``type=`` for one).
"""

from __future__ import annotations

import argparse
import re

__all__ = ["flag_seconds", "parse_boolean", "parse_duration", "parse_seconds"]

#: Units, as Spark writes them in its confs (``ms``, ``s``, ``min``, ``h``, ``d``) and in a trigger's interval
#: (``"1 minute"``, ``"500 milliseconds"``), to seconds.
_UNIT_S = {"ms": 0.001, "msec": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
           "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
           "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
           "h": 3600.0, "hour": 3600.0, "hours": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0}
_DURATION = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)("
                       + "|".join(sorted(_UNIT_S, key=len, reverse=True)) + ")?$")
#: What a valid duration looks like, for error messages.
EXAMPLES = "10s, 500ms, 2m or plain seconds"


def parse_duration(value: str | float) -> float:
    """``"10s"``, ``"500ms"``, ``"2min"``, ``"1.5h"``, ``"10"``, Spark's trigger style (``"1 minute"``,
    ``"500 milliseconds"``) or a number -> seconds.

    :raises ValueError: for anything else, or a value that is not finite.
    """
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value).strip().lower().replace(" ", ""))
        if not match:
            raise ValueError(f"cannot read a duration from {value!r}; write e.g. {EXAMPLES}")
        seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"duration {value!r} is not finite")
    return seconds


def parse_seconds(value: str | float | None, option: str | None = None, *, positive: bool = False) -> float | None:
    """An optional duration (:func:`parse_duration`: a string with or without a unit, or a number) -> seconds;
    None stays None.

    :param option: the flag, conf or option ``value`` was given for (``"--deadline"``, ``"spark.pacer.deadline"``):
        an error message names it and says what a valid value looks like.
    :param positive: the duration must be > 0.
    :raises ValueError: for a value that is not a finite duration, or (``positive``) not > 0.
    """
    if value is None:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError:
        if option is None:
            raise
        raise ValueError(f"{option} expects a duration such as {EXAMPLES}, got {value!r}") from None
    if positive and not seconds > 0:
        raise ValueError(f"{option or 'a duration'} must be > 0 seconds, got {value!r}")
    return seconds


def flag_seconds(value: str) -> float:
    """A command-line flag's duration (an ``argparse`` ``type=``): ``--duration 10m``, ``--duration "1 minute"``,
    ``--duration 600`` -> seconds (a flag's range, > 0 or >= 0, is its command's to check).

    :raises argparse.ArgumentTypeError: argparse's usage error, naming the flag, the value and what to write.
    """
    try:
        return parse_duration(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a duration such as {EXAMPLES}, got {value!r}") from None


def parse_boolean(value: object, setting: str) -> bool:
    """``true`` or ``false``, any case, spaces around (as Spark reads a boolean conf), or a bool -> a bool; anything
    else is refused naming ``setting`` (``ValueError``), never read as false."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("true", "false"):
        return word == "true"
    raise ValueError(f"{setting} expects true or false, got {value!r}")
