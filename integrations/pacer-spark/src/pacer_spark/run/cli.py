"""``pacer run --runtime spark``'s own flags and their checks. The common flags and the command are core's
(:mod:`pacer.cli.run_command`); running a configuration on Spark is :mod:`pacer_spark.run.spark_runtime`'s."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from pacer import RunConfig
from pacer.cli.commands import UsageError
from pacer.cli.run_command import default_trigger_or_seconds_flag
from pacer.durations import flag_seconds
from pacer.plugins import PluginManager

#: Seconds of traffic of ``pacer run --runtime spark`` without ``--duration``.
DEFAULT_DURATION = 120.0
#: Seconds between progress lines of ``pacer run`` (library runs print none).
DEFAULT_PROGRESS_EVERY = 2.0


def trigger_flag(value: str | None) -> float | None:
    """``--trigger``: seconds >= 0 (0: Spark's default trigger); None stays None.

    :raises UsageError: naming the flag, for an unreadable or negative value.
    """
    return default_trigger_or_seconds_flag("--trigger", value)


def configure_spark(p: argparse._ArgumentGroup) -> None:
    """The Spark runtime's own ``pacer run`` flags (the common ones are core's, :mod:`pacer.cli.run_command`)."""
    p.add_argument("--trigger", help="run Spark's own fixed processing-time trigger (e.g. 10s, 500ms or 10; 0: Spark's "
                                     "default trigger, a batch as soon as the previous one ends) as the baseline; "
                                     "pacer then only observes. An alternative to --admission: not both (and "
                                     "--overload is keep: Spark's trigger drops nothing)")
    p.add_argument("--drain-timeout", type=flag_seconds, default=120.0,
                   help="how long to wait after the traffic for the backlog to finish, e.g. 2m (default 120 s)")
    p.add_argument("--input", metavar="DIR", help="read every workload from this directory with pacer-files "
                                                   "(one dataset per file) instead of generating traffic")
    p.add_argument("--input-format", default="csv", choices=("csv", "json", "parquet"), help="format of --input files")
    p.add_argument("--malformed", choices=("fail", "quarantine"), default="fail",
                   help="a row of an --input file that does not fit the workload's schema: fail the run naming the "
                        "file and line (default), or set it aside in DIR/_pacer_quarantine and go on")
    p.add_argument("--source", choices=("gen", "files", "kafka"), default=None,
                   help="where the rows come from: gen (pacer-gen traffic, the default), files (--input DIR) or "
                        "kafka (Spark's Kafka source through format('pacer'); --bootstrap-servers and --topic)")
    p.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="Kafka brokers of --source kafka")
    p.add_argument("--topic", help="Kafka topic of --source kafka (written by `pacer produce`, for instance)")
    p.add_argument("--value-format", choices=("json", "csv"), default="json",
                   help="encoding of the Kafka record values (default json, as `pacer produce` writes)")
    p.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                   help="where a new Kafka query starts reading (default earliest)")
    p.add_argument("--max-offsets", type=int, default=0, metavar="N",
                   help="Kafka's maxOffsetsPerTrigger: a cap on records per batch (default 0: none)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint root (default: a temporary directory)")
    p.add_argument("--rapids-jar", action="append", default=[], metavar="JAR",
                   help="RAPIDS Accelerator jar(s): load the plugin so placement is enacted")
    p.add_argument("--rapids-explain", action="store_true",
                   help="load the RAPIDS Accelerator from Maven Central (fetched once, ~1 GB; or the --rapids-jar given) "
                        "in explainOnly mode: no GPU needed, RAPIDS plans every batch as pacer placed it and runs it on "
                        "the CPU, and each batch's plan is checked against the placement (report: spark.rapids_explain). "
                        "Needs the PySpark the jar's shim supports (4.2.0 for the default release)")
    p.add_argument("--engine-profile", metavar="FILE",
                   help="what this Spark measured the workload's batches to cost (`pacer calibrate --runtime spark "
                        "--workload W --out FILE`): its queries' service models start from it, the scaler reads it")
    p.add_argument("--progress-every", type=flag_seconds, default=DEFAULT_PROGRESS_EVERY,
                   help="seconds between progress lines (0: none)")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="skip the small stateful job run before the stream to pay the JVM's JIT cost")


def check_spark_flags(args: argparse.Namespace, config: RunConfig) -> float | None:
    """Check the Spark runtime's own flags before Spark starts, against the run ``config`` core built from the
    common flags (core checks those and the strategies): workloads and traffic, ``--trigger`` and what it
    excludes, ``--drain-timeout``, ``--source``/``--input``/Kafka's flags and ``--rapids-jar``.

    :return: ``--trigger`` in seconds (None: pacer decides).
    :raises UsageError: with a message saying what to do.
    """
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_traffic

    for name in args.workload:
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if args.traffic not in TRAFFIC_PATTERNS:
        raise UsageError(f"unknown traffic {args.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
    if args.drain_timeout < 0:
        raise UsageError(f"--drain-timeout must be >= 0, got {args.drain_timeout:g}")
    first = config.queries[0]
    trigger = trigger_flag(args.trigger)
    if trigger is not None:
        given = [f for f, v in (("--admission", args.admission), ("--interval", args.interval)) if v is not None]
        given += ["--param admission.*"] if first.admission_params else []
        given += ["--overload shed"] if args.overload == "shed" else []
        if given:
            raise UsageError(f"--trigger and {', '.join(given)} are alternatives: --trigger {args.trigger} runs Spark's "
                             "own fixed trigger and pacer only observes, so an admission strategy would be ignored. "
                             "Drop --trigger to let the strategy decide (--admission static --interval "
                             f"{args.trigger} is pacer's fixed trigger), or drop {given[0]}")
    try:
        make_traffic(args.traffic, rate=args.rate, duration=config.duration, **dict(first.traffic_params))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.input is not None and not Path(args.input).is_dir():
        raise UsageError(f"--input {args.input!r} is not a directory; create it or point --input at the folder "
                         "the files arrive in")
    source = args.source or ("files" if args.input is not None else "gen")
    if source == "kafka":
        missing = [f for f, v in (("--bootstrap-servers", args.bootstrap_servers), ("--topic", args.topic)) if not v]
        if missing:
            raise UsageError(f"--source kafka needs {' and '.join(missing)} (the broker and topic to read; "
                             "`pacer kafka up` starts a broker, `pacer produce` fills a topic)")
        if args.input is not None:
            raise UsageError("--source kafka and --input are alternatives: read a topic or a folder, not both")
        if args.max_offsets < 0:
            raise UsageError(f"--max-offsets must be >= 0, got {args.max_offsets}")
        if args.overload == "shed":
            raise UsageError("--overload shed cannot apply to --source kafka: the topic is read through "
                             "format('pacer'), and Spark reads every offset it logged, so pacer cannot drop records "
                             "(they would be written and still counted as dropped). Leave --overload at keep; "
                             "--max-offsets caps a batch")
        from pacer_spark.run.kafka_run import KafkaSourceError, check_topics

        try:  # before Spark starts: a missing topic or an absent broker is said in seconds, not after Spark's start
            check_topics(args.bootstrap_servers, args.topic)
        except KafkaSourceError as exc:
            raise UsageError(str(exc)) from None
    elif args.bootstrap_servers or args.topic:
        raise UsageError("--bootstrap-servers/--topic apply to --source kafka; add --source kafka")
    if source == "files" and args.input is None:
        raise UsageError("--source files reads --input DIR; add --input")
    if args.input is None and args.malformed != "fail":
        raise UsageError("--malformed applies to --input files; add --input DIR (generated traffic has no bad rows)")
    for jar in args.rapids_jar:
        if not Path(jar).is_file():
            raise UsageError(f"--rapids-jar {jar!r} does not exist; download rapids-4-spark from Maven Central")
    if getattr(args, "rapids_explain", False) and len(args.rapids_jar) > 1:
        raise UsageError("--rapids-explain loads one RAPIDS jar: give at most one --rapids-jar")
    if getattr(args, "engine_profile", None):
        check_engine_profile(args.engine_profile, [q.workload for q in config.queries])
    return trigger


def check_engine_profile(path: str, workloads: Sequence[str]) -> None:
    """``--engine-profile``: a profile file that reads, measured on Spark and on one of ``workloads``.

    :raises UsageError: naming the file, what is wrong and what to do.
    """
    from pacer.engine_profile import EngineProfileError, load

    try:
        profile = load(path)
    except EngineProfileError as exc:
        raise UsageError(f"--engine-profile: {exc}") from None
    if profile.runtime != "spark":
        raise UsageError(f"--engine-profile {path!r} was measured on {profile.runtime!r}, not Spark; calibrate on "
                         "this engine: pacer calibrate --runtime spark")
    if not any(profile.applies_to(w) for w in workloads):
        raise UsageError(f"--engine-profile {path!r} was measured on {profile.workload!r}; this run's workloads are "
                         f"{', '.join(workloads)}: calibrate one (pacer calibrate --runtime spark --workload "
                         f"{workloads[0]} --out FILE)")


def rapids_explain_jar(given: list[str]) -> str:
    """The RAPIDS jar of ``--rapids-explain``: the ``--rapids-jar`` given, else the release pacer pins from Maven
    Central (:func:`pacer_spark.plan.rapids_jar.resolve_rapids_jar`), checked to have a shim for the installed PySpark.

    :raises UsageError: the jar cannot be fetched, or it has no shim for this PySpark (the message names the one to pin).
    """
    import pyspark

    from pacer_spark.plan import rapids_jar
    try:
        jar = Path(given[0]) if given else rapids_jar.resolve_rapids_jar()
        rapids_jar.shim_for_spark(jar, str(pyspark.__version__))
    except rapids_jar.RapidsJarError as exc:
        raise UsageError(f"--rapids-explain: {exc}") from None
    return str(jar)


def apply_args(args: argparse.Namespace, config: RunConfig, pm: PluginManager) -> RunConfig:
    """``pacer run --runtime spark``: check the Spark flags before Spark starts (:func:`check_spark_flags`) and fold
    them into ``config``: with ``--trigger`` every query's admission is Spark's own trigger (pacer observes: asap,
    overload keep); the command line's progress lines are on unless ``--progress-every 0``.

    :raises UsageError: with what to do.
    """
    trigger = check_spark_flags(args, config) if args.config is None else trigger_flag(args.trigger)
    master = str(getattr(args, "master", None) or "local[2]")
    if (config.scale != "fixed" or config.executors is not None) and master.startswith("local"):
        raise UsageError(f"--scale {config.scale} --executors change the application's executors, which needs a "
                         f"cluster manager; --master {master} has none: start one (`pacer cluster up --workers 3`, "
                         "then --master spark://HOST:PORT) or drop --scale and --executors")
    if trigger is not None:
        queries = tuple(replace(q, admission="asap", admission_params={}) for q in config.queries)
        config = replace(config, queries=queries, overload="keep")
    options = config.options_for("spark")
    if getattr(args, "rapids_explain", False):
        config = config.with_options("spark", rapids_jar=[rapids_explain_jar(list(args.rapids_jar))],
                                     rapids_explain=True)
    return config.with_options("spark", progress_every=options.get("progress_every", DEFAULT_PROGRESS_EVERY),
                               warm_up=options.get("warm_up", True))
