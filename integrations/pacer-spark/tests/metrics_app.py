"""A paced query on a session whose metrics system serves Prometheus (the driver's UI, ``/metrics/prometheus``):
run by test_metrics_system.py in a process of its own (the suite's session has its UI off). Prints one JSON line:
the scrape's lines that name pacer, and the query's batches."""

from __future__ import annotations

import json
import sys
import time
import urllib.request


def main() -> int:
    import pacer_spark

    spark = pacer_spark.session_builder("local[1]", "pacer-metrics-system", shuffle_partitions=2, conf={
        "spark.ui.enabled": "true", "spark.ui.port": "0", "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
        "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    }).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    pacer = pacer_spark.attach(spark, admission="asap", deadline="1 minute")  # no row waits that long: none late
    query = (spark.readStream.format("pacer").option("pacer.source", "rate").option("rowsPerSecond", 20)
             .option("numPartitions", 1).load().writeStream.format("noop").queryName("paced_metrics")
             .option("checkpointLocation", sys.argv[1]).trigger(processingTime="0 seconds").start())
    deadline = time.monotonic() + 90
    while sum(1 for p in query.recentProgress if p["numInputRows"] > 0) < 4 and time.monotonic() < deadline:
        time.sleep(0.2)
    url = f"{spark.sparkContext.uiWebUrl.rstrip('/')}/metrics/prometheus"
    with urllib.request.urlopen(url, timeout=30) as response:
        scrape = response.read().decode()
    batches = sum(1 for p in query.recentProgress if p["numInputRows"] > 0)
    query.stop()
    pacer.stop()
    spark.stop()
    print(json.dumps({"url": url, "lines": [line for line in scrape.splitlines() if "pacer" in line],
                      "batches": batches}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
