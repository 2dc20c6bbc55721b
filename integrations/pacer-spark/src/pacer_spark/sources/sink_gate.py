"""A ``pacer-gen``/``pacer-files`` query's ``foreachBatch``, wrapped: the batch's pool, then the user's sink.

:meth:`SinkGate.wrap` wraps the user's sink. Before it runs, the driver says which pacer batch Spark's batch is
(the admitted one, or a replay admitted now) and its fair-scheduler pool, which only the stream thread can take (an
admitted batch waited for its turn in its reader's ``latestOffset``; a replay waits here); after it returns, the
driver reads the batch's operator metrics and completes it when its trigger reports. Both are reports to
:meth:`pacer_spark.driver.loop.Driver.step` (:class:`~pacer_spark.driver.protocol.readers.SinkStarts`,
:class:`~pacer_spark.driver.protocol.readers.SinkReturned`): nothing of the protocol lives here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from pacer_spark.driver.loop import Driver
from pacer_spark.driver.protocol.readers import SinkReturned, SinkStarts, SinkTurn
from pacer_spark.errors import stop_error

log = logging.getLogger("pacer_spark")

#: A ``foreachBatch`` function: the batch's DataFrame and Spark's batch id.
Sink = Callable[[DataFrame, int], None]


@dataclass(eq=False)
class SinkGate:
    """Runs each ``foreachBatch`` of a ``pacer-gen``/``pacer-files`` query through the driver (module docstring).

    :param driver: the session's driver.
    """

    driver: Driver

    def wrap(self, query_id: str, sink: Sink) -> Sink:
        """Wrap ``sink``: wait for the batch's turn (FIFO/EDF) or pick its pool (FAIR/RDAS), run, report."""

        def gated(df: DataFrame, spark_batch_id: int) -> None:
            turn: SinkTurn = self.driver.step(SinkStarts(query_id, spark_batch_id))
            if turn.batch_id is None:  # a no-data batch (watermark) or one pacer did not form
                sink(df, spark_batch_id)
                return
            df.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", turn.pool)  # type: ignore[arg-type]
            try:
                sink(df, spark_batch_id)
            except Exception as exc:
                stopped = stop_error(exc)
                if stopped is None:
                    raise
                raise stopped from None  # the query is being stopped: a short error Spark recognises
            self.driver.step(SinkReturned(query_id, turn.batch_id, spark_batch_id))

        return gated


__all__ = ["Sink", "SinkGate"]
