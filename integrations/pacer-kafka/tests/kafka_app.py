"""A Spark user's own job reading Kafka through ``format("pacer")``, as ``test_paced_kafka.py`` runs it in its own process.

Every record of ``--topic`` (from the earliest offset) into Spark's parquet sink with a checkpoint,
as (key, value, partition, offset, the record's timestamp, the batch's timestamp), on
``format("pacer").option("pacer.source", "kafka")`` paced by zStream with a ``--deadline`` (5 s),
``maxOffsetsPerTrigger`` as the cap (0: none). ``--available-now`` drains what is there and exits;
otherwise it streams until killed, or until ``--stop-file`` exists. At the end it prints
``pacer: {summary}``, ``report: {the query's part of pacer's report}`` and ``progress: [per trigger]``.

    python kafka_app.py --bootstrap-servers HOST:PORT --topic T --out OUT [--available-now] [--max-offsets N]
                        [--deadline 10s] [--stop-file PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

QUERY = "kafka-keys"
#: The driver JVM with the C1 compiler only, as the test broker runs: on 2 shared cores a session came up in
#: 12 s instead of 16.5 s and its first small job took 7 s instead of 12 s (two alternating pairs, load ~6).
FAST_START = {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def records(spark: Any, bootstrap_servers: str, topic: str, max_offsets: int, deadline: str) -> Any:
    """The user's query: the topic's records, paced by pacer (``max_offsets`` 0: no read cap)."""
    reader = (spark.readStream.format("pacer").option("pacer.source", "kafka")
              .option("pacer.admission", "zstream").option("pacer.deadline", deadline)
              .option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
              .option("startingOffsets", "earliest"))
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", max_offsets)
    # current_timestamp() is the batch's timestamp in a streaming query (the offset log's batchTimestampMs)
    return reader.load().selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                                    "offset", "timestamp", "current_timestamp() AS batch_time")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=500)
    parser.add_argument("--deadline", default="5s")
    parser.add_argument("--stop-file")
    args = parser.parse_args(argv)

    import pacer_spark

    spark = (pacer_spark.session_builder("local[2]", "kafka-app", kafka=True, shuffle_partitions=2, conf=FAST_START)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = pacer_spark.attach(spark)
    out = Path(args.out)
    writer = (records(spark, args.bootstrap_servers, args.topic, args.max_offsets, args.deadline).writeStream
              .queryName(QUERY)
              .format("parquet").option("path", str(out / "data"))
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="0 seconds")
    query = writer.start()
    print("started", flush=True)
    stop_file = Path(args.stop_file) if args.stop_file else None
    while not query.awaitTermination(0.5):
        if stop_file is not None and stop_file.exists():
            query.stop()
            break
    report = handle.report()
    print("pacer:", json.dumps(report["spark"]["paced"]), flush=True)
    print("report:", json.dumps(report["queries"].get(QUERY, {})),
          flush=True)
    print("progress:", json.dumps([{"batch": p["batchId"], "rows": p["numInputRows"], "timestamp": p["timestamp"],
                                    "ms": p["durationMs"].get("triggerExecution"),
                                    "start": p["sources"][0]["startOffset"], "end": p["sources"][0]["endOffset"],
                                    "latest": p["sources"][0]["latestOffset"]} for p in query.recentProgress]),
          flush=True)
    handle.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
