"""Spark's no-data batches under pacing: what they cost and what they change in a watermarked query's output.

    python -m pacer_spark.run.no_data --duration 120 --deadline 10 --watermark 10 [--json out.json]

A stateful query with a watermark runs a *no-data batch* after a data batch that moved its watermark, as soon as its
source has nothing new (``spark.sql.streaming.noDataMicroBatches.enabled``, on by default): it evicts state and, in
append mode, emits the windows the watermark closed. A paced query's source has nothing new most of the time, so
every data batch that moves the watermark is followed by one. This runs LR2 (average speed per segment over
30 s windows sliding by 10 s, congested segments only) on ``pacer-gen`` traffic under zStream at ``--deadline``, once
per output mode (``--modes``) and setting (on, then off), each on the same traffic (same seed, start aligned on the
window slide, so the windows and their rows are the same), and compares: the no-data batches (count, trigger
seconds, busy core-seconds, from the run's report), every cost total, the data's latency, and the rows the query
emitted: whether both settings emit the same rows, and how long after the watermark could first have passed a
window it was emitted (``emit_lag_s``: emission − (window end + watermark delay)).
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer.durations import flag_seconds
from pacer_spark.config import NO_DATA_BATCHES_CONF
from pacer_spark.jvm.progress import TriggerProgress

#: The query of the comparison by default.
WORKLOAD = "lr2"


class EmittedRows:
    """What a query's sink received: each row (window start and end in seconds from the traffic's start, then its
    other columns: the group and the aggregate) with when and in which batch.

    :param origin: epoch seconds the traffic starts.
    """

    def __init__(self, origin: float) -> None:
        self.origin = origin
        self.lock = threading.Lock()
        self.rows: list[tuple[tuple[Any, ...], float, int]] = []
        self.batches: dict[int, int] = {}  # Spark batch id -> rows emitted

    def sink(self, frame: Any, batch_id: int) -> None:
        """``foreachBatch``: collect the batch's rows (LR2 emits a few hundred per window at most)."""
        rows = frame.collect()
        at = time.time()
        with self.lock:
            self.batches[batch_id] = len(rows)
            for row in rows:
                rest = (round(v, 9) if isinstance(v, float) else v for k, v in row.asDict().items() if k != "window")
                key = (row["window"]["start"].timestamp() - self.origin,
                       row["window"]["end"].timestamp() - self.origin, *rest)
                self.rows.append((key, at - self.origin, batch_id))


def run_paced(spark: Any, *, workload: str, mode: str, settings: Sequence[bool], duration: float, deadline: float,
              watermark: float, rate: float, seed: int, settle_s: float, scratch: Path) -> list[dict[str, Any]]:
    """One paced run of ``workload`` in output ``mode``: one query per entry of ``settings`` (Spark's no-data batches on or
    off for it), all on the same traffic at once. Each query's report costs and latency, and the rows its sink
    received."""
    import pacer_spark
    from pacer_spark.gen_plan import GEN_FORMAT
    from pacer_spark.workloads import build_workload
    from pacer_workloads import WORKLOADS

    spec = WORKLOADS[workload]
    session = pacer_spark.attach(spark, checkpoint_root=str(scratch), admission="zstream", deadline=deadline)
    # the traffic starts on a window boundary a few seconds ahead: every run's windows are the same
    start = math.ceil((time.time() + 3.0) / spec.window_slide) * spec.window_slide
    queries: dict[str, tuple[bool, EmittedRows, Any]] = {}
    try:
        for no_data in settings:
            query_id = f"{workload}-{'on' if no_data else 'off'}"
            session.register_query(query_id, workload=workload, deadline=deadline, admission="zstream")
            frame = session.read_stream(query_id, GEN_FORMAT, stream=spec.stream, traffic="constant", rate=rate,
                                        duration=duration, seed=seed, start=repr(start))
            emitted = EmittedRows(start)
            spark.conf.set(NO_DATA_BATCHES_CONF, "true" if no_data else "false")  # read when the query starts
            handle = session.start(build_workload(workload, frame, watermark=watermark).frame, query_id,
                                   emitted.sink, output_mode=mode)
            queries[query_id] = (no_data, emitted, handle)
        drained = session.await_drained(duration + 180.0)
        time.sleep(settle_s)  # the last data batch's watermark move: a no-data batch (when on) emits what it closed
        errors = session.errors()
        progress = {query_id: list(handle.recentProgress) for query_id, (_, _, handle) in queries.items()}
    finally:
        spark.conf.unset(NO_DATA_BATCHES_CONF)
        session.stop()
    report = session.report({"mode": mode})
    results = []
    for query_id, (no_data, emitted, _) in queries.items():
        q = report["queries"][query_id]
        cost = q["cost"]
        triggers = [t for t in (TriggerProgress.from_json(p) for p in progress[query_id]) if t.executed]
        no_data_ids = {t.batch_id for t in triggers if t.no_data}
        results.append({
            "query": query_id, "mode": mode, "no_data_batches_enabled": no_data, "alone": len(settings) == 1,
            "drained": drained, "errors": errors, "traffic_start": start,
            "batches": q["batches"], "rows_in": q["rows_in"], "rows_processed": q["rows_processed"],
            "no_data": cost["no_data"], "busy_core_s": cost["busy_core_s"], "cpu_core_s": cost["cpu_core_s"],
            "trigger_s": cost["trigger_s"], "engine_s": cost["engine_s"], "latency_ms": q["latency_ms"],
            "deadline_miss_ratio": q["deadline_miss_ratio"],
            "rows_emitted": len(emitted.rows),
            "rows_emitted_by_no_data_batches": sum(n for b, n in emitted.batches.items() if b in no_data_ids),
            "task_costs": report["spark"]["task_costs"],
            # Spark's batches as the query's progress kept them (its last 100): id, input rows, no-data, rows emitted
            "spark_batches": [[t.batch_id, t.rows, t.no_data, emitted.batches.get(t.batch_id)] for t in triggers],
            "emitted": [[list(key), at, batch] for key, at, batch in emitted.rows],
        })
    return results


def without_rows(run: Mapping[str, Any]) -> dict[str, Any]:
    """A run's figures without the rows its sink received."""
    return {k: v for k, v in run.items() if k != "emitted"}


def compare(on: Mapping[str, Any], off: Mapping[str, Any], *, watermark: float) -> dict[str, Any]:
    """Two queries on the same traffic, no-data batches on and off: whether they emitted the same rows (each group's
    last row: update mode emits a window's row again each batch it changes), and, in append mode, when each row was
    first emitted relative to the earliest the watermark could pass its window (its end + the watermark delay)."""
    def first_emission(run: Mapping[str, Any]) -> dict[tuple[Any, ...], float]:
        out: dict[tuple[Any, ...], float] = {}
        for key, at, _ in run["emitted"]:
            k = tuple(key)
            out[k] = min(at, out.get(k, at))
        return out

    def last_value(run: Mapping[str, Any]) -> set[tuple[Any, ...]]:
        """Each group's last emitted row (update mode emits a window's row again each batch it changes)."""
        latest: dict[tuple[Any, ...], tuple[float, tuple[Any, ...]]] = {}
        for key, at, _ in run["emitted"]:
            group = tuple(key[:-1])  # the window and the grouping columns; the aggregate is last
            if group not in latest or at >= latest[group][0]:
                latest[group] = (at, tuple(key))
        return {row for _, row in latest.values()}

    first_on, first_off = first_emission(on), first_emission(off)

    def lags(first: Mapping[tuple[Any, ...], float]) -> list[float]:
        return [at - (key[1] + watermark) for key, at in first.items()]

    final_on, final_off = last_value(on), last_value(off)
    both = set(first_on) & set(first_off)
    append = on["mode"] == "append"
    return {
        "same_rows": final_on == final_off, "rows": len(final_on),
        "rows_emitted_by_no_data_batches": on.get("rows_emitted_by_no_data_batches"),
        "rows_only_on": len(final_on - final_off), "rows_only_off": len(final_off - final_on),
        "emit_lag_s_on": _spread(lags(first_on) if append else []),
        "emit_lag_s_off": _spread(lags(first_off) if append else []),
        "emitted_later_when_off_s": _spread(sorted(first_off[k] - first_on[k] for k in both) if append else []),
    }


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    """Median, 95th percentile and maximum (None when empty)."""
    if not values:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(values)
    return {"p50": statistics.median(ordered), "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max": ordered[-1]}


def summary_lines(results: Mapping[str, Any]) -> list[str]:
    """One line per run and one per mode's comparison."""
    lines = []
    for run in results["runs"]:
        nd = run["no_data"]
        lat = run["latency_ms"]
        lines.append(
            f"{run['query']:<7} {run['mode']:<6} no-data {'on ' if run['no_data_batches_enabled'] else 'off'} "
            f"{'alone   ' if run['alone'] else 'together'}: {run['batches']} pacer "
            f"batches, {nd['batches']} no-data batches ({nd['trigger_s']:.1f} s trigger, "
            f"{nd['busy_core_s'] or 0.0:.2f} busy core-s); totals {run['busy_core_s']:.1f} busy core-s, "
            f"{run['cpu_core_s']:.1f} CPU core-s, {run['trigger_s']:.1f} s trigger; latency p50 {lat['p50']:.0f} ms, "
            f"p99 {lat['p99']:.0f} ms, {100 * run['deadline_miss_ratio']:.2f} % late; {run['rows_emitted']} rows "
            f"emitted, {run['rows_emitted_by_no_data_batches']} by no-data batches")
    for mode, c in results["comparisons"].items():
        on, off, later = c["emit_lag_s_on"], c["emit_lag_s_off"], c["emitted_later_when_off_s"]
        lines.append(
            f"{mode:<6} together, same traffic: same rows {c['same_rows']} ({c['rows']} rows; only on: "
            f"{c['rows_only_on']}, only off: {c['rows_only_off']}; {c['rows_emitted_by_no_data_batches']} emitted by "
            "no-data batches)"
            + (f"; emitted after the watermark could pass: on p50 {_s(on['p50'])} max {_s(on['max'])}, off p50 "
               f"{_s(off['p50'])} max {_s(off['max'])}; off later than on by p50 {_s(later['p50'])} max "
               f"{_s(later['max'])}" if mode == "append" else ""))
    return lines


def _s(value: float | None) -> str:
    return f"{value:.1f} s" if value is not None else "-"


def run(spark: Any, args: argparse.Namespace, *, mode: str, settings: Sequence[bool], duration: float,
        settle_s: float) -> list[dict[str, Any]]:
    """:func:`run_paced` with the command's arguments, in a scratch checkpoint folder."""
    scratch = Path(tempfile.mkdtemp(prefix="pacer-no-data-"))
    try:
        return run_paced(spark, workload=args.workload, mode=mode, settings=settings, duration=duration, deadline=args.deadline,
                         watermark=args.watermark, rate=args.rate, seed=args.seed, settle_s=settle_s, scratch=scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: Sequence[str] | None = None, *, out: Callable[[str], None] = print) -> int:
    """Run every mode with no-data batches on, then off, and print and (``--json``) write the comparison."""
    parser = argparse.ArgumentParser(prog="python -m pacer_spark.run.no_data", description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=flag_seconds, default=120.0,
                        help="traffic per run, e.g. 120 or 2m (default 120 s)")
    parser.add_argument("--deadline", type=flag_seconds, default=10.0, help="zStream's deadline (default 10 s)")
    parser.add_argument("--watermark", type=flag_seconds, default=10.0, help="watermark delay (default 10 s)")
    parser.add_argument("--rate", type=float, default=1000.0, help="rows/s (default 1000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--modes", default="append,update", help="output modes, comma-separated")
    parser.add_argument("--workload", default=WORKLOAD, choices=("lr2", "lr3", "cm1", "cm2"),
                        help="one of pacer's windowed aggregations (default lr2)")
    parser.add_argument("--order", default="on,off", choices=("on,off", "off,on"),
                        help="which setting runs alone first (default on,off)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--json", type=Path, help="write every figure here")
    parser.add_argument("--rows", action="store_true", help="with --json: each emitted row too")
    args = parser.parse_args(argv)

    from pacer_spark.run.spark_runtime import build_session, warm_up

    spark = build_session(args.master, "pacer no-data batches")
    warm_up(spark)
    results: dict[str, Any] = {"config": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                               "runs": [], "comparisons": {}}
    try:
        # a throwaway run first: a fresh JVM's first stateful batches pay code generation and JIT
        run(spark, args, mode="update", settings=(True,), duration=min(20.0, args.duration), settle_s=0.0)
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            # each setting alone (what it costs, the latency), then both on the same traffic at once (the rows)
            first = args.order == "on,off"
            for settings in ((first,), (not first,), (True, False)):
                runs = run(spark, args, mode=mode, settings=settings, duration=args.duration,
                           settle_s=2 * args.deadline)
                results["runs"] += runs
                for line in summary_lines({"runs": runs, "comparisons": {}}):
                    out(line)
            on, off = results["runs"][-2:]
            results["comparisons"][mode] = compare(on, off, watermark=args.watermark)
    finally:
        spark.stop()
    for line in summary_lines({"runs": [], "comparisons": results["comparisons"]}):
        out(line)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        if not args.rows:
            results["runs"] = [without_rows(r) for r in results["runs"]]
        args.json.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    return 0 if all(r["drained"] and not r["errors"] for r in results["runs"]) else 1


if __name__ == "__main__":  # pragma: no cover - a command
    sys.exit(main())
