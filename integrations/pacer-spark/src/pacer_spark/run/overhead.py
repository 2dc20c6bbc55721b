"""What pacing costs: a file backlog through ``format("pacer")`` against Spark's own source, interleaved.

    python -m pacer_spark.run.overhead --files 200 --rows 10000 --repeat 3 [--json out.json]

Writes ``--files`` csv files of ``--rows`` rows into a scratch folder, then drains that backlog
with ``trigger(availableNow=True)`` and ``maxFilesPerTrigger`` (the same batches on both sides)
into Spark's parquet sink, alternating plain ``format("csv")`` and ``format("pacer")`` with
admission ``asap`` (pacer decides every batch end, the gate and the listener run, nothing waits),
``--repeat`` times each, on one SparkSession. Prints each run's seconds, the median [min-max] of each
side and the ratio of the medians.

:func:`drain_query`, :func:`interleave`, :func:`compare` and :func:`summary_line` are the source-agnostic
part, which ``python -m pacer_kafka.overhead`` (Kafka through ``format("pacer")``) shares.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

SCHEMA = "id BIGINT, ts TIMESTAMP, word STRING, value DOUBLE"

#: One timed run: ``seconds`` to drain, ``batches`` with data, ``rows`` read.
Run = dict[str, float]


def write_backlog(folder: Path, files: int, rows: int) -> None:
    """``files`` csv files of ``rows`` rows each."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        lines = (f"{f * rows + r},2026-01-01 00:{(r // 60) % 60:02d}:{r % 60:02d},w{r % 97},{r * 0.5}\n"
                 for r in range(rows))
        (folder / f"part-{f:04d}.csv").write_text("".join(lines))


def drain_query(frame: Any, out: Path, *, sink: str = "parquet") -> Run:
    """Drain the streaming ``frame`` with ``trigger(availableNow=True)`` into ``sink`` (``parquet`` under
    ``out/data``, or ``noop``), checkpointed under ``out``; the seconds from start to termination, the
    batches with data and the rows read (from the query's progress)."""
    writer = frame.writeStream.format(sink).option("checkpointLocation", str(out / "checkpoint"))
    if sink == "parquet":
        writer = writer.option("path", str(out / "data"))
    t0 = time.perf_counter()
    query = writer.queryName(f"overhead-{out.name}").trigger(availableNow=True).start()
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    ran = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return {"seconds": seconds, "batches": len(ran), "rows": sum(p["numInputRows"] for p in ran)}


def drain(spark: Any, backlog: Path, out: Path, *, paced: bool, files_per_batch: int) -> tuple[float, int, int]:
    """Seconds to drain ``backlog`` into parquet, the batches with data and the rows read."""
    reader = spark.readStream.format("pacer").option("pacer.source", "csv") if paced else spark.readStream.format("csv")
    frame = reader.option("maxFilesPerTrigger", files_per_batch).schema(SCHEMA).load(str(backlog))
    run = drain_query(frame, out)
    return run["seconds"], int(run["batches"]), int(run["rows"])


def interleave(sides: Sequence[str], repeat: int, run: Callable[[str, int], Run]) -> dict[str, list[Run]]:
    """``run(side, i)`` ``repeat`` times per side, the order reversed every other round (A B, B A, ...) so
    that neither side always runs on the warmer JVM; prints each run."""
    runs: dict[str, list[Run]] = {side: [] for side in sides}
    width = max(len(side) for side in sides)
    for i in range(repeat):
        for side in sides if i % 2 == 0 else tuple(reversed(sides)):
            result = run(side, i)
            runs[side].append(result)
            print(f"run {i + 1} {side:>{width}}: {result['seconds']:6.2f} s, {int(result['batches'])} batches, "
                  f"{int(result['rows'])} rows", flush=True)
    return runs


def spread(values: Iterable[float]) -> dict[str, float]:
    """The median, min and max of ``values``."""
    seen = sorted(values)
    return {"median": statistics.median(seen), "min": seen[0], "max": seen[-1]}


def compare(runs: dict[str, list[Run]], base: str = "plain", other: str = "pacer") -> dict[str, Any]:
    """Per side the median and the min/max seconds, and the ratio of the medians ``other / base``."""
    stats = {side: spread(r["seconds"] for r in rs) for side, rs in runs.items()}
    return {"median_s": {side: st["median"] for side, st in stats.items()},
            "min_s": {side: st["min"] for side, st in stats.items()},
            "max_s": {side: st["max"] for side, st in stats.items()},
            "ratio": stats[other]["median"] / stats[base]["median"]}


def summary_line(summary: dict[str, Any], labels: dict[str, str]) -> str:
    """``median [min-max]`` per side (in ``labels``' order, named by them) and the ratio."""
    sides = [f"{label} {summary['median_s'][side]:.2f} s [{summary['min_s'][side]:.2f}-{summary['max_s'][side]:.2f}]"
             for side, label in labels.items()]
    return f"median [min-max]: {', '.join(sides)}: {summary['ratio']:.3f}x"


def comparison_parser(prog: str, description: str | None, *, repeat: int, json_default: str | None = None
                      ) -> argparse.ArgumentParser:
    """The arguments every interleaved comparison takes: ``--repeat``, ``--master``, ``--json``."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=repeat, help="runs per side, interleaved")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", default=json_default, help="write the runs and the ratio here")
    return parser


def comparison_session(master: str, app: str, *, kafka: bool = False) -> Any:
    """A SparkSession for a comparison: pacer's builder, no UI or console progress, Spark's log at ERROR."""
    import pacer_spark

    spark = (pacer_spark.session_builder(master, app, kafka=kafka, shuffle_partitions=2)
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    if kafka:
        pacer_spark.add_kafka_connector(spark)  # a JVM this process started earlier, without the connector
    return spark


def write_result(path: str | None, settings: dict[str, Any], runs: dict[str, list[Run]],
                 summary: dict[str, Any]) -> None:
    """Write a comparison's settings, runs and :func:`compare` summary to ``path`` as JSON (nothing when no path)."""
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({**settings, "runs": runs, **summary}, indent=2) + "\n")
    print(f"wrote {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = comparison_parser("python -m pacer_spark.run.overhead", __doc__, repeat=3)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--rows", type=int, default=10000)
    parser.add_argument("--files-per-batch", type=int, default=10)
    args = parser.parse_args(argv)

    import pacer_spark

    scratch = Path(tempfile.mkdtemp(prefix="pacer-overhead-"))
    spark = comparison_session(args.master, "pacer-overhead")
    handle = pacer_spark.attach(spark, admission="asap")
    try:
        write_backlog(scratch / "backlog", args.files, args.rows)
        drain(spark, scratch / "backlog", scratch / "warm-up", paced=False, files_per_batch=args.files_per_batch)

        def run(side: str, i: int) -> Run:
            out = scratch / f"{side}-{i}"
            seconds, batches, rows = drain(spark, scratch / "backlog", out, paced=side == "pacer",
                                           files_per_batch=args.files_per_batch)
            shutil.rmtree(out, ignore_errors=True)
            return {"seconds": seconds, "batches": batches, "rows": rows}

        runs = interleave(("plain", "pacer"), args.repeat, run)
        summary = compare(runs)
        print(summary_line(summary, {"plain": "plain", "pacer": "format('pacer')"}))
        write_result(args.json, {"files": args.files, "rows_per_file": args.rows,
                                 "files_per_batch": args.files_per_batch}, runs, summary)
    finally:
        handle.stop()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
