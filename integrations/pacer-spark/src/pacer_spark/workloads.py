"""The papers' queries (LR1, LR1T, LR2, LR3, CM1, CM2) as Structured Streaming queries.

Each has an event-time window and a watermark (dStream's 60 s by default). Aggregations run in
``update`` mode (a window's result is emitted each batch it changes); the LR1 self-join in
``append`` mode. CM1's ``ORDER BY`` is applied inside the sink, where Spark allows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pacer_workloads import WORKLOADS

Sink = Callable[[DataFrame, int], None]


@dataclass(frozen=True)
class SparkWorkload:
    """A workload's streaming DataFrame, its output mode and the sink-side transformation."""

    frame: DataFrame
    output_mode: str
    finish: Callable[[DataFrame], DataFrame]


def _seconds(value: float) -> str:
    return f"{value:g} seconds"


def _identity(df: DataFrame) -> DataFrame:
    return df


def build_workload(workload: str, stream: DataFrame, *, watermark: float = 60.0) -> SparkWorkload:
    """Turn a stream of the workload's schema into its query.

    :param workload: ``lr1``, ``lr1t``, ``lr2``, ``lr3``, ``cm1`` or ``cm2``.
    :param stream: a streaming DataFrame of the workload's stream (``pacer-gen`` or ``pacer-files``).
    :param watermark: event-time watermark delay in seconds.
    :raises ValueError: for an unknown workload.
    """
    try:
        spec = WORKLOADS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; known workloads: {', '.join(WORKLOADS)}") from None
    data = stream.withWatermark("timestamp", _seconds(watermark))
    window = F.window("timestamp", _seconds(spec.window_range), _seconds(spec.window_slide))
    if workload in ("lr1", "lr1t"):
        # SegSpeedStr [range R slide S] AS A, SegSpeedStr AS L WHERE A.vehicle = L.vehicle:
        # an L report joins every window of A holding a report of the same vehicle.
        a = data.select(window.alias("w"), F.col("vehicle").alias("a_vehicle"))
        joined = a.join(
            data,
            (a.a_vehicle == data.vehicle) & (data.timestamp >= a.w.start) & (data.timestamp < a.w.end),
        )
        out = joined.select("timestamp", "vehicle", "speed", "highway", "lane", "direction", "segment")
        return SparkWorkload(out, "append", _identity)
    if workload == "lr2":
        out = (
            data.groupBy(window.alias("window"), "highway", "direction", "segment")
            .agg(F.avg("speed").alias("avgSpeed"))
            .where(F.col("avgSpeed") < 40.0)
        )
        return SparkWorkload(out, "update", _identity)
    if workload == "lr3":
        out = data.groupBy(window.alias("window"), "highway", "direction", "segment").agg(
            F.count("vehicle").alias("numVehicle")
        )
        return SparkWorkload(out, "update", _identity)
    if workload == "cm1":
        out = data.groupBy(window.alias("window"), "category").agg(F.sum("cpu").alias("totalCpu"))
        return SparkWorkload(out, "update", lambda df: df.orderBy("totalCpu"))
    if workload == "cm2":
        out = (
            data.where(F.col("eventType") == 1)
            .groupBy(window.alias("window"), "jobId")
            .agg(F.avg("cpu").alias("avgCpu"))
        )
        return SparkWorkload(out, "update", _identity)
    raise ValueError(f"workload {workload!r} has no Spark query")  # pragma: no cover - WORKLOADS lists the six


def noop_sink(finish: Callable[[DataFrame], DataFrame] = _identity) -> Sink:
    """A sink that computes the whole batch and discards it (Spark's ``noop`` format)."""

    def sink(df: DataFrame, batch_id: int) -> None:
        finish(df).write.format("noop").mode("overwrite").save()

    return sink
