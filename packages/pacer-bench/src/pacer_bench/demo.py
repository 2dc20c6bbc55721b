"""``pacer demo``: the promise on one query: a latency target met at a fraction of the cost.

Three configurations of the same query run on one local SparkSession with the ``pacer-gen`` source, one after the
other, after a warm-up job that pays the JVM's JIT cost for none of them: Spark's default trigger (a batch as soon as
the previous one ends), Spark's processing-time trigger at the deadline's interval (what a user tunes by hand to a
latency target), and pacer with the deadline stated (zStream admission: a batch when its predicted completion reaches
the deadline). Each writes one ``pacer.report/1``; the table and one plot show late rows, busy core-seconds (what
the user pays: the core-seconds the query's tasks executed) and batches side by side, and the closing line says the
ratios. LR2 at 2000 rows/s with a 10 s deadline is sustained by all three on 2 cores (the papers' LR1 self-join is
not superlinear in the batch on Spark here: see the pacer-spark README).
"""

from __future__ import annotations

import argparse
import textwrap
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer import RunConfig, durations
from pacer.cli import Command, UsageError
from pacer.cli.run_command import check_strategies, config_from_args
from pacer.plugins import PluginManager
from pacer.report import write_report

#: The demo's defaults, measured on a 2-core machine with PySpark 4.3.0 (see the pacer-spark README).
DEFAULT_WORKLOAD = "lr2"
DEFAULT_RATE = 2000.0
DEFAULT_DEADLINE = "10s"
DEFAULT_ADMISSION = "zstream"
DEFAULT_DURATION = 60.0


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="pacer-demo", help="folder for the reports, table and plots (default pacer-demo)")
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"the query (default {DEFAULT_WORKLOAD})")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help=f"rows/s (default {DEFAULT_RATE:g})")
    p.add_argument("--deadline", default=DEFAULT_DEADLINE,
                   help=f"the latency target, e.g. 10s (default {DEFAULT_DEADLINE}): pacer meets it, Spark's trigger "
                        "runs at its interval, and every configuration's rows are judged against it")
    p.add_argument("--trigger", help="the interval of Spark's processing-time trigger (default: the deadline)")
    p.add_argument("--admission", default=DEFAULT_ADMISSION,
                   help=f"pacer's admission strategy (default {DEFAULT_ADMISSION})")
    p.add_argument("--duration", type=durations.flag_seconds, default=DEFAULT_DURATION,
                   help=f"traffic per configuration, e.g. 2m or 120 (seconds) (default {DEFAULT_DURATION:g} s)")
    p.add_argument("--drain-timeout", type=durations.flag_seconds, default=180.0,
                   help="how long to wait for a configuration's backlog after its traffic ended, e.g. 3m "
                        "(default 180 s)")
    p.add_argument("--seed", type=int, default=7, help="seed of the generated traffic (default 7)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--partitions", type=int, default=2, help="shuffle partitions (default 2)")
    p.add_argument("--progress-every", type=durations.flag_seconds, default=10.0,
                   help="time between progress lines, e.g. 10s (0: none)")


def _run_args(args: argparse.Namespace, *, admission: str | None, scheduler: str = "fifo",
              trigger: str | None) -> argparse.Namespace:
    """The ``pacer run`` arguments of one configuration of the demo (``admission`` None with a ``trigger``)."""
    return argparse.Namespace(
        workload=[args.workload], traffic="constant", rate=args.rate, traffic_param=[], admission=admission,
        interval=None, scheduler=scheduler, placement="cpu-only", param=[], deadline=args.deadline, trigger=trigger,
        duration=args.duration, drain_timeout=args.drain_timeout, seed=args.seed, input=None, input_format="csv",
        malformed="fail", source=None, bootstrap_servers=None, topic=None, value_format="json",
        starting_offsets="earliest", max_offsets=0,
        master=args.master, partitions=args.partitions, checkpoint=None, rapids_jar=[], fallback=True,
        monitor_interval=1.0, progress_every=args.progress_every, report=None, warm_up=False, overload=None,
        max_rows=0, max_bytes=0, cores=None, gpus=None, config=None, save_config=None, scale="fixed",
        executors=None, initial_executors=None, cores_per_executor=1,
    )


def _run_config(run_args: argparse.Namespace, pm: PluginManager) -> RunConfig:
    """The run one configuration of the demo is, checked before Spark starts (as ``pacer run`` checks it)."""
    from pacer_spark.run.cli import DEFAULT_DURATION, apply_args

    config = config_from_args(run_args, duration_default=DEFAULT_DURATION)
    config = apply_args(run_args, config, pm).with_options(
        "spark", drain_timeout=run_args.drain_timeout, progress_every=run_args.progress_every,
        trigger=run_args.trigger, master=run_args.master)
    check_strategies(config, pm)
    return config


def _ratio(value: float, base: float) -> float:
    return value / base if base else float("nan")


def _figures(report: Mapping[str, Any], query_id: str) -> dict[str, float]:
    """What the table and the plot show of a configuration's query: batches, share of rows late, p99 (ms), busy
    core-seconds (NaN where not measured) and rows/s."""
    q = report["queries"][query_id]
    cost = q.get("cost") or {}
    busy = cost.get("busy_core_s")
    return {"batches": float(q["batches"]), "late": float(q.get("deadline_miss_ratio_rows", q["deadline_miss_ratio"])),
            "p99_ms": float(q["latency_ms"]["p99"]), "busy": float("nan") if busy is None else float(busy),
            "rows_per_s": float(q["throughput_rows_per_s"])}


def comparison(runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> str:
    """A Markdown table of the configurations: batches, the share of rows late, p99, busy core-seconds (what the user
    pays) as a ratio to Spark's default trigger (the first) and to Spark's trigger at the deadline (the second)."""
    default, static = (_figures(r, query_id) for _, r in runs[:2])
    deadline = runs[0][1]["queries"][query_id]["deadline_ms"] / 1000
    lines = [
        f"| configuration | batches | rows late (> {deadline:g} s) | p99 ms | busy core-s | ÷ default trigger "
        f"| ÷ trigger at {deadline:g} s | rows/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, report in runs:
        f = _figures(report, query_id)
        lines.append(
            f"| {label} | {f['batches']:.0f} | {f['late']:.2%} | {f['p99_ms']:.0f} | {f['busy']:.1f} "
            f"| {_ratio(f['busy'], default['busy']):.2f} | {_ratio(f['busy'], static['busy']):.2f} "
            f"| {f['rows_per_s']:.0f} |")
    return "\n".join(lines)


def closing_line(runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> str:
    """What the demo shows, in one line: pacer's late rows and its busy core-seconds and batches as ratios."""
    default, static, paced = (_figures(r, query_id) for _, r in runs[:3])
    deadline = runs[0][1]["queries"][query_id]["deadline_ms"] / 1000
    verdict = "met" if paced["late"] <= 0.01 else "missed"
    return (f"pacer {verdict} the {deadline:g} s target ({paced['late']:.2%} of rows late; Spark's default trigger "
            f"{default['late']:.2%}, its trigger at {deadline:g} s {static['late']:.2%}) at "
            f"{_ratio(paced['busy'], default['busy']):.2f}x the busy core-seconds of Spark's default trigger and "
            f"{_ratio(paced['busy'], static['busy']):.2f}x its trigger at {deadline:g} s, in "
            f"{paced['batches']:.0f} batches against {default['batches']:.0f} and {static['batches']:.0f}")


def promise_figure(runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> Any:
    """One figure: rows late, busy core-seconds and batches of each configuration, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = [_figures(r, query_id) for _, r in runs]
    labels = [label for label, _ in runs]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4))
    for ax, key, title, scale in ((axes[0], "late", "rows late (%)", 100.0), (axes[1], "busy", "busy core-s", 1.0),
                                  (axes[2], "batches", "batches", 1.0)):
        ax.bar(range(len(runs)), [f[key] * scale for f in figures], color=["#888888", "#5b8bd0", "#d0743c"])
        ax.set_xticks(range(len(runs)), labels, rotation=15, ha="right", fontsize="small")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(textwrap.fill(closing_line(runs, query_id), 120), fontsize="small")
    fig.tight_layout()
    return fig


def _plots(out: Path, runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> list[Path]:
    """PNG plots and an HTML page through pacer-bench's outputs (the promise figure first)."""
    from pacer_bench.outputs import BenchRun, write_outputs

    bench_runs = [BenchRun(label, dict(report), baseline=i == 0) for i, (label, report) in enumerate(runs)]
    paths = write_outputs(out, "demo", bench_runs, summary=closing_line(runs, query_id),
                          plots={"promise": promise_figure(runs, query_id)})
    return sorted({p for p in paths.values() if p.suffix in (".png", ".html") and p.is_file()})


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    from pacer_spark.run.spark_runtime import build_session, overhead_line, run_configuration, warm_up

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    if not args.duration > 0:
        raise UsageError(f"--duration must be > 0 seconds, got {args.duration:g}")
    try:
        deadline = durations.parse_seconds(args.deadline, "--deadline", positive=True) or 0.0
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    trigger = args.trigger or f"{deadline:g}s"
    configs = [
        ("Spark default trigger", _run_args(args, admission=None, trigger="0s")),
        (f"Spark trigger {trigger}", _run_args(args, admission=None, trigger=trigger)),
        (f"pacer {args.admission}, deadline {deadline:g}s", _run_args(args, admission=args.admission, trigger=None)),
    ]
    checked = [(label, _run_config(run_args, pm)) for label, run_args in configs]  # before Spark starts
    try:
        out.mkdir(parents=True, exist_ok=True)  # parents too, as pacer run --report does
    except OSError as exc:
        raise UsageError(f"--out: cannot create {str(out)!r} ({exc.strerror}); choose another folder") from None
    print(f"pacer demo: {args.workload} at {args.rate:g} rows/s for {args.duration:g} s per configuration, "
          f"{len(checked)} configurations, on {args.master}", flush=True)
    spark = build_session(args.master, "pacer demo", partitions=args.partitions)
    runs: list[tuple[str, dict[str, Any]]] = []
    status = 0
    try:
        warm_up(spark)
        for label, config in checked:
            print(f"--- {label}", flush=True)
            started = time.time()
            result = run_configuration(spark, config, pm, label="pacer demo")
            report, code = result.report, result.status
            report["config"]["label"] = label
            status = max(status, code)
            name = label.replace(" ", "-").replace("+", "").replace("--", "-")
            write_report(report, out / f"{name}.json")
            print(f"    done in {time.time() - started:.0f} s; {overhead_line(report)}", flush=True)
            runs.append((label, report))
    finally:
        spark.stop()
    table = comparison(runs, args.workload)
    heading = f"{args.workload} at {args.rate:g} rows/s for {args.duration:g} s per configuration, on {args.master}"
    line = closing_line(runs, args.workload)
    (out / "comparison.md").write_text(f"{heading}\n\n{table}\n\n{line}\n")
    written = _plots(out, runs, args.workload)
    pngs = [p for p in written if p.suffix == ".png"]
    print()
    print(heading)
    print(table)
    print()
    print(line)
    print(f"reports, comparison.md, {len(pngs)} PNG plot{'s' if len(pngs) != 1 else ''} and demo.html in {out}/")
    return status


DEMO_COMMAND = Command(
    "demo", "one query under Spark's default trigger, Spark's trigger at a 10 s deadline and pacer with that deadline: "
            "late rows, busy core-seconds and batches side by side (about 4 minutes)",
    _configure, _run,
)
