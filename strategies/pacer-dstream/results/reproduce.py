"""Simulated evidence for pacer-dstream (and pacer-lmstream) placement: dStream's rate sweep, and dStream under load.

Every figure is *simulated* (``pacer_sim``).

**Rate sweep** (64 KB/s to 16 MB/s): one dataset (one second of constant traffic) per micro-batch, so every
placement processes identical batches and average processing times compare directly; 2 cores, 2 partitions,
1 modelled GPU, seed 3, 60 s of traffic, the first ``WARM_UP`` batches dropped (dStream explores a new bucket in
its first batches). The Controller's overload policy is ``keep`` (pacer_sim's default) so that no dataset of an
overloaded baseline is shed: the sweep measures processing, not latency. Claim: after warm-up, average processing time
<= 1.05 x the better of cpu-only and gpu-only at every rate, with the GPU share of operators rising with the rate
(dStream Fig. 11). lr1's 16 MB/s row is left out: one 16 MB batch of the superlinear self-join takes minutes of
simulated time on either device, so fewer than ``WARM_UP`` batches finish.

**Under load** (issue 13): lr3, random traffic at 1 000 and 40 000 rows/s, asap admission (Spark's default
trigger), 1 modelled GPU, 600 s, seeds 23 and 5: what ``pacer sim --workload lr3 --traffic random --rate 40000
--placement dstream --gpus 1 --duration 600 --seed 23 --overload keep --gpu-profile builtin`` runs: nothing is shed, the conditions
issue 13 was measured in (``pacer sim`` sheds under overload unless told ``--overload keep``). Claim: dStream's average processing time per batch <= 1.05 x the better single device's (cpu-only,
gpu-only, same seed), over all its batches and over the batches that explored nothing.

Writes one ``pacer.report/1`` JSON per configuration (with an ``evidence`` section) into this folder
(lmstream's sweep into ``pacer-lmstream/results/``) and prints the READMEs' tables::

    python strategies/pacer-dstream/results/reproduce.py                 # both parts, dstream and lmstream
    python strategies/pacer-dstream/results/reproduce.py --only dstream  # leave pacer-lmstream's files alone
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacer import AdmissionDecision, StrategyContext, StrategyInfo, get_plugin_manager, hookimpl
from pacer.report import write_report

HERE = Path(__file__).resolve().parent
OUT = {"lmstream": HERE.parents[1] / "pacer-lmstream" / "results"}  # elsewhere: this folder
RATES = (64e3, 256e3, 1e6, 4e6, 16e6)
WORKLOADS = ("lr1", "lr2", "lr3", "cm1", "cm2")
SKIP = {("lr1", 16e6)}
BASELINES = ("cpu-only", "gpu-only")
STRATEGY_PARAMS: dict[str, dict[str, Any]] = {"dstream": {}, "lmstream": {"async_regression": False}}
WARM_UP = 10
DURATION = 60.0
SEED = 3
BOUND = 1.05
OVERLOAD = "keep"  # the Controller drops nothing under overload: every placement processes all the data
LOAD_WORKLOAD = "lr3"
LOAD_RATES = (1_000.0, 40_000.0)  # rows/s
LOAD_SEEDS = (23, 5)
LOAD_DURATION = 600.0
PLUGINS = ["dstream", "lmstream"]  # only these entry points (and core's baselines): others' plugins cannot break a run


class OneDatasetPerBatch:
    """Admission ``one-dataset``: every micro-batch is exactly the oldest buffered dataset."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        # a measuring device (maxFilesPerTrigger=1), not a pacer admission: it never hands over to catch-up
        return [StrategyInfo("one-dataset", frozenset({"admission"}), "one dataset per micro-batch", catch_up=False)]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext) -> AdmissionDecision | None:
        return AdmissionDecision(1, reason="one dataset") if ctx.chosen == "one-dataset" else None


@dataclass(frozen=True)
class Point:
    """One placement at one rate, after warm-up."""

    processing_s: float
    gpu_share: float
    batches: int


def run(workload: str, placement: str, rate: float, *, write: bool = True) -> Point:
    """Simulate one configuration; write its report (with an ``evidence`` section) unless ``write`` is False."""
    from pacer_sim import Simulation
    from pacer_workloads import WORKLOADS as SPECS
    from pacer_workloads import bytes_per_row

    pm = get_plugin_manager(allowed=PLUGINS)
    pm.register(OneDatasetPerBatch())
    sim = Simulation(cores=2, gpus=1, seed=SEED, plugin_manager=pm, monitor_interval=10.0, overload=OVERLOAD)
    qid = sim.add_query(
        workload, rate=rate / bytes_per_row(SPECS[workload].stream), admission="one-dataset", placement=placement,
        placement_params=STRATEGY_PARAMS.get(placement, {}), duration=DURATION, partitions=2,
        traffic_params={"noise": 0.0},  # identical batches: constant traffic's exact rows, not Poisson around them
    )
    report = sim.run(DURATION)
    after = sim.controller.reports(qid)[WARM_UP:]
    if not after:
        raise RuntimeError(f"{workload} {placement} at {rate:g} B/s: no batch after the {WARM_UP} warm-up batches")
    point = Point(
        sum(r.processing_s for r in after) / len(after),
        sum(r.placement.gpu_ratio for r in after if r.placement) / len(after),
        len(after),
    )
    if write:
        report["evidence"] = {
            "command": "python strategies/pacer-dstream/results/reproduce.py", "warm_up_batches": WARM_UP,
            "processing_s_avg_after_warm_up": point.processing_s, "gpu_share_after_warm_up": point.gpu_share,
            "batches_after_warm_up": point.batches,
        }
        write_report(report, OUT.get(placement, HERE) / f"sweep-{workload}-{rate / 1e3:g}KBps-{placement}.json")
    return point


def sweep(
    workloads: Sequence[str] = WORKLOADS, *, write: bool = True, strategies: Sequence[str] = tuple(STRATEGY_PARAMS)
) -> dict[tuple[str, float], dict[str, Point]]:
    """(workload, rate) -> placement -> point, for both baselines and ``strategies``."""
    out: dict[tuple[str, float], dict[str, Point]] = {}
    for workload, rate in itertools.product(workloads, RATES):
        if (workload, rate) not in SKIP:
            names = (*BASELINES, *strategies)
            out[(workload, rate)] = {name: run(workload, name, rate, write=write) for name in names}
    return out


def failures(points: Mapping[tuple[str, float], Mapping[str, Point]], strategy: str) -> list[str]:
    """Where the claim does not hold for ``strategy``: over the bound, or a GPU share that falls with the rate."""
    bad = []
    for (workload, rate), p in points.items():
        best = min(p[b].processing_s for b in BASELINES)
        if p[strategy].processing_s > BOUND * best:
            bad.append(f"{workload} {rate / 1e3:g} KB/s: {p[strategy].processing_s / best:.3f}x")
    for workload in {w for w, _ in points}:
        shares = [p[strategy].gpu_share for (w, _), p in points.items() if w == workload]
        if any(b < a - 1e-9 for a, b in itertools.pairwise(shares)) or not shares[-1] > shares[0]:
            bad.append(f"{workload}: GPU share {[round(s, 2) for s in shares]} does not rise with the rate")
    return bad


def table(points: Mapping[tuple[str, float], Mapping[str, Point]], strategy: str) -> str:
    """The README table for ``strategy``."""
    lines = [
        f"| workload | rate | cpu-only s | gpu-only s | {strategy} s | {strategy} / best | ≤ {BOUND}x "
        f"| {strategy} GPU share | cpu-only / gpu-only GPU share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (workload, rate), p in points.items():
        cpu, gpu, value = p["cpu-only"].processing_s, p["gpu-only"].processing_s, p[strategy].processing_s
        ratio = value / min(cpu, gpu)
        lines.append(
            f"| {workload} | {rate / 1e3:g} KB/s | {cpu:.3f} | {gpu:.3f} | {value:.3f} | {ratio:.3f} "
            f"| {'yes' if ratio <= BOUND else '**no**'} | {p[strategy].gpu_share:.2f} "
            f"| {p['cpu-only'].gpu_share:.2f} / {p['gpu-only'].gpu_share:.2f} |"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class LoadPoint:
    """One placement under load: average processing time per batch, over all batches and over those that explored
    nothing (a dStream placement note starts with ``exploring`` when its plan uses an entry never measured in the
    batch's bucket; the baselines never explore)."""

    processing_s: float
    exploited_s: float
    batches: int
    exploring: int
    shed: int
    gpu_share: float
    s_per_mb: float


def under_load(
    rate: float, placement: str, seed: int, *, write: bool = True, params: Mapping[str, Any] | None = None,
    overload: str = OVERLOAD,
) -> LoadPoint:
    """lr3, random traffic at ``rate`` rows/s, asap admission, 1 GPU, 600 s: ``pacer sim``'s defaults otherwise.

    :param overload: the Controller's policy; ``keep`` (default) sheds nothing, so every placement processes all
        the data, as when issue 13 was measured (``shed``: ``pacer sim``'s default).
    """
    from pacer_sim import Simulation

    sim = Simulation(
        cores=2, gpus=1, seed=seed, plugin_manager=get_plugin_manager(allowed=PLUGINS), monitor_interval=10.0,
        overload=overload,
    )
    qid = sim.add_query(
        LOAD_WORKLOAD, traffic="random", rate=rate, admission="asap", placement=placement,
        placement_params=dict(params or {}), duration=LOAD_DURATION, partitions=2,
    )
    report = sim.run(LOAD_DURATION)
    batches = sim.controller.reports(qid)
    if not batches:
        raise RuntimeError(f"{LOAD_WORKLOAD} {placement} at {rate:g} rows/s, seed {seed}: no batch completed")
    exploited = [r for r in batches if not (r.placement and r.placement.note.startswith("exploring"))]
    point = LoadPoint(
        processing_s=sum(r.processing_s for r in batches) / len(batches),
        exploited_s=sum(r.processing_s for r in exploited) / len(exploited) if exploited else float("inf"),
        batches=len(batches), exploring=len(batches) - len(exploited),
        shed=int(report["queries"][qid].get("datasets_shed", 0)),
        gpu_share=sum(r.placement.gpu_ratio for r in batches if r.placement) / len(batches),
        s_per_mb=sum(r.processing_s for r in batches) / max(1e-9, sum(r.bytes for r in batches) / 1e6),
    )
    if write:
        report["evidence"] = {
            "command": "python strategies/pacer-dstream/results/reproduce.py --only dstream",
            "processing_s_avg": point.processing_s, "processing_s_avg_without_exploring_batches": point.exploited_s,
            "batches": point.batches, "exploring_batches": point.exploring, "gpu_share": point.gpu_share,
            "processing_s_per_mb": point.s_per_mb, "datasets_shed": point.shed,
        }
        name = f"load-{LOAD_WORKLOAD}-{rate:g}rps-seed{seed}-{placement}.json"
        write_report(report, HERE / name)
    return point


def load_points(
    rates: Sequence[float] = LOAD_RATES, seeds: Sequence[int] = LOAD_SEEDS, *, write: bool = True
) -> dict[tuple[float, int], dict[str, LoadPoint]]:
    """(rate, seed) -> placement -> point, for cpu-only, gpu-only and dstream."""
    return {
        (rate, seed): {name: under_load(rate, name, seed, write=write) for name in (*BASELINES, "dstream")}
        for rate, seed in itertools.product(rates, seeds)
    }


def load_ratios(p: Mapping[str, LoadPoint]) -> tuple[float, float]:
    """dStream's processing time over the better single device's: all batches, and without exploring batches."""
    best = min(p[b].processing_s for b in BASELINES)
    return p["dstream"].processing_s / best, p["dstream"].exploited_s / best


def load_table(points: Mapping[tuple[float, int], Mapping[str, LoadPoint]]) -> str:
    """The README table of the under-load runs."""
    lines = [
        "| rate | seed | cpu-only s | gpu-only s | dstream s | dstream / best | without exploring batches "
        "| exploring / batches | dstream GPU share | s per MB: dstream / best |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (rate, seed), p in points.items():
        ratio, exploited = load_ratios(p)
        d = p["dstream"]
        lines.append(
            f"| {rate:,.0f} rows/s | {seed} | {p['cpu-only'].processing_s:.3f} | {p['gpu-only'].processing_s:.3f} "
            f"| {d.processing_s:.3f} | {ratio:.3f} | {exploited:.3f} | {d.exploring} / {d.batches} | {d.gpu_share:.2f} "
            f"| {d.s_per_mb / min(p[b].s_per_mb for b in BASELINES):.3f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=tuple(STRATEGY_PARAMS), help="run (and write) this strategy's results only")
    parser.add_argument("--part", choices=("sweep", "load"), help="run one part only")
    args = parser.parse_args(argv)
    strategies = (args.only,) if args.only else tuple(STRATEGY_PARAMS)
    if args.part in (None, "sweep"):
        points = sweep(strategies=strategies)
        for strategy in strategies:
            bad = failures(points, strategy)
            print(f"\n### {strategy} rate sweep (simulated)\n\n{table(points, strategy)}\n")
            print(f"claim for {strategy}: " + ("holds at every rate" if not bad else "fails: " + "; ".join(bad)))
    if args.part in (None, "load") and "dstream" in strategies:
        loads = load_points()
        print(f"\n### dstream under load (simulated)\n\n{load_table(loads)}\n")
        over = [f"{r:g} rows/s seed {s}" for (r, s), p in loads.items() if max(load_ratios(p)) > BOUND]
        print("claim under load: " + ("holds" if not over else "fails at " + ", ".join(over)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
