"""A paced query on a session whose metrics system serves Prometheus (the driver's UI, ``/metrics/prometheus``):
run by test_metrics_system.py in a process of its own (the suite's session has its UI off). The session is
docs/monitoring.md's, built by its block as shown (the test gives the UI a free port and loopback through
``PYSPARK_SUBMIT_ARGS``), and the page's other block, the progress metric it reads, is read as shown too. Prints one
JSON line: the scrape's lines that name pacer, the query's batches and the page's progress metric."""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

PAGE = Path(__file__).resolve().parents[3] / "docs" / "monitoring.md"


def main() -> int:
    progress_shown, session_shown = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    namespace: dict[str, Any] = {}
    exec(compile(session_shown, str(PAGE), "exec"), namespace)
    spark, pacer_spark = namespace["spark"], namespace["pacer_spark"]
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
    oldest_held = eval(progress_shown, {"query": query})  # the page's first block: a paced query's progress metric
    query.stop()
    pacer.stop()
    spark.stop()
    print(json.dumps({"url": url, "lines": [line for line in scrape.splitlines() if "pacer" in line],
                      "batches": batches, "oldest_held_age_ms": oldest_held}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
