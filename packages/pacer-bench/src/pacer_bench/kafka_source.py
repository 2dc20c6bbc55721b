"""``pacer bench latency-target --source kafka``: every configuration as a ``pacer run --source kafka``.

pacer-bench's ``kafka`` source (:data:`SOURCE`, registered under the ``pacer_bench.sources`` entry points; left
out where pacer-kafka is not installed, since loading it imports pacer-kafka). Each configuration (and repetition) gets a fresh topic; its
traffic is written by ``pacer produce``'s Python API (:func:`pacer_kafka.produce.produce`) on the wall clock,
from the moment its query is up, while Spark reads it: paced through ``format("pacer")`` by the
configuration's admission, or, for a static trigger, plain ``format("kafka")`` on Spark's own processing-time
trigger. The run goes through the ``spark`` runtime (found through ``pacer_runtimes``) with
``options["spark"]["source"] = "kafka"``; the figures come from the report's ``kafka`` section (latency from
each record's Kafka timestamp to the end of its batch), mapped by :func:`kafka_figures` onto the fields the
bench's tables read. Needs ``pacer-bench[kafka]`` (pacer-spark and pacer-kafka).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pacer import Runtime
from pacer.plugins import PluginManager
from pacer_kafka import ensure_topic, plan_workload, produce, start_broker, stop_broker

if TYPE_CHECKING:
    from pacer_bench.traffic_sources import BenchSource

#: Partitions of every topic the bench creates (as ``pacer produce --partitions 2``).
TOPIC_PARTITIONS = 2
#: Seconds the run reads beyond the traffic's duration, at the least (:func:`read_slack`).
PRODUCE_SLACK_S = 6.0


def read_slack(config: Any) -> float:
    """Seconds the run reads beyond the traffic's duration. A Kafka run ends, once its duration is over,
    as soon as its last trigger read everything the topic held when it started; the producer starts
    once the query is up (on the next whole second), so a trigger must start after the producer's last
    record and complete within the duration: :data:`PRODUCE_SLACK_S` plus two waits of the query (its
    static trigger's interval, else its deadline: 10 s for those that read none, 3 s at the least); with several
    queries, the longest of their waits."""

    def wait(query: Any) -> float:
        if query.admission == "static":
            return float(query.admission_params.get("interval", 10.0))
        if query.admission == "asap":
            return 0.0
        return float(query.deadline or 10.0)

    return PRODUCE_SLACK_S + 2.0 * max(3.0, *(wait(q) for q in config.queries))
#: Seconds to wait for a configuration's query to start before producing anyway.
QUERY_START_TIMEOUT_S = 180.0


@contextmanager
def kafka_servers(bootstrap_servers: str | None) -> Iterator[str]:
    """The brokers to use: ``bootstrap_servers``, or a scratch broker (pacer-kafka) in a temporary folder,
    stopped and removed on the way out."""
    if bootstrap_servers:
        yield bootstrap_servers
        return

    folder = tempfile.mkdtemp(prefix="pacer-bench-kafka-")
    try:
        info = start_broker(folder)
        try:
            yield info.bootstrap_servers
        finally:
            stop_broker(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def topic_name(label: str, repetition: int) -> str:
    """A fresh topic for one configuration's repetition: ``pacer-bench-lr2-binary-static-10s-r1-1a2b3c``."""
    slug = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in label.replace(" / ", "-").replace("@", ""))
    slug = "-".join(part for part in slug.split("-") if part)
    return f"pacer-bench-{slug[:180]}-r{repetition}-{uuid.uuid4().hex[:6]}"


@dataclass
class Producing:
    """The traffic of one configuration being written while it runs (a thread); ``result`` or ``error`` after."""

    thread: threading.Thread
    result: Any = None
    error: str | None = None


def _active_queries() -> list[Any]:
    """The streaming queries active on the session the Spark runtime built (none before it exists)."""
    from pyspark.sql import SparkSession

    spark = SparkSession._instantiatedSession  # shared by every thread, unlike the active session
    if spark is None:
        return []
    try:
        return list(spark.streams.active)
    except Exception:  # the session is being built or stopped: no query yet
        return []


def start_producing(bootstrap_servers: str, topic: str, query: Any, *, seed: int, duration: float,
                    query_name: str) -> Producing:
    """Write ``query``'s (a :class:`pacer.QueryRun`) traffic into ``topic`` for ``duration`` s, once a
    streaming query named ``query_name`` is active (at most :data:`QUERY_START_TIMEOUT_S` later)."""

    plan = plan_workload(query.workload, traffic=query.traffic, rate=query.rate, duration=duration, seed=seed,
                         traffic_params=dict(query.traffic_params))

    def work() -> None:
        limit = time.time() + QUERY_START_TIMEOUT_S
        while time.time() < limit and not any(q.name == query_name for q in _active_queries()):
            time.sleep(0.2)
        try:
            box.result = produce(bootstrap_servers, topic, plan, partitions=TOPIC_PARTITIONS)
        except Exception as exc:  # the run fails and its report says why
            box.error = f"{type(exc).__name__}: {exc}"

    box = Producing(threading.Thread(target=work, name=f"pacer-bench-produce-{topic}", daemon=True))
    box.thread.start()
    return box


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def kafka_figures(report: dict[str, Any], duration: float) -> None:
    """Map each query's ``kafka`` section onto what the bench's tables read of ``queries[q]``: latency
    percentiles (p50 stands for the average, which Kafka's quantiles do not give), the share of records
    over the query's deadline, latency quantiles at every percentile (to judge other deadlines),
    batches, rows per second and ``cost.engine_s``. What the Controller recorded stays under
    ``bench.controller_queries``; ``bench.latencies_s``, ``latency_rows`` and ``shed_rows`` are left out so no
    table reads the Controller's (a record is a row: the share of records over the deadline is rows-weighted)."""
    bench = report.setdefault("bench", {})
    for key in ("latencies_s", "latency_rows", "shed_rows"):
        bench.pop(key, None)
    queries = report.setdefault("queries", {})
    bench["controller_queries"] = {q: dict(v) for q, v in queries.items()}
    for query_id, k in (report.get("kafka") or {}).items():
        lat = k.get("latency_ms") or {}
        batches = int(k.get("batches") or 0)
        engine_s = float(k.get("engine_s") or 0.0)
        q = dict(queries.get(query_id) or {})
        q.pop("deadline_miss_ratio_datasets", None)  # the Controller's: a Kafka record is a row, not a dataset
        share = 1.0 if k.get("miss_share") is None else float(k["miss_share"])
        q.update({
            "latency_ms": {"avg": _number(lat.get("p50")), "p50": _number(lat.get("p50")),
                           "p95": _number(lat.get("p95")), "p99": _number(lat.get("p99")),
                           "max": _number(lat.get("max"))},
            "latency_quantiles_ms": list(k.get("quantiles_ms") or []),
            "deadline_ms": 1000.0 * float(k["deadline_s"]),
            "deadline_miss_ratio": share, "deadline_miss_ratio_rows": share,
            "batches": batches, "rows_processed": int(k.get("records") or 0),
            "throughput_rows_per_s": int(k.get("records") or 0) / max(duration, 1e-9),
            "processing_ms": {"avg": 1000.0 * engine_s / batches if batches else 0.0},
            "gpu_operator_ratio": float(q.get("gpu_operator_ratio") or 0.0), "datasets_shed": 0,
            "cost": {**(q.get("cost") or {}), "engine_s": engine_s, "batches_per_min": k.get("batches_per_min"),
                     # the query's tasks' core-seconds from pacer's listener: measured for Spark's own trigger too
                     **({"busy_core_s": float(k["busy_core_s"])} if k.get("busy_core_s") is not None else {})},
        })
        queries[query_id] = q
    bench["source"] = "kafka"


def run_one_kafka(config: Any, pm: PluginManager, runtime: Runtime, options: Mapping[str, Any], *,
                  bootstrap_servers: str, repetition: int) -> tuple[dict[str, Any], bool]:
    """One configuration (a :class:`pacer_bench.scenarios.Config`: latency-target's one query, or multi-query's
    several) once on Spark's Kafka source: a fresh topic per query, each query's traffic produced into its topic
    while the queries run (query ``i`` with the run's seed ``+ i``); returns the report (figures from its ``kafka``
    section, :func:`kafka_figures`) and whether it failed (not drained, a query failed, or a producer could not
    write everything, or a query read fewer records than its topic got)."""
    from pacer_bench.runtime_traits import on_spark

    run = on_spark(config, config.run_config())
    ids = run.query_ids()
    topics = {qid: topic_name(config.label if len(ids) == 1 else f"{config.label}-{qid}", repetition) for qid in ids}
    for topic in topics.values():
        ensure_topic(bootstrap_servers, topic, TOPIC_PARTITIONS)
    run = run.with_options("spark", **options, label=config.label, source="kafka",
                           bootstrap_servers=bootstrap_servers, topic=topics[ids[0]], starting_offsets="earliest",
                           **({"topics": topics} if len(ids) > 1 else {}))
    traffic_s = config.duration
    run = replace(run, duration=traffic_s + read_slack(config))
    producing = {qid: start_producing(bootstrap_servers, topics[qid], query, seed=run.query_seed(i),
                                      duration=traffic_s, query_name=qid)
                 for i, (qid, query) in enumerate(zip(ids, config.queries, strict=True))}
    result = runtime.run(run, plugin_manager=pm)
    for box in producing.values():
        box.thread.join(timeout=traffic_s + 120.0)
    report = result.report
    kafka_figures(report, traffic_s)
    report.setdefault("config", {})["duration_s"] = traffic_s  # the traffic's; the run read read_slack() more
    produce = {qid: _produced(topics[qid], box) for qid, box in producing.items()}
    report["bench"]["produce"] = produce[ids[0]] if len(ids) == 1 else produce
    failed = bool(result.status)
    for qid, box in producing.items():
        read = int(((report.get("kafka") or {}).get(qid) or {}).get("records") or 0)
        failed |= box.error is not None or box.result is None or bool(box.result.failed) or \
            (box.result is not None and read < box.result.produced)
    return report, failed


def _produced(topic: str, box: Producing) -> dict[str, Any]:
    """What the producer of ``topic`` wrote, for the report's ``bench.produce``."""
    produced = box.result
    return {"topic": topic, "error": box.error,
            **({"produced": produced.produced, "failed": produced.failed, "asked_rate": produced.asked_rate,
                "achieved_rate": produced.achieved_rate, "max_lag_s": produced.max_lag_s,
                "kept_up": produced.kept_up} if produced is not None else {})}


#: Seconds of traffic of the throwaway run that warms a new session's streaming path before the first measured one.
KAFKA_WARM_UP_S = 4.0


def warm_up_kafka(config: Any, pm: PluginManager, runtime: Runtime, options: Mapping[str, Any], *,
                  bootstrap_servers: str) -> None:
    """A short throwaway run of ``config`` on its own topic, not measured: a fresh JVM's first streaming batch
    of a stateful query pays code generation and JIT (the Spark runtime's own streaming warm-up skips Kafka
    sources), which would otherwise fall on the first configuration alone. None when :data:`KAFKA_WARM_UP_S` is 0."""
    if KAFKA_WARM_UP_S <= 0:
        return
    warm = replace(config.with_duration(min(KAFKA_WARM_UP_S, config.duration)), label=f"warm-up {config.label}")
    run_one_kafka(warm, pm, runtime, {**options, "drain_timeout": 60.0}, bootstrap_servers=bootstrap_servers,
                  repetition=0)


class KafkaSource:
    """pacer-bench's ``--source kafka`` (a :class:`pacer_bench.traffic_sources.BenchSource`): ``--bootstrap-servers``, or a
    scratch broker for the whole bench run (:func:`kafka_servers`); :func:`warm_up_kafka`, then
    :func:`run_one_kafka` for every configuration and repetition, on the ``spark`` runtime."""

    name = "kafka"
    runtime = "spark"
    help = ("every configuration a `pacer run --source kafka` on a fresh topic, its traffic produced while it runs, "
            "latency from the Kafka timestamps (runs on Spark)")
    summary = (", reading Kafka (a fresh topic per configuration, its traffic produced while it ran; "
               "latency from each record's Kafka timestamp to the end of its batch)")
    warm_up_message = "warming up Spark's Kafka path (not measured)"
    #: latency-target's statics are Spark's trigger at each deadline: the baseline a Kafka user runs.
    statics_at_deadlines = True

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """``--bootstrap-servers HOST:PORT``."""
        group.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                           help="Kafka brokers of --source kafka (default: a scratch broker, started and stopped)")

    def open(self, options: Mapping[str, Any]) -> AbstractContextManager[str]:
        """The brokers every configuration's topic lives on (:func:`kafka_servers`)."""
        return kafka_servers(options.get("bootstrap_servers"))

    def warm_up(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any) -> None:
        """:func:`warm_up_kafka` on the brokers ``handle``."""
        warm_up_kafka(config, pm, runtime, run_options, bootstrap_servers=handle)

    def run_one(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any, *, repetition: int) -> tuple[dict[str, Any], bool]:
        """:func:`run_one_kafka` on the brokers ``handle``."""
        return run_one_kafka(config, pm, runtime, run_options, bootstrap_servers=handle, repetition=repetition)


#: The object the ``pacer_bench.sources`` entry point ``kafka`` names.
SOURCE: BenchSource = KafkaSource()
