"""Simulated evidence for pacer-fixedpoint: Das §5.2.2 (sinusoidal rate) and §3.2 (superlinear LR1 join).

Every figure is *simulated* (``pacer_sim``). Runs each configuration through the simulator's Python
API, writes one ``pacer.report/1`` JSON per configuration next to this file and prints the README's
Markdown tables::

    python strategies/pacer-fixedpoint/results/reproduce.py            # everything (~1 min on 2 cores)
    python strategies/pacer-fixedpoint/results/reproduce.py --only lr1

Experiments
- ``sinusoidal``: LR2 (a windowed aggregation, Das's "Reduce") under rate(t) = mid + amp·sin(2πt/60 s)
  with amp = 0.73·mid (Das's 1 to 6.4 MB/s: (6.4 - 1) / (6.4 + 1)); fixed-point against a sweep of static
  intervals in the same run, at several mid rates. Claim: average latency within 1.2x the best static.
- ``lr1``: the superlinear LR1 window self-join at constant rates; static intervals above the stable
  region diverge, fixed-point stays bounded. A run *diverges* when its max latency over the last tenth
  of the run (drain included) exceeds 2x that over the first tenth
  (``pacer.report.max_latency_trend_ms``).
- ``overload``: LR1 beyond capacity (2000 rows/s: even 1 s batches take > 1 s), with the opt-in
  overload policies; shed and paused admissions are counted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacer.report import max_latency_trend_ms, write_report
from pacer_sim import Simulation

HERE = Path(__file__).resolve().parent
SEED = 7
DURATION = 300.0
MONITOR = 10.0  # seconds per series row: keeps reports small
MAX_BYTES = 200_000
DAS_AMPLITUDE = (6.4 - 1.0) / (6.4 + 1.0)
SINUSOIDAL_RATES = (1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 8000.0)
SINUSOIDAL_STATIC = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
LR1_RATES = (1000.0, 1250.0, 1500.0)
LR1_STATIC = (1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0)
DIVERGES = 2.0  # last-tenth / first-tenth max latency above which a run is called divergent
ADMISSION_BASIS = {"interval_basis": "admission"}


@dataclass(frozen=True)
class Run:
    """One configuration: a single query on 2 cores, seed 7, 300 s of traffic."""

    name: str
    workload: str
    traffic: str
    rate: float
    admission: str
    params: Mapping[str, Any] = field(default_factory=dict)
    traffic_params: Mapping[str, float] = field(default_factory=dict)


def execute(run: Run) -> dict[str, Any]:
    """Simulate ``run``; return its report with an ``evidence`` section (Das's batch latency, strategy counters)."""
    sim = Simulation(cores=2, seed=SEED, monitor_interval=MONITOR)
    qid = sim.add_query(
        run.workload, traffic=run.traffic, rate=run.rate, traffic_params=dict(run.traffic_params),
        admission=run.admission, admission_params=dict(run.params), duration=DURATION,
    )
    report: dict[str, Any] = sim.run(DURATION)
    batches = sim.controller.reports(qid)
    state = sim.controller.queries[qid].states.get(run.admission)
    first, last = max_latency_trend_ms(report, qid)
    report["evidence"] = {
        "name": run.name,
        "command": "python strategies/pacer-fixedpoint/results/reproduce.py",
        # Das §5.1: latency of a batch = its interval + queueing + processing, averaged over batches
        "das_batch_latency_ms_avg": 1000.0 * sum(b.interval_s + b.queueing_s + b.processing_s for b in batches)
        / max(1, len(batches)),
        "max_latency_trend_ms": [first, last],
        "branches": dict(getattr(state, "branches", {})),
        "shed_datasets": getattr(state, "shed_datasets", 0),
        "paused_admissions": getattr(state, "paused_admissions", 0),
    }
    query = report["queries"][qid]
    while len(json.dumps(report)) > MAX_BYTES and len(query["series"]) > 1:
        query["series"] = query["series"][::2]  # thin long (divergent, long-draining) runs
    write_report(report, HERE / f"{run.name}.json")
    return report


def _query(report: Mapping[str, Any]) -> dict[str, Any]:
    query: dict[str, Any] = next(iter(report["queries"].values()))
    return query


def _trend(report: Mapping[str, Any]) -> float:
    first, last = report["evidence"]["max_latency_trend_ms"]
    return float(last / first) if first > 0 else 1.0


def sinusoidal_runs() -> list[Run]:
    runs = []
    for rate in SINUSOIDAL_RATES:
        wave = {"amp": DAS_AMPLITUDE * rate, "period": 60.0}
        tag = f"sinusoidal-lr2-{rate:g}"
        runs += [Run(f"{tag}-static-{s:g}", "lr2", "sinusoidal", rate, "static", {"interval": s}, wave)
                 for s in SINUSOIDAL_STATIC]
        runs.append(Run(f"{tag}-fixed-point", "lr2", "sinusoidal", rate, "fixed-point", {}, wave))
        runs.append(Run(f"{tag}-fixed-point-admission-basis", "lr2", "sinusoidal", rate, "fixed-point",
                        ADMISSION_BASIS, wave))
    return runs


def sinusoidal_table(reports: Mapping[str, dict[str, Any]]) -> str:
    lines = [
        "| mid rate rows/s (peak) | best static (of 1-10 s) avg ms | fixed-point avg ms | ratio | p95 ms static / fp "
        "| Das batch latency ms static / fp | fp interval_basis=admission avg ms (ratio) | ≤ 1.2x |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rate in SINUSOIDAL_RATES:
        tag = f"sinusoidal-lr2-{rate:g}"
        statics = {s: _query(reports[f"{tag}-static-{s:g}"]) for s in SINUSOIDAL_STATIC}
        best_s = min(statics, key=lambda s: statics[s]["latency_ms"]["avg"])
        best, fp = statics[best_s], _query(reports[f"{tag}-fixed-point"])
        adm = _query(reports[f"{tag}-fixed-point-admission-basis"])
        ratio = fp["latency_ms"]["avg"] / best["latency_ms"]["avg"]
        das = (reports[f"{tag}-static-{best_s:g}"]["evidence"]["das_batch_latency_ms_avg"],
               reports[f"{tag}-fixed-point"]["evidence"]["das_batch_latency_ms_avg"])
        lines.append(
            f"| {rate:g} ({rate * (1 + DAS_AMPLITUDE):.0f}) | {best['latency_ms']['avg']:.0f} ({best_s:g} s) "
            f"| {fp['latency_ms']['avg']:.0f} | {ratio:.2f} | {best['latency_ms']['p95']:.0f} / {fp['latency_ms']['p95']:.0f} "
            f"| {das[0]:.0f} / {das[1]:.0f} "
            f"| {adm['latency_ms']['avg']:.0f} ({adm['latency_ms']['avg'] / best['latency_ms']['avg']:.2f}) "
            f"| {'yes' if ratio <= 1.2 else '**no**'} |"
        )
    return "\n".join(lines)


def lr1_runs() -> list[Run]:
    runs = []
    for rate in LR1_RATES:
        tag = f"lr1-{rate:g}"
        runs += [Run(f"{tag}-static-{s:g}", "lr1", "constant", rate, "static", {"interval": s}) for s in LR1_STATIC]
        runs.append(Run(f"{tag}-asap", "lr1", "constant", rate, "asap"))
        runs.append(Run(f"{tag}-fixed-point", "lr1", "constant", rate, "fixed-point"))
        runs.append(Run(f"{tag}-fixed-point-admission-basis", "lr1", "constant", rate, "fixed-point", ADMISSION_BASIS))
    return runs


def _cell(report: Mapping[str, Any]) -> str:
    q, trend = _query(report), _trend(report)
    verdict = "**diverges**" if trend > DIVERGES else "bounded"
    return f"{q['latency_ms']['avg'] / 1000:.1f} s, ×{trend:.1f} {verdict}"


def lr1_table(reports: Mapping[str, dict[str, Any]]) -> str:
    heads = [f"static {s:g} s" for s in LR1_STATIC] + ["asap", "fixed-point", "fp admission basis"]
    lines = ["| rate rows/s | " + " | ".join(heads) + " |", "|---" * (len(heads) + 1) + "|"]
    for rate in LR1_RATES:
        tag = f"lr1-{rate:g}"
        names = [f"{tag}-static-{s:g}" for s in LR1_STATIC] + [f"{tag}-asap", f"{tag}-fixed-point",
                                                               f"{tag}-fixed-point-admission-basis"]
        lines.append(f"| {rate:g} | " + " | ".join(_cell(reports[n]) for n in names) + " |")
    return "\n".join(lines)


OVERLOAD: tuple[tuple[str, dict[str, Any]], ...] = (("off", {}), ("shed", {"overload": "shed", "max_buffer_s": 10.0}),
            ("pause", {"overload": "pause", "max_buffer_s": 10.0}))


def overload_runs() -> list[Run]:
    return [Run(f"overload-lr1-2000-{label}", "lr1", "constant", 2000.0, "fixed-point", params)
            for label, params in OVERLOAD]


def overload_table(reports: Mapping[str, dict[str, Any]]) -> str:
    lines = ["| overload policy | avg latency s | max latency s | trend (last / first tenth) | datasets in / processed "
             "/ shed | paused admissions |", "|---|---|---|---|---|---|"]
    for label, _ in OVERLOAD:
        r = reports[f"overload-lr1-2000-{label}"]
        q = _query(r)
        lines.append(
            f"| {label} | {q['latency_ms']['avg'] / 1000:.1f} | {q['latency_ms']['max'] / 1000:.1f} | ×{_trend(r):.1f} "
            f"| {q['datasets_in']} / {q['datasets_processed']} / {q['datasets_shed']} "
            f"| {r['evidence']['paused_admissions']} |"
        )
    return "\n".join(lines)


OMEGA_INTERVALS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0)


def omega_table() -> str:
    """ω(x)/x of LR1 from the cost model (noise 0, 2 cores): Type-I exists where it is <= ρ, static x is stable where < 1."""
    from pacer import Dataset, MicroBatch
    from pacer_sim import CostModel
    from pacer_sim.costs import batch_work
    from pacer_workloads import bytes_per_row, make_query

    model, spec, per_row = CostModel(noise=0.0), make_query("lr1", query_id="q"), bytes_per_row("linear_road")
    lines = ["| rate rows/s | " + " | ".join(f"x = {x:g} s" for x in OMEGA_INTERVALS) + " |",
             "|---" * (len(OMEGA_INTERVALS) + 1) + "|"]
    for rate in LR1_RATES:
        cells = []
        for x in OMEGA_INTERVALS:
            rows = round(rate * x)
            batch = MicroBatch("q#1", "q", 1, (Dataset("d", 0.0, round(rows * per_row), rows),), 0.0)
            cells.append(f"{batch_work(model, spec, batch, gpus=0, seed=SEED).alone_s(2) / x:.2f}")
        lines.append(f"| {rate:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


EXPERIMENTS: dict[str, tuple[Callable[[], list[Run]], Callable[[Mapping[str, dict[str, Any]]], str]]] = {
    "sinusoidal": (sinusoidal_runs, sinusoidal_table),
    "lr1": (lr1_runs, lambda reports: f"{lr1_table(reports)}\n\nω(x)/x (cost model):\n\n{omega_table()}"),
    "overload": (overload_runs, overload_table),
}


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(EXPERIMENTS), action="append", help="run only these experiments")
    args = parser.parse_args(list(argv) if argv is not None else None)
    logging.getLogger("pacer").setLevel(logging.ERROR)  # the shed policy warns once per shed
    for name in args.only or list(EXPERIMENTS):
        build, table = EXPERIMENTS[name]
        reports = {run.name: execute(run) for run in build()}
        print(f"\n### {name} (simulated)\n\n{table(reports)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
