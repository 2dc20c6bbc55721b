"""What pacing Kafka costs: a topic's backlog through ``format("pacer")`` against Spark's own ``format("kafka")``.

    python -m pacer_kafka.overhead --records 1000000 --repeat 3 [--sink noop|parquet] [--max-offsets 100000]
                                   [--bootstrap-servers HOST:PORT] [--json bench-results/kafka-overhead/overhead.json]

Writes ``--records`` Linear Road rows (JSON values, :mod:`pacer_kafka.produce`, as fast as the broker
takes them) into a fresh topic of ``--partitions`` partitions, on the broker at ``--bootstrap-servers``
or on a scratch one started for the run (``pacer kafka up``). Then drains that backlog with
``trigger(availableNow=True)`` and the same ``maxOffsetsPerTrigger`` on both sides (the same batches)
into Spark's ``noop`` or ``parquet`` sink, alternating plain ``format("kafka")`` and
``format("pacer").option("pacer.source", "kafka")`` with admission ``asap`` (pacer decides every batch
end, the gate and the listener run, nothing waits), ``--repeat`` times each after one warm-up run, on
one SparkSession. Prints each run, the median [min-max] seconds of each side and the ratio of the
medians, and writes them as JSON. The timing helpers are ``pacer_spark.run.overhead``'s (the csv benchmark).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from pacer_kafka.distribution import KafkaSetupError

DEFAULT_JSON = Path("bench-results") / "kafka-overhead" / "overhead.json"
SIDES = ("plain", "pacer")


def fill_topic(bootstrap_servers: str, topic: str, records: int, partitions: int) -> tuple[int, float]:
    """``records`` Linear Road rows into a new ``topic``, sent at once (their event times lie in the past).

    :return: the records the broker acknowledged and the seconds it took.
    :raises RuntimeError: some records were not acknowledged.
    """
    from pacer_kafka.produce import plan_workload, produce

    seconds = 10.0
    plan = plan_workload("lr2", traffic="constant", rate=records / seconds, duration=seconds, seed=1)
    t0 = time.perf_counter()
    result = produce(bootstrap_servers, topic, plan, partitions=partitions, start_time=time.time() - 2 * seconds)
    if result.failed:
        raise RuntimeError(f"{result.failed} of {plan.total_rows} records were not written: {'; '.join(result.errors)}")
    return result.produced, time.perf_counter() - t0


def kafka_frame(spark: Any, bootstrap_servers: str, topic: str, *, paced: bool, max_offsets: int) -> Any:
    """The topic from its start as a stream: Spark's ``format("kafka")``, or the same wrapped by ``format("pacer")``."""
    reader = spark.readStream.format("pacer").option("pacer.source", "kafka") if paced else spark.readStream.format(
        "kafka")
    return (reader.option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
            .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", max_offsets).load())


def main(argv: list[str] | None = None) -> int:
    try:
        import pacer_spark
        from pacer_spark.run.overhead import (
            Run,
            compare,
            comparison_parser,
            comparison_session,
            drain_query,
            interleave,
            summary_line,
            write_result,
        )
    except ImportError as exc:
        print(f"pacer_kafka.overhead needs pacer-spark: from the checkout, pip install ./integrations/pacer-spark "
              f"({exc})", file=sys.stderr)
        return 2
    parser = comparison_parser("python -m pacer_kafka.overhead", __doc__, repeat=3, json_default=str(DEFAULT_JSON))
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--max-offsets", type=int, default=100_000, help="maxOffsetsPerTrigger, both sides")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--sink", choices=["noop", "parquet"], default="noop")
    parser.add_argument("--bootstrap-servers", help="a running broker (default: a scratch one for this run)")
    args = parser.parse_args(argv)
    for name in ("records", "repeat", "max_offsets", "partitions"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")

    from pacer_kafka.broker import start_broker, stop_broker

    scratch = Path(tempfile.mkdtemp(prefix="pacer-kafka-overhead-"))
    broker_dir: Path | None = None
    spark = handle = None
    try:
        if args.bootstrap_servers:
            servers = args.bootstrap_servers
        else:
            servers = start_broker(scratch / "broker").bootstrap_servers
            broker_dir = scratch / "broker"
            print(f"scratch broker at {servers}", flush=True)
        topic = f"pacer-overhead-{uuid.uuid4().hex[:8]}"
        produced, fill_s = fill_topic(servers, topic, args.records, args.partitions)
        print(f"topic {topic}: {produced} records in {args.partitions} partitions, written in {fill_s:.1f} s", flush=True)

        spark = comparison_session(args.master, "pacer-kafka-overhead", kafka=True)
        handle = pacer_spark.attach(spark, admission="asap")

        def run(side: str, i: int) -> Run:
            out = scratch / f"{side}-{i}"
            frame = kafka_frame(spark, servers, topic, paced=side == "pacer", max_offsets=args.max_offsets)
            result = drain_query(frame, out, sink=args.sink)
            shutil.rmtree(out, ignore_errors=True)
            if result["rows"] != produced:
                raise RuntimeError(f"{side} run {i + 1} read {result['rows']} rows of {produced}")
            return result

        warm = run("plain", -1)
        print(f"warm-up (plain): {warm['seconds']:.2f} s", flush=True)
        runs = interleave(SIDES, args.repeat, run)
        summary = compare(runs)
        print(summary_line(summary, {"plain": "plain format('kafka')", "pacer": "format('pacer')"}), flush=True)
        write_result(args.json, {
            "records": produced, "partitions": args.partitions, "max_offsets_per_trigger": args.max_offsets,
            "sink": args.sink, "master": args.master, "admission": "asap", "trigger": "availableNow",
            "spark": spark.version, "fill_s": fill_s, "warm_up_s": warm["seconds"],
            "paced": handle.report()["spark"]["paced"]}, runs, summary)
    except KafkaSetupError as exc:
        print(f"pacer_kafka.overhead: {exc}", file=sys.stderr)
        return 2
    finally:
        if handle is not None:
            handle.stop()
        if spark is not None:
            spark.stop()
        if broker_dir is not None:
            stop_broker(broker_dir)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
