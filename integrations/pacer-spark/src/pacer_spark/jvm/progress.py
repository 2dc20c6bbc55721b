"""A trigger's progress as plain values: Spark's ``StreamingQueryProgress`` JSON read once, whether it came from
the listener's event or from a query's progress buffer (:mod:`pacer_spark.jvm.stream_query`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


def parse_progress_timestamp(text: str | None) -> float | None:
    """Spark's progress ``timestamp`` (ISO-8601 UTC, e.g. ``2025-01-31T10:00:00.123Z``) -> epoch seconds.

    :return: None for a missing or unreadable value.
    """
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class TriggerProgress:
    """One trigger of a streaming query as Spark reported it after ``commitOffsets``.

    :ivar query: the query's name (pacer's query id); empty for an unnamed query.
    :ivar batch_id: Spark's batch id (the one ``foreachBatch`` was given).
    :ivar started_at: epoch seconds the trigger started (None if unreadable).
    :ivar durations_ms: ``durationMs`` (``triggerExecution``, ``walCommit``, ``addBatch``, ...).
    :ivar rows: ``numInputRows``.
    :ivar delivered_at: epoch seconds the listener received it.
    :ivar stream_id: the streaming query's id (stable across restarts from one checkpoint).
    :ivar run_id: the id of this run of the query (new at every start): with ``batch_id``, what
        identifies a trigger whatever the query's name.
    :ivar source_metrics: the first source's ``metrics`` (a ``format("pacer")`` source's ``pacer.*`` counters).
    :ivar source_rows: the batch's rows as Spark counted them, where they are one source's (a query reading one
        source); None where it read several, or the trigger's rows belong to more than one of pacer's batches.
    :ivar unanswered: a ``format("pacer")`` source of the query admitted into this batch without the driver's
        answer (its metric ``pacerUnanswered``): the batch ran as the source's next ask reports, not as decided.
    :ivar no_data: a batch Spark formed itself without new data (it ran, every source's ``startOffset`` equals its
        ``endOffset``, no input row): a stateful query's no-data batch, run after its watermark moved to evict state
        and emit what the watermark closed (``spark.sql.streaming.noDataMicroBatches.enabled``). Not a trigger that
        ran no batch (:attr:`executed` False: Spark keeps one such entry every 10 s of idleness in the query's
        progress buffer, under the id of the batch still to come).
    """

    query: str
    batch_id: int
    started_at: float | None
    durations_ms: Mapping[str, float]
    rows: int
    delivered_at: float
    stream_id: str | None = None
    run_id: str | None = None
    source_metrics: Mapping[str, str] = field(default_factory=dict)
    source_rows: int | None = None
    unanswered: bool = False
    no_data: bool = False

    @classmethod
    def from_event(cls, progress: Any, *, now: float | None = None) -> TriggerProgress:
        """Read a ``StreamingQueryProgress`` (the ``event.progress`` of ``onQueryProgress``)."""
        return cls(
            query=str(progress.name or ""),
            batch_id=int(progress.batchId),
            started_at=parse_progress_timestamp(progress.timestamp),
            durations_ms={str(k): float(v) for k, v in dict(progress.durationMs).items()},
            rows=int(progress.numInputRows),
            delivered_at=time.time() if now is None else now,
            stream_id=str(progress.id),
            run_id=str(progress.runId),
            source_metrics=_first_source_metrics([{"metrics": dict(getattr(src, "metrics", {}) or {})}
                                                  for src in (progress.sources or ())]),
            source_rows=_only_source_rows([{"numInputRows": getattr(src, "numInputRows", None)}
                                           for src in (progress.sources or ())]),
            unanswered=_unanswered([{"metrics": dict(getattr(src, "metrics", {}) or {})}
                                    for src in (progress.sources or ())]),
            no_data=_no_data([{"startOffset": getattr(src, "startOffset", None),
                               "endOffset": getattr(src, "endOffset", None)} for src in (progress.sources or ())],
                             int(progress.numInputRows), dict(progress.durationMs)),
        )

    @property
    def engine_s(self) -> float | None:
        """``triggerExecution`` in seconds: latestOffset through commitOffsets (None if not reported)."""
        ms = self.durations_ms.get("triggerExecution")
        return ms / 1000.0 if ms is not None and math.isfinite(ms) and ms >= 0 else None

    @property
    def executed(self) -> bool:
        """Whether the trigger ran a batch (its durations have ``addBatch``): not one that only found nothing to run,
        which Spark records in the query's progress buffer after 10 s of idleness, under the next batch's id."""
        return _ran(self.durations_ms)

    @property
    def ended_at(self) -> float | None:
        """Epoch seconds the trigger ended (start + triggerExecution), None when either is missing."""
        if self.started_at is None or self.engine_s is None:
            return None
        return self.started_at + self.engine_s

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, now: float | None = None) -> TriggerProgress:
        """Read a progress's JSON form (``StreamingQueryProgress.json()`` on the JVM)."""
        return cls(
            query=str(data.get("name") or ""),
            batch_id=int(data["batchId"]),
            started_at=parse_progress_timestamp(data.get("timestamp")),
            durations_ms={str(k): float(v) for k, v in (data.get("durationMs") or {}).items()},
            rows=int(data.get("numInputRows") or 0),
            delivered_at=time.time() if now is None else now,
            stream_id=None if data.get("id") is None else str(data["id"]),
            run_id=None if data.get("runId") is None else str(data["runId"]),
            source_metrics=_first_source_metrics(data.get("sources") or ()),
            source_rows=_only_source_rows(data.get("sources") or ()),
            unanswered=_unanswered(data.get("sources") or ()),
            no_data=_no_data(data.get("sources") or (), int(data.get("numInputRows") or 0),
                             data.get("durationMs") or {}),
        )

    def as_json(self) -> dict[str, Any]:
        """The form kept in the session's per-query progress list."""
        return {"batchId": self.batch_id, "durationMs": dict(self.durations_ms), "numInputRows": self.rows}


def _first_source_metrics(sources: Any) -> dict[str, str]:
    """The ``metrics`` of a progress's first source, as strings (empty when it has none)."""
    for source in sources:
        return {str(k): str(v) for k, v in dict(source.get("metrics") or {}).items()}
    return {}


def _unanswered(sources: Any) -> bool:
    """Whether a source of the progress says it admitted into the batch without the driver's answer."""
    return any(str(dict(source.get("metrics") or {}).get("pacerUnanswered")) == "true" for source in sources)


def _ran(durations_ms: Mapping[str, Any]) -> bool:
    """Whether a trigger's ``durationMs`` are those of a batch Spark ran (its sink was called)."""
    return "addBatch" in durations_ms


def _no_data(sources: Any, rows: int, durations_ms: Mapping[str, Any]) -> bool:
    """Whether a trigger ran a batch that read nothing new: no input row, and every source ended where it started (a
    batch Spark formed without new data; a pacer batch of zero-byte datasets still moves its source's offset)."""
    offsets = [(source.get("startOffset"), source.get("endOffset")) for source in sources]
    return (_ran(durations_ms) and rows == 0 and bool(offsets)
            and all(start is not None and start == end for start, end in offsets))


def _only_source_rows(sources: Any) -> int | None:
    """``numInputRows`` of a progress's only source; None when it has several (or none, or no count)."""
    counts = [source.get("numInputRows") for source in sources]
    return int(counts[0]) if len(counts) == 1 and counts[0] is not None else None
