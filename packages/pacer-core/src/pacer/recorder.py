"""What a run leaves behind for its report: every arrival and every completed batch, per query.

The Controller feeds a :class:`RunRecorder` as data arrives and batches complete; the report
(:mod:`pacer.report`) is built from it and from the Controller's read-only views, never from the
Controller's own per-query state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pacer.model import BatchReport, Dataset


@dataclass
class QueryRecord:
    """One query's record: ``(arrival time, rows, bytes)`` per arrived dataset and its completed batches."""

    arrivals: list[tuple[float, int, int]] = field(default_factory=list)
    reports: list[BatchReport] = field(default_factory=list)

    def arrived(self, dataset: Dataset) -> None:
        """Record an arrival."""
        self.arrivals.append((dataset.arrival, dataset.rows, dataset.bytes))

    @property
    def rows_in(self) -> int:
        """Rows that arrived."""
        return sum(rows for _, rows, _ in self.arrivals)

    @property
    def bytes_in(self) -> int:
        """Bytes that arrived."""
        return sum(nbytes for _, _, nbytes in self.arrivals)


class RunRecorder:
    """Every query's :class:`QueryRecord`, in registration order."""

    def __init__(self) -> None:
        self._records: dict[str, QueryRecord] = {}

    def add_query(self, query_id: str) -> QueryRecord:
        """Start recording ``query_id``; returns its record (the Controller appends to it)."""
        if query_id in self._records:
            raise ValueError(f"query {query_id!r} is already recorded")
        record = self._records[query_id] = QueryRecord()
        return record

    def record(self, query_id: str) -> QueryRecord:
        """The record of ``query_id``.

        :raises KeyError: for a query never registered.
        """
        try:
            return self._records[query_id]
        except KeyError:
            raise KeyError(f"no record of query {query_id!r}; recorded: {sorted(self._records)}") from None

    def arrivals(self, query_id: str) -> Sequence[tuple[float, int, int]]:
        """``(arrival time, rows, bytes)`` of every dataset of ``query_id``, in arrival order."""
        return tuple(self.record(query_id).arrivals)

    def reports(self, query_id: str | None = None) -> list[BatchReport]:
        """Completed batches of one query, or of all queries in completion order."""
        if query_id is not None:
            return list(self.record(query_id).reports)
        every = [r for record in self._records.values() for r in record.reports]
        return sorted(every, key=lambda r: (r.completed_at, r.query_id))
