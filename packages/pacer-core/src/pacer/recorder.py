"""What a run leaves behind for its report, per query, in memory bounded whatever the run's length.

The Controller feeds a :class:`RunRecorder` as data arrives and batches complete; the report
(:mod:`pacer.report`) is built from it and from the Controller's read-only views, never from the
Controller's own per-query state.

Per query a :class:`QueryRecord` keeps exact totals (datasets, rows and bytes in and processed, batches,
processing and engine time, task time, deadline misses counted in datasets and in their rows, datasets and rows
shed, the engine's own no-data batches and what they cost),
as running counters, never per-dataset lists; bounded summaries of the dataset latencies and batch
processing times (:class:`pacer.summary.StreamingSummary`: exact percentiles while the run has at most
``latency_window`` datasets / ``recent`` batches, within 1 % beyond), the report's series
(:class:`pacer.series.SeriesAccumulator`) and the most recent ``recent`` arrivals and batch reports.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

from pacer.metrics import batch_late, check_non_negative
from pacer.model import BatchReport, Dataset, QueryHistory
from pacer.series import SeriesAccumulator
from pacer.summary import StreamingSummary

#: Arrivals and batch reports a record keeps per query (the most recent), by default.
RECENT = 1024
#: Datasets the recent batch reports of a query hold together at most (the window shrinks for big batches).
RECENT_DATASETS = 16384
#: How a runtime may date arrivals (:meth:`QueryRecord.dated_by`).
ARRIVAL_CLOCKS = ("source-time", "first-seen")
#: Dataset latencies kept per query for exact percentiles (8 bytes each), by default.
LATENCY_WINDOW = 16384


class QueryRecord:
    """One query's record (module docstring).

    :param recent: how many of the latest arrivals (``(arrival time, rows, bytes)``) and batch reports
        :attr:`arrivals` and :attr:`reports` keep (reports: fewer when they hold more than
        ``RECENT_DATASETS`` datasets together).
    :param deadline: the query's deadline, for :attr:`miss_datasets` and :attr:`miss_rows`.
    :param latency_window: latencies kept for exact percentiles.
    :param interval: the series' initial bucket width, seconds.
    """

    def __init__(self, recent: int = RECENT, *, deadline: float = math.inf,
                 latency_window: int = LATENCY_WINDOW, interval: float = 1.0) -> None:
        self.arrivals: deque[tuple[float, int, int]] = deque(maxlen=recent)
        self.reports = QueryHistory(maxlen=recent, max_datasets=RECENT_DATASETS)
        self.deadline = deadline
        self.datasets_in = 0
        self.rows_in = 0
        self.bytes_in = 0
        self.batches = 0
        self.rows_processed = 0
        self.bytes_processed = 0
        self.processing_s = 0.0
        self.engine_s = 0.0
        #: the engine's time less gate waits, the gate waits, and the core-seconds of the batches that measured them
        #: (no-data batches and task time outside any batch included: :meth:`no_data_batch`, :meth:`unbatched`)
        self.trigger_s = 0.0
        self.gate_wait_s = 0.0
        self.busy_core_s = 0.0
        self.busy_batches = 0
        #: the tasks' CPU time and the run time of their failed or killed attempts (part of ``busy_core_s``), and
        #: whether any batch measured them
        self.cpu_core_s = 0.0
        self.failed_core_s = 0.0
        self.cpu_measured = False
        #: batches the engine formed itself without new data (Spark's after a watermark moved), and what they cost
        #: (counted in the totals above too); None: not measured
        self.no_data_batches = 0
        self.no_data_trigger_s = 0.0
        self.no_data_busy_core_s: float | None = None
        self.no_data_cpu_core_s: float | None = None
        #: Completed datasets whose latency exceeded the deadline, and their rows (shed ones not included).
        self.miss_datasets = 0
        self.miss_rows = 0
        #: Datasets shed (never completed) and their rows.
        self.shed_datasets = 0
        self.shed_rows = 0
        self.gpu_ratio_sum = 0.0
        self.placed = 0
        self.latency = StreamingSummary(keep_last=latency_window)
        self.processing = StreamingSummary(keep_last=recent)
        self.series = SeriesAccumulator(width=interval)
        #: How arrivals are dated: ``"source-time"`` (the data's own time) or ``"first-seen"``.
        self.arrival = "source-time"

    def dated_by(self, clock: str) -> None:
        """Say how the runtime dates this query's arrivals: ``"source-time"`` where the data carries its own
        time (a Kafka record's timestamp, a file's modification time, a generator's schedule), ``"first-seen"``
        where it is the moment the runtime first saw the data."""
        if clock not in ARRIVAL_CLOCKS:
            raise ValueError(f"arrival clock must be one of {ARRIVAL_CLOCKS}, got {clock!r}")
        self.arrival = clock

    @property
    def complete(self) -> bool:
        """True while :attr:`arrivals` and :attr:`reports` still hold every arrival and batch of the run."""
        return len(self.arrivals) == self.datasets_in and len(self.reports) == self.batches

    def arrived(self, dataset: Dataset) -> None:
        """Record an arrival."""
        self.arrivals.append((dataset.arrival, dataset.rows, dataset.bytes))
        self.datasets_in += 1
        self.rows_in += dataset.rows
        self.bytes_in += dataset.bytes
        self.series.arrived(dataset.arrival, dataset.rows)

    def withdrawn(self, datasets: Sequence[Dataset]) -> None:
        """Take back the latest arrivals ``datasets`` (their source restarts and offers them again)."""
        for dataset in reversed(datasets):
            if self.arrivals and self.arrivals[-1] == (dataset.arrival, dataset.rows, dataset.bytes):
                self.arrivals.pop()
            self.datasets_in -= 1
            self.rows_in -= dataset.rows
            self.bytes_in -= dataset.bytes
            self.series.withdrawn(dataset.arrival, dataset.rows)

    def completed(self, report: BatchReport, *, recounted: int = 0) -> None:
        """Record a completed batch; ``recounted``: the rows the engine counted in it beyond its datasets' own counts
        (they arrived too: :attr:`rows_in` grows by as many)."""
        self.rows_in += recounted
        self.reports.add(report)
        self.batches += 1
        self.rows_processed += report.rows
        self.bytes_processed += report.bytes
        self.processing_s += report.processing_s
        self.engine_s += report.cost_s
        self.trigger_s += report.trigger_s
        self.gate_wait_s += report.gate_wait_s
        if report.busy_core_s is not None:
            self.busy_core_s += report.busy_core_s
            self.busy_batches += 1
        self._task_parts(report.cpu_core_s, report.failed_core_s)
        self.processing.add(report.processing_s)
        for _, latency in report.dataset_latencies:
            self.latency.add(latency)
        late, missed = batch_late(report, self.deadline)
        self.miss_datasets += late
        self.miss_rows += missed
        if report.placement is not None:
            self.gpu_ratio_sum += report.placement.ran_gpu_ratio
            self.placed += 1
        self.series.completed(report, missed)

    def _task_parts(self, cpu_core_s: float | None, failed_core_s: float | None) -> None:
        """Add the CPU time and failed attempts' run time the runtime measured (nothing where it did not)."""
        if cpu_core_s is not None:
            self.cpu_core_s += cpu_core_s
            self.cpu_measured = True
        if failed_core_s is not None:
            self.failed_core_s += failed_core_s

    def no_data_batch(self, trigger_s: float, *, busy_core_s: float | None = None, cpu_core_s: float | None = None,
                      failed_core_s: float | None = None) -> None:
        """A batch the engine formed itself without new data (Spark's no-data batch, run after a watermark moved to
        evict state and emit closed windows): no dataset and no latency, but its ``trigger_s`` (also its engine time)
        and its tasks' core-seconds count in the query's totals, and apart as no-data."""
        check_non_negative(trigger_s=trigger_s, busy_core_s=busy_core_s, cpu_core_s=cpu_core_s,
                           failed_core_s=failed_core_s)
        self.no_data_batches += 1
        self.no_data_trigger_s += trigger_s
        self.trigger_s += trigger_s
        self.engine_s += trigger_s
        if busy_core_s is not None:
            self.no_data_busy_core_s = (self.no_data_busy_core_s or 0.0) + busy_core_s
            self.busy_core_s += busy_core_s
        if cpu_core_s is not None:
            self.no_data_cpu_core_s = (self.no_data_cpu_core_s or 0.0) + cpu_core_s
        self._task_parts(cpu_core_s, failed_core_s)

    def unbatched(self, *, busy_core_s: float, cpu_core_s: float | None = None,
                  failed_core_s: float | None = None) -> None:
        """Task time of the query that no batch took: tasks of a job outside any batch, a task counted after its
        batch was read. It counts in the query's totals."""
        check_non_negative(busy_core_s=busy_core_s, cpu_core_s=cpu_core_s, failed_core_s=failed_core_s)
        self.busy_core_s += busy_core_s
        self._task_parts(cpu_core_s, failed_core_s)

    def shed(self, datasets: Sequence[Dataset]) -> None:
        """Record datasets shed (dropped unprocessed): they count as missed in the report."""
        self.shed_datasets += len(datasets)
        self.shed_rows += sum(d.rows for d in datasets)

    @property
    def misses(self) -> int:
        """Completed datasets over the deadline: an alias of :attr:`miss_datasets`."""
        return self.miss_datasets

    @property
    def gpu_operator_ratio(self) -> float:
        """Mean share of operators that ran on the GPU over the batches with a placement (exact)."""
        return self.gpu_ratio_sum / self.placed if self.placed else 0.0


class RunRecorder:
    """Every query's :class:`QueryRecord`, in registration order.

    :param recent: arrivals and batch reports each record keeps (the most recent).
    """

    def __init__(self, recent: int = RECENT) -> None:
        self.recent = recent
        self._records: dict[str, QueryRecord] = {}

    def add_query(self, query_id: str, *, deadline: float = math.inf) -> QueryRecord:
        """Start recording ``query_id``; returns its record (the Controller feeds it)."""
        if query_id in self._records:
            raise ValueError(f"query {query_id!r} is already recorded")
        record = self._records[query_id] = QueryRecord(self.recent, deadline=deadline)
        return record

    def record(self, query_id: str) -> QueryRecord:
        """The record of ``query_id``.

        :raises KeyError: for a query never registered.
        """
        try:
            return self._records[query_id]
        except KeyError:
            raise KeyError(f"no record of query {query_id!r}; recorded: {sorted(self._records)}") from None

    def records(self) -> Iterable[QueryRecord]:
        """Every query's record, in registration order."""
        return self._records.values()

    def arrivals(self, query_id: str) -> Sequence[tuple[float, int, int]]:
        """``(arrival time, rows, bytes)`` of the latest ``recent`` datasets of ``query_id``, in arrival order
        (every one while the run has had at most ``recent``)."""
        return tuple(self.record(query_id).arrivals)

    def reports(self, query_id: str | None = None) -> list[BatchReport]:
        """The latest ``recent`` completed batches of one query, or of each query merged in completion order."""
        if query_id is not None:
            return list(self.record(query_id).reports)
        every = [r for record in self._records.values() for r in record.reports]
        return sorted(every, key=lambda r: (r.completed_at, r.query_id))
