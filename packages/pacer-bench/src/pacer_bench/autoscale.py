"""``pacer bench autoscale``: how many executors each scaler holds, and what the deadlines pay for it.

Groups: step (rate ×2 then back), wave, spike and daily (a 3:1 day in one period) traffic, for one query (LR2,
10 s) and three (LR2 5 s, LR3 10 s, CM2 20 s under EDF), every query paced by zStream. Configurations per group:

- *fixed at peak* and *fixed at mean*: the executors the simulator needs to keep the traffic's peak (its mean) rate
  plus the deadline rule's headroom, held constant, on time (:class:`pacer_bench.oracle.Capacity`), held the whole
  run, with no cap;
- *spark-dynamic*: Spark's dynamic allocation (:mod:`pacer.baselines.scaling`) as documented, starting at its
  minimum (``spark.dynamicAllocation.initialExecutors``' default), and *spark-dynamic tuned*, with the timeouts
  shortened for streaming and half the executors per waiting task (:data:`TUNED_DYNAMIC`);
- *dstream-ratio*: Spark Streaming's (DStreams') rule (:mod:`pacer.baselines.dstream_ratio`), and *deadline*: pacer's
  deadline scaler (pacer-scaler), both starting at the peak's executors (what a first deployment sizes: before its
  first batch no scaler has measured anything);
- *cheapest fixed*: the fewest fixed executors that keep every repetition's rows ≤ 1 % late, found by bisection
  over counts, each probe running every repetition's seed (:mod:`pacer_bench.cheapest_fixed`);
- *oracle*: perfect foresight of each repetition's own traffic, window by window (:mod:`pacer_bench.oracle`), played
  by the ``scheduled`` strategy.

The last two need every repetition's seed, so :func:`write_autoscale` runs them once the others ran
(:func:`reference_runs`). Per configuration: late rows per query (against its own deadline), ``allocated_core_s``
(core-seconds of executors held), its ratio to cheapest fixed's, to the oracle's and to fixed at peak's (same
repetition), reconfigurations per minute, and after each step of the step traffic, whether the executors settled
(no change for :data:`SETTLED_S`) and after how many changes.

On Spark (``--runtime spark --master spark://…``, a standalone cluster such as ``pacer cluster up``) the group is one
query under a wave on :data:`SPARK_EXECUTORS` executors of one core: *fixed at peak* holds every one;
*spark-dynamic* is Spark's own dynamic allocation (a session of its own with it on, pacer only watching) and
*deadline* pacer's scaler, both starting there and moving between them. No reference configuration runs there.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacer import QueryRun, RunConfig

if TYPE_CHECKING:
    from pacer_bench.oracle import Capacity
    from pacer_bench.tables import BenchRun

#: The bounds every scaled configuration gets: room above every group's peak need (three queries on a spike need
#: about 130), so no bound makes a scaler miss.
EXECUTORS = (2, 256)
#: Seconds an executor takes to start in the simulation (a container or pod).
EXECUTOR_STARTUP_S = 30.0
#: Partitions per batch: enough for a batch to use every executor.
PARTITIONS = 64
#: Executors settled after a step: no change for this long.
SETTLED_S = 300.0
#: The goals the summary lines judge: every query's late share, allocated core-s over cheapest fixed's and over the
#: oracle's, reconfigurations per minute; and changes after a step.
LATE_LIMIT, CHEAPEST_LIMIT, ORACLE_LIMIT, CHANGES_PER_MIN, SETTLE_CHANGES = 0.01, 0.80, 1.10, 1.0, 3
#: spark-dynamic tuned for streaming: an executor leaves after 15 s unneeded (batches come every few seconds, the
#: default 60 s keeps every one), and half the executors the waiting tasks need are asked for
#: (``spark.dynamicAllocation.executorAllocationRatio``: each batch's tasks in two waves).
TUNED_DYNAMIC = {"idle_timeout_s": 15.0, "allocation_ratio": 0.5}

#: (workload, deadline s, mean rows/s) of the one- and three-query groups.
QUERY_SETS: dict[str, tuple[tuple[str, float, float], ...]] = {
    "1 query": (("lr2", 10.0, 100_000.0),),
    "3 queries": (("lr2", 5.0, 40_000.0), ("lr3", 10.0, 40_000.0), ("cm2", 20.0, 40_000.0)),
}
#: traffic -> (pattern, parameters as shares of the mean rate or seconds, run seconds). daily: a day compressed into
#: the run, from the mean up to 1.5x, down to 0.5x and back (peak to trough 3:1).
TRAFFICS: dict[str, tuple[str, dict[str, float], float]] = {
    "step": ("binary", {"min": 2 / 3, "max": 4 / 3, "period": 1800.0}, 2100.0),  # 300 s still after the last step
    "wave": ("wave", {"min": 0.2, "max": 1.8, "period": 600.0}, 1200.0),
    "spike": ("spike", {"min": 0.5, "spike": 0.4, "period": 300.0}, 1200.0),
    "daily": ("wave", {"min": 0.5, "max": 1.5, "period": 1200.0}, 1200.0),
}
CONFIGS = ("fixed at peak", "fixed at mean", "spark-dynamic", "spark-dynamic tuned", "dstream-ratio", "deadline")
#: The configurations :func:`reference_runs` adds to each simulated group.
REFERENCES = ("cheapest fixed", "oracle")
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


def headroom() -> float:
    """The deadline rule's headroom (pacer-scaler's ``headroom`` default, a share of the rate's work), which fixed at
    peak, fixed at mean and the oracle add to the rate they are sized for."""
    from pacer.plugins import get_plugin_manager

    return float(get_plugin_manager().find("deadline", "scaling").resolve_params({})["headroom"])


def simulate(config: RunConfig) -> dict[str, Any]:
    """``config``'s report on the simulator, with what the bench's tables read (every dataset latency)."""
    from pacer_bench.tables import record_latencies
    from pacer_sim.runtime import SIM_RUNTIME

    result = SIM_RUNTIME.run(config)
    record_latencies(result.report, result.controller)
    return result.report


#: Each query set's :class:`pacer_bench.oracle.Capacity`, probed once per process (constant traffic on seed 7:
#: the plan and the oracle share it).
_CAPACITY: dict[str, Capacity] = {}


def capacity(queries: Sequence[QueryRun], scheduler: str) -> Capacity:
    """The probes of ``queries``' capacity (:class:`pacer_bench.oracle.Capacity`), shared per query set."""
    from pacer_bench.oracle import Capacity

    base = RunConfig(tuple(replace(q, traffic="constant", traffic_params={}) for q in queries), seed=7,
                     scheduler=scheduler, partitions=PARTITIONS, overload="keep")
    key = repr(base.as_dict())
    if key not in _CAPACITY:
        _CAPACITY[key] = Capacity(base, _probe)
    return _CAPACITY[key]


def _probe(config: RunConfig) -> dict[str, Any]:
    """A probe's report (no per-dataset latencies: a probe is judged by its series)."""
    from pacer_sim.runtime import SIM_RUNTIME

    return SIM_RUNTIME.run(config).report


def sized(queries: Sequence[QueryRun], scheduler: str, levels: Sequence[float]) -> list[int]:
    """The executors the simulator needs to keep each constant level × every query's mean × (1 + the headroom) on
    time (the most that helps where none does); the levels found together, lowest first, each from the last."""
    from pacer_bench.oracle import rounded_level

    share = headroom()
    rounded = [rounded_level(level * (1.0 + share)) for level in levels]
    needs = capacity(queries, scheduler).needs(rounded, low=1, high=most_useful(queries))
    return [needs[level] for level in rounded]


def most_useful(queries: Sequence[QueryRun]) -> int:
    """The most executors (of one core) that can make a batch faster: every query's batch on all its partitions at
    once (the bound's most, where that is fewer). Where no count up to it meets a level, it is that level's need."""
    return min(EXECUTORS[1], PARTITIONS * len(queries))


def autoscale_plan(quick: bool, *, simulated: bool = True,
                   executors: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """Every group's configurations (module docstring; the references come later), as
    :class:`pacer_bench.scenarios.Config`'s keywords; ``quick``: one query; not ``simulated``: the standalone
    cluster's group (:func:`spark_plan`, with ``executors``).

    :raises ValueError: pacer-scaler is not installed (the runner reports it as a usage error).
    """
    import importlib.util

    if importlib.util.find_spec("pacer_scaler") is None:
        raise ValueError("autoscale compares pacer's deadline scaler, which is not installed: "
                         "from the checkout, pip install ./strategies/pacer-scaler")
    if not simulated:
        return spark_plan(quick, executors or SPARK_EXECUTORS)
    if executors is not None:
        raise ValueError("--executors sets autoscale's executors on a standalone cluster (--runtime spark --master "
                         "spark://HOST:PORT); the simulated groups size their own")

    configs: list[dict[str, Any]] = []
    sets = {"1 query": QUERY_SETS["1 query"]} if quick else QUERY_SETS
    for set_name, queries in sets.items():
        scheduler = "edf" if len(queries) > 1 else "fifo"
        levels = [1.0, *(max(peak_rate(traffic, r) / r for _, _, r in queries) for traffic in TRAFFICS)]
        mean, *peaks = sized(tuple(QueryRun(w, rate=r, deadline=d, admission="zstream", query_id=w)
                                   for w, d, r in queries), scheduler, levels)
        mean = max(EXECUTORS[0], mean)
        for (traffic, (pattern, _, duration)), peak in zip(TRAFFICS.items(), peaks, strict=True):
            duration = min(duration, 900.0) if quick and traffic != "step" else duration
            runs = tuple(QueryRun(w, traffic=pattern, rate=r, traffic_params=_traffic_params(traffic, r),
                                  admission="zstream", deadline=d, query_id=w) for w, d, r in queries)
            group = f"{traffic} / {set_name}"
            common: dict[str, Any] = {"queries": runs, "duration": duration, "group": group,
                                      "scheduler": scheduler, "partitions": PARTITIONS}
            tags = {"traffic": traffic, "queries": set_name, "peak_executors": peak, "mean_executors": mean}
            scaled: dict[str, Any] = {"executors": EXECUTORS, "executor_startup": EXECUTOR_STARTUP_S}
            configs += [
                {"label": f"{group} / fixed at peak", "cores": peak, "baseline": True,
                 "tags": {**tags, "name": "fixed at peak", "family": "fixed"}, **common},
                {"label": f"{group} / fixed at mean", "cores": mean,
                 "tags": {**tags, "name": "fixed at mean", "family": "fixed"}, **common},
                {"label": f"{group} / spark-dynamic", "scale": "spark-dynamic",
                 "tags": {**tags, "name": "spark-dynamic", "family": "spark-dynamic"}, **scaled, **common},
                {"label": f"{group} / spark-dynamic tuned", "scale": "spark-dynamic", "scale_params": TUNED_DYNAMIC,
                 "tags": {**tags, "name": "spark-dynamic tuned", "family": "spark-dynamic"}, **scaled, **common},
                *({"label": f"{group} / {scale}", "scale": scale, "initial_executors": min(peak, EXECUTORS[1]),
                   "tags": {**tags, "name": scale, "family": scale}, **scaled, **common}
                  for scale in ("dstream-ratio", "deadline")),
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
    tags = {"traffic": "wave", "queries": SPARK_SET, "peak_executors": high, "mean_executors": None}
    return [
        {"label": f"{group} / fixed at peak", "scale": "fixed", "executors": (high, high), "baseline": True,
         "tags": {**tags, "name": "fixed at peak", "family": "fixed"}, **common},
        {"label": f"{group} / spark-dynamic", "scale": "spark-dynamic", "executors": (low, high),
         "tags": {**tags, "name": "spark-dynamic", "family": "spark-dynamic"}, **common},
        {"label": f"{group} / deadline", "scale": "deadline", "executors": (low, high),
         "tags": {**tags, "name": "deadline", "family": "deadline"}, **common},
    ]


# ---------------------------------------------------------------------- the references


def _fixed(config: RunConfig, executors: int) -> RunConfig:
    """``config`` on ``executors`` fixed executors of one core."""
    return replace(config, cores=executors, scale="fixed", scale_params={}, executors=None, initial_executors=None)


def _say(text: str) -> None:
    print(f"pacer bench autoscale: {text}", file=sys.stderr, flush=True)


def reference_runs(runs: Sequence[BenchRun]) -> tuple[list[BenchRun], dict[str, Any]]:
    """Each simulated group's *cheapest fixed* and *oracle* (module docstring), on every repetition's seed and
    traffic as its other configurations ran them; and, per group, the bisection's probes and the oracle's
    timetables."""
    from pacer_bench.cheapest_fixed import cheapest_fixed
    from pacer_bench.oracle import timetable, window_levels
    from pacer_bench.tables import BenchRun

    out: list[BenchRun] = []
    details: dict[str, Any] = {}
    share = headroom()
    for group in dict.fromkeys(r.group for r in runs if r.report.get("simulated")):
        first = next(r for r in runs if r.group == group)
        bases = [_fixed(RunConfig.from_dict(report), 1) for report in first.reports]
        _say(f"{group}: the cheapest fixed count, by bisection over {len(bases)} seed(s)")
        search = cheapest_fixed(lambda n: [simulate(_fixed(b, n)) for b in bases], limit=LATE_LIMIT,  # noqa: B023
                                start=int(first.tags["peak_executors"]))
        _say(f"{group}: the oracle's timetables (capacity probes, then one run per seed)")
        probes = capacity(bases[0].queries, bases[0].scheduler)
        oracle, tables = [], []
        for base in bases:
            levels = window_levels(base, headroom=share)
            needs = probes.needs(levels, low=1, high=most_useful(base.queries))
            tables.append(timetable(levels, needs, bounds=EXECUTORS))
            start = int(tables[-1].split(",")[0].split(":")[1])
            oracle.append(simulate(replace(base, cores=None, scale="scheduled", scale_params={"timetable": tables[-1]},
                                           executors=EXECUTORS, initial_executors=start)
                                   .with_options("sim", executor_startup=EXECUTOR_STARTUP_S)))
        tags = {k: first.tags[k] for k in ("traffic", "queries", "peak_executors", "mean_executors")}
        for name, family, reports in (("cheapest fixed", "fixed", search.reports), ("oracle", "oracle", oracle)):
            label = f"{group} / {name}"
            for i, report in enumerate(reports):
                report["config"]["label"] = label
                report.setdefault("bench", {})["repetition"] = i + 1
            out.append(BenchRun(label, reports[0], group=group, repeats=tuple(reports[1:]),
                                tags={**tags, "name": name, "family": family}))
        details[group] = {"cheapest_fixed": search.as_json(), "oracle_timetables": tables, "headroom": share,
                          "executors_for_level": {f"{level:g}": n for level, n in
                                                  sorted(probes.counts(low=1, high=most_useful(bases[0].queries))
                                                         .items())},
                          "capacity_probes": {f"{n}@{level:g}": late for (n, level), late
                                              in sorted(probes.probes.items())}}
    return out, details


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


def analyse(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """One row per configuration: medians over repetitions of its late shares, held core-seconds, its ratios to
    cheapest fixed's, the oracle's and fixed at peak's (same repetition; nan where the group has none),
    reconfigurations (and per minute); the step group's settling."""
    from pacer_bench.tables import Spread

    reference: dict[tuple[str, str, int], float] = {}
    for run in runs:
        if run.tags.get("name") in ("fixed at peak", *REFERENCES):
            for i, report in enumerate(run.reports):
                reference[(run.tags["name"], run.group, i)] = float(report["cost"]["allocated_core_s"])
    rows = []
    for run in runs:
        late, cost, changes, per_min, settle = [], [], [], [], []
        ratios: dict[str, list[float]] = {"vs_cheapest": [], "vs_oracle": [], "vs_peak": []}
        for i, report in enumerate(run.reports):
            late.append(max(late_share(report).values()))
            held = float(report["cost"]["allocated_core_s"])
            cost.append(held)
            for key, name in (("vs_cheapest", "cheapest fixed"), ("vs_oracle", "oracle"), ("vs_peak", "fixed at peak")):
                ratios[key].append(held / reference[(name, run.group, i)] if (name, run.group, i) in reference
                                   else math.nan)
            count = float((report.get("scaling") or {}).get("reconfigurations", 0))
            changes.append(count)
            per_min.append(count / (float(report["duration_s"]) / 60.0))
            settle.extend(settling(report) if run.tags["traffic"] == "step" else [])
        rows.append({
            "group": run.group, "config": run.tags["name"], "late_max": Spread.of(late),
            "allocated_core_s": Spread.of(cost), **{k: Spread.of(v) for k, v in ratios.items()},
            "reconfigurations": Spread.of(changes), "changes_per_min": Spread.of(per_min),
            "settled": (sum(s["settled"] and s["changes"] <= SETTLE_CHANGES for s in settle), len(settle)),
            "settle_changes_max": max((s["changes"] for s in settle), default=0),
            "late_by_query": {q: Spread.of([late_share(r)[q] for r in run.reports]).median
                              for q in run.report["queries"]},
        })
    return rows


def goal_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary lines of the goals: met, or by how much not; then every other scaler's figures beside."""
    lines = []
    for row in rows:
        if row["config"] != "deadline":
            continue
        traffic = row["group"].split(" / ")[0]
        late, peak = row["late_max"].median, row["vs_peak"].median
        cheap, oracle, per_min = row["vs_cheapest"].median, row["vs_oracle"].median, row["changes_per_min"].median
        if row["group"].endswith(SPARK_SET):
            misses = [f"late {late:.2%} > {LATE_LIMIT:.0%}"] if late > LATE_LIMIT else []
            misses += [f"{peak:.3f}× fixed-at-peak's allocated core-s"] if peak >= 1.0 else []
            verdict = "MET" if not misses else "MISSED: " + "; ".join(misses)
            lines.append(f"GOAL {row['group']}: deadline scaler ≤ {LATE_LIMIT:.0%} late with fewer allocated core-s "
                         f"than fixed-at-peak: {verdict} (late {late:.2%}, {peak:.3f}× peak)")
            continue
        misses = [f"late {late:.2%} > {LATE_LIMIT:.0%}"] if late > LATE_LIMIT else []
        misses += [f"{cheap:.3f}× cheapest fixed > {CHEAPEST_LIMIT}×"] if not cheap <= CHEAPEST_LIMIT else []
        misses += [f"{oracle:.3f}× the oracle > {ORACLE_LIMIT}×"] if not oracle <= ORACLE_LIMIT else []
        misses += [f"{per_min:.2f} reconfigurations/min > {CHANGES_PER_MIN:g}"] if per_min > CHANGES_PER_MIN else []
        verdict = "MET" if not misses else "MISSED: " + "; ".join(misses)
        lines.append(f"GOAL {row['group']}: deadline scaler, every query ≤ {LATE_LIMIT:.0%} late at ≤ "
                     f"{CHEAPEST_LIMIT}× cheapest fixed's allocated core-s and ≤ {ORACLE_LIMIT}× the oracle's, ≤ "
                     f"{CHANGES_PER_MIN:g} reconfiguration/min: {verdict} (late {late:.2%}, {cheap:.3f}× cheapest "
                     f"fixed, {oracle:.3f}× oracle, {per_min:.2f}/min)")
        if traffic == "step":
            settled, total = row["settled"]
            verdict = "MET" if settled == total else f"MISSED: {total - settled} of {total} steps"
            lines.append(f"GOAL {row['group']}: settled (no change for {SETTLED_S:g} s) within {SETTLE_CHANGES} "
                         f"reconfigurations after each step: {verdict} (at most {row['settle_changes_max']} changes)")
    for row in rows:
        if row["config"] not in ("deadline", "fixed at peak", *REFERENCES) and not row["group"].endswith(SPARK_SET):
            lines.append(f"{row['config']} {row['group']}: late {row['late_max'].median:.2%}, "
                         f"{row['vs_cheapest'].median:.3f}× cheapest fixed, {row['vs_oracle'].median:.3f}× oracle, "
                         f"{row['changes_per_min'].median:.2f} reconfigurations/min")
    return lines


HEADERS = {
    "group": ("traffic / queries", 0), "config": ("config", 0), "late_max": ("late (worst query)", 4),
    "allocated_core_s": ("allocated core-s", 0), "vs_cheapest": ("×cheapest fixed", 3), "vs_oracle": ("×oracle", 3),
    "vs_peak": ("×fixed at peak", 3), "reconfigurations": ("changes", 0), "changes_per_min": ("changes/min", 2),
    "settled_text": ("settled steps", 0),
}
LEGEND = (
    "late: share of the worst query's rows that completed past its own deadline (median [min–max] over "
    "repetitions); allocated core-s: core-seconds of executors held (starting ones included: what a cluster bills); "
    "×cheapest fixed, ×oracle, ×fixed at peak: over that configuration's allocated core-s, same repetition "
    f"(cheapest fixed: the fewest fixed executors that keep every repetition ≤ {LATE_LIMIT:.0%} late, by "
    "bisection; oracle: perfect foresight of the repetition's traffic, the fewest executors each 10 s window needs "
    "at its rate plus the deadline rule's headroom, found by running the simulator, each rise asked for a start-up "
    "ahead); changes/min: reconfigurations per minute; changes: "
    f"reconfigurations; settled steps: steps after which the executors held still for {SETTLED_S:g} s within "
    f"{SETTLE_CHANGES} changes"
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


def slim_report(report: Mapping[str, Any], series: Sequence[str] = RAW_SERIES) -> dict[str, Any]:
    """``report`` less :data:`RAW_DROPPED` and with only the ``series`` columns of each query's series (none: no
    series)."""
    bench = {k: v for k, v in (report.get("bench") or {}).items() if k not in RAW_DROPPED}
    queries = {q: {**v, "series": [{k: row[k] for k in series if k in row} for row in v.get("series", ())]
                   if series else []} for q, v in report["queries"].items()}
    return {**report, "bench": bench, "queries": queries}


def raw_runs(runs: Sequence[BenchRun]) -> list[dict[str, Any]]:
    """Every configuration's every repetition as written to ``autoscale-runs.json.gz``: label, group, tags and each
    report as :func:`slim_report` leaves it (what :func:`analyse` reads: late shares, allocated core-seconds, the
    scaling record and each query's per-interval offered rate), so every figure is recomputed from the file alone
    (:func:`load_raw`, then :func:`analyse`)."""
    return [{"label": r.label, "group": r.group, "baseline": r.baseline, "tags": dict(r.tags),
             "reports": [slim_report(report) for report in r.reports]} for r in runs]


def load_raw(path: str | Path) -> list[BenchRun]:
    """The runs ``autoscale-runs.json.gz`` (:func:`raw_runs`) or ``autoscale.json`` (whose reports have no series:
    the steps' settling needs the former) holds, for :func:`analyse`."""
    import gzip
    import json

    from pacer_bench.tables import BenchRun

    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return [BenchRun(r["label"], r["reports"][0], baseline=r["baseline"], group=r["group"], tags=r["tags"],
                             repeats=tuple(r["reports"][1:])) for r in json.load(fh)]
    return [BenchRun(r["label"], r["report"], baseline=r["baseline"], group=r["group"], tags=r["tags"],
                     repeats=tuple(r["repeats"])) for r in json.loads(path.read_text())["runs"]]


def write_autoscale(out: str | Path, runs: Sequence[BenchRun], *, summary: str, notes: Sequence[str] = (),
                    machine: str | None = None) -> dict[str, Path]:
    """autoscale's outputs, once :func:`reference_runs` ran each simulated group's cheapest fixed and oracle: the
    goal lines, the scaling table and the plots, then every configuration's table; ``autoscale.json`` with every
    repetition's report less its per-dataset lists and series (each ratio is recomputed from it, :func:`load_raw`),
    the analysis, the goals and the references' probes and timetables; and ``autoscale-runs.json.gz``
    (:func:`raw_runs`: with the series, for the plots and the steps' settling)."""
    import gzip
    import json

    from pacer_bench.outputs import Section, write_outputs

    added, references = reference_runs(runs)
    runs = [run for group in dict.fromkeys(r.group for r in runs)
            for run in (*(r for r in runs if r.group == group), *(r for r in added if r.group == group))]
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
    columns = [c for c in HEADERS if not c.startswith("vs_") or any(math.isfinite(r[c].median) for r in rows)]
    section = Section("Executors and what they cost", shown, columns, HEADERS, text="\n\n".join(lines),
                      legend=LEGEND)
    paths = write_outputs(out, "autoscale", runs, summary=summary, notes=notes, machine=machine, sections=[section],
                          extra={"analysis": [{k: (v.median if hasattr(v, "median") else v) for k, v in r.items()}
                                              for r in rows], "goals": lines, "references": references},
                          plots=figures(runs), report_json=lambda report: slim_report(report, ()))
    paths["raw"] = Path(out) / "autoscale-runs.json.gz"
    with paths["raw"].open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:  # the same bytes
        fh.write(json.dumps(raw_runs(runs), sort_keys=True).encode())  # for the same runs: no time in the header
    return paths
