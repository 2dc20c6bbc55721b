"""What pacing costs: a file backlog through ``format("pacer")`` against Spark's own source, interleaved.

    python -m pacer_spark.overhead --files 200 --rows 10000 --repeat 3 [--json out.json]

Writes ``--files`` csv files of ``--rows`` rows into a scratch folder, then drains that backlog
with ``trigger(availableNow=True)`` and ``maxFilesPerTrigger`` (the same batches on both sides)
into Spark's parquet sink, alternating plain ``format("csv")`` and ``format("pacer")`` with
admission ``asap`` (pacer decides every batch end, the gate and the listener run, nothing waits),
``--repeat`` times each, on one SparkSession. Prints each run's seconds and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCHEMA = "id BIGINT, ts TIMESTAMP, word STRING, value DOUBLE"


def write_backlog(folder: Path, files: int, rows: int) -> None:
    """``files`` csv files of ``rows`` rows each."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = (f"{f * rows + r},2026-01-01 00:{(r // 60) % 60:02d}:{r % 60:02d},w{r % 97},{r * 0.5}\n"
                 for r in range(rows))
        (folder / f"part-{f:04d}.csv").write_text("".join(lines))


def drain(spark: Any, backlog: Path, out: Path, *, paced: bool, files_per_batch: int) -> tuple[float, int, int]:
    """Seconds to drain ``backlog`` into parquet, the batches with data and the rows read."""
    reader = spark.readStream.format("pacer").option("pacer.source", "csv") if paced else spark.readStream.format("csv")
    frame = reader.option("maxFilesPerTrigger", files_per_batch).schema(SCHEMA).load(str(backlog))
    t0 = time.perf_counter()
    query = (frame.writeStream.format("parquet").option("path", str(out / "data"))
             .option("checkpointLocation", str(out / "checkpoint")).queryName(f"overhead-{out.name}")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    ran = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return seconds, len(ran), sum(p["numInputRows"] for p in ran)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_spark.overhead", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--files-per-batch", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", help="write the runs and the ratio here")
    args = parser.parse_args(argv)

    import pacer_spark

    scratch = Path(tempfile.mkdtemp(prefix="pacer-overhead-"))
    spark = (pacer_spark.session_builder(args.master, "pacer-overhead").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    handle = pacer_spark.attach(spark, admission="asap")
    try:
        write_backlog(scratch / "backlog", args.files, args.rows)
        drain(spark, scratch / "backlog", scratch / "warm-up", paced=False, files_per_batch=args.files_per_batch)
        runs: dict[str, list[dict[str, float]]] = {"plain": [], "pacer": []}
        for i in range(args.repeat):
            for side in ("plain", "pacer") if i % 2 == 0 else ("pacer", "plain"):
                seconds, batches, rows = drain(spark, scratch / "backlog", scratch / f"{side}-{i}",
                                               paced=side == "pacer", files_per_batch=args.files_per_batch)
                runs[side].append({"seconds": seconds, "batches": batches, "rows": rows})
                print(f"run {i + 1} {side:>5}: {seconds:6.2f} s, {batches} batches, {rows} rows", flush=True)
                shutil.rmtree(scratch / f"{side}-{i}", ignore_errors=True)
        medians = {side: statistics.median(r["seconds"] for r in rs) for side, rs in runs.items()}
        ratio = medians["pacer"] / medians["plain"]
        print(f"median: plain {medians['plain']:.2f} s, format('pacer') {medians['pacer']:.2f} s: {ratio:.3f}x")
        if args.json:
            Path(args.json).write_text(json.dumps({"files": args.files, "rows_per_file": args.rows,
                                                   "files_per_batch": args.files_per_batch, "runs": runs,
                                                   "median_s": medians, "ratio": ratio}, indent=2))
    finally:
        handle.stop()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
