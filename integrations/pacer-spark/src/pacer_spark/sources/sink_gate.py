"""A ``pacer-gen``/``pacer-files`` query's ``foreachBatch``: the batch's pool, its sink, its metrics.

:meth:`SinkGate.wrap` wraps the user's sink: the Spark batch is matched with the batch pacer admitted
(or a replay, :meth:`~pacer_spark.sources.admission.AdmissionService.claim`). An admitted batch waited for its
turn in its reader's ``latestOffset`` (:class:`~pacer_spark.sources.admission.AdmissionService`); here it learns
its fair-scheduler pool, which only the stream thread can take (a replay, admitted here, waits for its
turn here too). Then the sink runs, and the wrapper reads the
operator metrics of its executed plan and hands the batch to the
:class:`~pacer_spark.driver.completion.BatchCompletion`, which completes it when its trigger reports.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from pacer_spark.driver.completion import SinkDone
from pacer_spark.driver.loop import Driver
from pacer_spark.errors import stop_error
from pacer_spark.jvm import stream_query
from pacer_spark.plan.dag import operator_metrics
from pacer_spark.sources.admission import AdmissionService

log = logging.getLogger("pacer_spark")

#: A ``foreachBatch`` function: the batch's DataFrame and Spark's batch id.
Sink = Callable[[DataFrame, int], None]


@dataclass(eq=False)
class SinkGate:
    """Runs each ``foreachBatch`` of a ``pacer-gen``/``pacer-files`` query through the gate (module docstring).

    :param driver: the session's driver (its Controller under its lock, gate and batch completion).
    :param admission: the session's admission service (the queries' sources).
    :param collect_metrics: read per-operator metrics from each batch's executed plan.
    """

    driver: Driver
    admission: AdmissionService
    collect_metrics: bool

    def wrap(self, query_id: str, sink: Sink) -> Sink:
        """Wrap ``sink``: wait for the batch's turn (FIFO/EDF) or pick its pool (FAIR/RDAS), run, report."""

        def gated(df: DataFrame, spark_batch_id: int) -> None:
            batch_id = self.admission.claim(query_id, spark_batch_id)
            if batch_id is None:  # a no-data batch (watermark) or one pacer did not form
                sink(df, spark_batch_id)
                return
            self._wait_turn(query_id, batch_id, df)
            try:
                sink(df, spark_batch_id)
            except Exception as exc:
                stopped = stop_error(exc)
                if stopped is None:
                    raise
                raise stopped from None  # the query is being stopped: a short error Spark recognises
            self._finish(query_id, batch_id, spark_batch_id)

        return gated

    def _wait_turn(self, query_id: str, batch_id: str, df: DataFrame) -> None:
        source = self.admission.sources[query_id]
        if source.observe_only:  # Spark's own trigger: pacer only observes
            with self.driver.books() as books:
                books.start(batch_id)
            return
        turn = self.driver.pass_turn(batch_id)  # passed at admission: its pool
        with self.driver.books() as books:
            if batch_id not in self.admission.gated:  # a replayed batch, admitted here: its wait counts here
                source.gate_wait_s.add(turn.waited_s)
        df.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", turn.pool)  # type: ignore[arg-type]

    def _finish(self, query_id: str, batch_id: str, spark_batch_id: int) -> None:
        """The sink returned: read the operator metrics (the next trigger replaces the executed plan), free the
        gate and leave completion to the trigger's progress event, after commitOffsets (see pacer_spark.driver.completion)."""
        source = self.admission.sources[query_id]
        metrics = []
        if self.collect_metrics and source.handle is not None:
            t0 = time.perf_counter()
            try:
                with self.driver.books() as books:
                    batch = books.batch(batch_id).batch
                    dag = books.query(query_id).spec.dag
                root = stream_query.executed_plan(source.handle)
                if root is None:
                    raise LookupError("the query has no executed plan yet")
                metrics = operator_metrics(root, dag, batch.placement,
                                           batch_bytes=batch.bytes, batch_rows=batch.rows)
            except Exception:
                log.debug("no operator metrics for %s", batch_id, exc_info=True)
            source.metrics_s.add(time.perf_counter() - t0)
        self.driver.sink_done(query_id, SinkDone(batch_id, spark_batch_id, time.time(), metrics))


__all__ = ["Sink", "SinkGate"]
