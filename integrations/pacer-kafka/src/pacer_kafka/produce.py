"""``pacer produce``: a workload's rows written into a Kafka topic on the wall clock, at a traffic pattern.

The rows are :mod:`pacer_workloads`' Linear Road or Cluster Monitoring rows, one dataset per
``period`` as :func:`pacer_workloads.schedule_arrivals` lays them out (the same traffic the
simulator and ``pacer-gen`` see). Each row is sent once the wall clock passes its event time, so
the topic fills at the pattern's rate; the event time is in the value and is the record's Kafka
timestamp. Rows are encoded in bulk (Arrow's CSV writer, then one byte template per row) and
handed to librdkafka, which batches them; the next dataset is encoded while the current one is
being sent. When the producer falls behind the schedule it says so, with the asked and achieved rates.
"""

from __future__ import annotations

import io
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacer_kafka.clients import KafkaConnectionError, client_config, cluster_metadata

VALUE_FORMATS: tuple[str, ...] = ("json", "csv")
#: Achieved below this fraction of the asked rate counts as not keeping up.
KEEP_UP_FRACTION = 0.95
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_STRING_COLUMNS = frozenset({"timestamp", "userId"})


@dataclass(frozen=True)
class ProducePlan:
    """What to write: a workload's stream at a traffic pattern, as a list of timed datasets.

    :param workload: the query whose stream is written (``lr2`` → Linear Road, ``cm1`` → Cluster Monitoring).
    :param stream: the stream's name in :data:`pacer_workloads.STREAMS`.
    :param traffic: the pattern's name; ``traffic_params`` its effective parameters.
    :param arrivals: ``(index, end of period in seconds from the start, rows)`` per dataset.
    """

    workload: str
    stream: str
    traffic: str
    traffic_params: Mapping[str, float | str]
    arrivals: tuple[tuple[int, float, int], ...]
    duration: float
    period: float
    seed: int
    value_format: str

    @property
    def total_rows(self) -> int:
        """Rows the schedule holds."""
        return sum(rows for _, _, rows in self.arrivals)

    @property
    def asked_rate(self) -> float:
        """The schedule's mean rate in rows per second."""
        return self.total_rows / self.duration


def plan_workload(workload: str, *, traffic: str, rate: float, duration: float, seed: int, period: float = 1.0,
                  value_format: str = "json", traffic_params: Mapping[str, float | str] | None = None) -> ProducePlan:
    """Check the inputs and lay out the datasets.

    :raises ValueError: unknown workload, traffic pattern or format; rate, duration or period not > 0.
    """
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_traffic, schedule_arrivals

    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}; known workloads: {', '.join(WORKLOADS)}")
    if traffic not in TRAFFIC_PATTERNS:
        raise ValueError(f"unknown traffic pattern {traffic!r}; known patterns: {', '.join(TRAFFIC_PATTERNS)}")
    for name, value in (("rate", rate), ("duration", duration), ("period", period)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"--{name} must be a number > 0, got {value:g}")
    if value_format not in VALUE_FORMATS:
        raise ValueError(f"unknown value format {value_format!r}; use one of {', '.join(VALUE_FORMATS)}")
    pattern = make_traffic(traffic, rate=rate, duration=duration, **dict(traffic_params or {}))
    arrivals = schedule_arrivals(pattern, duration=duration, seed=seed, period=period)
    if not arrivals:
        raise ValueError(f"--duration {duration:g} s is shorter than one period ({period:g} s): nothing to send")
    return ProducePlan(workload, WORKLOADS[workload].stream, traffic, pattern.params(),
                       tuple((a.index, a.time, a.rows) for a in arrivals), len(arrivals) * period, period, int(seed),
                       value_format)


@dataclass
class EncodedDataset:
    """One dataset ready to send: values, Kafka timestamps (ms) and event times (epoch s), sorted by time."""

    values: list[bytes]
    timestamps_ms: list[int]
    event_s: np.ndarray


def encode_dataset(plan: ProducePlan, index: int, rows: int, start_time: float) -> EncodedDataset:
    """Generate dataset ``index`` (events in ``[start, start + period)``) and encode its rows as values.

    JSON values are objects with the stream's columns; CSV values are the columns in schema order
    (:func:`pacer_workloads.spark_schema_ddl`); the timestamp is ISO 8601 UTC with microseconds
    (``2026-01-01T12:00:00.123456Z``) in both.
    """
    import pyarrow.csv as pcsv

    from pacer_workloads import generate_arrow

    table = generate_arrow(plan.stream, rows, seed=plan.seed, index=index,
                           start_time=start_time + index * plan.period, duration=plan.period)
    micros = table.column("timestamp").cast("int64").to_numpy()
    if rows == 0:
        return EncodedDataset([], [], micros / 1e6)
    buffer = io.BytesIO()
    pcsv.write_csv(table, buffer, pcsv.WriteOptions(include_header=False, quoting_style="none"))
    lines = buffer.getvalue().split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    assert table.column_names[0] == "timestamp" and len(lines) == rows
    if plan.value_format == "csv":
        values = [b"%sZ,%s" % (head.replace(b" ", b"T"), rest) for head, rest in (ln.split(b",", 1) for ln in lines)]
    else:
        fields = ",".join(f'"{name}":"%s"' if name in _STRING_COLUMNS else f'"{name}":%s' for name in table.column_names)
        template = ("{" + fields + "}").encode()
        values = []
        for line in lines:
            head, rest = line.split(b",", 1)
            values.append(template % (head.replace(b" ", b"T") + b"Z", *rest.split(b",")))
    return EncodedDataset(values, (micros // 1000).tolist(), micros / 1e6)


@dataclass
class ProduceResult:
    """What a run wrote and how fast.

    :param produced: records the broker acknowledged.
    :param failed: records whose delivery failed (the first error is in ``errors``).
    :param asked_rate: the schedule's mean rows per second over its duration.
    :param achieved_rate: acknowledged records per second of wall time, first event to last acknowledgement.
    :param max_lag_s: the furthest a send fell behind its row's event time.
    :param interrupted: Ctrl-C stopped it early.
    """

    topic: str
    partitions: int
    created: bool
    produced: int = 0
    failed: int = 0
    asked_rate: float = 0.0
    achieved_rate: float = 0.0
    elapsed_s: float = 0.0
    max_lag_s: float = 0.0
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def kept_up(self) -> bool:
        """True when the achieved rate reached :data:`KEEP_UP_FRACTION` of the asked one."""
        return self.achieved_rate >= KEEP_UP_FRACTION * self.asked_rate


def check_topic_name(topic: str) -> None:
    """:raises ValueError: for a name Kafka refuses (letters, digits, ``. _ -``, at most 249)."""
    if not _TOPIC.match(topic) or topic in (".", ".."):
        raise ValueError(f"topic name {topic!r} is not valid in Kafka: use 1-249 letters, digits, '.', '_' or '-'")


def ensure_topic(bootstrap_servers: str, topic: str, partitions: int | None, *,
                 timeout_s: float = 10.0) -> tuple[int, bool]:
    """Create ``topic`` with ``partitions`` (default 1) unless it exists; return its partition count and whether it was created.

    :raises KafkaConnectionError: no broker answered.
    :raises RuntimeError: the broker refused to create it (its reason in the message).
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    check_topic_name(topic)
    if partitions is not None and partitions < 1:
        raise ValueError(f"--partitions must be >= 1, got {partitions}")
    metadata = cluster_metadata(bootstrap_servers, timeout_s=min(timeout_s, 5.0))
    existing = metadata.topics.get(topic)
    if existing is not None and existing.error is None:
        return len(existing.partitions), False
    admin = AdminClient(client_config(bootstrap_servers))
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions or 1, replication_factor=-1)],
                                 operation_timeout=timeout_s)[topic]
    created = True
    try:
        future.result(timeout=timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise RuntimeError(f"the broker did not create topic {topic!r}: {error.str()}") from None
        created = False
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # the new partitions need a leader before a produce lands
        described = cluster_metadata(bootstrap_servers, timeout_s=5.0).topics.get(topic)
        if described is not None and described.error is None and described.partitions and all(
                p.leader >= 0 for p in described.partitions.values()):
            return len(described.partitions), created
        time.sleep(0.1)
    raise KafkaConnectionError(f"topic {topic!r} has no partition leader after {timeout_s:g} s")


class _Sender:
    """Hands rows to librdkafka, counting delivery failures (only failures are reported back)."""

    def __init__(self, bootstrap_servers: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.failed = 0
        self.errors: list[str] = []
        self.submitted = 0
        self.producer = Producer(client_config(
            bootstrap_servers, **{
                "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "lz4",
                "queue.buffering.max.messages": 1_000_000, "delivery.report.only.error": True,
                "on_delivery": self._delivered, "message.timeout.ms": 60_000,
            }))

    def _delivered(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.failed += 1
            if len(self.errors) < 5:
                self.errors.append(error.str())

    def send(self, values: Sequence[bytes], stamps: Sequence[int], begin: int, end: int) -> None:
        """Queue rows ``[begin, end)``; wait for room when librdkafka's queue is full."""
        produce, topic = self.producer.produce, self.topic
        done = begin
        while done < end:
            try:
                for i in range(done, end):
                    produce(topic, values[i], timestamp=stamps[i])
                    done = i + 1
            except BufferError:
                self.producer.poll(0.05)
        self.submitted += done - begin
        self.producer.poll(0)

    def flush(self, timeout_s: float, interrupts: _Interrupts) -> int:
        """Wait for outstanding deliveries, up to ``timeout_s`` or a second Ctrl-C; return how many are still
        unacknowledged."""
        limit = time.monotonic() + timeout_s
        while (left := int(self.producer.flush(0.2))) and time.monotonic() < limit and interrupts.count < 2:
            pass
        return left


class _Interrupts:
    """Ctrl-C (SIGINT) counted, not raised, while records are handed to librdkafka: a KeyboardInterrupt raised
    between librdkafka queueing a record and the count of queued records would leave a record in the topic that
    ``produced N records`` does not count. Only the main thread receives signals; elsewhere nothing is counted."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, _signum: int, _frame: Any) -> None:
        self.count += 1

    @property
    def requested(self) -> bool:
        """Whether Ctrl-C was pressed."""
        return self.count > 0


@contextmanager
def _counting_interrupts() -> Iterator[_Interrupts]:
    interrupts = _Interrupts()
    if threading.current_thread() is not threading.main_thread():
        yield interrupts
        return
    previous = signal.signal(signal.SIGINT, interrupts)
    try:
        yield interrupts
    finally:
        signal.signal(signal.SIGINT, previous)


def produce(bootstrap_servers: str, topic: str, plan: ProducePlan, *, partitions: int | None = None,
            flush_timeout_s: float = 60.0, tick_s: float = 0.01, start_time: float | None = None,
            progress: Callable[[str], None] | None = None) -> ProduceResult:
    """Write ``plan`` into ``topic`` on the wall clock; return what was acknowledged and how fast.

    :param partitions: partitions of the topic if it has to be created (default 1).
    :param start_time: epoch seconds of the first event (default: the next whole second after setup).
    :param progress: receives a status line about every 10 s.
    :raises KafkaConnectionError: no broker answered at ``bootstrap_servers`` (within about 5 s).
    """
    count, created = ensure_topic(bootstrap_servers, topic, partitions)
    result = ProduceResult(topic, count, created, asked_rate=plan.asked_rate)
    sender = _Sender(bootstrap_servers, topic)
    start = float(start_time) if start_time is not None else float(math.ceil(time.time()) + 1)
    arrivals = plan.arrivals
    next_report = start + 10.0
    with _counting_interrupts() as interrupts:
        pending: EncodedDataset | None = encode_dataset(plan, arrivals[0][0], arrivals[0][2], start)
        for position, _arrival in enumerate(arrivals):
            current, pending = pending, None
            assert current is not None
            sent, rows = 0, len(current.values)
            while not interrupts.requested and (sent < rows or (pending is None and position + 1 < len(arrivals))):
                now = time.time()
                due = int(np.searchsorted(current.event_s, now, side="right"))
                if due > sent:
                    result.max_lag_s = max(result.max_lag_s, now - float(current.event_s[sent]))
                    sender.send(current.values, current.timestamps_ms, sent, due)
                    sent = due
                elif pending is None and position + 1 < len(arrivals):
                    index, _, next_rows = arrivals[position + 1]
                    pending = encode_dataset(plan, index, next_rows, start)
                else:
                    wait = float(current.event_s[sent]) - now
                    sender.producer.poll(max(0.0, min(tick_s, wait)))
                if progress is not None and now >= next_report:
                    next_report += 10.0
                    progress(f"{now - start:5.0f} s: {sender.submitted} records sent, {sender.failed} failed")
            if interrupts.requested:
                break
        unacknowledged = sender.flush(flush_timeout_s, interrupts)
        result.interrupted = interrupts.requested
    end = time.time()
    result.failed = sender.failed + unacknowledged
    result.produced = sender.submitted - result.failed
    result.errors = sender.errors + ([f"{unacknowledged} records not acknowledged"] if unacknowledged else [])
    result.elapsed_s = max(end - start, 1e-9)
    result.achieved_rate = result.produced / result.elapsed_s
    return result


def summary_lines(plan: ProducePlan, result: ProduceResult) -> list[str]:
    """The lines ``pacer produce`` prints at the end (the last is ``produced N records``)."""
    lines = [f"topic {result.topic}: {result.partitions} partition(s){' (created)' if result.created else ''}; "
             f"{plan.workload} ({plan.stream}) as {plan.value_format}, traffic {plan.traffic}, seed {plan.seed}"]
    rates = (f"asked {plan.asked_rate:.0f} rows/s, achieved {result.achieved_rate:.0f} rows/s over "
             f"{result.elapsed_s:.1f} s (at most {result.max_lag_s:.2f} s behind the schedule)")
    if result.interrupted:
        lines.append(f"interrupted after {result.elapsed_s:.1f} s: {rates}")
    else:
        lines.append(f"{'kept up' if result.kept_up else 'cannot keep up'}: {rates}")
    if result.failed:
        lines.append(f"{result.failed} records failed: {'; '.join(result.errors)}")
    lines.append(f"produced {result.produced} records")
    return lines


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


#: Progress printer for the CLI.
PRINT_PROGRESS = _stderr
