"""Real Spark as a pacer runtime (``pacer run --runtime spark``, ``pacer bench --runtime spark``, the conformance suite),
and running a configuration there: the session (:func:`build_session`, :func:`warm_up`), the run
(:func:`run_configuration`, the Kafka path through :mod:`pacer_spark.run.kafka_run`), driving it to its end with
progress lines, signals and errors (:func:`drive`) and the report's lines.

:class:`SparkRuntime` runs a :class:`pacer.RunConfig` through the ``pacer-gen`` source (or ``pacer-files`` with
``options["spark"]["input"]``) on a SparkSession: the one it was given, or one it builds from
``options["spark"]``: ``master`` (``local[2]``), ``rapids_jar`` (jars), ``rapids_explain`` (RAPIDS in explainOnly mode), ``warm_up`` (true) and ``keep_session``
(keep it for the next run until :meth:`SparkRuntime.close`, as ``pacer bench`` does). Query ``i`` gets the traffic
seed ``seed + i`` (:meth:`pacer.RunConfig.query_seed`), as on the simulator.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from pacer import RunConfig, RunResult
from pacer.engine_profile import EngineProfile
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.report import PROGRESS_LEGEND, progress_line
from pacer.run import parse_duration
from pacer_spark.errors import write_traces
from pacer_spark.jvm import executor_requests
from pacer_spark.plan import rapids_explain
from pacer_spark.run.cli import apply_args, configure_spark


class SparkRuntime:
    """Spark Structured Streaming: wall clock, not deterministic; GPUs only with RAPIDS. Declares ``multi-query``.

    :param spark: a SparkSession to run on (None: built per run from the options).
    :param time_scale: shortens every run's traffic (a 30 s run streams ``30 * time_scale`` s, at least 2 s).
    :param drain_timeout: seconds a run's backlog may take after its traffic (None: ``options["drain_timeout"]``,
        default 120).
    """

    name = "spark"
    summary = "Apache Spark Structured Streaming (local or a cluster) through pacer's sources"
    capabilities = frozenset({"multi-query"})
    #: ``pacer run --runtime spark`` defaults that differ from the other runtimes'.
    defaults: ClassVar[Mapping[str, Any]] = {"duration": 120.0}

    def __init__(self, spark: Any = None, *, time_scale: float = 1.0, drain_timeout: float | None = None) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.spark = spark
        self.time_scale = time_scale
        self.drain_timeout = drain_timeout
        self._kept: tuple[tuple[Any, ...], Any] | None = None  # (what the session was built for, the session)

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """Spark's own ``pacer run`` flags (:func:`pacer_spark.run.cli.configure_spark`)."""

        configure_spark(group)

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: PluginManager) -> RunConfig:
        """Check every flag before Spark starts and fold the Spark ones in (:func:`pacer_spark.run.cli.apply_args`)."""

        return apply_args(args, config, plugin_manager)

    def _session(self, options: Any, config: RunConfig) -> tuple[Any, bool, bool]:
        """The session to run on, whether this run must stop it, and whether it is new and wants warming."""
        if self.spark is not None:
            return self.spark, False, False

        kafka = options.get("source") == "kafka"
        explain = bool(options.get("rapids_explain"))
        scaled = scaling_settings(config)
        key = (str(options.get("master", "local[2]")), tuple(options.get("rapids_jar") or ()), config.partitions,
               kafka, explain, tuple(sorted(scaled.items())))
        if self._kept is not None and self._kept[0] == key:
            return self._kept[1], False, False
        self.close()
        conf = dict(rapids_explain.EXPLAIN_ONLY_CONFS) if explain else {}  # RAPIDS plans each batch, the CPU runs it
        spark = build_session(key[0], "pacer run", partitions=config.partitions, rapids_jars=list(key[1]),
                              kafka=kafka, conf={**conf, **scaled} or None)
        warm = bool(options.get("warm_up", True))
        if warm:
            warm_up(spark)
        if options.get("keep_session"):
            self._kept = (key, spark)
            return spark, False, warm
        return spark, True, warm

    def run(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> RunResult:
        """Stream ``config`` on Spark, wait for its backlog, and report (status 1: not drained or a query failed)."""

        if self.time_scale != 1.0:
            config = replace(config, duration=max(2.0, config.duration * self.time_scale))
        if self.drain_timeout is not None:
            config = config.with_options(self.name, drain_timeout=self.drain_timeout)
        options = config.options_for(self.name)
        scratch = None
        if not options.get("checkpoint") and not options.get("input"):
            scratch = tempfile.mkdtemp(prefix="pacer-spark-")
            config = config.with_options(self.name, checkpoint=scratch)
        spark, owned, fresh = self._session(options, config)
        pm = plugin_manager or get_plugin_manager()
        try:
            # never read a user's data; warm_up_stream=False (pacer bench --no-warm-up-stream): the JIT job only
            if fresh and options.get("warm_up_stream", True) and not options.get("input") \
                    and options.get("source") != "kafka":
                warm_scratch = tempfile.mkdtemp(prefix="pacer-spark-warm-up-")
                try:
                    run_configuration(spark, stream_warm_up(config, warm_scratch), pm, label="warm-up")
                finally:
                    shutil.rmtree(warm_scratch, ignore_errors=True)
            return run_configuration(spark, config, pm, label=str(options.get("label", "pacer run")))
        finally:
            if owned:
                spark.stop()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    def calibrate_engine(self, config: RunConfig, *, intervals: Sequence[float], batches: int,
                         note: Callable[[str], None] = lambda _: None) -> EngineProfile:
        """Measure what ``config``'s first workload costs this Spark (``pacer calibrate --runtime spark``): its batches
        at ``config.queries[0].rate`` rows/s under each trigger of ``intervals`` seconds, ``batches`` of each, tiny
        ones and, on a cluster, an executor's start-up (:mod:`pacer_spark.run.calibrate`), on a session built from
        ``config``'s options (``master``) and partitions, warmed as a run's is."""
        from pacer_spark.run.calibrate import measure_profile

        options = config.options_for(self.name)
        spark, owned, fresh = self._session(options, config)
        scratch = tempfile.mkdtemp(prefix="pacer-calibrate-")
        try:
            if fresh:
                run_configuration(spark, stream_warm_up(config, str(Path(scratch) / "warm-up")), get_plugin_manager(),
                                  label="warm-up")
            query = config.queries[0]
            return measure_profile(spark, query.workload, rate=query.rate, intervals=intervals, repeats=batches,
                                   checkpoint_root=str(Path(scratch) / "calibration"), note=note)
        finally:
            if owned:
                spark.stop()
            shutil.rmtree(scratch, ignore_errors=True)

    def close(self) -> None:
        """Stop the session kept for the next run (``keep_session``), if any."""
        if self._kept is not None:
            self._kept[1].stop()
            self._kept = None


def scaling_settings(config: RunConfig) -> dict[str, str]:
    """The session settings of a run whose executors change (empty where they do not).

    - ``--scale spark-dynamic``: Spark's dynamic allocation on, as its documentation configures it for a cluster
      without an external shuffle service (shuffle tracking), between ``--executors``, starting at
      ``--initial-executors``; Spark's own timeouts.
    - Any scaling: ``spark.locality.wait.process=0s``. A stateful query's task prefers the executor that loaded its
      state; once that executor is removed, Spark's delay scheduling still held the task for the 3 s default before
      running it on another (measured on a standalone cluster: the first batch after a removal took 4.5 s against
      0.6 s, and its rows were late).
    """
    if config.scale == "fixed" and config.executors is None:
        return {}
    settings = {"spark.locality.wait.process": "0s"}
    if config.scale == "spark-dynamic":
        low, high = config.executors or (1, executor_requests.NO_MAX_EXECUTORS)
        settings |= {"spark.dynamicAllocation.enabled": "true",
                     "spark.dynamicAllocation.shuffleTracking.enabled": "true",
                     "spark.dynamicAllocation.minExecutors": str(low), "spark.dynamicAllocation.maxExecutors": str(high),
                     "spark.dynamicAllocation.initialExecutors": str(config.initial_executors or low)}
    return settings


#: Seconds of traffic the streaming warm-up of a new session runs before the measured run.
STREAM_WARM_UP_S = 8.0


def stream_warm_up(config: RunConfig, checkpoint: str) -> RunConfig:
    """A short throwaway run of the same queries (Spark's default trigger, nothing dropped, no progress lines).

    A fresh JVM's first streaming batch of a stateful query pays the Python source's worker start-up, code
    generation and JIT, many times a later batch's time (pacer-bench's README gives the figure). Measured, it would
    be the first batch of every run; a long-running query pays it once in its lifetime. It streams into its own
    ``checkpoint`` folder, never the measured run's.
    """
    queries = tuple(replace(q, admission="asap", admission_params={}) for q in config.queries)
    warm = replace(config, queries=queries, duration=min(STREAM_WARM_UP_S, config.duration), overload="keep")
    return warm.with_options("spark", progress_every=0, trigger=None, label="warm-up", checkpoint=checkpoint)


#: The instance the ``pacer_runtimes`` hook returns (it builds its sessions from each run's options).
SPARK_RUNTIME = SparkRuntime()


def cost_lines(report: Mapping[str, Any]) -> list[str]:
    """What each query cost: the core-seconds its tasks executed (``cost.busy_core_s``, what a user pays), the
    engine's time less gate waits (``cost.trigger_s``), batches per minute, and how much of it was Spark's no-data
    batches (``cost.no_data``); and what the run held."""
    lines = []
    for query_id, q in report["queries"].items():
        cost = q.get("cost") or {}
        if cost:
            busy = cost.get("busy_core_s")
            lines.append(f"cost {query_id}: " + (f"{busy:.1f} busy core-s (its tasks' executor run time), "
                                                 if busy is not None else "busy core-s not measured, ")
                         + f"trigger {cost.get('trigger_s', cost['engine_s']):.1f} s (Spark's triggerExecution less "
                         f"{cost.get('gate_wait_s', 0.0):.1f} s waiting at pacer's gate), "
                         f"{cost['batches_per_min']:.1f} batches/min")
            empty = cost.get("no_data") or {}
            if empty.get("batches"):
                busy_empty = empty.get("busy_core_s")
                lines.append(f"cost {query_id}: of which {empty['batches']} no-data batches (Spark's, after the "
                             f"watermark moved): trigger {empty['trigger_s']:.1f} s"
                             + (f", {busy_empty:.1f} busy core-s" if busy_empty is not None else ""))
    allocated = (report.get("cost") or {}).get("allocated_core_s")
    if allocated is not None:
        lines.append(f"cost of the run: {allocated:.1f} core-s allocated (executor cores x the time each was alive "
                     f"in the {report['duration_s']:.0f} s run)")
    return lines


def build_session(master: str, app: str, *, partitions: int = 2, rapids_jars: Sequence[str] = (),
                  kafka: bool = False, conf: Mapping[str, str] | None = None) -> Any:
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
                                    kafka=kafka, conf=conf)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("FATAL")
    if kafka:
        pacer_spark.add_kafka_connector(spark)  # a JVM this process started earlier, without the connector
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
    ``checkpoint``, ``drain_timeout`` (120 s), ``progress_every``, ``master`` (recorded), ``engine_profile`` (the
    path of the workload's profile: its queries' prior, :mod:`pacer.engine_profile`).

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
        cores=config.cores, gpus=config.gpus, paced=kafka, scale=config.scale, scale_params=config.scale_params,
        executors=config.executors, initial_executors=config.initial_executors,
        engine_profile=options.get("engine_profile"),
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
    """:func:`run_configuration` of ``--source kafka``: every workload's query reads the topic (or its own, where
    ``options["topics"]`` maps query ids to topics), paced through ``format("pacer")`` with the run's strategies, or
    on Spark's own ``trigger`` (the baseline)."""
    from pacer_spark.run.kafka_run import KafkaRun, kafka_lines

    options = config.options_for("spark")
    settings = {"bootstrap_servers": options["bootstrap_servers"], "topic": options["topic"],
                "value_format": options.get("value_format", "json"),
                "starting_offsets": options.get("starting_offsets", "earliest"),
                "max_offsets": int(options.get("max_offsets", 0))}
    topics = dict(options.get("topics") or {})  # query id -> its own topic (several queries, several streams)
    drain_timeout = float(options.get("drain_timeout", 120.0))
    run = KafkaRun(session, settings, drain_timeout=drain_timeout)
    report_config.update(source="kafka", topic=settings["topic"], bootstrap_servers=settings["bootstrap_servers"])

    profile = session.config.engine_profile  # the session read the file of options["engine_profile"] already

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
                if profile is not None and profile.applies_to(q.workload):  # the workload's calibration: its prior
                    paced["pacer.engineProfile"] = str(options["engine_profile"])
            run.start(qid, q.workload, deadline_s=deadline, paced_options=paced, trigger=trigger,
                      checkpoint=str(session.checkpoint_root / qid / "checkpoint"), topic=topics.get(qid))

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
                with session.lock:
                    line = progress_line(session.controller, time.time() - start)
                print(line, flush=True)

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
