"""``pacer kafka up|down|status|create-topic`` and ``pacer produce``."""

from __future__ import annotations

import argparse
import logging
import sys

from pacer.cli import Command, UsageError
from pacer.durations import flag_seconds
from pacer.plugins import PluginManager
from pacer_kafka.broker import (
    DEFAULT_HEAP,
    DEFAULT_START_TIMEOUT_S,
    DEFAULT_STOP_TIMEOUT_S,
    BrokerError,
    running_broker,
    start_broker,
    stop_broker,
)
from pacer_kafka.clients import LIBRDKAFKA_LOGGER, KafkaConnectionError
from pacer_kafka.distribution import KafkaSetupError


def _configure_kafka(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="kafka_action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start a single-node KRaft broker on 127.0.0.1 and wait until it answers")
    up.add_argument("--dir", required=True, help="folder for its properties, data, broker.log and broker.pid")
    up.add_argument("--port", type=int, help="client port on 127.0.0.1 (default: a free one)")
    up.add_argument("--kafka-version", help="Apache Kafka release (default: $PACER_KAFKA_VERSION or the built-in one)")
    up.add_argument("--heap", default=DEFAULT_HEAP, help=f"the broker JVM's -Xmx (default {DEFAULT_HEAP})")
    up.add_argument("--timeout", type=flag_seconds, default=DEFAULT_START_TIMEOUT_S,
                    help=f"how long to wait for the broker to answer, e.g. 2m (default {DEFAULT_START_TIMEOUT_S:g} s)")
    down = actions.add_parser("down", help="stop the broker started in --dir (SIGTERM, then SIGKILL)")
    down.add_argument("--dir", required=True)
    down.add_argument("--timeout", type=flag_seconds, default=DEFAULT_STOP_TIMEOUT_S,
                      help=f"time between SIGTERM and SIGKILL, e.g. 30s (default {DEFAULT_STOP_TIMEOUT_S:g} s)")
    status = actions.add_parser("status", help="print bootstrap.servers of the broker running in --dir")
    status.add_argument("--dir", required=True)
    create = actions.add_parser("create-topic", help="create a topic without writing records (kept as it is when it "
                                "exists), e.g. before `pacer run --source kafka` starts reading it")
    create.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...] of the Kafka cluster")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int, help="partitions of a new topic (default 1)")


def _check_topic_arguments(args: argparse.Namespace) -> None:
    """Quiet librdkafka unless ``-v``; a bad ``--topic`` or ``--partitions`` is a usage error."""
    from pacer_kafka.produce import check_topic_name

    if args.verbose == 0:
        LIBRDKAFKA_LOGGER.setLevel(logging.CRITICAL)
    try:
        check_topic_name(args.topic)
        if args.partitions is not None and args.partitions < 1:
            raise ValueError(f"--partitions must be >= 1, got {args.partitions}")
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _create_topic(args: argparse.Namespace) -> int:
    """``pacer kafka create-topic``: the topic exists afterwards, with its partitions' leaders elected."""
    from pacer_kafka.produce import ensure_topic

    _check_topic_arguments(args)
    try:
        partitions, created = ensure_topic(args.bootstrap_servers, args.topic, args.partitions)
    except (KafkaConnectionError, RuntimeError) as exc:
        print(f"pacer kafka create-topic: error: {exc}", file=sys.stderr)
        return 1
    if created:
        print(f"topic {args.topic}: {partitions} partition(s) (created)")
    else:
        note = (f"; --partitions {args.partitions} not applied: an existing topic is kept as it is"
                if args.partitions is not None and args.partitions != partitions else "")
        print(f"topic {args.topic}: {partitions} partition(s) (exists){note}")
    return 0


def _run_kafka(args: argparse.Namespace, pm: PluginManager) -> int:
    prefix = f"pacer kafka {args.kafka_action}"
    if args.kafka_action == "create-topic":
        return _create_topic(args)
    try:
        if args.kafka_action == "up":
            info = start_broker(args.dir, port=args.port, version=args.kafka_version, heap=args.heap or None,
                                timeout_s=args.timeout)
            print(f"Apache Kafka {info.kafka_version} broker (pid {info.pid}) in {info.directory}; "
                  f"log {info.log_path}")
            print(f"bootstrap.servers={info.bootstrap_servers}")
            return 0
        if args.kafka_action == "down":
            pid = stop_broker(args.dir, timeout_s=args.timeout)
            print(f"stopped the broker (pid {pid})" if pid is not None else f"no broker was running in {args.dir}")
            return 0
        running = running_broker(args.dir)
        if running is None:
            print(f"no broker is running in {args.dir}")
            return 1
        print(f"Apache Kafka {running.kafka_version} broker (pid {running.pid})")
        print(f"bootstrap.servers={running.bootstrap_servers}")
        return 0
    except (BrokerError, KafkaSetupError) as exc:
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return 1


def _traffic_param(text: str) -> tuple[str, float]:
    key, sep, value = text.partition("=")
    try:
        if not sep or not key:
            raise ValueError(text)
        return key.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected KEY=NUMBER (e.g. period=30), got {text!r}") from None


def _configure_produce(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...] of the Kafka cluster")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--workload", required=True,
                        help="a pacer workload (lr1, lr1t, lr2, lr3, cm1, cm2): its stream "
                        "is written")
    parser.add_argument("--traffic", default="constant", help="traffic pattern (constant, random, sinusoidal, wave, "
                        "binary, spike, increasing, decreasing)")
    parser.add_argument("--traffic-param", action="append", type=_traffic_param, default=[], metavar="KEY=VALUE",
                        help="a traffic pattern parameter (e.g. period=30); repeatable")
    parser.add_argument("--rate", type=float, required=True, help="mean rows per second")
    parser.add_argument("--duration", type=flag_seconds, required=True,
                        help="how long to write traffic, e.g. 60, 60s or '1 minute'")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--period", type=flag_seconds, default=1.0,
                        help="time per dataset of the schedule, e.g. 1 or 500ms (default 1 s)")
    parser.add_argument("--partitions", type=int, help="partitions when the topic is created (default 1)")
    parser.add_argument("--format", dest="value_format", default="json", choices=("json", "csv"),
                        help="record value encoding (default json)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines every 10 s")


def _run_produce(args: argparse.Namespace, pm: PluginManager) -> int:
    from pacer_kafka.produce import PRINT_PROGRESS, plan_workload, produce, summary_lines

    _check_topic_arguments(args)
    try:
        plan = plan_workload(args.workload, traffic=args.traffic, rate=args.rate, duration=args.duration,
                             seed=args.seed, period=args.period, value_format=args.value_format,
                             traffic_params=dict(args.traffic_param))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        result = produce(args.bootstrap_servers, args.topic, plan, partitions=args.partitions,
                         progress=None if args.quiet else PRINT_PROGRESS)
    except (KafkaConnectionError, RuntimeError) as exc:
        print(f"pacer produce: error: {exc}", file=sys.stderr)
        return 1
    for line in summary_lines(plan, result):
        print(line)
    if result.interrupted:
        return 130
    return 1 if result.failed else 0


KAFKA_COMMAND = Command("kafka", "run a single-node Apache Kafka broker on 127.0.0.1 (up, down, status) and "
                        "create topics (create-topic)",
                        _configure_kafka, _run_kafka)
PRODUCE_COMMAND = Command("produce", "write a workload into a Kafka topic at a traffic pattern", _configure_produce,
                          _run_produce)
