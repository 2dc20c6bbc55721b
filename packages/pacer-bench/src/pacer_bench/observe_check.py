"""Observe, advise, then pace, on real Spark: does ``pacer advise`` predict what pacing then does?

One query (csv files in, parsed and filtered, parquet out) reads the same traffic twice, on the same session:

1. **observed** (``pacer.observe``): Spark admits as without pacer; the recording keeps its arrivals and costs;
2. ``pacer advise`` on the recording predicts the paced run (rows late, batches, busy core-s), on the simulator;
3. **paced**: the same traffic with the deadline and admission asked, measured by pacer's report.

The traffic is a wave of rows per second written as one csv file a second by a thread, the same schedule in both
runs (:func:`wave_rows`). The prediction is judged with ``pacer bench fidelity``'s bounds (batches within 15 %,
rows late within 1 point, busy core-s within 20 %).

Rounds alternate which run comes first, after a warm-up run that is not counted.
``python -m pacer_bench.observe_check --out DIR [--duration 120] [--deadline 10] [--repeat 2]`` writes
``observe-check.json``, ``observe-check.md`` and each round's recording (``observed-roundN.jsonl``) to DIR (needs
pacer-spark and a JDK).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pacer.observed import read
from pacer_bench.advise import AdviseConfig, advise
from pacer_bench.fidelity import BOUNDS

SCHEMA = "id LONG, key STRING, value DOUBLE"
QUERY = "observe-check"


def wave_rows(second: int, *, low: float = 200.0, high: float = 2000.0, period_s: float = 60.0) -> int:
    """Rows written in second ``second``: a sine between ``low`` and ``high`` rows/s over ``period_s``."""
    phase = math.sin(2.0 * math.pi * second / period_s)
    return round(low + (high - low) * (0.5 + 0.5 * phase))


def feed(folder: Path, duration_s: int, stop: threading.Event) -> threading.Thread:
    """Write one csv file a second into ``folder`` for ``duration_s`` seconds (ids unique across the run)."""
    def run() -> None:
        start = time.monotonic()
        for second in range(duration_s):
            rows = wave_rows(second)
            staging = folder.parent / f".{folder.name}-{second}.csv"
            staging.write_text("".join(f"{second * 100_000 + j},k{j % 13},{j * 0.5}\n" for j in range(rows)))
            os.replace(staging, folder / f"part-{second:05d}.csv")
            if stop.wait(max(0.0, start + second + 1 - time.monotonic())):
                return

    thread = threading.Thread(target=run, name="observe-check-feed", daemon=True)
    thread.start()
    return thread


def run_once(spark: Any, work: Path, duration_s: int, options: dict[str, str]) -> Any:
    """The query on fresh folders, fed for ``duration_s`` seconds, stopped once every row is written (or 60 s
    after the feed ended); the streaming query handle."""
    if work.exists():
        shutil.rmtree(work)
    src = work / "in"
    src.mkdir(parents=True)
    reader = spark.readStream.format("pacer").option("pacer.source", "csv").option("pacer.query", QUERY)
    for key, value in options.items():
        reader = reader.option(key, value)
    frame = reader.schema(SCHEMA).load(str(src)).where("value >= 0").selectExpr("id", "upper(key) AS key", "value")
    query = (frame.writeStream.format("parquet").option("path", str(work / "out"))
             .option("checkpointLocation", str(work / "checkpoint")).queryName(QUERY).start())
    stop = threading.Event()
    thread = feed(src, duration_s, stop)
    thread.join()
    expected = sum(wave_rows(s) for s in range(duration_s))
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline and _rows_read(query) < expected:
        time.sleep(1.0)
    query.stop()
    return query


def _rows_read(query: Any) -> int:
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def measured(report: dict[str, Any]) -> dict[str, float]:
    """The paced run's figures from pacer's report."""
    q = report["queries"][QUERY]
    return {"batches": float(q["batches"]), "late_pct": 100.0 * float(q["deadline_miss_ratio_rows"]),
            "busy_core_s": float((q.get("cost") or {}).get("busy_core_s") or math.nan)}


def observe(spark: Any, attach: Callable[..., Any], work: Path, duration_s: int, deadline_s: float) -> Path:
    """The observed run; its recording."""
    recording = work / "observed.jsonl"
    recording.unlink(missing_ok=True)
    pacer = attach(spark, checkpoint_root=str(work / "pacer-observe"))
    try:
        run_once(spark, work / "observe", duration_s, {"pacer.observe": str(recording),
                                                       "pacer.deadline": f"{deadline_s:g}s"})
    finally:
        pacer.stop()
    return recording


def pace(spark: Any, attach: Callable[..., Any], work: Path, duration_s: int, deadline_s: float,
         admission: str) -> dict[str, float]:
    """The paced run's figures."""
    pacer = attach(spark, deadline=deadline_s, admission=admission, checkpoint_root=str(work / "pacer-paced"))
    try:
        run_once(spark, work / "paced", duration_s, {})
        return measured(pacer.report())
    finally:
        pacer.stop()


def check(spark: Any, attach: Callable[..., Any], work: Path, *, duration_s: int, deadline_s: float,
          admission: str, observe_first: bool, keep: Path) -> dict[str, Any]:
    """One observe, advise, pace round (module docstring); the paced run first where ``observe_first`` is False (the
    rounds alternate, so that neither side always runs on a JVM warmed by the other). The recording is kept as
    ``keep`` (``pacer advise`` on it predicts the round again)."""
    if not observe_first:
        spark_paced = pace(spark, attach, work, duration_s, deadline_s, admission)
    recording = observe(spark, attach, work, duration_s, deadline_s)
    if observe_first:
        spark_paced = pace(spark, attach, work, duration_s, deadline_s, admission)
    shutil.copyfile(recording, keep)
    advice = advise(read(keep), AdviseConfig(deadline_s=deadline_s, admission=admission, max_executors=1))
    predicted = advice["paced"]
    row = {"observe_first": observe_first, "observed": advice["observed"], "replay": advice["replay"],
           "predicted": predicted,
           "spark_paced": spark_paced,
           "batches_ratio": predicted["batches"] / spark_paced["batches"],
           "late_points": predicted["late_pct"] - spark_paced["late_pct"],
           "busy_ratio": predicted["busy_core_s"] / spark_paced["busy_core_s"]}
    row["within_bounds"] = (abs(row["batches_ratio"] - 1) <= BOUNDS["batches"]
                            and abs(row["late_points"]) <= BOUNDS["late_points"]
                            and abs(row["busy_ratio"] - 1) <= BOUNDS["busy_core_s"])
    return row


def markdown(rows: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """The rounds as a table: Spark observed, predicted paced, Spark paced, and the ratios."""
    out = [f"# Observe, advise, pace: {config['admission']} at {config['deadline_s']:g} s, wave 200-2000 rows/s, "
           f"{config['duration_s']} s per run, local[2]", "",
           "| round (first run) | observed batches | predicted batches | Spark paced batches | batches (pred/meas) | "
           "rows late pred / meas (%) | busy core-s pred / meas | busy (pred/meas) | within bounds |",
           "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        p, m = r["predicted"], r["spark_paced"]
        first = "observed" if r["observe_first"] else "paced"
        out.append(f"| {i} ({first}) | {r['observed']['batches']:.0f} | {p['batches']:.0f} | {m['batches']:.0f} | "
                   f"{r['batches_ratio']:.2f} | {p['late_pct']:.2f} / {m['late_pct']:.2f} | "
                   f"{p['busy_core_s']:.1f} / {m['busy_core_s']:.1f} | {r['busy_ratio']:.2f} | "
                   f"{'yes' if r['within_bounds'] else 'no'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_bench.observe_check", description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--duration", type=int, default=120)
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--admission", default="zstream")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30, help="seconds of an observed run first, not counted")
    args = parser.parse_args(argv)
    import pacer_spark

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spark = pacer_spark.session_builder("local[2]", "observe-check").getOrCreate()
    config = {"duration_s": args.duration, "deadline_s": args.deadline, "admission": args.admission}
    if args.warmup > 0:  # the JVM's first minute (classes loaded, code compiled) is neither side's
        observe(spark, pacer_spark.attach, out / "work", args.warmup, args.deadline)
    rows = [check(spark, pacer_spark.attach, out / "work", duration_s=args.duration, deadline_s=args.deadline,
                  admission=args.admission, observe_first=i % 2 == 0, keep=out / f"observed-round{i + 1}.jsonl")
            for i in range(args.repeat)]
    shutil.rmtree(out / "work", ignore_errors=True)
    (out / "observe-check.json").write_text(json.dumps({"config": config, "rounds": rows}, indent=2) + "\n")
    text = markdown(rows, config)
    (out / "observe-check.md").write_text(text)
    print(text)
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
