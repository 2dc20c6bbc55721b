"""``pacer run``: the papers' workloads on real Spark under pacer's strategies (or Spark's fixed trigger)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer import UnknownStrategyError
from pacer.cli import Command, UsageError
from pacer.metrics import dataset_latencies, percentile
from pacer.plugins import PluginManager
from pacer.report import summary_table, write_report


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", nargs="+", action="extend", required=True,
                   help="lr1 lr1t lr2 lr3 cm1 cm2; several values (or repeats) run several queries in one session")
    p.add_argument("--traffic", default="constant",
                   help="constant, random, sinusoidal, wave, binary, spike, increasing, decreasing (default constant)")
    p.add_argument("--rate", type=float, default=1000.0, help="mean input rate in rows/s (default 1000)")
    p.add_argument("--traffic-param", action="append", default=[], metavar="KEY=VALUE",
                   help="traffic parameter, e.g. period=30")
    p.add_argument("--admission", help="admission strategy (default asap: Spark's default trigger); `pacer strategies` "
                                       "lists them, e.g. zstream, fixed-point, lmstream, static, pid, min-rows")
    p.add_argument("--interval", help="the batch interval of admission static or pid, e.g. 10s, 500ms or 2 (seconds)")
    p.add_argument("--scheduler", default="fifo", help="scheduling strategy (default fifo)")
    p.add_argument("--placement", default="cpu-only", help="placement strategy (default cpu-only)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE",
                   help="strategy parameter, e.g. admission.rho=0.7")
    p.add_argument("--deadline", help="deadline for every query, e.g. 10s, 500ms or 10 (seconds); "
                                      "default: its window slide")
    p.add_argument("--trigger", help="run Spark's own fixed processing-time trigger (e.g. 10s, 500ms or 10) as the "
                                     "baseline; pacer then only observes. An alternative to --admission: not both")
    p.add_argument("--overload", choices=("shed", "keep"),
                   help="when a query's offered load cannot be served within its deadline by any batch size: shed "
                        "(default) drops the buffered datasets that can no longer make it (counted, never read); "
                        "keep drops nothing and only reports the overload (always so with --trigger: Spark's "
                        "trigger drops nothing)")
    p.add_argument("--max-rows", type=int, default=0, metavar="N",
                   help="read cap: at most N rows per batch, whatever the admission (Spark's maxOffsetsPerTrigger; "
                        "default 0: none)")
    p.add_argument("--max-bytes", type=int, default=0, metavar="N",
                   help="read cap: at most N bytes per batch (Spark's maxBytesPerTrigger; default 0: none)")
    p.add_argument("--duration", type=float, default=120.0, help="seconds of traffic (default 120)")
    p.add_argument("--drain-timeout", type=float, default=120.0,
                   help="seconds to wait after the traffic for the backlog to finish (default 120)")
    p.add_argument("--seed", type=int, default=7, help="seed of the generated traffic (default 7)")
    p.add_argument("--input", metavar="DIR", help="read every workload from this directory with pacer-files "
                                                   "(one dataset per file) instead of generating traffic")
    p.add_argument("--input-format", default="csv", choices=("csv", "json", "parquet"), help="format of --input files")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--partitions", type=int, default=2, help="shuffle partitions (default 2)")
    p.add_argument("--checkpoint", metavar="DIR", help="checkpoint root (default: a temporary directory)")
    p.add_argument("--rapids-jar", action="append", default=[], metavar="JAR",
                   help="RAPIDS Accelerator jar(s): load the plugin so placement is enacted")
    p.add_argument("--no-fallback", action="store_true",
                   help="fallback is on by default: a strategy that raises is logged, counted and replaced by its "
                        "baseline (asap, fifo, cpu-only) for that decision; --no-fallback fails the query instead")
    p.add_argument("--monitor-interval", type=float, default=1.0, help="seconds per row of the report's series")
    p.add_argument("--progress-every", type=float, default=2.0, help="seconds between progress lines (0: none)")
    p.add_argument("--no-warm-up", dest="warm_up", action="store_false",
                   help="skip the small stateful job run before the stream to pay the JVM's JIT cost")
    p.add_argument("--report", help="write the pacer.report/1 JSON here (missing folders are created)")


def parse_assignments(values: Sequence[str], what: str) -> dict[str, str]:
    """``["a=1"]`` -> ``{"a": "1"}``; a malformed item raises :class:`UsageError`."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def _seconds(flag: str, value: str | None, *, positive: bool = True) -> float | None:
    from pacer_spark.runtime import parse_seconds

    if value is None:
        return None
    try:
        seconds = parse_seconds(value)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None
    if positive and (seconds is None or seconds <= 0):
        raise UsageError(f"{flag} must be > 0 seconds, got {value!r}")
    return seconds


def validate(args: argparse.Namespace, pm: PluginManager) -> dict[str, Any]:
    """Check every argument before Spark starts; return the parsed run configuration.

    :raises UsageError: with a message saying what to do.
    """
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_traffic

    for name in args.workload:
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if args.traffic not in TRAFFIC_PATTERNS:
        raise UsageError(f"unknown traffic {args.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
    for flag, value in (("--duration", args.duration), ("--monitor-interval", args.monitor_interval)):
        if not value > 0:
            raise UsageError(f"{flag} must be > 0 seconds, got {value:g}")
    for flag, value, low in (("--rate", args.rate, 0.0), ("--partitions", args.partitions, 1),
                             ("--drain-timeout", args.drain_timeout, 0.0), ("--max-rows", args.max_rows, 0),
                             ("--max-bytes", args.max_bytes, 0)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low:g}, got {value:g}")
    deadline = _seconds("--deadline", args.deadline)
    trigger = _seconds("--trigger", args.trigger)
    if trigger is not None:
        given = [f for f, v in (("--admission", args.admission), ("--interval", args.interval)) if v is not None]
        given += ["--param admission.*"] if any(p.startswith("admission.") for p in args.param) else []
        given += ["--overload shed"] if args.overload == "shed" else []
        if given:
            raise UsageError(f"--trigger and {', '.join(given)} are alternatives: --trigger {args.trigger} runs Spark's "
                             "own fixed trigger and pacer only observes, so an admission strategy would be ignored. "
                             "Drop --trigger to let the strategy decide (--admission static --interval "
                             f"{args.trigger} is pacer's fixed trigger), or drop {given[0]}")
    params: dict[str, dict[str, str]] = {"admission": {}, "scheduler": {}, "placement": {}}
    for key, value in parse_assignments(args.param, "--param").items():
        decision, _, name = key.partition(".")
        if decision not in params or not name:
            raise UsageError(f"--param keys look like admission.NAME, scheduler.NAME or placement.NAME; got {key!r}")
        params[decision][name] = value
    if args.interval is not None:
        params["admission"]["interval"] = str(_seconds("--interval", args.interval))
    traffic_params = {}
    for key, value in parse_assignments(args.traffic_param, "--traffic-param").items():
        try:
            traffic_params[key] = float(value)
        except ValueError:
            raise UsageError(f"--traffic-param {key} must be a number, got {value!r}") from None
    try:
        make_traffic(args.traffic, rate=args.rate, duration=args.duration, **traffic_params)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    admission = "asap" if trigger is not None else (args.admission or "asap")
    chosen = {"admission": admission, "scheduling": args.scheduler, "placement": args.placement}
    try:
        infos = {kind: pm.find(name, kind) for kind, name in chosen.items()}
        if args.interval is not None and "interval" not in {p.name for p in infos["admission"].params}:
            raise UsageError(f"--interval is the batch interval of an interval-based admission (static, pid); "
                             f"{admission!r} has none: drop --interval")
        for kind, key in (("admission", "admission"), ("scheduling", "scheduler"), ("placement", "placement")):
            if not (trigger is not None and kind == "admission"):
                infos[kind].resolve_params(params[key])
    except UnknownStrategyError as exc:
        raise UsageError(f"{exc}. Run `pacer strategies` to list them.") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.input is not None and not Path(args.input).is_dir():
        raise UsageError(f"--input {args.input!r} is not a directory; create it or point --input at the folder "
                         "the files arrive in")
    for jar in args.rapids_jar:
        if not Path(jar).is_file():
            raise UsageError(f"--rapids-jar {jar!r} does not exist; download rapids-4-spark from Maven Central")
    if args.report is not None:
        report_folder(args.report)
    ids = _query_ids(args.workload)
    overload = "keep" if trigger is not None else (args.overload or "shed")  # the baseline observes, drops nothing
    return {"deadline": deadline, "trigger": trigger, "params": params, "traffic_params": traffic_params,
            "admission": admission, "query_ids": ids, "overload": overload}


def report_folder(path: str) -> Path:
    """Create the folder ``path`` (a report file) goes in, parents included, as ``pacer demo --out`` does.

    :raises UsageError: when it cannot be created (a file in the way, no permission).
    """
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"--report {path!r} is a folder; give a file name, e.g. {str(target / 'report.json')!r}")
    try:
        target.resolve().parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--report: cannot create the folder for {path!r} ({exc.strerror}); choose another path") \
            from None
    return target.resolve().parent


def _query_ids(workloads: Sequence[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for w in workloads:
        seen[w] = seen.get(w, 0) + 1
        out.append(w if seen[w] == 1 else f"{w}-{seen[w]}")
    return out


#: Printed once before the first progress line: what each field of :func:`progress_line` means.
PROGRESS_LEGEND = (
    "progress, every query together: t = seconds since the start; batches = micro-batches completed; "
    "last = datasets/rows of the newest batch; p95 = 95th-percentile dataset latency (arrival to the end of its "
    "batch's trigger); misses = datasets over the deadline / datasets done; overloaded = seconds the offered load "
    "could not be served within the deadline by any batch size; shed = datasets dropped for it (--overload shed)"
)


def progress_line(controller: Any, lock: Any, elapsed: float) -> str:
    """``t=12s batches=5 last=3 datasets/1500 rows p95=1234ms misses=0/12 overloaded=0s shed=0`` over every query.

    :data:`PROGRESS_LEGEND` explains the fields.
    """
    with lock:
        reports = controller.reports()
        deadlines = {q: s.spec.effective_deadline for q, s in controller.queries.items()}
        overloaded_s = sum(s.overload.overloaded_s for s in controller.queries.values())
        shed = sum(controller.ledger.counts.get(q, {}).get("shed", 0) for q in controller.queries)
    lats = dataset_latencies(reports)
    misses = sum(1 for r in reports for _, lat in r.dataset_latencies if lat > deadlines[r.query_id])
    last = reports[-1] if reports else None
    last_text = f"{len(last.dataset_latencies)} datasets/{last.rows} rows" if last else "-"
    return (f"t={elapsed:5.0f}s batches={len(reports)} last={last_text} "
            f"p95={1000 * percentile(lats, 95):.0f}ms misses={misses}/{len(lats)} "
            f"overloaded={overloaded_s:.0f}s shed={shed}")


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


def build_session(master: str, app: str, *, partitions: int = 2, rapids_jars: Sequence[str] = ()) -> Any:
    """A quiet FAIR-mode SparkSession from :func:`pacer_spark.session_builder` for the CLI commands."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import pacer_spark

    spark = (
        pacer_spark.session_builder(master, app, shuffle_partitions=partitions, rapids_jars=list(rapids_jars))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
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


def run_configuration(spark: Any, args: argparse.Namespace, cfg: Mapping[str, Any], pm: PluginManager,
                      *, label: str = "pacer run") -> tuple[dict[str, Any], int]:
    """Run one configuration (``args`` as :func:`_configure` parses them, ``cfg`` from :func:`validate`).

    Streams every workload for ``args.duration`` seconds, waits for the backlog, prints progress lines
    every ``args.progress_every`` seconds and returns the ``pacer.report/1`` document and an exit status
    (1 when the backlog did not drain or a query failed).
    """
    import pacer_spark

    trigger = f"{cfg['trigger']:g} seconds" if cfg["trigger"] is not None else None
    session = pacer_spark.attach(
        spark, admission=cfg["admission"], scheduler=args.scheduler, placement=args.placement,
        deadline=cfg["deadline"], fallback=not args.no_fallback, admission_params=cfg["params"]["admission"],
        scheduler_params=cfg["params"]["scheduler"], placement_params=cfg["params"]["placement"],
        plugin_manager=pm, checkpoint_root=args.checkpoint, overload=cfg["overload"],
    )
    config = {
        "workloads": list(args.workload), "traffic": args.traffic, "rate": args.rate,
        "traffic_params": cfg["traffic_params"], "admission": cfg["admission"], "scheduler": args.scheduler,
        "placement": args.placement, "params": cfg["params"], "deadline_s": cfg["deadline"],
        "trigger_s": cfg["trigger"], "duration_s": args.duration, "seed": args.seed, "master": args.master,
        "input": args.input, "mode": "spark-trigger" if trigger else "pacer", "overload": cfg["overload"],
        "max_rows": args.max_rows, "max_bytes": args.max_bytes,
    }

    def start_queries() -> None:
        for workload, query_id in zip(args.workload, cfg["query_ids"], strict=True):
            session.run_workload(
                workload, query_id=query_id, traffic=args.traffic, rate=args.rate, duration=args.duration,
                seed=args.seed, traffic_params=cfg["traffic_params"], files=args.input,
                file_format=args.input_format, trigger=trigger, max_rows=args.max_rows, max_bytes=args.max_bytes,
            )

    return drive(
        session, start_queries, config, duration=args.duration, drain_timeout=args.drain_timeout,
        progress_every=args.progress_every, monitor_interval=args.monitor_interval, label=label,
        wait_for_drain=args.input is None,
    )


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
    wait_for_drain: bool = True,
) -> tuple[dict[str, Any], int]:
    """Start the queries of an attached :class:`~pacer_spark.runtime.PacerSession`, let them stream and report.

    ``start_queries`` starts every stream (``session.run_workload`` calls). The traffic lasts ``duration``
    seconds; then the backlog gets ``drain_timeout`` more seconds (``wait_for_drain``; a folder source has
    no known end, so without it the run stops after ``duration``). A progress line is printed every
    ``progress_every`` seconds (0: none). The session is stopped on the way out.

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
    try:
        start_queries()
        if printer is not None:
            print(PROGRESS_LEGEND, flush=True)
            printer.start()
        drained = session.await_drained(duration + drain_timeout if wait_for_drain else duration)
        if wait_for_drain and not drained:
            print(f"{label}: backlog not drained {drain_timeout:g} s after the traffic ended", file=sys.stderr)
            status = 1
        for query_id, error in session.errors().items():
            print(f"{label}: query {query_id} failed: {error}", file=sys.stderr)
            status = 1
    finally:
        stop.set()
        end = time.time()
        session.stop()
    return session.report(config, interval=monitor_interval, end=end), status


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    cfg = validate(args, pm)  # before Spark starts
    spark = build_session(args.master, "pacer run", partitions=args.partitions, rapids_jars=args.rapids_jar)
    try:
        if args.warm_up:
            warm_up(spark)
        report, status = run_configuration(spark, args, cfg, pm)
    finally:
        spark.stop()
    print(summary_table(report))
    for line in cost_lines(report):
        print(line)
    print(overhead_line(report))
    if args.report:
        print(f"report: {write_report(report, args.report)}")
    return status


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


RUN_COMMAND = Command("run", "run workloads on real Spark (local or a cluster) under pacer's strategies", _configure,
                      _run)
