"""``pacer bench autoscale``: how many executors each scaler holds, and what the deadlines pay for it.

Groups: step (rate ×2 then back), wave and spike traffic, for one query (LR2, 10 s) and three (LR2 5 s, LR3 10 s,
CM2 20 s under EDF), every query paced by zStream. Configurations per group:

- *fixed at peak* and *fixed at mean*: the executors the deadline rule (:func:`pacer_scaler.shared_cores`, with its
  default headroom) needs at the traffic's peak and at its mean, held the whole run;
- *spark-dynamic*: Spark's dynamic allocation (:mod:`pacer.baselines.scaling`), starting at the peak's executors
  (what a first deployment sizes, as ``spark.dynamicAllocation.initialExecutors``: before its first batch no scaler
  has measured anything, and the traffic starts rising; started at the mean's, the deadline scaler left 2.7 % of a
  wave's rows late, three quarters of them in the first 45 s, against 0.5 % started at the peak's);
- *deadline*: pacer's deadline scaler (pacer-scaler), starting there too.

The rule's inputs (each query's core-seconds per byte and fixed part) come from a calibration run at the mean rates
on :data:`CALIBRATION_EXECUTORS` executors, measured in the same bench run. Per configuration: late rows per query
(against its own deadline), ``allocated_core_s`` (core-seconds of executors held), reconfigurations, and after each
step of the step traffic, whether the executors settled (no change for :data:`SETTLED_S`) and after how many changes.
The *offline optimum* is the bound: for every minute, the fewest executors the rule (no headroom, no start-up lag)
needs at that minute's highest arrival rate averaged over each query's deadline (the arrivals a deadline lets wait),
from the run's own arrivals, summed as core-seconds.

On Spark (``--runtime spark --master spark://…``, a standalone cluster such as ``pacer cluster up --workers 3``) the
group is one query under a wave on :data:`SPARK_EXECUTORS` executors of one core: *fixed at peak* holds every one;
*spark-dynamic* is Spark's own dynamic allocation (a session of its own with it on, pacer only watching) and
*deadline* pacer's scaler, both starting there and moving between them. No model of the Spark query is calibrated,
so no optimum is shown there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacer import QueryRun, RunConfig

if TYPE_CHECKING:
    from pacer_bench.tables import BenchRun

#: The bounds every scaled configuration gets, and the calibration's executors.
EXECUTORS = (2, 64)
CALIBRATION_EXECUTORS = 64
#: Seconds an executor takes to start in the simulation (a container or pod).
EXECUTOR_STARTUP_S = 30.0
#: Partitions per batch: enough for a batch to use every executor.
PARTITIONS = 64
#: Executors settled after a step: no change for this long.
SETTLED_S = 300.0
#: The goals the summary lines judge.
LATE_LIMIT, PEAK_LIMIT, OPTIMUM_LIMIT, SETTLE_CHANGES = 0.01, 0.6, 1.15, 3

#: (workload, deadline s, mean rows/s) of the one- and three-query groups.
QUERY_SETS: dict[str, tuple[tuple[str, float, float], ...]] = {
    "1 query": (("lr2", 10.0, 100_000.0),),
    "3 queries": (("lr2", 5.0, 40_000.0), ("lr3", 10.0, 40_000.0), ("cm2", 20.0, 40_000.0)),
}
#: traffic -> (pattern, parameters as shares of the mean rate or seconds, run seconds).
TRAFFICS: dict[str, tuple[str, dict[str, float], float]] = {
    "step": ("binary", {"min": 2 / 3, "max": 4 / 3, "period": 1800.0}, 2100.0),  # 300 s still after the last step
    "wave": ("wave", {"min": 0.2, "max": 1.8, "period": 600.0}, 1200.0),
    "spike": ("spike", {"min": 0.5, "spike": 0.4, "period": 300.0}, 1200.0),
}
CONFIGS = ("fixed at peak", "fixed at mean", "spark-dynamic", "deadline")
#: On a standalone cluster: the executors (of one core) the deadline scaler moves between by default
#: (``--executors``); fixed at peak holds the most.
SPARK_EXECUTORS = (1, 3)
#: On a standalone cluster: (workload, deadline s, mean rows/s); a wave from 0.2× to 1.8× of the mean.
SPARK_QUERY = ("lr2", 10.0, 20000.0)
#: On a standalone cluster: the run's seconds and the wave's period (quick: half of each).
SPARK_DURATION_S, SPARK_PERIOD_S = 300.0, 150.0
#: The group's name in the table of a run on a standalone cluster.
SPARK_SET = "1 query, standalone cluster"


def _traffic_params(traffic: str, rate: float) -> dict[str, float]:
    _, shares, _ = TRAFFICS[traffic]
    return {k: (v * rate if k in ("min", "max") else v) for k, v in shares.items()}


def peak_rate(traffic: str, rate: float) -> float:
    """The highest rate of ``traffic`` around a mean of ``rate`` rows/s (spike: its ``max``, chosen so the mean
    is ``rate``)."""
    from pacer_workloads import make_traffic

    pattern, _, duration = TRAFFICS[traffic]
    params = make_traffic(pattern, rate=rate, duration=duration, **_traffic_params(traffic, rate)).params()
    return float(params["max"])


def calibrate(queries: Sequence[tuple[str, float, float]]) -> dict[str, tuple[float, float]]:
    """Each query's ``(core-seconds per byte, fixed part s)``, measured on the simulator at its mean rate on
    :data:`CALIBRATION_EXECUTORS` cores for 120 s (after the first 20 s).

    Spark's no-data batches count as they cost: their tasks' core-seconds in the per-byte figure (they come with the
    data batches they follow), and the part of their trigger time that holds no core in the fixed part (a no-data
    batch holds the query's stream, as a batch's own fixed part does). The simulator reports them as totals
    (``cost.no_data``), so the measured window gets its data batches' share of them."""
    from pacer.scaler import fixed_part
    from pacer_sim.runtime import SIM_RUNTIME

    runs = tuple(QueryRun(w, rate=r, admission="zstream", deadline=d) for w, d, r in queries)
    result = SIM_RUNTIME.run(RunConfig(runs, duration=140.0, cores=CALIBRATION_EXECUTORS, partitions=PARTITIONS,
                                       scheduler="edf" if len(runs) > 1 else "fifo"))
    out = {}
    for (workload, _, _), qid in zip(queries, RunConfig(runs).query_ids(), strict=True):
        every = result.controller.reports(qid)
        reports = [r for r in every if r.started_at >= 20.0]
        no_data = result.report["queries"][qid]["cost"]["no_data"]
        share = len(reports) / len(every) if every else 0.0
        no_data_busy = share * float(no_data["busy_core_s"] or 0.0)
        no_data_wall = share * max(0.0, float(no_data["trigger_s"] or 0.0)
                                   - float(no_data["busy_core_s"] or 0.0) / PARTITIONS)
        busy = sum(r.busy_core_s or 0.0 for r in reports) + no_data_busy
        nbytes = sum(r.bytes for r in reports)
        fixed = fixed_part(reports, PARTITIONS, 0.0) + (no_data_wall / len(reports) if reports else 0.0)
        out[workload] = (busy / nbytes, fixed)
    return out


def executors_needed(queries: Sequence[tuple[str, float, float]], rates: Mapping[str, float],
                     model: Mapping[str, tuple[float, float]], *, headroom: float) -> int:
    """The fewest executors (of one core) at which the rule meets every deadline at ``rates`` (rows/s by workload),
    the queries' batches one at a time on them (:func:`pacer_scaler.shared_cores`)."""
    from pacer import QueryLoad
    from pacer_scaler import shared_cores
    from pacer_workloads import WORKLOADS, bytes_per_row

    loads = [QueryLoad(workload, deadline, model[workload][1], model[workload][0], PARTITIONS,
                       rates[workload] * bytes_per_row(WORKLOADS[workload].stream)) for workload, deadline, _ in queries]
    cores, _ = shared_cores(loads, headroom=headroom, catch_up_s=60.0, horizon_s=0.0)
    return max(1, math.ceil(cores - 1e-9))


def autoscale_plan(quick: bool, *, simulated: bool = True,
                   executors: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Every group's four configurations (module docstring), as :class:`pacer_bench.scenarios.Config`'s keywords;
    ``quick``: one query; not ``simulated``: the standalone cluster's group (:func:`spark_plan`, with
    ``executors``).

    :raises ValueError: pacer-scaler is not installed (the runner reports it as a usage error).
    """
    import importlib.util

    if importlib.util.find_spec("pacer_scaler") is None:
        raise ValueError("autoscale compares pacer's deadline scaler, which is not installed: "
                         "pip install 'pacer-bench[autoscale]' (pacer-scaler)")
    if not simulated:
        return spark_plan(quick, executors or SPARK_EXECUTORS)
    if executors is not None:
        raise ValueError("--executors sets autoscale's executors on a standalone cluster (--runtime spark --master "
                         "spark://HOST:PORT); the simulated groups size their own")

    configs: list[dict[str, Any]] = []
    sets = {"1 query": QUERY_SETS["1 query"]} if quick else QUERY_SETS
    for set_name, queries in sets.items():
        model = calibrate(queries)
        for traffic, (pattern, _, duration) in TRAFFICS.items():
            duration = min(duration, 900.0) if quick and traffic != "step" else duration
            peak = executors_needed(queries, {w: peak_rate(traffic, r) for w, _, r in queries}, model, headroom=0.15)
            mean = executors_needed(queries, {w: r for w, _, r in queries}, model, headroom=0.15)
            peak, mean = min(peak, EXECUTORS[1]), max(EXECUTORS[0], min(mean, EXECUTORS[1]))
            runs = tuple(QueryRun(w, traffic=pattern, rate=r, traffic_params=_traffic_params(traffic, r),
                                  admission="zstream", deadline=d, query_id=w) for w, d, r in queries)
            group = f"{traffic} / {set_name}"
            common: dict[str, Any] = {"queries": runs, "duration": duration, "group": group,
                                      "scheduler": "edf" if len(runs) > 1 else "fifo", "partitions": PARTITIONS}
            tags = {"traffic": traffic, "queries": set_name, "peak_executors": peak, "mean_executors": mean,
                    "model": {w: list(v) for w, v in model.items()}}
            configs += [
                {"label": f"{group} / fixed at peak", "cores": peak, "baseline": True,
                 "tags": {**tags, "name": "fixed at peak", "family": "fixed"}, **common},
                {"label": f"{group} / fixed at mean", "cores": mean,
                 "tags": {**tags, "name": "fixed at mean", "family": "fixed"}, **common},
                *({"label": f"{group} / {scale}", "scale": scale, "executors": EXECUTORS, "initial_executors": peak,
                   "executor_startup": EXECUTOR_STARTUP_S, "tags": {**tags, "name": scale, "family": scale},
                   **common} for scale in ("spark-dynamic", "deadline")),
            ]
    return configs


def spark_plan(quick: bool, executors: tuple[int, int]) -> list[dict[str, Any]]:
    """The standalone cluster's group (module docstring): fixed at peak (``executors``' most), Spark's dynamic
    allocation and the deadline scaler between ``executors``, all starting with the most, one batch partition per
    executor."""
    workload, deadline, rate = SPARK_QUERY
    duration, period = (SPARK_DURATION_S / 2, SPARK_PERIOD_S / 2) if quick else (SPARK_DURATION_S, SPARK_PERIOD_S)
    params = {"min": 0.2 * rate, "max": 1.8 * rate, "period": period}
    query = QueryRun(workload, traffic="wave", rate=rate, traffic_params=params, admission="zstream",
                     deadline=deadline, query_id=workload)
    low, high = executors
    group = f"wave / {SPARK_SET}"
    common: dict[str, Any] = {"queries": (query,), "duration": duration, "group": group, "partitions": high,
                              "initial_executors": high}
    tags = {"traffic": "wave", "queries": SPARK_SET, "peak_executors": high, "mean_executors": None, "model": {}}
    return [
        {"label": f"{group} / fixed at peak", "scale": "fixed", "executors": (high, high), "baseline": True,
         "tags": {**tags, "name": "fixed at peak", "family": "fixed"}, **common},
        {"label": f"{group} / spark-dynamic", "scale": "spark-dynamic", "executors": (low, high),
         "tags": {**tags, "name": "spark-dynamic", "family": "spark-dynamic"}, **common},
        {"label": f"{group} / deadline", "scale": "deadline", "executors": (low, high),
         "tags": {**tags, "name": "deadline", "family": "deadline"}, **common},
    ]


# ---------------------------------------------------------------------- analysis


def late_share(report: Mapping[str, Any]) -> dict[str, float]:
    """Each query's share of rows late against its own deadline (shed rows count)."""
    return {q: float(v.get("deadline_miss_ratio_rows", v.get("deadline_miss_ratio", 0.0)))
            for q, v in report["queries"].items()}


def executors_over_time(report: Mapping[str, Any]) -> list[tuple[float, int]]:
    """``(time, executors held)``: the scaler's record, or the fixed cores the whole run."""
    scaling = report.get("scaling")
    if scaling:
        return [(float(t), int(held)) for t, _, held in scaling["executors"]]
    return [(0.0, int(report["config"]["cores"]))]


def per_second(query: Mapping[str, Any], duration: float) -> list[float]:
    """A query's offered rate (rows/s) for each second of the run, from its report's series (each row stands for its
    ``series_interval_s``, which grows with the run's length)."""
    step = float(query.get("series_interval_s") or 1.0)
    out = [0.0] * int(duration)
    for row in query["series"]:
        start = int(row["t"])
        for second in range(start, min(len(out), int(row["t"] + step))):
            out[second] = float(row["input_rows_per_s"])
    return out


def steps(report: Mapping[str, Any]) -> list[float]:
    """Times the offered rate (summed over the queries, 10 s averages) crossed the middle between its 5th and 95th
    percentiles and stayed across for 30 s: the steps of the step traffic."""
    duration = float(report["config"]["duration"])
    total = [sum(rates) for rates in zip(*(per_second(q, duration) for q in report["queries"].values()), strict=True)]
    seconds = list(range(10, len(total)))
    smooth = [statistics.fmean(total[s - j] for j in range(10)) for s in seconds]
    if len(smooth) < 2:
        return []
    ranked = sorted(smooth)
    mid = (ranked[len(ranked) // 20] + ranked[-1 - len(ranked) // 20]) / 2
    out, side = [], smooth[0] >= mid
    for i, value in enumerate(smooth):
        if (value >= mid) != side and all((v >= mid) != side for v in smooth[i:i + 30]):
            out.append(float(seconds[i]))
            side = not side
    return out


def settling(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """After each step: the changes until the executors held still for :data:`SETTLED_S` (or the next step), and
    when the last of them came."""
    changes = [float(c["at"]) for c in (report.get("scaling") or {}).get("changes", [])]
    at = steps(report)
    end = float(report["duration_s"])
    out = []
    for i, step in enumerate(at):
        until = at[i + 1] if i + 1 < len(at) else end
        within = [t for t in changes if step <= t < until]
        last = within[-1] if within else step
        out.append({"step_s": step, "changes": len(within), "settle_s": last - step,
                    "settled": until - last >= SETTLED_S})
    return out


def optimum_core_s(report: Mapping[str, Any], model: Mapping[str, tuple[float, float]],
                   queries: Sequence[tuple[str, float, float]]) -> float:
    """The offline optimum (module docstring) over the run's traffic, in core-seconds."""
    rates: dict[str, list[float]] = {}
    duration = float(report["config"]["duration"])
    for workload, deadline, _ in queries:
        offered = per_second(report["queries"][workload], duration)
        window = max(1, int(deadline))
        rates[workload] = [statistics.fmean(offered[s - j] if s - j >= 0 else 0.0 for j in range(window))
                           for s in range(len(offered))]
    total = 0.0
    for start in range(0, int(duration), 60):
        peak = {w: max(r[start:start + 60]) for w, r in rates.items()}
        total += executors_needed(queries, peak, model, headroom=0.0) * min(60.0, duration - start)
    return total


def analyse(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """One row per configuration: medians over repetitions of its late shares, held core-seconds, reconfigurations,
    ×fixed-at-peak and ×optimum; the step group's settling."""
    from pacer_bench.tables import Spread

    peak_cost: dict[tuple[str, int], float] = {}
    for run in runs:
        if run.tags.get("name") == "fixed at peak":
            for i, report in enumerate(run.reports):
                peak_cost[(run.group, i)] = float(report["cost"]["allocated_core_s"])
    rows = []
    for run in runs:
        queries = QUERY_SETS.get(run.tags["queries"], ())
        model = {w: (float(v[0]), float(v[1])) for w, v in run.tags["model"].items()}
        late, cost, vs_peak, vs_opt, changes, settle, opt_peak = [], [], [], [], [], [], []
        for i, report in enumerate(run.reports):
            shares = late_share(report)
            late.append(max(shares.values()))
            held = float(report["cost"]["allocated_core_s"])
            cost.append(held)
            vs_peak.append(held / peak_cost[(run.group, i)])
            optimum = optimum_core_s(report, model, queries) if model else math.nan  # none calibrated on Spark
            vs_opt.append(held / optimum)
            opt_peak.append(optimum / peak_cost[(run.group, i)])
            changes.append(float((report.get("scaling") or {}).get("reconfigurations", 0)))
            settle.extend(settling(report) if run.tags["traffic"] == "step" else [])
        rows.append({
            "group": run.group, "config": run.tags["name"], "late_max": Spread.of(late), "allocated_core_s":
            Spread.of(cost), "vs_peak": Spread.of(vs_peak), "vs_optimum": Spread.of(vs_opt),
            "reconfigurations": Spread.of(changes), "optimum_vs_peak": Spread.of(opt_peak),
            "settled": (sum(s["settled"] and s["changes"] <= SETTLE_CHANGES for s in settle), len(settle)),
            "settle_changes_max": max((s["changes"] for s in settle), default=0),
            "late_by_query": {q: Spread.of([late_share(r)[q] for r in run.reports]).median
                              for q in run.report["queries"]},
        })
    return rows


def goal_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary lines of issue 34's goals: met, or by how much not."""
    lines = []
    for row in rows:
        if row["config"] != "deadline":
            continue
        traffic = row["group"].split(" / ")[0]
        late, peak, opt = row["late_max"].median, row["vs_peak"].median, row["vs_optimum"].median
        if row["group"].endswith(SPARK_SET):
            misses = [f"late {late:.2%} > {LATE_LIMIT:.0%}"] if late > LATE_LIMIT else []
            misses += [f"{peak:.3f}× fixed-at-peak's allocated core-s"] if peak >= 1.0 else []
            verdict = "MET" if not misses else "MISSED: " + "; ".join(misses)
            lines.append(f"GOAL {row['group']}: deadline scaler ≤ {LATE_LIMIT:.0%} late with fewer allocated core-s "
                         f"than fixed-at-peak: {verdict} (late {late:.2%}, {peak:.3f}× peak)")
        elif traffic == "wave":
            misses = [f"late {late:.2%} > {LATE_LIMIT:.0%}"] if late > LATE_LIMIT else []
            misses += [f"{peak:.3f}× fixed-at-peak > {PEAK_LIMIT}×"] if peak > PEAK_LIMIT else []
            misses += [f"{opt:.3f}× the optimum > {OPTIMUM_LIMIT}×"] if opt > OPTIMUM_LIMIT else []
            verdict = "MET" if not misses else "MISSED: " + "; ".join(misses)
            lines.append(f"GOAL {row['group']}: deadline scaler, every query ≤ {LATE_LIMIT:.0%} late at ≤ "
                         f"{PEAK_LIMIT}× fixed-at-peak and ≤ {OPTIMUM_LIMIT}× the optimum: {verdict} (late "
                         f"{late:.2%}, {peak:.3f}× peak, {opt:.3f}× optimum; the optimum itself is "
                         f"{row['optimum_vs_peak'].median:.3f}× fixed-at-peak)")
        if traffic == "step":
            settled, total = row["settled"]
            verdict = "MET" if settled == total else f"MISSED: {total - settled} of {total} steps"
            lines.append(f"GOAL {row['group']}: settled (no change for {SETTLED_S:g} s) within {SETTLE_CHANGES} "
                         f"reconfigurations after each step: {verdict} (at most {row['settle_changes_max']} changes)")
    for row in rows:
        if row["config"] == "spark-dynamic":
            lines.append(f"spark-dynamic {row['group']}: late {row['late_max'].median:.2%}, "
                         f"{row['vs_peak'].median:.3f}× fixed-at-peak, {row['vs_optimum'].median:.3f}× optimum")
    return lines


HEADERS = {
    "group": ("traffic / queries", 0), "config": ("config", 0), "late_max": ("late (worst query)", 4),
    "allocated_core_s": ("allocated core-s", 0), "vs_peak": ("×fixed at peak", 3),
    "vs_optimum": ("×optimum", 3), "reconfigurations": ("changes", 0), "settled_text": ("settled steps", 0),
}
LEGEND = (
    "late: share of the worst query's rows that completed past its own deadline (median [min–max] over "
    "repetitions); allocated core-s: core-seconds of executors held (starting ones included: what a cluster bills); "
    "×fixed at peak: over the fixed-at-peak configuration's, same repetition; ×optimum: over the offline optimum "
    "(the fewest executors the rule needs each minute at that minute's highest arrival rate averaged over the "
    "deadline, from the run's own arrivals, no headroom and no start-up lag); changes: reconfigurations; settled "
    f"steps: steps after which the executors held still for {SETTLED_S:g} s within {SETTLE_CHANGES} changes"
)


def figures(runs: Sequence[BenchRun]) -> dict[str, Any]:
    """Per group, executors held over time and late rows over time (first repetition), one line per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pacer_bench.plots import finish, line_style

    out = {}
    for group in dict.fromkeys(r.group for r in runs):
        members = [r for r in runs if r.group == group]
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for i, run in enumerate(members):
            points = executors_over_time(run.report)
            end = float(run.report["duration_s"])
            xs = [t for t, _ in points] + [end]
            ys = [n for _, n in points] + [points[-1][1]]
            top.step(xs, ys, where="post", label=run.tags["name"], **line_style(i))
            late: dict[float, float] = {}
            for q in run.report["queries"].values():
                for row in q["series"]:
                    late[row["t"]] = late.get(row["t"], 0.0) + row.get("late_rows", 0)
            times = sorted(late)
            bottom.plot(times, [late[t] for t in times], label=run.tags["name"], **line_style(i))
        top.set_ylabel("executors held")
        top.grid(alpha=0.3)
        top.legend(fontsize="small")
        slug = group.replace(" / ", "-").replace(", ", "-").replace(" ", "-")
        out[f"executors_{slug}"] = finish(fig, bottom, "seconds", "late rows per interval",
                                          f"autoscale {group}: executors and late rows")
    return out


#: What :func:`raw_runs` leaves out of a report: the bench's per-dataset and per-batch lists (a full simulated
#: autoscale run's JSON is 130 MB with them), which no figure of autoscale's reads.
RAW_DROPPED = ("latencies_s", "latency_rows", "batches")
#: The columns of a query's series :func:`raw_runs` keeps: what :func:`analyse` and the executors plot read.
RAW_SERIES = ("t", "input_rows_per_s", "late_rows")


def raw_runs(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """Every configuration's every repetition as written to ``autoscale-runs.json.gz``: label, group, tags and each
    report less :data:`RAW_DROPPED` and with only :data:`RAW_SERIES` of its series (it keeps what :func:`analyse`
    reads: late shares, allocated core-seconds, the scaling record and each query's per-interval offered rate), so
    the ratios are recomputed from the file alone (:func:`load_raw`, then :func:`analyse`)."""
    def slim(report: Mapping[str, Any]) -> dict[str, Any]:
        bench = {k: v for k, v in (report.get("bench") or {}).items() if k not in RAW_DROPPED}
        queries = {q: {**v, "series": [{k: row[k] for k in RAW_SERIES if k in row} for row in v.get("series", ())]}
                   for q, v in report["queries"].items()}
        return {**report, "bench": bench, "queries": queries}

    return [{"label": r.label, "group": r.group, "baseline": r.baseline, "tags": dict(r.tags),
             "reports": [slim(report) for report in r.reports]} for r in runs]


def load_raw(path: str | Path) -> list[BenchRun]:
    """The runs ``autoscale-runs.json.gz`` holds (:func:`raw_runs`), for :func:`analyse`."""
    import gzip
    import json

    from pacer_bench.tables import BenchRun

    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    return [BenchRun(r["label"], r["reports"][0], baseline=r["baseline"], group=r["group"], tags=r["tags"],
                     repeats=tuple(r["reports"][1:])) for r in doc]


def write_autoscale(out: str | Path, runs: Sequence[BenchRun], *, summary: str, notes: Sequence[str] = (),
                    machine: str | None = None) -> dict[str, Path]:
    """autoscale's outputs: the goal lines, the scaling table and the plots, then every configuration's table; and
    ``autoscale-runs.json.gz`` (:func:`raw_runs`, gzip: 1-2 MB where the full JSON is 130 MB), from which every
    ratio is recomputed."""
    import gzip
    import json

    from pacer_bench.outputs import Section, write_outputs

    rows = analyse(runs)
    shown = []
    for r in rows:
        cells: dict[str, Any] = {"settled_text": f"{r['settled'][0]}/{r['settled'][1]}" if r["settled"][1] else "–"}
        for key, value in r.items():
            if hasattr(value, "median"):
                cells |= {key: value.median, f"{key}_min": value.low, f"{key}_max": value.high}
            else:
                cells.setdefault(key, value)
        shown.append(cells)
    lines = goal_lines(rows)
    columns = [c for c in HEADERS if c != "vs_optimum" or any(math.isfinite(r["vs_optimum"].median) for r in rows)]
    section = Section("Executors and what they cost", shown, columns, HEADERS, text="\n\n".join(lines),
                      legend=LEGEND)
    paths = write_outputs(out, "autoscale", runs, summary=summary, notes=notes, machine=machine, sections=[section],
                          extra={"analysis": [{k: (v.median if hasattr(v, "median") else v) for k, v in r.items()}
                                              for r in rows], "goals": lines}, plots=figures(runs))
    paths["raw"] = Path(out) / "autoscale-runs.json.gz"
    with paths["raw"].open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:  # the same bytes
        fh.write(json.dumps(raw_runs(runs), sort_keys=True).encode())  # for the same runs: no time in the header
    return paths
