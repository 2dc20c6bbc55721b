"""Observe, advise, then pace, on real Spark: does ``pacer advise`` predict what pacing then does?

One query (csv lines in, parsed and filtered, parquet out) reads the same traffic twice, on the same session:

1. **observed** (``pacer.observe``): Spark admits as without pacer; the recording keeps its arrivals and costs;
2. ``pacer advise`` on the recording predicts the paced run (rows late, batches, busy core-s), on the simulator;
3. **paced**: the same traffic with the deadline and admission asked, measured by pacer's report.

The traffic is a wave of rows per second (:func:`wave_rows`), the same schedule in both runs, written by a thread
from the source ``--source`` names: ``csv``, one csv file a second into a folder; ``kafka``, the same lines as
records, each second's spread over ten slices of it, into a fresh topic of two partitions on a scratch broker
(pacer-kafka), read through Spark's Kafka connector. The prediction is judged with ``pacer bench fidelity``'s
bounds (batches within 15 %, rows late within 1 point, busy core-s within 20 %).

Rounds alternate which run comes first, after a warm-up run that is not counted.
``python -m pacer_bench.observe_check --out DIR [--source csv|kafka] [--duration 120] [--deadline 10] [--repeat 2]``
writes
``observe-check.json``, ``observe-check.md`` and each round's recording (``observed-roundN.jsonl``) to DIR (needs
pacer-spark and a JDK; ``kafka``: pacer-kafka too); ``--rejudge`` judges those rounds again from the recordings and
Spark's paced figures, without Spark.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pacer.observed import read
from pacer_sim.advise import AdviseConfig, advise, within_bounds

SCHEMA = "id LONG, key STRING, value DOUBLE"
QUERY = "observe-check"
#: Slices of a second a Kafka feed writes its rows in.
SLICES = 10
#: Partitions of each run's topic.
TOPIC_PARTITIONS = 2


def wave_rows(second: int, *, low: float = 200.0, high: float = 2000.0, period_s: float = 60.0) -> int:
    """Rows written in second ``second``: a sine between ``low`` and ``high`` rows/s over ``period_s``."""
    phase = math.sin(2.0 * math.pi * second / period_s)
    return round(low + (high - low) * (0.5 + 0.5 * phase))


def csv_lines(second: int) -> list[str]:
    """Second ``second``'s rows as csv lines (ids unique across the run)."""
    return [f"{second * 100_000 + j},k{j % 13},{j * 0.5}\n" for j in range(wave_rows(second))]


def feed_files(folder: Path, duration_s: int, stop: threading.Event) -> threading.Thread:
    """Write one csv file a second into ``folder`` for ``duration_s`` seconds."""
    def run() -> None:
        start = time.monotonic()
        for second in range(duration_s):
            staging = folder.parent / f".{folder.name}-{second}.csv"
            staging.write_text("".join(csv_lines(second)))
            os.replace(staging, folder / f"part-{second:05d}.csv")
            if stop.wait(max(0.0, start + second + 1 - time.monotonic())):
                return

    thread = threading.Thread(target=run, name="observe-check-feed", daemon=True)
    thread.start()
    return thread


def feed_topic(bootstrap_servers: str, topic: str, duration_s: int, stop: threading.Event) -> threading.Thread:
    """Produce each second's csv lines into ``topic`` for ``duration_s`` seconds, in :data:`SLICES` slices of it,
    each flushed (so a record's timestamp is when it was written)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})

    def run() -> None:
        start = time.monotonic()
        for second in range(duration_s):
            lines = csv_lines(second)
            for k in range(SLICES):
                for line in lines[k * len(lines) // SLICES:(k + 1) * len(lines) // SLICES]:
                    producer.produce(topic, value=line[:-1].encode())
                producer.flush(10)
                if stop.wait(max(0.0, start + second + (k + 1) / SLICES - time.monotonic())):
                    return

    thread = threading.Thread(target=run, name="observe-check-produce", daemon=True)
    thread.start()
    return thread


class Source:
    """Where the check's query reads from: ``csv`` (a folder of files) or ``kafka`` (a topic per run on
    ``bootstrap_servers``)."""

    def __init__(self, name: str, bootstrap_servers: str | None = None) -> None:
        self.name, self.bootstrap_servers = name, bootstrap_servers

    def start(self, spark: Any, work: Path, duration_s: int, options: dict[str, str],
              stop: threading.Event) -> tuple[Any, threading.Thread]:
        """The user's query on fresh input, started, and the thread feeding it."""
        reader = spark.readStream.format("pacer").option("pacer.source", self.name).option("pacer.query", QUERY)
        for key, value in options.items():
            reader = reader.option(key, value)
        if self.name == "csv":
            src = work / "in"
            src.mkdir(parents=True)
            frame = reader.schema(SCHEMA).load(str(src))
            feed: Callable[[], threading.Thread] = functools.partial(feed_files, src, duration_s, stop)
        else:
            from pacer_kafka import ensure_topic

            assert self.bootstrap_servers is not None
            topic = f"observe-check-{uuid.uuid4().hex[:8]}"
            ensure_topic(self.bootstrap_servers, topic, TOPIC_PARTITIONS)
            frame = (reader.option("kafka.bootstrap.servers", self.bootstrap_servers).option("subscribe", topic)
                     .option("startingOffsets", "earliest").load()
                     .selectExpr("split(CAST(value AS STRING), ',') AS f")
                     .selectExpr("CAST(f[0] AS LONG) AS id", "f[1] AS key", "CAST(f[2] AS DOUBLE) AS value"))
            feed = functools.partial(feed_topic, self.bootstrap_servers, topic, duration_s, stop)
        frame = frame.where("value >= 0").selectExpr("id", "upper(key) AS key", "value")
        query = (frame.writeStream.format("parquet").option("path", str(work / "out"))
                 .option("checkpointLocation", str(work / "checkpoint")).queryName(QUERY).start())
        return query, feed()


def run_once(spark: Any, source: Source, work: Path, duration_s: int, options: dict[str, str]) -> Any:
    """The query on fresh input, fed for ``duration_s`` seconds, stopped once every row is read (or 60 s after the
    feed ended); the streaming query handle."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    stop = threading.Event()
    query, thread = source.start(spark, work, duration_s, options, stop)
    thread.join()
    expected = sum(wave_rows(s) for s in range(duration_s))
    deadline = time.monotonic() + 60.0
    while time.monotonic() < deadline and _rows_read(query) < expected:
        time.sleep(1.0)
    query.stop()
    return query


def _rows_read(query: Any) -> int:
    return sum(int(p["numInputRows"]) for p in query.recentProgress)


def measured(report: dict[str, Any]) -> dict[str, Any]:
    """The paced run's figures from pacer's report, and what explains a run that did not pace (``why``: its
    catch-up, admissions without an answer, decisions, errors and whether it was observed)."""
    q = report["queries"][QUERY]
    paced = ((report.get("spark") or {}).get("paced") or {}).get(QUERY) or {}
    why = {"catch_up_s": q.get("catch_up_s"), "catch_up_episodes": q.get("catch_up_episodes"),
           **{k: paced.get(k) for k in ("decisions", "failed_open", "forced", "drained", "error", "observed")}}
    return {"batches": float(q["batches"]), "late_pct": 100.0 * float(q["deadline_miss_ratio_rows"]),
            "busy_core_s": float((q.get("cost") or {}).get("busy_core_s") or math.nan), "why": why}


def observe(spark: Any, attach: Callable[..., Any], source: Source, work: Path, duration_s: int,
            deadline_s: float) -> Path:
    """The observed run; its recording."""
    recording = work / "observed.jsonl"
    recording.unlink(missing_ok=True)
    pacer = attach(spark, checkpoint_root=str(work / "pacer-observe"))
    try:
        run_once(spark, source, work / "observe", duration_s, {"pacer.observe": str(recording),
                                                               "pacer.deadline": f"{deadline_s:g}s",
                                                               "pacer.observe.adviseEvery": "0"})
    finally:
        pacer.stop()
    return recording


def pace(spark: Any, attach: Callable[..., Any], source: Source, work: Path, duration_s: int, deadline_s: float,
         admission: str) -> dict[str, Any]:
    """The paced run's figures, and its batches as Spark's progress gives them (``spark_batches``: seconds from the
    first, rows, trigger ms), to set beside the predicted ones."""
    pacer = attach(spark, deadline=deadline_s, admission=admission, checkpoint_root=str(work / "pacer-paced"))
    try:
        query = run_once(spark, source, work / "paced", duration_s, {})
        return {**measured(pacer.report()), "spark_batches": progress_batches(query.recentProgress)}
    finally:
        pacer.stop()


def progress_batches(progress: list[Any]) -> list[list[float]]:
    """Each batch with rows in Spark's progress: [seconds since the first batch started, rows, trigger ms]."""
    from datetime import datetime

    rows = [p for p in progress if int(p["numInputRows"]) > 0]
    if not rows:
        return []
    start = datetime.fromisoformat(rows[0]["timestamp"].replace("Z", "+00:00"))
    return [[round((datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")) - start).total_seconds(), 3),
             int(p["numInputRows"]), int(p["durationMs"].get("triggerExecution", 0))] for p in rows]


def check(spark: Any, attach: Callable[..., Any], source: Source, work: Path, *, duration_s: int, deadline_s: float,
          admission: str, observe_first: bool, keep: Path) -> dict[str, Any]:
    """One observe, advise, pace round (module docstring); the paced run first where ``observe_first`` is False (the
    rounds alternate, so that neither side always runs on a JVM warmed by the other). The recording is kept as
    ``keep`` (``pacer advise`` on it predicts the round again)."""
    if not observe_first:
        spark_paced = pace(spark, attach, source, work, duration_s, deadline_s, admission)
    recording = observe(spark, attach, source, work, duration_s, deadline_s)
    if observe_first:
        spark_paced = pace(spark, attach, source, work, duration_s, deadline_s, admission)
    shutil.copyfile(recording, keep)
    return judge(keep, spark_paced, observe_first=observe_first, deadline_s=deadline_s, admission=admission)


def judge(recording: Path, spark_paced: dict[str, Any], *, observe_first: bool, deadline_s: float,
          admission: str) -> dict[str, Any]:
    """A round's row: ``pacer advise`` on its recording beside what the paced run measured on Spark."""
    advice = advise(read(recording), AdviseConfig(deadline_s=deadline_s, admission=admission, max_executors=1))
    predicted = advice["paced"]
    row = {"observe_first": observe_first, "observed": advice["observed"], "replay": advice["replay"],
           "predicted": predicted,
           "spark_paced": spark_paced,
           "batches_ratio": predicted["batches"] / spark_paced["batches"],
           "late_points": predicted["late_pct"] - spark_paced["late_pct"],
           "busy_ratio": predicted["busy_core_s"] / spark_paced["busy_core_s"]}
    low, high = predicted.get("busy_core_s_range") or (math.nan, math.nan)
    row["busy_within_range"] = bool(low <= spark_paced["busy_core_s"] <= high)
    row["within_bounds"] = within_bounds(predicted, spark_paced)
    return row


def rejudge(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every round of a check's folder judged again from its kept recording and Spark's paced figures (after a
    change to the simulator or the fit: no Spark needed)."""
    doc = json.loads((out / "observe-check.json").read_text())
    config = {"source": "csv", **doc["config"]}
    rows = [judge(out / f"observed-round{i}.jsonl", r["spark_paced"], observe_first=r["observe_first"],
                  deadline_s=config["deadline_s"], admission=config["admission"])
            for i, r in enumerate(doc["rounds"], 1)]
    return rows, config


def markdown(rows: list[dict[str, Any]], config: dict[str, Any]) -> str:
    """The rounds as a table: Spark observed, the replay of it, predicted paced, Spark paced, and the ratios."""
    out = [f"# Observe, advise, pace: {config['admission']} at {config['deadline_s']:g} s, {config['source']} source, "
           f"wave 200-2000 rows/s, {config['duration_s']} s per run, local[2]", "",
           "| round (first run) | observed batches | replay/observed busy | predicted batches | Spark paced batches | "
           "batches (pred/meas) | rows late pred / meas (%) | busy core-s pred [range] / meas | busy (pred/meas) | "
           "within bounds |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        p, m = r["predicted"], r["spark_paced"]
        first = "observed" if r["observe_first"] else "paced"
        out.append(f"| {i} ({first}) | {r['observed']['batches']:.0f} | {r['replay']['busy_ratio']:.2f} | "
                   f"{p['batches']:.0f} | {m['batches']:.0f} | "
                   f"{r['batches_ratio']:.2f} | {p['late_pct']:.2f} / {m['late_pct']:.2f} | "
                   f"{p['busy_core_s']:.2f} [{_range(p)}] / {m['busy_core_s']:.2f} | {r['busy_ratio']:.2f} | "
                   f"{'yes' if r['within_bounds'] else 'no'} |")
    return "\n".join(out) + "\n"


def _range(predicted: dict[str, Any]) -> str:
    low, high = predicted.get("busy_core_s_range") or (math.nan, math.nan)
    return f"{low:.2f}-{high:.2f}"


@contextmanager
def _source(name: str) -> Iterator[Source]:
    """The check's source; for ``kafka``, a scratch broker for the whole check."""
    if name == "csv":
        yield Source("csv")
        return
    from pacer_bench.kafka_source import kafka_servers

    with kafka_servers(None) as servers:
        yield Source("kafka", servers)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_bench.observe_check", description=__doc__)
    parser.add_argument("--out", required=True)
    parser.add_argument("--source", choices=("csv", "kafka"), default="csv")
    parser.add_argument("--duration", type=int, default=120)
    parser.add_argument("--deadline", type=float, default=10.0)
    parser.add_argument("--admission", default="zstream")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=30, help="seconds of an observed run first, not counted")
    parser.add_argument("--rejudge", action="store_true", help="judge the rounds kept in --out again (no Spark)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.rejudge:
        rows, config = rejudge(out)
    else:
        rows, config = measure(args, out)
    (out / "observe-check.json").write_text(json.dumps({"config": config, "rounds": rows}, indent=2) + "\n")
    text = markdown(rows, config)
    (out / "observe-check.md").write_text(text)
    print(text)
    return 0


def measure(args: argparse.Namespace, out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rounds on Spark (module docstring)."""
    import pacer_spark

    out.mkdir(parents=True, exist_ok=True)
    config = {"source": args.source, "duration_s": args.duration, "deadline_s": args.deadline,
              "admission": args.admission}
    with _source(args.source) as source:
        spark = pacer_spark.session_builder("local[2]", "observe-check", kafka=args.source == "kafka",
                                            shuffle_partitions=2).getOrCreate()
        try:
            if args.warmup > 0:  # the JVM's first minute (classes loaded, code compiled) is neither side's
                observe(spark, pacer_spark.attach, source, out / "work", args.warmup, args.deadline)
            rows = [check(spark, pacer_spark.attach, source, out / "work", duration_s=args.duration,
                          deadline_s=args.deadline, admission=args.admission, observe_first=i % 2 == 0,
                          keep=out / f"observed-round{i + 1}.jsonl")
                    for i in range(args.repeat)]
        finally:
            spark.stop()
    shutil.rmtree(out / "work", ignore_errors=True)
    return rows, config


if __name__ == "__main__":
    raise SystemExit(main())
