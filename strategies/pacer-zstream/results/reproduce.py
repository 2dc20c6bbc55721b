"""Simulated evidence for pacer-zstream: three queries with different deadlines under binary bursts.

Every figure is *simulated* (``pacer_sim``). One ``pacer.report/1`` JSON per configuration is written
next to this file, and the README's Markdown tables are printed::

    python strategies/pacer-zstream/results/reproduce.py

Scenario (as pacer-bench's ``multi-query``): lr2, lr3 and cm2 with deadlines 5, 10 and 20 s on 2 cores,
each fed binary traffic that toggles between 3000 and 200 rows/s every 15 s (period 30 s), 300 s.
Baselines are Spark's processing-time trigger with FIFO (and FAIR) scheduling: with each query's
trigger equal to its deadline (zStream's own comparison: the trigger interval is the latency target),
and with one 10 s trigger for every query. Claim: EDF p95 latency <= 0.8 x FIFO with static triggers,
per query, and fewer deadline misses.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacer.report import write_report
from pacer_sim import Simulation

HERE = Path(__file__).resolve().parent
DURATION = 300.0
QUERIES = (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
BURSTS = {"min": 200.0, "max": 3000.0, "period": 30.0}
MEAN_RATE = 1600.0
BASELINE = "fifo + static trigger = deadline"
HEADLINE = "edf + zstream"
ROBUSTNESS_SEEDS = (1, 2, 3)


@dataclass(frozen=True)
class Config:
    """One configuration: a scheduler for all three queries and an admission for each."""

    label: str
    scheduler: str
    admission: str
    trigger: float | None = None  # static trigger for every query; None: each query's deadline
    scheduler_params: Mapping[str, Any] = field(default_factory=dict)

    def file(self, seed: int) -> Path:
        stem = self.label.replace(" + ", "-").replace(" = ", "-").replace(" ", "-").replace("=", "")
        return HERE / (f"{stem}.json" if seed == 7 else f"{stem}-seed{seed}.json")


CONFIGS = (
    Config(BASELINE, "fifo", "static"),
    Config("fair + static trigger = deadline", "fair", "static"),
    Config("fifo + static 10 s", "fifo", "static", trigger=10.0),
    Config(HEADLINE, "edf", "zstream"),
    Config("edf preempt + zstream", "edf", "zstream", scheduler_params={"preempt": True}),
    Config("rdas + zstream", "rdas", "zstream"),
    Config("fifo + zstream", "fifo", "zstream"),
)


def run(config: Config, seed: int = 7) -> dict[str, Any]:
    """Simulate ``config``; write and return its report."""
    sim = Simulation(cores=2, seed=seed, scheduler=config.scheduler, scheduler_params=dict(config.scheduler_params),
                     monitor_interval=10.0)
    for workload, deadline in QUERIES:
        params = {"interval": config.trigger or deadline} if config.admission == "static" else {}
        sim.add_query(workload, traffic="binary", rate=MEAN_RATE, traffic_params=BURSTS, admission=config.admission,
                      admission_params=params, deadline=deadline, duration=DURATION)
    report: dict[str, Any] = sim.run(DURATION)
    report["evidence"] = {"name": config.label, "command": "python strategies/pacer-zstream/results/reproduce.py"}
    write_report(report, config.file(seed))
    return report


def _figures(report: Mapping[str, Any], key: str) -> list[float]:
    if key == "miss":
        return [report["queries"][w]["deadline_miss_ratio"] for w, _ in QUERIES]
    return [report["queries"][w]["latency_ms"][key] / 1000.0 for w, _ in QUERIES]


def results_table(reports: Mapping[str, dict[str, Any]]) -> str:
    """p95 and deadline misses per query for every configuration, with the ratio to each baseline."""
    heads = " | ".join(f"{kind} {w} ({d:g} s)" for kind in ("p95 s", "misses", "avg s") for w, d in QUERIES)
    lines = [
        f"| configuration | {heads} | p95 / `{BASELINE}` | p95 / `fifo + static 10 s` |",
        "|---|" + "---|" * (3 * len(QUERIES)) + "---|---|",
    ]
    base = _figures(reports[BASELINE], "p95")
    ten = _figures(reports["fifo + static 10 s"], "p95")
    for c in CONFIGS:
        r = reports[c.label]
        p95, miss, avg = _figures(r, "p95"), _figures(r, "miss"), _figures(r, "avg")
        cells = [f"{v:.1f}" for v in p95] + [f"{v:.2f}" for v in miss] + [f"{v:.1f}" for v in avg]
        ratio = " / ".join(f"{a / b:.2f}" for a, b in zip(p95, base, strict=True))
        ratio10 = " / ".join(f"{a / b:.2f}" for a, b in zip(p95, ten, strict=True))
        lines.append(f"| `{c.label}` | " + " | ".join(cells) + f" | {ratio} | {ratio10} |")
    return "\n".join(lines)


def verdict(edf: Mapping[str, Any], fifo: Mapping[str, Any]) -> str:
    """The claim, per query: EDF p95 <= 0.8 x FIFO's, and fewer misses."""
    out = []
    p95s = zip(_figures(edf, "p95"), _figures(fifo, "p95"), strict=True)
    misses = zip(_figures(edf, "miss"), _figures(fifo, "miss"), strict=True)
    for (w, _), (a, b), (m, n) in zip(QUERIES, p95s, misses, strict=True):
        out.append(f"{w}: p95 ×{a / b:.2f} {'≤' if a <= 0.8 * b else '**>**'} 0.8, misses {m:.2f} vs {n:.2f} "
                   f"{'fewer' if m < n else '**not fewer**'}")
    return "; ".join(out)


def main() -> int:
    logging.getLogger("pacer").setLevel(logging.ERROR)  # zstream logs predicted misses once per query
    reports = {c.label: run(c) for c in CONFIGS}
    print(f"### three queries, binary bursts, seed 7 (simulated)\n\n{results_table(reports)}\n")
    print(f"- claim vs `{BASELINE}`: {verdict(reports[HEADLINE], reports[BASELINE])}")
    print(f"- claim vs `fifo + static 10 s`: {verdict(reports[HEADLINE], reports['fifo + static 10 s'])}")
    base, edf = CONFIGS[0], CONFIGS[3]
    for seed in ROBUSTNESS_SEEDS:
        print(f"- seed {seed}, claim vs `{BASELINE}`: {verdict(run(edf, seed), run(base, seed))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
