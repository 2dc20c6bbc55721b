"""``pacer demo``: Spark's own fixed trigger against pacer, side by side, on the embedded default.

Both configurations run on one local SparkSession with the ``pacer-gen`` source, one after the
other, after a warm-up job that pays the JVM's JIT cost for neither of them, and write one
``pacer.report/1`` each, a comparison table and plots.

The papers' case is the LR1 window self-join, whose cost they find superlinear in the batch, so
that a 10 s trigger falls behind where small batches keep up. Measured here (PySpark 4.3.0,
``local[2]``), Spark's stream-stream join is not superlinear in the batch: a batch costs a fixed
~1 s plus a per-row cost that grows with the join state (the rate times window plus watermark),
so every batch size hits the same capacity (about 860 rows/s at 1400 rows/s offered, for the
10 s trigger and for pacer's small batches alike; ``pacer demo --workload lr1 --rate 1400`` shows
it). The default is therefore where the difference is largest on this machine: LR2 at 2000 rows/s,
which both sustain, where the fixed trigger holds every row for up to 10 s and pacer's fixed-point
admission (Das et al.) sizes batches to the processing time and EDF orders them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer import RunConfig
from pacer.cli import Command, UsageError
from pacer.cli.run_command import check_strategies, config_from_args
from pacer.plugins import PluginManager
from pacer.report import max_latency_trend_ms, write_report

#: The demo's defaults, measured on a 2-core machine with PySpark 4.3.0 (see the pacer-spark README).
DEFAULT_WORKLOAD = "lr2"
DEFAULT_RATE = 2000.0
DEFAULT_TRIGGER = "10s"
DEFAULT_ADMISSION = "fixed-point"
DEFAULT_SCHEDULER = "edf"
DEFAULT_DURATION = 90.0


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="pacer-demo", help="folder for the reports, table and plots (default pacer-demo)")
    p.add_argument("--workload", default=DEFAULT_WORKLOAD, help=f"the query (default {DEFAULT_WORKLOAD})")
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help=f"rows/s (default {DEFAULT_RATE:g})")
    p.add_argument("--trigger", default=DEFAULT_TRIGGER, help=f"Spark's fixed trigger (default {DEFAULT_TRIGGER})")
    p.add_argument("--admission", default=DEFAULT_ADMISSION,
                   help=f"pacer's admission strategy (default {DEFAULT_ADMISSION})")
    p.add_argument("--scheduler", default=DEFAULT_SCHEDULER, help=f"pacer's scheduler (default {DEFAULT_SCHEDULER})")
    p.add_argument("--deadline", help="the query's deadline, e.g. 10s (default: its window slide)")
    p.add_argument("--duration", type=float, default=DEFAULT_DURATION,
                   help=f"seconds of traffic per configuration (default {DEFAULT_DURATION:g})")
    p.add_argument("--drain-timeout", type=float, default=180.0,
                   help="seconds to wait for a configuration's backlog after its traffic ended (default 180)")
    p.add_argument("--seed", type=int, default=7, help="seed of the generated traffic (default 7)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--partitions", type=int, default=2, help="shuffle partitions (default 2)")
    p.add_argument("--progress-every", type=float, default=10.0, help="seconds between progress lines (0: none)")


def _run_args(args: argparse.Namespace, *, admission: str | None, scheduler: str,
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
        max_rows=0, max_bytes=0, cores=None, gpus=None, config=None, save_config=None,
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


def deadline_text(runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> str:
    """The deadline the misses count against, e.g. ``10 s`` (``10 s / 8 s`` if the configurations differ)."""
    seen = dict.fromkeys(f"{r['queries'][query_id]['deadline_ms'] / 1000:g} s" for _, r in runs)
    return " / ".join(seen)


def comparison(runs: Sequence[tuple[str, Mapping[str, Any]]], query_id: str) -> str:
    """A Markdown table of the configurations, with p99, throughput and engine time as ratios to the first one.

    The heading names the deadline the misses count against; ``engine s`` is the report's ``cost.engine_s``
    (Spark's ``triggerExecution`` summed over the query's batches: what the configuration cost the engine).
    """
    base = runs[0][1]["queries"][query_id]
    lines = [
        f"| configuration | batches | avg ms | p95 ms | p99 ms | max ms | rows/s | deadline miss (> "
        f"{deadline_text(runs, query_id)}) | max latency, first → last tenth (ms) | engine s | p99 ÷ first "
        "| throughput ÷ first | engine s ÷ first |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, report in runs:
        q = report["queries"][query_id]
        lat = q["latency_ms"]
        first, last = max_latency_trend_ms(report, query_id)
        engine, base_engine = q.get("cost", {}).get("engine_s"), base.get("cost", {}).get("engine_s")
        engine_ratio = _ratio(engine, base_engine) if engine is not None and base_engine is not None else float("nan")
        lines.append(
            f"| {label} | {q['batches']} | {lat['avg']:.0f} | {lat['p95']:.0f} | {lat['p99']:.0f} | {lat['max']:.0f} "
            f"| {q['throughput_rows_per_s']:.0f} | {q['deadline_miss_ratio']:.2f} | {first:.0f} → {last:.0f} "
            f"| {'n/a' if engine is None else f'{engine:.1f}'} | {_ratio(lat['p99'], base['latency_ms']['p99']):.2f} "
            f"| {_ratio(q['throughput_rows_per_s'], base['throughput_rows_per_s']):.2f} | {engine_ratio:.2f} |"
        )
    return "\n".join(lines)


def _plots(out: Path, runs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[Path]:
    """PNG plots and an HTML page through pacer-bench, when it is installed (it brings matplotlib)."""
    try:
        from pacer_bench.outputs import BenchRun, write_outputs
    except ImportError:
        print("pacer demo: pacer-bench is not installed, so no plots were drawn "
              "(pip install pacer-bench, or the README's development install)", file=sys.stderr)
        return []
    bench_runs = [BenchRun(label, dict(report), baseline=i == 0) for i, (label, report) in enumerate(runs)]
    paths = write_outputs(out, "demo", bench_runs, summary="pacer demo: Spark's fixed trigger against pacer")
    return sorted({p for p in paths.values() if p.suffix in (".png", ".html") and p.is_file()})


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    from pacer_spark.run.spark_runtime import build_session, overhead_line, run_configuration, warm_up

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {str(out)!r} is a file; give a folder (it is created if missing)")
    if not args.duration > 0:
        raise UsageError(f"--duration must be > 0 seconds, got {args.duration:g}")
    static_label = f"spark trigger {args.trigger}"
    pacer_label = f"pacer {args.admission} + {args.scheduler}"
    configs = [
        (static_label, _run_args(args, admission=None, scheduler="fifo", trigger=args.trigger)),
        (pacer_label, _run_args(args, admission=args.admission, scheduler=args.scheduler, trigger=None)),
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
    deadline = deadline_text(runs, args.workload)
    heading = (f"{args.workload} at {args.rate:g} rows/s for {args.duration:g} s; deadline misses count datasets "
               f"over {deadline} ({'--deadline' if args.deadline else 'the query window slide'})")
    (out / "comparison.md").write_text(f"{heading}\n\n{table}\n")
    written = _plots(out, runs)
    pngs = [p for p in written if p.suffix == ".png"]
    print()
    print(heading)
    print(table)
    print()
    html = " and demo.html" if any(p.suffix == ".html" for p in written) else ""
    print(f"reports, comparison.md, {len(pngs)} PNG plot{'s' if len(pngs) != 1 else ''}{html} in {out}/")
    return status


DEMO_COMMAND = Command(
    "demo", "Spark's fixed 10 s trigger against pacer (fixed-point admission + EDF), side by side (about 4 minutes)",
    _configure, _run,
)
