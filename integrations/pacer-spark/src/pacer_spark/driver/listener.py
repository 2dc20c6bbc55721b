"""Spark's ``StreamingQueryListener`` for a pacer session: each trigger's progress (which completes its batch) and
each query's end, handed to the driver; Spark's per-trigger durations averaged per source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pyspark.sql.streaming.listener import StreamingQueryListener

from pacer_spark.jvm.progress import TriggerProgress


class DurationAverages:
    """Spark's ``durationMs`` of a query's triggers, averaged per key: running sums, so bounded however long it runs."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self.count = 0

    def add(self, durations_ms: Mapping[str, float]) -> None:
        """One trigger's ``durationMs``."""
        self.count += 1
        for key, value in durations_ms.items():
            self._sums[key] = self._sums.get(key, 0.0) + float(value)

    def averages(self) -> dict[str, float]:
        """ms per key, over every trigger added (empty before the first)."""
        return {k: v / self.count for k, v in sorted(self._sums.items())} if self.count else {}


class ProgressSink(Protocol):
    """What :class:`ProgressListener` reports to (the session's :class:`~pacer_spark.driver.loop.Driver`)."""

    def on_progress(self, progress: TriggerProgress) -> None:
        """A trigger ended."""

    def on_terminated(self, run_id: str, exception: str | None) -> None:
        """A run of a streaming query ended (``run_id``: its run id, not the query's id)."""


class ProgressListener(StreamingQueryListener):
    """Forwards Spark's per-trigger progress (completing batches) and query terminations to the driver."""

    def __init__(self, driver: ProgressSink) -> None:
        self.driver = driver

    def onQueryStarted(self, event: Any) -> None:
        """Nothing to do."""

    def onQueryProgress(self, event: Any) -> None:
        """A trigger ended (after ``commitOffsets``): its progress completes its batch."""
        self.driver.on_progress(TriggerProgress.from_event(event.progress))

    def onQueryIdle(self, event: Any) -> None:
        """Nothing to do."""

    def onQueryTerminated(self, event: Any) -> None:
        """Mark the query dead so no other batch waits for it."""
        self.driver.on_terminated(str(event.runId), event.exception)


__all__ = ["DurationAverages", "ProgressListener", "ProgressSink"]
