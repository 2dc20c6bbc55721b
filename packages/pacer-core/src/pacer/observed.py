"""A query observed as it runs without pacing: its arrivals and what each of its batches cost, as a file.

Observe mode (pacer-spark's ``pacer.observe`` option) lets Spark admit as it would without pacer and appends every
completed batch of the query to a JSON-lines file: one header line per run (``{"schema": "pacer.observed/1",
"query": ..., "cores": ..., "partitions": ..., "options": {...}}``), then one line per batch (its seq, admitted,
started and completed times, rows, bytes, engine seconds, busy core-seconds, and the arrival time and rows of each
dataset it read). ``pacer advise`` (pacer-bench) replays those arrivals in the simulator with the query's own costs
to say what pacing would do. This module is the format: :class:`Recorder` writes it, :func:`read` reads it back.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pacer.engine_profile import CostPoint
from pacer.model import BatchReport

#: The header line's ``schema``; :func:`read` refuses other files.
SCHEMA = "pacer.observed/1"


class ObservedError(ValueError):
    """A recording that cannot be read (not one, or written by another version)."""


@dataclass(frozen=True)
class ObservedBatch:
    """One batch as the engine ran it: when, how much, what it cost, the ``arrivals`` (time, rows) of its data and
    the ``tasks`` that ran it (None where not counted: a recording written before they were)."""

    seq: int
    admitted_at: float
    started_at: float
    completed_at: float
    rows: int
    bytes: int
    trigger_s: float
    busy_core_s: float | None
    arrivals: tuple[tuple[float, int], ...]
    tasks: int | None = None

    @classmethod
    def of(cls, report: BatchReport) -> ObservedBatch:
        """The batch a completed report describes (a dataset arrived ``latency`` before the batch completed)."""
        rows = report.dataset_rows or (0,) * len(report.dataset_latencies)
        arrivals = tuple((report.completed_at - latency, int(n))
                         for (_, latency), n in zip(report.dataset_latencies, rows, strict=True))
        return cls(report.seq, report.admitted_at, report.started_at, report.completed_at, report.rows, report.bytes,
                   report.trigger_s, report.busy_core_s, arrivals, report.tasks)

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "admitted_at": self.admitted_at, "started_at": self.started_at,
                "completed_at": self.completed_at, "rows": self.rows, "bytes": self.bytes,
                "trigger_s": self.trigger_s, "busy_core_s": self.busy_core_s,
                "arrivals": [[round(t, 6), n] for t, n in self.arrivals], "tasks": self.tasks}


@dataclass
class Observation:
    """A recording read back: the latest run's ``header`` and every batch of every run in the file, in order (an
    arrival dated before its run started, a backlog dated by the data's own time, counts from the start)."""

    header: dict[str, Any]
    batches: list[ObservedBatch] = field(default_factory=list)

    @property
    def start(self) -> float:
        """The first arrival (or batch start) recorded: second 0 of :meth:`rates`."""
        times = [t for b in self.batches for t, _ in b.arrivals] or [b.started_at for b in self.batches]
        return min(times) if times else 0.0

    @property
    def duration_s(self) -> float:
        """Seconds from the first arrival to the last batch's completion."""
        return max((b.completed_at for b in self.batches), default=self.start) - self.start

    def rates(self) -> list[float]:
        """Rows that arrived in each whole second from :attr:`start` (the simulator's trace of rates)."""
        start = self.start
        per_second = [0.0] * max(1, math.ceil(self.duration_s))
        for b in self.batches:
            for t, n in b.arrivals:
                per_second[min(len(per_second) - 1, max(0, int(t - start)))] += n
        return per_second

    def arrival_period_s(self, *, finest: float = 0.05) -> float:
        """Seconds between the query's arrivals, for the simulator's datasets: the median gap between consecutive
        recorded arrivals, within ``finest``-1 s (a file a second gives 1; a Kafka topic read by Spark's default
        trigger, its batches' cadence). 1 with fewer than two arrivals."""
        times = sorted(t for b in self.batches for t, _ in b.arrivals)
        gaps = [b - a for a, b in itertools.pairwise(times) if b > a]
        return min(1.0, max(finest, statistics.median(gaps))) if gaps else 1.0

    def cost_points(self) -> list[CostPoint]:
        """The batches with data as :func:`pacer.engine_profile.fit_batches` reads them: each ``batch``, the first of
        the recording apart as ``first`` (it pays for compiling the plan)."""
        measured = [b for b in self.batches if b.rows > 0]
        return [CostPoint("first" if i == 0 else "batch", b.rows, b.bytes, b.trigger_s, b.busy_core_s, b.tasks,
                          len(b.arrivals) or None)
                for i, b in enumerate(measured)]


class Recorder:
    """Appends a query's completed batches to its recording (module docstring), each once, in completion order: a
    run's header, then the batches after seq ``after`` (those of an earlier run of the query are its recorder's)."""

    def __init__(self, path: str | Path, header: Mapping[str, Any], *, after: int = -1) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._last_seq = after
        with self.path.open("a", encoding="utf-8") as out:
            _line(out, {"schema": SCHEMA, **header})

    def record(self, reports: Iterable[BatchReport]) -> int:
        """Append the reports not recorded yet (by their seq); how many were."""
        new = [r for r in reports if r.seq > self._last_seq]
        if not new:
            return 0
        with self.path.open("a", encoding="utf-8") as out:
            for report in sorted(new, key=lambda r: r.seq):
                _line(out, ObservedBatch.of(report).as_dict())
        self._last_seq = max(r.seq for r in new)
        return len(new)


def _line(out: TextIO, doc: Mapping[str, Any]) -> None:
    out.write(json.dumps(doc, separators=(",", ":")) + "\n")


def read(path: str | Path) -> Observation:
    """The recording at ``path``.

    :raises ObservedError: a file that is missing, not a recording, or holds no batch.
    """
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise ObservedError(f"cannot read the recording {where}: {exc.strerror or exc}") from None
    # every line is written whole with its newline: text after the last one is a line still being written (read
    # while the query runs) or cut short (the driver died mid-write), not yet part of the recording
    lines = text[:text.rfind("\n") + 1].splitlines()
    observation: Observation | None = None
    started = -math.inf  # the run's start: data dated earlier (a backlog, by its own time) arrived for it then
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            doc = json.loads(text)
            if "schema" in doc:
                if doc["schema"] != SCHEMA:
                    raise ObservedError(f"{where}:{number}: a {doc['schema']!r} file, not a {SCHEMA!r} recording")
                batches = observation.batches if observation is not None else []
                observation = Observation(dict(doc), batches)
                started = float(doc.get("started_at") or -math.inf)
                continue
            if observation is None:
                raise ObservedError(f"{where}:{number}: a batch before any header: not a {SCHEMA!r} recording")
            observation.batches.append(ObservedBatch(
                int(doc["seq"]), float(doc["admitted_at"]), float(doc["started_at"]), float(doc["completed_at"]),
                int(doc["rows"]), int(doc["bytes"]), float(doc["trigger_s"]),
                None if doc.get("busy_core_s") is None else float(doc["busy_core_s"]),
                tuple((max(float(t), started), int(n)) for t, n in doc.get("arrivals") or ()),
                None if doc.get("tasks") is None else int(doc["tasks"])))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, ObservedError):
                raise
            raise ObservedError(f"{where}:{number}: not a line of a {SCHEMA!r} recording ({exc})") from None
    if observation is None or not observation.batches:
        raise ObservedError(f"{where} holds no batch: observe the query longer (option pacer.observe) before "
                            "asking for advice")
    return observation
