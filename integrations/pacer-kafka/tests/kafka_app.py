"""A Spark user's own job reading Kafka through ``format("pacer")``, as ``test_paced_kafka.py`` runs it in its own process.

Every record of ``--topic`` (from the earliest offset) into Spark's parquet sink with a checkpoint,
as (key, value, partition, offset), on ``format("pacer").option("pacer.source", "kafka")`` paced by
zStream with a 5 s deadline, ``maxOffsetsPerTrigger`` as the cap. ``--available-now`` drains what is
there and exits; otherwise it streams until killed. At the end it prints ``pacer: {summary}`` and
``progress: [per trigger]``.

    python kafka_app.py --bootstrap-servers HOST:PORT --topic T --out OUT [--available-now] [--max-offsets N]
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


def records(spark: Any, bootstrap_servers: str, topic: str, max_offsets: int) -> Any:
    """The user's query: the topic's records, paced by pacer."""
    frame = (spark.readStream.format("pacer").option("pacer.source", "kafka")
             .option("pacer.admission", "zstream").option("pacer.deadline", "5s")
             .option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max_offsets).load())
    return frame.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition", "offset")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--available-now", action="store_true")
    parser.add_argument("--max-offsets", type=int, default=500)
    args = parser.parse_args(argv)

    import pacer_spark

    spark = (pacer_spark.session_builder("local[2]", "kafka-app", kafka=True, conf=FAST_START)
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = pacer_spark.attach(spark)
    out = Path(args.out)
    writer = (records(spark, args.bootstrap_servers, args.topic, args.max_offsets).writeStream.queryName(QUERY)
              .format("parquet").option("path", str(out / "data"))
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(availableNow=True) if args.available_now else writer.trigger(processingTime="0 seconds")
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    print("pacer:", json.dumps(handle.report()["spark"]["paced"]), flush=True)
    print("progress:", json.dumps([{"batch": p["batchId"], "rows": p["numInputRows"],
                                    "start": p["sources"][0]["startOffset"], "end": p["sources"][0]["endOffset"],
                                    "latest": p["sources"][0]["latestOffset"]} for p in query.recentProgress]),
          flush=True)
    handle.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
