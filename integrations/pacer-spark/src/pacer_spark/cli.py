"""``pacer run --runtime spark``: the papers' workloads on real Spark under pacer's strategies (or Spark's fixed
trigger). The common flags and the command are core's (:mod:`pacer.run_cli`); this module holds the Spark
runtime's own flags, their checks, and the run itself (:func:`run_configuration`)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pacer import RunConfig, RunResult
from pacer.cli import UsageError
from pacer.metrics import dataset_latencies, percentile
from pacer.plugins import PluginManager
from pacer.run import parse_duration
from pacer.run_cli import check_strategies, config_from_args, parse_seconds
from pacer_spark.errors import write_traces

#: Seconds of traffic of ``pacer run --runtime spark`` without ``--duration``.
DEFAULT_DURATION = 120.0
#: Seconds between progress lines of ``pacer run`` (library runs print none).
DEFAULT_PROGRESS_EVERY = 2.0


def configure_spark(p: argparse._ArgumentGroup) -> None:
    """The Spark runtime's own ``pacer run`` flags (the common ones are core's, :mod:`pacer.run_cli`)."""
    p.add_argument("--trigger", help="run Spark's own fixed processing-time trigger (e.g. 10s, 500ms or 10) as the "
                                     "baseline; pacer then only observes. An alternative to --admission: not both "
                                     "(and --overload is keep: Spark's trigger drops nothing)")
    p.add_argument("--drain-timeout", type=float, default=120.0,
                   help="seconds to wait after the traffic for the backlog to finish (default 120)")
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
    p.add_argument("--progress-every", type=float, default=DEFAULT_PROGRESS_EVERY,
                   help="seconds between progress lines (0: none)")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="skip the small stateful job run before the stream to pay the JVM's JIT cost")


def validate(args: argparse.Namespace, pm: PluginManager) -> dict[str, Any]:
    """Check every argument before Spark starts; return the parsed run configuration.

    The common flags are checked by core (:func:`pacer.run_cli.config_from_args`,
    :func:`~pacer.run_cli.check_strategies`); here: workloads and traffic, ``--trigger`` and what it
    excludes, ``--drain-timeout``, ``--input`` and ``--rapids-jar``.

    :raises UsageError: with a message saying what to do.
    """
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_traffic

    config = config_from_args(args, duration_default=DEFAULT_DURATION)
    for name in args.workload:
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if args.traffic not in TRAFFIC_PATTERNS:
        raise UsageError(f"unknown traffic {args.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
    if args.drain_timeout < 0:
        raise UsageError(f"--drain-timeout must be >= 0, got {args.drain_timeout:g}")
    first = config.queries[0]
    trigger = parse_seconds("--trigger", args.trigger)
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
    check_strategies(config, pm)
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
    elif args.bootstrap_servers or args.topic:
        raise UsageError("--bootstrap-servers/--topic apply to --source kafka; add --source kafka")
    if source == "files" and args.input is None:
        raise UsageError("--source files reads --input DIR; add --input")
    if args.input is None and args.malformed != "fail":
        raise UsageError("--malformed applies to --input files; add --input DIR (generated traffic has no bad rows)")
    for jar in args.rapids_jar:
        if not Path(jar).is_file():
            raise UsageError(f"--rapids-jar {jar!r} does not exist; download rapids-4-spark from Maven Central")
    overload = "keep" if trigger is not None else config.overload  # the baseline observes, drops nothing
    params = {"admission": dict(first.admission_params), "scheduler": dict(config.scheduler_params),
              "placement": dict(first.placement_params)}
    return {"deadline": first.deadline, "trigger": trigger, "params": params,
            "traffic_params": dict(first.traffic_params), "admission": "asap" if trigger is not None else first.admission,
            "overload": overload}


def apply_args(args: argparse.Namespace, config: RunConfig, pm: PluginManager) -> RunConfig:
    """``pacer run --runtime spark``: check every flag before Spark starts (:func:`validate`) and fold the Spark
    ones into ``config``: with ``--trigger`` every query's admission is Spark's own trigger (pacer observes: asap,
    overload keep); the command line's progress lines are on unless ``--progress-every 0``.

    :raises UsageError: with what to do.
    """
    cfg = validate(args, pm) if args.config is None else {"trigger": parse_seconds("--trigger", args.trigger)}
    if cfg["trigger"] is not None:
        queries = tuple(replace(q, admission="asap", admission_params={}) for q in config.queries)
        config = replace(config, queries=queries, overload="keep")
    options = config.options_for("spark")
    return config.with_options("spark", progress_every=options.get("progress_every", DEFAULT_PROGRESS_EVERY),
                               warm_up=options.get("warm_up", True))


#: Printed once before the first progress line: what each field of :func:`progress_line` means.
PROGRESS_LEGEND = (
    "progress, every query together: t = seconds since the start; batches = micro-batches completed; "
    "last = datasets/rows of the newest batch; p95 = 95th-percentile dataset latency (arrival to the end of its "
    "batch's trigger); misses = datasets over the deadline / datasets done; overloaded = seconds the offered load "
    "could not be served within the deadline by any batch size; shed = datasets dropped for it (--overload shed); "
    "catch-up = seconds spent draining data already past its deadline when seen, and its rows"
)


def progress_line(controller: Any, lock: Any, elapsed: float) -> str:
    """``t=12s batches=5 last=3 datasets/1500 rows p95=1234ms misses=0/12 overloaded=0s shed=0 catch-up=0s/0 rows``
    over every query.

    :data:`PROGRESS_LEGEND` explains the fields.
    """
    with lock:
        reports = controller.reports()
        views = [controller.query(q) for q in controller.query_ids()]
        deadlines = {q.id: q.spec.effective_deadline for q in views}
        overloaded_s = sum(q.overload.overloaded_s for q in views)
        shed = sum(controller.ledger.counts.get(q.id, {}).get("shed", 0) for q in views)
        now = controller.clock()
        catch_up_s = sum(q.catch_up.until(now) for q in views)
        catch_up_rows = sum(q.catch_up.rows for q in views)
    lats = dataset_latencies(reports)
    misses = sum(1 for r in reports for _, lat in r.dataset_latencies if lat > deadlines[r.query_id])
    last = reports[-1] if reports else None
    last_text = f"{len(last.dataset_latencies)} datasets/{last.rows} rows" if last else "-"
    return (f"t={elapsed:5.0f}s batches={len(reports)} last={last_text} "
            f"p95={1000 * percentile(lats, 95):.0f}ms misses={misses}/{len(lats)} "
            f"overloaded={overloaded_s:.0f}s shed={shed} catch-up={catch_up_s:.0f}s/{catch_up_rows} rows")


def cost_lines(report: Mapping[str, Any]) -> list[str]:
    """What each query cost the engine: ``cost.engine_s``, its share of the run and batches per minute."""
    lines = []
    for query_id, q in report["queries"].items():
        cost = q.get("cost") or {}
        if cost:
            lines.append(f"cost {query_id}: engine {cost['engine_s']:.1f} s = {100 * cost['engine_share']:.1f} % of "
                         f"the {report['duration_s']:.0f} s run, {cost['batches_per_min']:.1f} batches/min "
                         "(engine s: Spark's triggerExecution, admission to commitOffsets, summed over the batches)")
    return lines


def build_session(master: str, app: str, *, partitions: int = 2, rapids_jars: Sequence[str] = (),
                  kafka: bool = False) -> Any:
    """A quiet FAIR-mode SparkSession from :func:`pacer_spark.session_builder` for the CLI commands.

    Spark logs only FATAL and Py4J's callback server nothing: a failed query is reported by :func:`drive`,
    its root cause in one line and Spark's full error text in a file (:mod:`pacer_spark.errors`), instead
    of the same trace logged four times by the executor, the task set, the callback server and the stream.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import pacer_spark

    spark = (
        pacer_spark.session_builder(master, app, shuffle_partitions=partitions, rapids_jars=list(rapids_jars),
                                    kafka=kafka)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    logging.getLogger("py4j.clientserver").setLevel(logging.CRITICAL)
    return spark


def warm_up(spark: Any) -> None:
    """One small aggregation and join, so that the first measured batch does not pay the JVM's JIT cost.

    On 2 cores the first stateful batch of a fresh JVM takes several seconds longer than the next ones,
    which would dominate the tail latency of a short run.
    """
    spark.range(50000).selectExpr("id % 97 AS k", "id AS v").groupBy("k").sum("v").collect()
    left = spark.range(20000).selectExpr("id % 500 AS k", "id AS a")
    right = spark.range(20000).selectExpr("id % 500 AS k", "id AS b")
    left.join(right, "k").count()


def run_configuration(spark: Any, config: RunConfig, pm: PluginManager, *, label: str = "pacer run") -> RunResult:
    """Run ``config`` on ``spark``: stream every query for ``config.duration`` seconds, wait for the backlog,
    print progress lines every ``options["progress_every"]`` seconds (default none) and report.

    Query ``i`` gets the traffic seed ``config.query_seed(i)``. Its Spark settings (``config.options["spark"]``):
    ``trigger`` (Spark's own fixed trigger, e.g. ``10s``), ``input``, ``input_format`` and ``malformed``
    (pacer-files: the run ends once every file in the folder, those arriving meanwhile included, is processed),
    ``checkpoint``, ``drain_timeout`` (120 s), ``progress_every``, ``master`` (recorded).

    :return: the :class:`pacer.RunResult` (status 1 when the backlog did not drain or a query failed; notes:
        what each query cost the engine and pacer's own overhead).
    """
    import pacer_spark

    options = config.options_for("spark")
    trigger_s = parse_duration(options["trigger"]) if options.get("trigger") else None
    trigger = f"{trigger_s:g} seconds" if trigger_s is not None else None
    kafka = options.get("source") == "kafka"
    session = pacer_spark.attach(
        spark, scheduler=config.scheduler, scheduler_params=config.scheduler_params, fallback=config.fallback,
        plugin_manager=pm, checkpoint_root=options.get("checkpoint"), overload=config.overload,
        cores=config.cores, gpus=config.gpus, paced=kafka,
    )
    ids = config.query_ids()
    queries = [{**q.as_dict(), "query_id": qid} for qid, q in zip(ids, config.queries, strict=True)]
    first = config.queries[0]
    report_config = {
        "run": config.as_dict(), "workloads": [q.workload for q in config.queries], "queries": queries,
        "traffic": first.traffic, "rate": first.rate, "scheduler": config.scheduler, "duration_s": config.duration,
        "seed": config.seed, "master": options.get("master", spark.sparkContext.master), "trigger_s": trigger_s,
        "input": options.get("input"), "mode": "spark-trigger" if trigger else "pacer", "overload": config.overload,
        "label": options.get("label", label),
    }

    if kafka:
        return _run_kafka(session, config, report_config, trigger=trigger, label=label)

    def start_queries() -> None:
        for i, (qid, q) in enumerate(zip(ids, config.queries, strict=True)):
            session.run_workload(
                q.workload, query_id=qid, traffic=q.traffic, rate=q.rate, duration=config.duration,
                seed=config.query_seed(i), traffic_params=dict(q.traffic_params), files=options.get("input"),
                file_format=options.get("input_format", "csv"), trigger=trigger, deadline=q.deadline,
                admission=q.admission, placement=q.placement, admission_params=dict(q.admission_params),
                placement_params=dict(q.placement_params), max_rows=q.max_rows, max_bytes=q.max_bytes,
                source_options={"malformed": options.get("malformed", "fail")} if options.get("input") else None,
            )

    report, status = drive(
        session, start_queries, report_config, duration=config.duration,
        drain_timeout=float(options.get("drain_timeout", 120.0)), progress_every=float(options.get("progress_every", 0)),
        monitor_interval=config.monitor_interval, label=label,
    )
    notes = run_notes(report, label, session.errors(), [*cost_lines(report), overhead_line(report)])
    return RunResult(report=report, controller=session.controller, status=status, notes=notes)


def run_notes(report: Mapping[str, Any], label: str, errors: Mapping[str, str], lines: list[str]) -> list[str]:
    """The lines printed after a run's summary: whether it was interrupted, ``lines``, then each failed query."""
    head = [f"{label}: interrupted; the summary and report cover what ran until then"] if report.get("interrupted") \
        else []
    return [*head, *lines, *(f"query {q} failed: {error}" for q, error in errors.items())]


def _run_kafka(session: Any, config: RunConfig, report_config: dict[str, Any], *, trigger: str | None,
               label: str) -> RunResult:
    """:func:`run_configuration` of ``--source kafka``: every workload's query reads the topic, paced through
    ``format("pacer")`` with the run's strategies, or on Spark's own ``trigger`` (the baseline)."""
    from pacer_spark.kafka_run import KafkaRun, kafka_lines

    options = config.options_for("spark")
    settings = {"bootstrap_servers": options["bootstrap_servers"], "topic": options["topic"],
                "value_format": options.get("value_format", "json"),
                "starting_offsets": options.get("starting_offsets", "earliest"),
                "max_offsets": int(options.get("max_offsets", 0))}
    drain_timeout = float(options.get("drain_timeout", 120.0))
    run = KafkaRun(session, settings, drain_timeout=drain_timeout)
    report_config.update(source="kafka", topic=settings["topic"], bootstrap_servers=settings["bootstrap_servers"])

    def start_queries() -> None:
        from pacer_workloads import WORKLOADS

        for qid, q in zip(config.query_ids(), config.queries, strict=True):
            spec = WORKLOADS[q.workload]
            deadline = q.deadline or spec.window_slide or spec.window_range or 10.0
            paced = None
            if trigger is None:
                paced = {"pacer.admission": q.admission, "pacer.placement": q.placement,
                         "pacer.deadline": f"{deadline:g}s"}
                paced |= {f"pacer.param.admission.{k}": str(v) for k, v in q.admission_params.items()}
                paced |= {f"pacer.param.placement.{k}": str(v) for k, v in q.placement_params.items()}
            run.start(qid, q.workload, deadline_s=deadline, paced_options=paced, trigger=trigger,
                      checkpoint=str(session.checkpoint_root / qid / "checkpoint"))

    report, status = drive(
        run, start_queries, report_config, duration=config.duration, drain_timeout=drain_timeout,
        progress_every=float(options.get("progress_every", 0)), monitor_interval=config.monitor_interval,
        label=label,
    )
    notes = run_notes(report, label, run.errors(), [*kafka_lines(report), *cost_lines(report)])
    return RunResult(report=report, controller=session.controller, status=status, notes=notes)


def drive(
    session: Any,
    start_queries: Callable[[], None],
    config: Mapping[str, Any],
    *,
    duration: float,
    drain_timeout: float,
    progress_every: float = 0.0,
    monitor_interval: float = 1.0,
    label: str = "pacer run",
) -> tuple[dict[str, Any], int]:
    """Start the queries of an attached :class:`~pacer_spark.runtime.PacerSession`, let them stream and report.

    ``start_queries`` starts every stream (``session.run_workload`` calls). The traffic lasts ``duration``
    seconds; then the backlog gets ``drain_timeout`` more seconds. The run ends as soon as the session is
    drained (:meth:`~pacer_spark.runtime.PacerSession.drained`: generated traffic all processed; every file of
    a watched folder processed). A progress line is printed every ``progress_every`` seconds (0: none). The
    session is stopped on the way out.

    :return: the ``pacer.report/1`` document (``config`` in its ``config``) and an exit status: 1 when the
        backlog did not drain or a query failed.
    """
    stop = threading.Event()
    start = time.time()
    printer = None
    if progress_every > 0:
        def report_progress() -> None:
            while not stop.wait(progress_every):
                print(progress_line(session.controller, session.lock, time.time() - start), flush=True)

        printer = threading.Thread(target=report_progress, name="pacer-progress", daemon=True)
    status = 0
    interrupted = False
    restore = _sigterm_interrupts()
    try:
        start_queries()
        if printer is not None:
            print(PROGRESS_LEGEND, flush=True)
            printer.start()
        drained = session.await_drained(duration + drain_timeout)
        if not drained and not session.errors():
            print(f"{label}: backlog not drained {drain_timeout:g} s after the traffic ended", file=sys.stderr)
            status = 1
        failures = session.errors()
        if failures:
            traces = write_error_traces(session.error_traces())
            for query_id, error in failures.items():
                print(f"{label}: query {query_id} failed: {error}\n  (full trace: {traces})", file=sys.stderr)
            status = 1
    except KeyboardInterrupt:
        interrupted, status = True, INTERRUPTED_STATUS
        print(f"{label}: interrupted after {time.time() - start:.0f} s: stopping the queries, then the summary and "
              "report of what was measured (interrupt again to quit at once)", file=sys.stderr, flush=True)
    finally:
        stop.set()
        end = time.time()
        try:
            session.stop(timeout=INTERRUPT_STOP_S if interrupted else 10.0)
        finally:
            restore()
    report = session.report(config, interval=monitor_interval, end=end)
    if interrupted:
        report["interrupted"] = True
    return report, status


def write_error_traces(traces: dict[str, str]) -> Path:
    """Failed queries' full traces in ``errors.txt`` of a new folder only this user can enter
    (``tempfile.mkdtemp``, 0700): no predictable name, nothing written through a planted link."""
    return write_traces(traces, Path(tempfile.mkdtemp(prefix=f"pacer-run-{os.getpid()}-")) / "errors.txt")


#: Exit status of a run stopped by SIGINT or SIGTERM (128 + SIGINT, as shells report it).
INTERRUPTED_STATUS = 130

#: Seconds an interrupted run waits for a running trigger before it stops the query anyway.
INTERRUPT_STOP_S = 1.0


def _sigterm_interrupts() -> Callable[[], None]:
    """Make SIGTERM interrupt the main thread like Ctrl-C; a second signal quits at once. Returns the undo."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    seen: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if seen:
            print("interrupted twice: quitting without a report", file=sys.stderr, flush=True)
            os._exit(INTERRUPTED_STATUS)
        seen.append(signum)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


def overhead_line(report: Mapping[str, Any]) -> str:
    """pacer's own cost in one line: admission poll p99, per-batch share, reader-to-driver RPC p99."""
    o = report["overhead"]
    s = report["spark"]["pacer_spark_overhead"]
    poll = o.get("admission_poll_us_p99")
    share = o.get("per_batch_share_of_processing")
    rtt = s.get("rpc_round_trip_us_p99")
    return (
        "pacer overhead: admission poll p99 "
        + (f"{poll:.0f} µs" if poll is not None else "n/a")
        + ", per-batch share of processing "
        + (f"{100 * share:.3f} %" if share is not None else "n/a")
        + ", reader->driver RPC round trip p99 "
        + (f"{rtt / 1000:.1f} ms" if rtt is not None else "n/a")
    )
