"""A Spark user's own streaming job, as the paced-query tests run it in a process of its own.

A windowed word count over the files of ``--input`` into Spark's parquet sink (or an idempotent
``foreachBatch`` sink), with a checkpoint: either on ``format("pacer")`` paced by zStream with a
5 s deadline, or on the plain ``format(<source>)`` pacer wraps. ``--available-now`` drains what is
there and exits; otherwise it streams until killed.

    python wordcount_app.py --source csv --input IN --out OUT [--plain] [--available-now] [--foreach-batch]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = "ts TIMESTAMP, word STRING"


def word_counts(spark: Any, source: str, folder: str, plain: bool) -> Any:
    """The user's query: a 10 s tumbling-window count per word, 10 s watermark."""
    from pyspark.sql import functions as F

    if plain:
        reader = spark.readStream.format(source)
    else:
        reader = (spark.readStream.format("pacer").option("pacer.source", source)
                  .option("pacer.admission", "zstream").option("pacer.deadline", "5s"))
    if source == "csv":
        reader = reader.option("header", "true")
    frame = reader.schema(SCHEMA).load(folder)
    return (frame.withWatermark("ts", "10 seconds")
            .groupBy(F.window("ts", "10 seconds").alias("window"), "word").count()
            .select(F.col("window.start").alias("start"), "word", "count"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", required=True, choices=["csv", "json", "parquet"])
    parser.add_argument("--input", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--plain", action="store_true", help="Spark's own source, no pacer")
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--foreach-batch", action="store_true", help="an idempotent foreachBatch sink")
    args = parser.parse_args(argv)

    import pacer_spark

    spark = (pacer_spark.session_builder("local[2]", "wordcount").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = None if args.plain else pacer_spark.attach(spark)
    out = Path(args.out)
    writer = word_counts(spark, args.source, args.input, args.plain).writeStream.queryName("wordcount")
    writer = writer.option("checkpointLocation", str(out / "checkpoint")).outputMode("append")
    if args.foreach_batch:
        def write_batch(batch: Any, batch_id: int) -> None:  # overwrite by batch id: a replay rewrites the same
            batch.write.mode("overwrite").parquet(str(out / "data" / f"batch={batch_id}"))

        writer = writer.foreachBatch(write_batch)
    else:
        writer = writer.format("parquet").option("path", str(out / "data"))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="0 seconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    if handle is not None:
        print("pacer:", json.dumps(handle.report()["spark"]["paced"]), flush=True)
        handle.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
