"""Errors a person can read: the root cause of a failed query first, stops that Spark recognises, and
:class:`ScalingRefused` (a session whose executors pacer cannot change).

A query that fails in a Python ``foreachBatch`` function or a Python data source reaches the listener
as one string: a JVM stack trace wrapping the Python traceback, often hundreds of lines, with the
message that says what to do in the middle. :func:`root_cause` picks that message out;
:func:`write_traces` keeps the full text in a file the one-line message points to.

:func:`stop_error` guards Spark's own stop path: stopping a query interrupts its stream thread; when
that thread is inside a Python ``foreachBatch`` call, the interruption comes back to the JVM as a
Python traceback, which Spark matches against the pattern ``Py4JJavaError: An error occurred while
calling (.|\\n)*InterruptedException`` to tell a stop from a failure. Over a long traceback that
pattern recurses once per character and can overflow the stream thread's stack
(``java.lang.StackOverflowError`` in ``java.util.regex``, then a minute of shutdown).
"""

from __future__ import annotations

import re
from pathlib import Path


class ScalingRefused(ValueError):
    """pacer cannot change this session's executors (``attach(scale=...)``): the message says why and what to do."""

#: Java exceptions Spark treats as "the query was stopped" (StreamExecution.IO_EXCEPTION_NAMES).
INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)

# The last line of a Python traceback, at column 0 after the indented frames: "package.module.Name: message".
_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.\-]*(?::|$)")
_CAUSED_BY = re.compile(r"^\s*Caused by: (.*)$")
#: Wrappers around the real error: Py4J's and PySpark's, and Spark's foreachBatch wrapper.
_WRAPPERS = ("py4j.", "pyspark.errors.exceptions.captured.PythonException",
             "pyspark.errors.exceptions.captured.StreamingQueryException",
             "org.apache.spark.sql.execution.streaming", "org.apache.spark.sql.streaming")
_LONGEST = 2000


def root_cause(trace: str) -> str:
    """One line saying why a query failed, picked from Spark's error text.

    Preference: the last Python exception in the text that is not a Py4J/PySpark wrapper (raised in the
    user's or pacer's code, its message names the problem and the fix), else the innermost Java
    ``Caused by:``, else the first line.
    """
    raw = [line.rstrip() for line in trace.splitlines() if line.strip()]
    if not raw:
        return ""
    lines = [line.strip() for line in raw]
    tracebacks = [i for i, line in enumerate(raw) if "Traceback (most recent call last)" in line]
    python = [line for i, line in enumerate(raw)
              if tracebacks and i > tracebacks[0] and raw[i - 1][:1].isspace() and _PYTHON_ERROR.match(line)
              and not line.startswith(_WRAPPERS)]
    if python:
        best = python[-1]
    else:
        causes = [m.group(1) for line in lines if (m := _CAUSED_BY.match(line))]
        best = causes[-1] if causes else lines[0]
    return best if len(best) <= _LONGEST else best[:_LONGEST] + " ..."


def write_traces(traces: dict[str, str], path: Path) -> Path:
    """Write every query's full error text to ``path`` (parents created) and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = [f"=== query {query_id} ===\n{text.rstrip()}\n" for query_id, text in traces.items()]
    path.write_text("\n".join(parts))
    return path


def is_interruption(error: BaseException) -> bool:
    """Whether ``error`` (a Py4J error out of a Spark call) is the stream thread being interrupted."""
    text = _safe_str(error)
    head = "\n".join(text.splitlines()[:3])
    return any(name in head for name in INTERRUPTIONS)


def stop_error(error: BaseException) -> InterruptedError | None:
    """A short stand-in for ``error`` when it is an interruption, else None.

    Raise it ``from None`` out of a ``foreachBatch`` function: Spark still recognises a stop, and its
    pattern runs over a few lines instead of the whole traceback.
    """
    if not is_interruption(error):
        return None
    name = next(n for n in INTERRUPTIONS if n in _safe_str(error))
    return InterruptedError(f"py4j.protocol.Py4JJavaError: An error occurred while calling the sink: {name}")


def _safe_str(error: BaseException) -> str:
    try:  # a Py4JJavaError's str asks the JVM for the Java trace, which may be shutting down
        return str(error)
    except Exception:
        return repr(error)
