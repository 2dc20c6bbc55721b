"""What a ``pacer-gen`` batch costs against a batch of Spark's ``rate`` source at the same rate, interleaved.

    python -m pacer_spark.run.gen_cost --rate 2000 --seconds 30 --repeat 2 [--json out.json]

Each run streams for ``--seconds`` into a ``foreachBatch`` sink that counts the batch's rows: ``rate``
with ``rowsPerSecond`` = ``--rate`` on a 1 s processing-time trigger (plain Spark), or ``pacer-gen``'s
constant traffic at ``--rate`` in 1 s datasets through :meth:`pacer_spark.PacerSession.start` with
admission ``asap`` (one dataset a batch: the RPC, the gate, the operator metrics and the listener
all run). A run's figure is the median ``triggerExecution`` of its batches with data, the first two
left out (the JVM warms up); prints each run, the median [min-max] of each side and the ratio.
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pacer_spark.run.overhead import (
    Run,
    compare,
    comparison_parser,
    comparison_session,
    interleave,
    summary_line,
    write_result,
)

#: Batches with data left out at the start of every run.
WARM_UP_BATCHES = 2


def batch_cost(query: Any) -> Run:
    """The median ``triggerExecution`` (s) of ``query``'s batches with data after the warm-up, how many, rows."""
    ran = [p for p in query.recentProgress if p["numInputRows"] > 0][WARM_UP_BATCHES:]
    if not ran:
        raise RuntimeError(f"query {query.name!r} ran no batch with data after its warm-up")
    seconds = statistics.median(p["durationMs"]["triggerExecution"] / 1e3 for p in ran)
    return {"seconds": seconds, "batches": len(ran), "rows": sum(p["numInputRows"] for p in ran)}


def run_rate(spark: Any, out: Path, *, rate: int, seconds: float) -> Run:
    """Spark's ``rate`` source at ``rate`` rows/s on a 1 s trigger for ``seconds``."""
    query = (spark.readStream.format("rate").option("rowsPerSecond", rate).load().writeStream
             .foreachBatch(lambda frame, _: frame.count()).trigger(processingTime="1 second")
             .option("checkpointLocation", str(out)).queryName(out.name).start())
    try:
        time.sleep(seconds)
    finally:
        query.stop()
    return batch_cost(query)


def run_gen(handle: Any, query_id: str, *, rate: int, seconds: float) -> Run:
    """``pacer-gen`` at ``rate`` rows/s in 1 s datasets, admission ``asap``, for ``seconds``."""
    handle.register_query(query_id)
    frame = handle.read_stream(query_id, "pacer-gen", stream="linear_road", traffic="constant", rate=rate,
                               duration=seconds, period=1)
    query = handle.start(frame, query_id, lambda batch, _: batch.count())
    try:
        time.sleep(seconds)
    finally:
        query.stop()
    return batch_cost(query)


def main(argv: list[str] | None = None) -> int:
    parser = comparison_parser("python -m pacer_spark.run.gen_cost", __doc__, repeat=2)
    parser.add_argument("--rate", type=int, default=2000, help="rows per second, both sides")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds each run streams")
    args = parser.parse_args(argv)

    import pacer_spark

    scratch = Path(tempfile.mkdtemp(prefix="pacer-gen-cost-"))
    spark = comparison_session(args.master, "pacer-gen-cost")
    handle = pacer_spark.attach(spark, admission="asap", checkpoint_root=str(scratch / "pacer"))
    try:
        def run(side: str, i: int) -> Run:
            if side == "rate":
                return run_rate(spark, scratch / f"rate-{i}", rate=args.rate, seconds=args.seconds)
            return run_gen(handle, f"gen-{i}", rate=args.rate, seconds=args.seconds)

        runs = interleave(("rate", "pacer-gen"), args.repeat, run)
        summary = compare(runs, base="rate", other="pacer-gen")
        print("median triggerExecution per batch, " + summary_line(summary, {"rate": "rate", "pacer-gen": "pacer-gen"}))
        write_result(args.json, {"rate": args.rate, "seconds": args.seconds}, runs, summary)
    finally:
        handle.stop()
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
