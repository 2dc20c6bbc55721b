"""Driver-side state of one ``pacer-gen``/``pacer-files`` source: what its reader listed, what was admitted,
what Spark ran (:class:`SourceState`, kept by :class:`pacer_spark.driver.protocol.readers.AdmissionService`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.query import StreamingQuery

from pacer import Dataset
from pacer.summary import StreamingSummary
from pacer_spark.driver.listener import DurationAverages
from pacer_spark.gen_plan import GenPlan
from pacer_spark.jvm import stream_query
from pacer_spark.manifest import FILES_FORMAT, Manifest, ignored_name
from pacer_spark.reader_offsets import shed_in


@dataclass
class SourceState:
    """Driver-side state of one query's ``pacer-gen``/``pacer-files`` source.

    :ivar next_index: the next dataset offset to hand to the Controller (None before the reader asked).
    :ivar admitted_end: the end offset of the last admitted batch.
    :ivar handle: the streaming query, once started; :ivar stream_id: its id.
    :ivar observe_only: Spark's own trigger decides its batches; pacer only observes.
    :ivar no_data_batches: whether the query started with Spark's no-data batches on (None: not started yet).
    :ivar listed: a ``pacer-files`` reader has listed its folder at least once.
    :ivar manifest: a ``pacer-files`` manifest: option ``manifest``, or in the checkpoint once
        :meth:`AdmissionService.checkpointed` knows it (None: ``default_manifest``, for a plain ``writeStream``).
    """

    query_id: str
    fmt: str
    options: dict[str, str]
    gen: GenPlan | None = None
    files: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_index: int | None = None
    admitted_end: int | None = None
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    handle: StreamingQuery | None = None
    stream_id: str | None = None
    observe_only: bool = False
    no_data_batches: bool | None = None
    dead: bool = False
    error: str | None = None
    gate_wait_s: StreamingSummary = field(default_factory=StreamingSummary)
    metrics_s: StreamingSummary = field(default_factory=StreamingSummary)
    durations: DurationAverages = field(default_factory=DurationAverages)
    shed: list[int] = field(default_factory=list)
    spark_batches: int = 0
    #: batches Spark ran without the driver's answer (a replay after a restart, or the reader admitting on its own:
    #: accounted from Spark's offset log), and batches the driver admitted that Spark never ran (taken back)
    unanswered: int = 0
    retracted: int = 0
    #: the pacer batch a ``foreachBatch`` of this run last ran (a batch admitted but never claimed never ran)
    claimed: str | None = None
    listed: bool = False
    manifest: Path | None = None
    default_manifest: Path | None = None

    def manifest_path(self) -> Path:
        """Where this ``pacer-files`` source records its files' offsets (see :attr:`manifest`)."""
        path = self.manifest or self.default_manifest
        assert path is not None, "a pacer-files source always has a default manifest"
        return path

    def dataset(self, index: int) -> Dataset | None:
        """The dataset at offset ``index``: rebuilt from the traffic plan, or the file the reader told about."""
        if self.gen is not None:
            return self.gen.dataset(self.query_id, index)
        entry = self.files.get(index)
        if entry is None:
            return None
        return Dataset(f"{index}:{entry['name']}", float(entry["arrival"]), int(entry["bytes"]), int(entry["rows"]),
                       handle=index)

    def drained(self) -> bool:
        """Whether every dataset of the source was handed to the Controller (generated, or in its folder)."""
        if self.gen is not None:
            return self.next_index is not None and self.next_index >= len(self.gen.arrivals())
        known = max(self.files) + 1 if self.files else (self.next_index or 0)
        if not self.listed or known == 0 or known < self.files_waiting():
            return False  # not listed yet, no file yet, or files the reader has not told about
        return (self.next_index or 0) >= known

    def files_waiting(self) -> int:
        """Datasets waiting in a ``pacer-files`` folder right now (what its reader will list)."""
        try:
            return sum(1 for e in os.scandir(self.options["path"]) if e.is_file() and not ignored_name(e.name))
        except FileNotFoundError:
            return 0

    def quarantined(self) -> int:
        """Rows a ``pacer-files`` source set aside as malformed."""
        directory = Path(self.options.get("quarantine") or Path(self.options["path"]) / "_pacer_quarantine")
        if not directory.is_dir():
            return 0
        return sum(len(p.read_text().splitlines()) for p in directory.glob("*.bad"))

    def missing_files(self) -> int:
        """Files a ``pacer-files`` source listed that were gone before their batch read them (quarantine records)."""
        directory = Path(self.options.get("quarantine") or Path(self.options["path"]) / "_pacer_quarantine")
        return len(list(directory.glob("*.missing"))) if directory.is_dir() else 0

    def load_manifest(self) -> None:
        """Describe a ``pacer-files`` source's datasets from its manifest (a replay after a restart)."""
        if self.fmt == FILES_FORMAT:
            for entry in Manifest(self.manifest_path()).entries:
                self.files.setdefault(entry.index, entry.as_json())

    def logged_range(self, spark_batch_id: int) -> tuple[int, int, frozenset[int]] | None:
        """``(start, end, shed)``: the dataset offsets of a Spark batch, from the query's offset log, and the
        datasets its end offset records as shed (None: not started, or not readable)."""
        if self.handle is None:
            return None
        logged = stream_query.logged_offsets(self.handle, spark_batch_id)
        if logged is None:  # an internal API changed: pacer then just does not track this batch
            return None
        begin, end = logged
        if end is None or begin is None:
            return None
        return int(begin["index"]), int(end["index"]), shed_in(end)


__all__ = ["SourceState"]
