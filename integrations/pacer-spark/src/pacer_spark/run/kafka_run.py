"""``pacer run --source kafka``: a workload's query on Spark's own Kafka source, paced or as a baseline.

Paced, the query reads ``format("pacer").option("pacer.source", "kafka")`` with the run's admission,
deadline and placement as ``pacer.*`` options (:mod:`pacer_spark.driver.protocol.paced`); with ``--trigger`` it reads
plain ``format("kafka")`` on Spark's own processing-time trigger, the baseline a Spark user runs.

Latency is measured the same way for both, from Kafka: every batch observes
(``DataFrame.observe``, reported in its progress event, no extra job) the count and 21 quantiles of
its records' Kafka timestamps; a record's latency is its batch's end (trigger start +
``triggerExecution``) minus its timestamp. The run's percentiles and deadline misses are taken over
those quantile points weighted by each batch's records (to about 5 percentile points; the maximum is
exact).

What each trigger cost is recorded the same way for both too, one point per Spark batch (:class:`BatchPoint`): its
input rows, ``triggerExecution``, whether Spark formed it without new data (a no-data batch after the watermark
moved), and its own tasks' busy and CPU core-seconds, read from pacer's task-time listener by its batch id.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pacer_spark.config import no_data_batches_enabled
from pacer_spark.connectors import connector
from pacer_spark.jvm.progress import TriggerProgress
from pacer_spark.jvm.task_time import TaskTime


class KafkaSourceError(ValueError):
    """The topic a run reads is missing, or no broker answered: the message names what and how to fix it.

    A ``ValueError``, so that ``pacer run`` prints it as one line (``pacer run: error: ...``) instead of a
    trace.
    """


#: Seconds :func:`check_topics` waits for the cluster's metadata.
CHECK_TIMEOUT_S = 10.0

#: The observation every Kafka query of ``pacer run`` carries.
OBSERVATION = "pacer_kafka_timestamps"
QUANTILES = tuple(i / 20 for i in range(21))


@dataclass
class KafkaBatch:
    """What one trigger of a Kafka query read: records, the quantiles of their Kafka timestamps (ms),
    when it ended (epoch s) and the engine time it took (s)."""

    batch_id: int
    records: int
    quantiles_ms: tuple[float, ...]
    ended_at: float
    engine_s: float


@dataclass
class BatchPoint:
    """What one trigger of a Kafka query cost: Spark's batch id, its input rows, its ``triggerExecution`` (s), whether
    Spark formed it without new data, and its tasks' busy and CPU core-seconds (None: not measured, or not read yet).
    :ivar complete: the task figures were read after the listener had every task of the batch."""

    batch_id: int
    rows: int
    trigger_s: float
    no_data: bool
    busy_core_s: float | None = None
    cpu_core_s: float | None = None
    complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The report's form of the point."""
        return {"batch_id": self.batch_id, "rows": self.rows, "trigger_s": self.trigger_s, "no_data": self.no_data,
                "busy_core_s": self.busy_core_s, "cpu_core_s": self.cpu_core_s}


@dataclass
class KafkaQuery:
    """A running Kafka query of ``pacer run``, the batches it reported and what each trigger cost.

    :ivar task_time: pacer's task-time listener (None: the points carry no task figures).
    :ivar no_data_batches: whether it started with Spark's no-data batches on.
    """

    query_id: str
    handle: Any
    deadline_s: float
    batches: dict[int, KafkaBatch] = field(default_factory=dict)
    caught_up: bool = False
    task_time: TaskTime | None = None
    points: dict[int, BatchPoint] = field(default_factory=dict)
    no_data_batches: bool = True

    def collect(self) -> None:
        """Read the progress Spark keeps (``recentProgress``) into :attr:`batches` and :attr:`points`."""
        for progress in self.handle.recentProgress:
            batch = batch_of(progress)
            if batch is not None:
                self.batches[batch.batch_id] = batch
            trigger = TriggerProgress.from_json(progress)
            if trigger.executed and trigger.batch_id not in self.points:  # not an idle trigger's entry
                self.points[trigger.batch_id] = BatchPoint(trigger.batch_id, trigger.rows, trigger.engine_s or 0.0,
                                                           trigger.no_data)
            sources = progress["sources"]
            self.caught_up = bool(sources) and all(
                s.get("latestOffset") in (None, s.get("endOffset")) for s in sources)
        self.read_costs(final=False)

    def read_costs(self, *, final: bool) -> None:
        """Read the task figures of the points not complete yet: those whose batch the listener has seen through
        (``final``: every one, as far as counted)."""
        stream = str(self.handle.id)
        for point in self.points.values():
            if point.complete or self.task_time is None:
                continue
            cost = self.task_time.batch_cost(stream, point.batch_id)
            if cost is not None and (cost.reported or final):
                point.busy_core_s, point.cpu_core_s, point.complete = cost.busy_core_s, cost.cpu_core_s, True


def points_summary(points: Sequence[BatchPoint]) -> dict[str, Any]:
    """A query's triggers, in batch order (``per_batch``), and how many were Spark's no-data batches and what they
    cost (``no_data``: ``batches``, ``trigger_s``, ``busy_core_s``, ``cpu_core_s``; core-seconds None where not
    measured)."""
    empty = [p for p in points if p.no_data]

    def total(values: Iterable[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    return {"per_batch": [p.as_dict() for p in sorted(points, key=lambda p: p.batch_id)],
            "trigger_s": sum(p.trigger_s for p in points),
            "no_data": {"batches": len(empty), "trigger_s": sum(p.trigger_s for p in empty),
                        "busy_core_s": total(p.busy_core_s for p in empty),
                        "cpu_core_s": total(p.cpu_core_s for p in empty)}}


def _plain(value: Any) -> Any:
    """A progress value as plain Python (PySpark gives Rows for observed metrics)."""
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def batch_of(progress: Mapping[str, Any]) -> KafkaBatch | None:
    """The :class:`KafkaBatch` of one progress event (None for a trigger that read nothing)."""
    observed = _plain((progress.get("observedMetrics") or {}).get(OBSERVATION))
    if not observed or not observed.get("records"):
        return None
    started = datetime.fromisoformat(str(progress["timestamp"]).replace("Z", "+00:00")).timestamp()
    engine_s = float((progress.get("durationMs") or {}).get("triggerExecution", 0)) / 1e3
    return KafkaBatch(int(progress["batchId"]), int(observed["records"]),
                      tuple(float(q) for q in observed["quantiles"]), started + engine_s, engine_s)


def latency_summary(batches: Sequence[KafkaBatch], deadline_s: float) -> dict[str, Any]:
    """Latency from each record's Kafka timestamp to its batch's end, over ``batches`` (``quantiles_ms``:
    at every percentile 0-100, so the run can be judged against other deadlines)."""
    points: list[tuple[float, float]] = []  # (latency s, weight in records)
    missed = 0.0
    for b in batches:
        latencies = [b.ended_at - q / 1e3 for q in b.quantiles_ms]  # falling: oldest record first
        step = b.records / (len(latencies) - 1)
        points += [(lat, step / (2 if i in (0, len(latencies) - 1) else 1)) for i, lat in enumerate(latencies)]
        missed += b.records * _share_over(latencies, deadline_s)
    records = sum(b.records for b in batches)
    engine_s = sum(b.engine_s for b in batches)

    def pct(q: float) -> float | None:
        if not points:
            return None
        ordered = sorted(points)
        total, seen = sum(w for _, w in ordered), 0.0
        for latency, weight in ordered:
            seen += weight
            if seen >= q / 100 * total:
                return 1e3 * latency
        return 1e3 * ordered[-1][0]

    return {"records": records, "batches": len(batches), "deadline_s": deadline_s,
            "records_max": max((b.records for b in batches), default=0),  # the largest batch (a read cap bounds it)
            "latency_ms": {"p50": pct(50), "p95": pct(95), "p99": pct(99),
                           "max": 1e3 * max((lat for lat, _ in points), default=0.0) if points else None},
            "miss_share": missed / records if records else None, "engine_s": engine_s,
            "batches_per_min": None, "quantiles_ms": [pct(q) for q in range(101)] if points else []}


def _share_over(latencies: Sequence[float], deadline_s: float) -> float:
    """Share of a batch's records over the deadline, interpolated between its quantile points."""
    n = len(latencies) - 1
    for i in range(n):
        hi, lo = latencies[i], latencies[i + 1]  # quantile i/n has the larger latency
        if hi > deadline_s >= lo:
            return (i + (hi - deadline_s) / (hi - lo if hi > lo else 1.0)) / n
    return 1.0 if latencies[-1] > deadline_s else 0.0


def recovery_summary(batches: Iterable[KafkaBatch], deadline_s: float) -> dict[str, Any]:
    """How long the query took to catch up with what waited when it started, and the misses after, by the records.

    The query is caught up at the end of its first batch whose oldest record met the deadline; ``catch_up_s`` runs
    from the first batch's start to there (0 when the first batch met it). ``records_after`` are the records
    produced after that moment (their Kafka timestamps), ``miss_share_after`` the share of them over the deadline:
    the steady state once the backlog is gone, the same measure for a paced query and a baseline.
    """
    ordered = sorted(batches, key=lambda b: b.batch_id)
    if not ordered:
        return {"catch_up_s": None, "records_after": 0, "miss_share_after": None}
    start = ordered[0].ended_at - ordered[0].engine_s
    caught = next((b for b in ordered if b.ended_at - b.quantiles_ms[0] / 1e3 <= deadline_s), None)
    if caught is None:
        return {"catch_up_s": ordered[-1].ended_at - start, "records_after": 0, "miss_share_after": None}
    after_ms = 1e3 * caught.ended_at if caught is not ordered[0] else -float("inf")
    records = missed = 0.0
    for b in ordered:
        late_before_ms = 1e3 * (b.ended_at - deadline_s)  # a record older than this missed
        records += b.records * (1.0 - _cdf(b.quantiles_ms, after_ms))
        missed += b.records * max(0.0, _cdf(b.quantiles_ms, late_before_ms) - _cdf(b.quantiles_ms, after_ms))
    return {"catch_up_s": caught.ended_at - start if caught is not ordered[0] else 0.0,
            "records_after": round(records), "miss_share_after": missed / records if records else None}


def _cdf(quantiles_ms: Sequence[float], at_ms: float) -> float:
    """Share of a batch's records with a timestamp before ``at_ms``, interpolated between its quantile points."""
    n = len(quantiles_ms) - 1
    if at_ms <= quantiles_ms[0]:
        return 0.0
    if at_ms > quantiles_ms[-1]:
        return 1.0
    for i in range(n):
        lo, hi = quantiles_ms[i], quantiles_ms[i + 1]
        if lo < at_ms <= hi:
            return (i + (at_ms - lo) / (hi - lo)) / n
    return 1.0


def kafka_stream(spark: Any, *, bootstrap_servers: str, topic: str, stream: str, value_format: str,
                 starting_offsets: str, max_offsets: int, paced_options: Mapping[str, str] | None) -> Any:
    """The topic's records as the workload stream's rows, observed for latency.

    :param paced_options: the ``pacer.*`` options of a paced query; None reads plain ``format("kafka")``.
    """
    from pyspark.sql import functions as F

    from pacer_workloads import spark_schema_ddl

    reader = spark.readStream.format("pacer" if paced_options is not None else "kafka")
    if paced_options is not None:
        reader = reader.option("pacer.source", "kafka").options(**paced_options)
    reader = (reader.option("kafka.bootstrap.servers", bootstrap_servers).option("subscribe", topic)
              .option("startingOffsets", starting_offsets).option("failOnDataLoss", "false"))
    if max_offsets > 0:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    raw = reader.load()
    ddl = spark_schema_ddl(stream)
    text = F.col("value").cast("string")
    parsed = F.from_json(text, ddl) if value_format == "json" else F.from_csv(text, ddl)
    rows = raw.select(parsed.alias("row"), (F.col("timestamp").cast("double") * 1e3).alias("kafka_ms"))
    observed = rows.observe(OBSERVATION, F.count(F.lit(1)).alias("records"),
                            F.percentile_approx("kafka_ms", list(QUANTILES), 10000).alias("quantiles"))
    return observed.select("row.*")


def topic_names(topic: str) -> list[str]:
    """The topics of a ``subscribe`` option (comma-separated)."""
    return [t.strip() for t in topic.split(",") if t.strip()]


def create_hint(bootstrap_servers: str, topic: str) -> str:
    """How to create ``topic``: empty with ``pacer kafka create-topic``, or filled by ``pacer produce``."""
    return (f"create it with `pacer kafka create-topic --bootstrap-servers {bootstrap_servers} --topic {topic} "
            f"--partitions N` (no records), or fill it with `pacer produce --bootstrap-servers {bootstrap_servers} "
            f"--topic {topic} --workload W --rate R --duration S` (creates it), then run again")


def _shared_prefix(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` share."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def missing_topic_message(bootstrap_servers: str, topic: str, existing: Sequence[str] | None = None) -> str:
    """One line: ``topic`` does not exist at ``bootstrap_servers``, which topics do (the ten nearest the name asked
    for first, by the prefix they share with it: a typo's target leads), and how to create it."""
    others = sorted((t for t in existing or () if not t.startswith("__")),
                    key=lambda t: (-_shared_prefix(t, topic), t))
    listed = (f" (it has {len(others)}: {', '.join(others[:10])}{', ...' if len(others) > 10 else ''})"
              if others else " (it has no topic yet)" if existing is not None else "")
    return (f"Kafka topic {topic!r} does not exist on the cluster at {bootstrap_servers}{listed}; "
            f"{create_hint(bootstrap_servers, topic)}")


def check_topics(bootstrap_servers: str, topic: str, *, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, int]:
    """Each topic of ``topic`` and its partition count, asked of the cluster before a query starts on them.

    Spark's Kafka source on a missing topic fails only once its first offset request times out, with
    Kafka's ``UnknownTopicOrPartitionException: This server does not host this topic-partition`` inside a
    trace; this says which topic and how to create it, asking the ``kafka`` connector
    (:mod:`pacer_spark.connectors`). Without pacer-kafka installed it checks nothing (returns ``{}``).

    :raises KafkaSourceError: a topic does not exist, or no broker answered within ``timeout_s``.
    """
    try:
        kafka = connector("kafka")
    except ImportError:  # pragma: no cover - session_builder(kafka=True) needs pacer-kafka already
        return {}
    try:
        served = kafka.partitions(bootstrap_servers, timeout_s)
    except ConnectionError as exc:
        raise KafkaSourceError(str(exc)) from None
    found = {}
    for name in topic_names(topic):
        if name not in served:
            raise KafkaSourceError(missing_topic_message(bootstrap_servers, name, list(served)))
        found[name] = served[name]
    return found


#: Kafka errors, as Spark's text shows them, that mean the broker did not answer in time.
_UNREACHABLE = ("Timed out waiting for a node assignment", "Timed out waiting to send the call",
                "Timed out waiting for a connection", "Connection to node", "DisconnectException")


def explain_failure(trace: str, *, bootstrap_servers: str, topic: str, checkpoint: str | None = None) -> str | None:
    """One line saying why a Kafka query failed, when its error text is a Kafka cause pacer knows; else None.

    - A ``format("pacer")`` query's own check at its start (``KafkaTopicCheck`` in the JVM source: a subscribed
      topic that does not exist): its line, which names the topic, the servers and how to create it.
    - ``UnknownTopicOrPartitionException`` (the topic does not exist, or was deleted while the query ran):
      which topic and how to create it.
    - Kafka's ``TimeoutException`` waiting for a broker (the broker stopped longer than the source's
      offset requests wait: ``kafka.default.api.timeout.ms`` x ``fetchOffset.numRetries``): which broker,
      what to check, and that a restart from the checkpoint reads on after the last committed batch.
    """
    from pacer_spark.errors import root_cause

    cause = root_cause(trace)
    checked = re.search(r"Kafka topic '[^'\n]*' does not exist on the cluster at [^\n]*", trace)
    if checked:
        return checked.group(0).strip()
    if "UnknownTopicOrPartitionException" in trace:
        names = topic_names(topic)
        which = names[0] if len(names) == 1 else ", ".join(names)
        return (f"Kafka topic {which!r} does not exist on the cluster at {bootstrap_servers} (Kafka: "
                f"UnknownTopicOrPartitionException); {create_hint(bootstrap_servers, names[0] if names else topic)}")
    if "org.apache.kafka.common.errors.TimeoutException" in trace and any(s in trace for s in _UNREACHABLE):
        resume = (f"; its checkpoint {checkpoint} holds every committed batch: a query restarted on it reads "
                  "on from there, losing and repeating no record" if checkpoint else "")
        return (f"no Kafka broker answered at {bootstrap_servers} for longer than the Kafka source waits (Kafka: "
                f"{cause}); check that the broker runs (`pacer kafka status --dir DIR`, `pacer kafka up --dir DIR "
                f"--port PORT` starts it again on its port), then run again{resume}")
    return None


def await_caught_up(queries: Sequence[KafkaQuery], *, duration: float, drain_timeout: float,
                    poll: float = 1.0) -> bool:
    """Let the queries read for ``duration`` seconds, then until each has read everything the topic
    held at its last trigger (``latestOffset`` = ``endOffset``), at most ``drain_timeout`` more."""
    started = time.time()
    while True:
        for q in queries:
            if q.handle.exception() is not None or not q.handle.isActive:
                return False
            q.collect()
        elapsed = time.time() - started
        if elapsed >= duration and all(q.caught_up for q in queries):
            return True
        if elapsed >= duration + drain_timeout:
            return False
        time.sleep(poll)


class KafkaRun:
    """The Kafka queries of one ``pacer run`` on an attached session, with the interface
    :func:`pacer_spark.run.spark_runtime.drive` drives (start, wait, errors, stop, report).

    :param session: the attached :class:`~pacer_spark.runtime.PacerSession` (its Controller paces the
        ``format("pacer")`` queries; a ``--trigger`` baseline only reports through its progress).
    :param settings: ``bootstrap_servers``, ``topic``, ``value_format``, ``starting_offsets``, ``max_offsets``.
    :param drain_timeout: seconds, after the run's duration, to catch up with the topic.
    """

    def __init__(self, session: Any, settings: Mapping[str, Any], *, drain_timeout: float) -> None:
        self.session = session
        self.settings = dict(settings)
        self.queries: list[KafkaQuery] = []
        self.drain_timeout = drain_timeout
        self.checked_topics: set[str] = set()
        self.checkpoints: dict[str, str] = {}
        self.topics: dict[str, str] = {}  # query id -> the topic it reads

    def start(self, query_id: str, workload: str, *, deadline_s: float, paced_options: Mapping[str, str] | None,
              trigger: str | None, checkpoint: str, topic: str | None = None) -> None:
        """Start ``workload``'s query on the topic (``topic``, else the run's; paced unless ``trigger``), into a
        noop sink.

        :raises KafkaSourceError: before a query, when its topic does not exist or no broker answers.
        """
        from pacer_spark.workloads import build_workload, noop_sink
        from pacer_workloads import WORKLOADS

        topic = topic or self.settings["topic"]
        if topic not in self.checked_topics:
            check_topics(self.settings["bootstrap_servers"], topic)
            self.checked_topics.add(topic)
        self.checkpoints[query_id] = checkpoint
        self.topics[query_id] = topic
        frame = kafka_stream(self.session.spark, stream=WORKLOADS[workload].stream, paced_options=paced_options,
                             topic=topic, **{k: self.settings[k] for k in ("bootstrap_servers", "value_format",
                                                                           "starting_offsets", "max_offsets")})
        query = build_workload(workload, frame)
        writer = (query.frame.writeStream.queryName(query_id).foreachBatch(noop_sink(query.finish))
                  .outputMode(query.output_mode).option("checkpointLocation", checkpoint))
        writer = writer.trigger(processingTime=trigger) if trigger else writer.trigger(processingTime="0 seconds")
        enabled = no_data_batches_enabled(self.session.spark)
        self.queries.append(KafkaQuery(query_id, writer.start(), deadline_s, task_time=self.session.task_time,
                                       no_data_batches=enabled))

    def await_drained(self, timeout: float) -> bool:
        """Read for ``timeout`` minus the drain time, then until caught up with the topic."""
        return await_caught_up(self.queries, duration=max(0.0, timeout - self.drain_timeout),
                               drain_timeout=self.drain_timeout)

    def error_traces(self) -> dict[str, str]:
        """Queries that failed, and Spark's error text."""
        failed = {}
        for q in self.queries:
            exc = q.handle.exception()
            if exc is not None:
                failed[q.query_id] = str(exc)
        return failed

    def errors(self) -> dict[str, str]:
        """Queries that failed, and why in one line: what to do for a Kafka cause :func:`explain_failure`
        knows (a missing topic, a broker that stopped answering), else the root cause."""
        from pacer_spark.errors import root_cause

        servers = self.settings["bootstrap_servers"]
        return {q: explain_failure(text, bootstrap_servers=servers, topic=self.topics.get(q, self.settings["topic"]),
                                   checkpoint=self.checkpoints.get(q))
                or root_cause(text) for q, text in self.error_traces().items()}

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop the queries (after their running trigger, at most ``timeout`` s each), then the session.

        A paced query first admits nothing more (:meth:`pacer_spark.driver.protocol.paced.PacedQueries.hold`), so the
        stop comes between batches: a query that triggers back to back (asap) would otherwise run on for the whole
        ``timeout`` and have its last batch interrupted, which the report counted and the records did not. The batches
        that end meanwhile are collected too, once the query has stopped (its progress outlives it)."""
        paced = self.session.paced
        for q in self.queries:
            if paced is not None:
                paced.hold(q.query_id)
        for q in self.queries:
            collected = time.monotonic()
            limit = collected + timeout
            while time.monotonic() < limit and q.handle.isActive and q.handle.status.get("isTriggerActive"):
                if time.monotonic() - collected >= 1.0:  # Spark keeps the last 100 progress events only
                    q.collect()
                    collected = time.monotonic()
                time.sleep(0.05)
            q.handle.stop()
            q.collect()
        self.session.stop(timeout=timeout)

    def report(self, config: Mapping[str, Any], *, interval: float = 1.0, end: float | None = None) -> dict[str, Any]:
        """The session's ``pacer.report/1`` plus ``kafka``: per query, latency from Kafka timestamps, and what each
        trigger cost (:func:`points_summary`; ``busy_core_s``: every task of the query, in a batch or not)."""
        report: dict[str, Any] = self.session.report(config, interval=interval, end=end)
        wall = max((end or time.time()) - self.session.started_at, 1e-9)
        kafka = {}
        for q in self.queries:
            summary = latency_summary(sorted(q.batches.values(), key=lambda b: b.batch_id), q.deadline_s)
            summary["batches_per_min"] = 60.0 * summary["batches"] / wall
            summary.update(recovery_summary(q.batches.values(), q.deadline_s))
            task_time = self.session.task_time
            summary["busy_core_s"] = task_time.query_total_s(str(q.handle.id)) if task_time is not None else None
            q.read_costs(final=True)
            summary.update(points_summary(list(q.points.values())), no_data_batches_enabled=q.no_data_batches)
            kafka[q.query_id] = summary
        report["kafka"] = kafka
        return report


def kafka_lines(report: Mapping[str, Any]) -> list[str]:
    """One line per Kafka query: records, batches, latency from the Kafka timestamp, misses, engine time."""
    lines = []
    for query_id, k in (report.get("kafka") or {}).items():
        lat = k["latency_ms"]
        if not k["records"]:
            lines.append(f"kafka {query_id}: no record read")
            continue
        lines.append(f"kafka {query_id}: {k['records']} records in {k['batches']} batches; latency from the Kafka "
                     f"timestamp p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, max {lat['max']:.0f} ms; "
                     f"{100 * k['miss_share']:.1f} % over the {k['deadline_s']:g} s deadline; engine "
                     f"{k['engine_s']:.1f} s, {k['batches_per_min']:.1f} batches/min")
        empty = k.get("no_data") or {}
        if empty.get("batches"):
            busy = empty.get("busy_core_s")
            lines.append(f"kafka {query_id}: {empty['batches']} no-data batches (Spark's, after the watermark moved): "
                         f"trigger {empty['trigger_s']:.1f} s" + (f", {busy:.1f} busy core-s" if busy is not None
                                                                   else ""))
        if k.get("catch_up_s"):
            after = k["miss_share_after"]
            lines.append(f"kafka {query_id}: caught up with the waiting records in {k['catch_up_s']:.1f} s; of the "
                         f"{k['records_after']} records produced after, "
                         + (f"{100 * after:.1f} % over the deadline" if after is not None else "none read"))
    return lines
