"""A soak run on real Spark: one paced ``format("pacer")`` query for thousands of batches, the driver watched.

    python -m pacer_spark.run.soak --batches 3000 [--checkpoints 10] [--out soak.json]

The query reads Spark's ``rate-micro-batch`` source through ``format("pacer")`` (asap admission, so every
trigger is a decision and a batch) into Spark's ``noop`` sink. At each checkpoint it records the driver
process's resident memory, the Python heap traced by :mod:`tracemalloc` (pacer's own state lives there), and
the p99 of the most recent decision times; at the end it prints the figures at the start and the end and the
slopes per 1000 batches (least squares over the checkpoints after the first, which holds the JVM's and the
session's warm-up). It exits 1 when the traced heap grows by more than ``--max-growth-mb`` from the first
checkpoint to the last.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from pacer.metrics import percentile


def rss_mb() -> float:
    """This process's resident memory (Linux ``/proc/self/status``), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(x, y)`` points (0 for fewer than two)."""
    if len(points) < 2:
        return 0.0
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    var = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / var if var else 0.0


def run(batches: int, checkpoints: int, rows_per_batch: int) -> dict[str, Any]:
    """Run the soak; the checkpoints and slopes as a dict."""
    import pacer_spark

    spark = (pacer_spark.session_builder("local[2]", "pacer-soak").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = pacer_spark.attach(spark, admission="asap")
    query = (spark.readStream.format("pacer").option("pacer.source", "rate-micro-batch")
             .option("rowsPerBatch", str(rows_per_batch)).load()
             .writeStream.queryName("soak").format("noop").trigger(processingTime="0 seconds").start())
    tracemalloc.start()
    rows: list[dict[str, Any]] = []
    step = max(1, batches // checkpoints)
    t0 = time.time()
    try:
        while True:
            done = query.lastProgress["batchId"] if query.lastProgress else 0
            if done >= len(rows) * step:
                gc.collect()
                paced = handle.paced.queries.get("soak") if handle.paced else None
                recent = list(paced.decide_s.last) if paced is not None else []
                rows.append({"batches": done, "seconds": round(time.time() - t0, 1), "rss_mb": round(rss_mb(), 1),
                             "traced_mb": round(tracemalloc.get_traced_memory()[0] / 2**20, 2),
                             "decide_p99_ms": round(1e3 * percentile(recent, 99), 3) if recent else None})
                print(json.dumps(rows[-1]), flush=True)
                if done >= batches:
                    break
            if query.exception() is not None:
                raise RuntimeError(f"the soak query failed: {query.exception()}")
            time.sleep(0.5)
    finally:
        query.stop()
        handle.stop()
        spark.stop()
    later = rows[1:]
    per_k = 1000.0
    return {
        "batches": rows[-1]["batches"], "checkpoints": rows,
        "rss_mb_per_1000_batches": round(per_k * slope([(r["batches"], r["rss_mb"]) for r in later]), 3),
        "traced_mb_per_1000_batches": round(per_k * slope([(r["batches"], r["traced_mb"]) for r in later]), 4),
        "decide_p99_ms_per_1000_batches": round(per_k * slope(
            [(r["batches"], r["decide_p99_ms"]) for r in later if r["decide_p99_ms"] is not None]), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--checkpoints", type=int, default=10)
    parser.add_argument("--rows-per-batch", type=int, default=100)
    parser.add_argument("--max-growth-mb", type=float, default=5.0,
                        help="fail when the traced Python heap grows more than this from the first checkpoint")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    result = run(args.batches, args.checkpoints, args.rows_per_batch)
    first, last = result["checkpoints"][1 if len(result["checkpoints"]) > 2 else 0], result["checkpoints"][-1]
    growth = last["traced_mb"] - first["traced_mb"]
    result["traced_growth_mb"] = round(growth, 3)
    print(json.dumps({k: v for k, v in result.items() if k != "checkpoints"}, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 1 if growth > args.max_growth_mb else 0


if __name__ == "__main__":
    sys.exit(main())
