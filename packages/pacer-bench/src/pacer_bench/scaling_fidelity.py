"""Does the calibrated simulator predict Spark when executors scale? A standalone cluster's ``pacer bench autoscale``
run beside the simulator's replay of the same configurations.

``pacer bench autoscale --runtime spark --master spark://...`` keeps every configuration's Spark report in its
``autoscale.json``. Each configuration (fixed at peak, Spark's dynamic allocation, pacer's deadline scaler) is run
again on the simulator: the same plan (:func:`pacer_bench.autoscale.spark_plan`), seed, traffic and executors, the
costs from ``--calibrated`` (``pacer calibrate --runtime spark``) and the executors' start-up the Spark run measured.
Set side by side: batches, rows late, busy core-s (``pacer bench fidelity``'s bounds) and the allocated core-s and
executor changes the scaling is about.

``python -m pacer_bench.scaling_fidelity --spark DIR --calibrated FILE --out DIR`` writes ``fidelity-scaling.json``
and ``fidelity-scaling.md``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pacer_bench.autoscale import SPARK_EXECUTORS, spark_plan
from pacer_bench.scenarios import Config
from pacer_sim.advise import within_bounds
from pacer_sim.runtime import SIM_RUNTIME


def figures(report: Mapping[str, Any], query: str) -> dict[str, float]:
    """A run's batches, rows late (%), busy core-s, allocated core-s and executor changes."""
    q = report["queries"][query]
    return {"batches": float(q["batches"]), "late_pct": 100.0 * float(q["deadline_miss_ratio_rows"]),
            "busy_core_s": float(q["cost"]["busy_core_s"]),
            "allocated_core_s": float(report["cost"]["allocated_core_s"]),
            "changes": float(len((report.get("scaling") or {}).get("changes") or []))}


def compare(spark_dir: Path, calibrated: str) -> list[dict[str, Any]]:
    """Each configuration of the Spark run in ``spark_dir``, measured and simulated, with the ratios and whether the
    simulated one is within :data:`pacer_sim.advise.BOUNDS`."""
    doc = json.loads((spark_dir / "autoscale.json").read_text())
    measured = {r["label"]: r["report"] if isinstance(r["report"], dict) else r["report"][0] for r in doc["runs"]}
    quick = float(next(iter(measured.values()))["config"]["run"]["duration"]) < 300.0
    rows = []
    for cfg in spark_plan(quick, SPARK_EXECUTORS):
        spark = measured.get(cfg["label"])
        if spark is None:
            continue
        query = cfg["queries"][0].query_id
        run = Config(**cfg).run_config().with_options(
            SIM_RUNTIME.name, calibrated=[calibrated], executor_startup=float(spark["scaling"]["startup_s"]))
        sim = SIM_RUNTIME.run(run).report
        m, s = figures(spark, query), figures(sim, query)
        row: dict[str, Any] = {"configuration": cfg["label"], "spark": m, "sim": s,
                               "batches_ratio": s["batches"] / m["batches"],
                               "late_points": s["late_pct"] - m["late_pct"],
                               "busy_ratio": s["busy_core_s"] / m["busy_core_s"],
                               "allocated_ratio": s["allocated_core_s"] / m["allocated_core_s"]}
        row["within_bounds"] = within_bounds(s, m)
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    """The comparison as a table, with the command that made it."""
    out = ["# Scaling on a standalone cluster: simulated beside measured", "", f"`{command}`", "",
           "| configuration | batches sim/Spark | rows late sim − Spark (pts) | busy core-s sim/Spark | "
           "allocated core-s sim/Spark | changes sim/Spark | within bounds |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        s, m = r["sim"], r["spark"]
        out.append(f"| {r['configuration']} | {s['batches']:.0f}/{m['batches']:.0f} = {r['batches_ratio']:.2f} | "
                   f"{s['late_pct']:.2f} − {m['late_pct']:.2f} | {s['busy_core_s']:.1f}/{m['busy_core_s']:.1f} = "
                   f"{r['busy_ratio']:.2f} | {s['allocated_core_s']:.0f}/{m['allocated_core_s']:.0f} = "
                   f"{r['allocated_ratio']:.2f} | {s['changes']:.0f}/{m['changes']:.0f} | "
                   f"{'yes' if r['within_bounds'] else 'no'} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_bench.scaling_fidelity", description=__doc__)
    parser.add_argument("--spark", required=True, help="a pacer bench autoscale --runtime spark output folder")
    parser.add_argument("--calibrated", required=True, help="the workload's pacer calibrate --runtime spark profile")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rows = compare(Path(args.spark), args.calibrated)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = (f"python -m pacer_bench.scaling_fidelity --spark {args.spark} --calibrated {args.calibrated} "
               f"--out {args.out}")
    (out / "fidelity-scaling.json").write_text(json.dumps({"command": command, "rows": rows}, indent=2) + "\n")
    text = markdown(rows, command)
    (out / "fidelity-scaling.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
