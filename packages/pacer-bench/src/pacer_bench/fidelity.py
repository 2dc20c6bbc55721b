"""``pacer bench fidelity``: does the calibrated simulator predict Spark? Each configuration runs on real Spark, then
the simulator runs the same configuration (same queries, seeds and so the same arrivals, the same cores) with each
query's costs from the engine profile ``pacer calibrate --runtime spark`` measured for its workload
(``--calibrated FILE``, :mod:`pacer_sim.calibrated`), and the two are set side by side per query:

- **batches**: pacer's batches (Spark's no-data batches shown apart), predicted within :data:`BOUNDS` ``batches``;
- **rows late**: the share of rows over the query's deadline, predicted within ``late_points`` points;
- **busy core-s**: the core-seconds its tasks ran (no-data batches included), predicted within ``busy_core_s``.

The configurations are chosen apart from the calibration's (constant traffic, static 2/5/10 s triggers at 2000
rows/s and one-dataset batches at 20 rows/s): other traffic patterns, rates, admissions and deadlines.

``python -m pacer_bench.fidelity DIR`` predicts a fidelity run's recorded Spark runs again with the simulator as it
is now and rewrites DIR's outputs (:func:`rewrite`): a change to the model is judged on the same measurements.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pacer import QueryRun, RunConfig
from pacer.plugins import PluginManager
from pacer_bench.runtime_traits import SIMULATOR
from pacer_bench.tables import BenchRun, busy_core_seconds, miss_ratio, record_latencies
from pacer_sim.advise import BOUNDS

#: Seconds of traffic of each configuration on Spark (``--quick``: 60).
FIDELITY_DURATION_S, FIDELITY_QUICK_S = 90.0, 60.0


def fidelity_plan(quick: bool) -> list[dict[str, Any]]:
    """The configurations, as keyword arguments of :class:`pacer_bench.scenarios.Config`: one query (two in the last:
    both on the same cores, by FIFO turns), on traffic, a rate and an admission the calibration did not run (its
    name is its label and ``--config`` name); one under a deadline its batches and Spark's no-data batches barely
    fit, so some rows are late."""
    duration = FIDELITY_QUICK_S if quick else FIDELITY_DURATION_S
    binary = {"min": 500.0, "max": 2500.0, "period": 30.0}
    spike = {"min": 400.0, "max": 2000.0, "period": 30.0}
    tight = {"min": 1000.0, "max": 4000.0, "period": 30.0}  # a deadline batches and no-data batches barely fit
    plan = [
        ("lr2 wave / zstream @10s", QueryRun("lr2", traffic="wave", rate=2000.0, admission="zstream", deadline=10.0)),
        ("lr2 binary / static 4s", QueryRun("lr2", traffic="binary", rate=1500.0, traffic_params=binary,
                                            admission="static", admission_params={"interval": 4.0}, deadline=5.0)),
        ("cm1 spike / zstream @20s", QueryRun("cm1", traffic="spike", rate=1000.0, traffic_params=spike,
                                              admission="zstream", deadline=20.0)),
        ("cm1 random / asap", QueryRun("cm1", traffic="random", rate=800.0, admission="asap", deadline=5.0)),
        ("lr2 binary / zstream @3s", QueryRun("lr2", traffic="binary", rate=2500.0, traffic_params=tight,
                                              admission="zstream", deadline=3.0)),
        ("lr2 + cm1 wave, two queries / zstream @10s",
         (QueryRun("lr2", traffic="wave", rate=1000.0, admission="zstream", deadline=10.0),
          QueryRun("cm1", traffic="wave", rate=600.0, admission="zstream", deadline=10.0))),
    ]
    configs = []
    for label, run in plan:
        queries = run if isinstance(run, tuple) else (run,)
        configs.append({"label": label, "queries": queries, "duration": duration, "deadline": queries[0].deadline,
                        "tags": {"name": label, "family": queries[0].admission,
                                 "workload": "+".join(q.workload for q in queries)}})
    return configs


def predict(report: Mapping[str, Any], calibrated: Sequence[str], *,
            plugin_manager: PluginManager | None = None) -> dict[str, Any]:
    """The simulator's report of the run ``report`` (a Spark run's ``pacer.report/1``) recorded: its configuration
    (queries, seeds, duration, scheduler) on as many cores as Spark had, costs from the engine profiles
    ``calibrated`` (one per workload), every dataset latency kept as the bench keeps them.

    :raises ValueError: a profile that does not read, or a report with no configuration to repeat.
    """
    from pacer.plugins import get_plugin_manager
    from pacer_sim import SIM_RUNTIME

    pm = plugin_manager or get_plugin_manager()
    run = RunConfig.from_dict(report)
    cores = report.get("cores") or run.cores  # Spark's options stay Spark's: the simulator's are the profiles
    run = replace(run, cores=int(cores) if cores else None, options={SIMULATOR: {"calibrated": list(calibrated)}})
    result = SIM_RUNTIME.run(run, plugin_manager=pm)
    record_latencies(result.report, result.controller)
    return result.report


def _ratio(predicted: float, measured: float) -> float:
    return predicted / measured if measured else (1.0 if predicted == measured else math.inf)


def _figures(report: Mapping[str, Any], query_id: str, deadline_s: float) -> dict[str, float]:
    q = report["queries"][query_id]
    no_data = (q.get("cost") or {}).get("no_data") or {}
    return {"batches": float(q["batches"]), "no_data_batches": float(no_data.get("batches") or 0),
            "late_pct": 100.0 * miss_ratio(report, query_id, deadline_s),
            "busy_core_s": busy_core_seconds(q), "p99_s": float(q["latency_ms"]["p99"]) / 1000.0}


def compare(measured: Mapping[str, Any], predicted: Mapping[str, Any], label: str = "") -> list[dict[str, Any]]:
    """Per query of the run: Spark's figures, the simulator's, their ratios (rows late: the difference in points) and
    whether each bounded figure is within :data:`BOUNDS`."""
    rows = []
    for query_id, q in measured["queries"].items():
        deadline = float(q["deadline_ms"]) / 1000.0
        spark, sim = _figures(measured, query_id, deadline), _figures(predicted, query_id, deadline)
        batches, busy = _ratio(sim["batches"], spark["batches"]), _ratio(sim["busy_core_s"], spark["busy_core_s"])
        late = sim["late_pct"] - spark["late_pct"]
        rows.append({
            "config": label, "query": query_id, "deadline_s": deadline,
            **{f"spark_{k}": v for k, v in spark.items()}, **{f"sim_{k}": v for k, v in sim.items()},
            "batches_ratio": batches, "late_points": late, "busy_ratio": busy,
            "batches_ok": abs(batches - 1.0) <= BOUNDS["batches"],
            "late_ok": abs(late) <= BOUNDS["late_points"],
            "busy_ok": abs(busy - 1.0) <= BOUNDS["busy_core_s"],
        })
    return rows


def _section(rows: Sequence[dict[str, Any]], calibrated: Sequence[str], command: str) -> Any:
    """The table of predicted beside measured (:class:`pacer_bench.outputs.Section`)."""
    from pacer_bench.outputs import Section

    shown = [{**r, "within": " ".join(k for k, ok in (("batches", r["batches_ok"]), ("late", r["late_ok"]),
                                                       ("busy", r["busy_ok"])) if ok) or "none"} for r in rows]
    headers = {"config": ("configuration", 0), "query": ("query", 0),
               "spark_batches": ("batches Spark", 0), "sim_batches": ("batches sim", 0),
               "batches_ratio": ("sim/Spark", 2),
               "spark_no_data_batches": ("no-data Spark", 0), "sim_no_data_batches": ("no-data sim", 0),
               "spark_late_pct": ("% late Spark", 2), "sim_late_pct": ("% late sim", 2),
               "late_points": ("sim-Spark pts", 2),
               "spark_busy_core_s": ("busy core-s Spark", 1), "sim_busy_core_s": ("busy core-s sim", 1),
               "busy_ratio": ("sim/Spark", 2), "within": ("within bounds", 0)}
    met = sum(r["batches_ok"] and r["late_ok"] and r["busy_ok"] for r in rows)
    text = (f"Measured on real Spark beside predicted by the simulator (simulated) with costs from "
            f"{', '.join(Path(c).name for c in calibrated)}. Bounds: batches within ±{BOUNDS['batches']:.0%}, rows "
            f"late within ±{BOUNDS['late_points']:g} point, busy core-s within ±{BOUNDS['busy_core_s']:.0%}; "
            f"{met} of {len(rows)} queries within all three. Command: `{command}`")
    return Section("Predicted beside measured", shown, list(headers), headers, text=text,
                   legend="batches: pacer's batches (Spark's no-data batches apart); % late: rows over the query's "
                          "deadline; busy core-s: its tasks' run time, no-data batches included")


def write_fidelity(out: str | Path, runs: Sequence[BenchRun], calibrated: Sequence[str], *, summary: str = "",
                   notes: Sequence[str] = (), machine: str | None = None) -> dict[str, Path]:
    """Predict every Spark run with the simulator (:func:`predict`), then write the comparison before the common
    tables: ``fidelity.json`` holds every row (:func:`compare`), the bounds, and both sides' reports (Spark's under
    ``runs``, the simulator's under ``fidelity.predicted``), so every ratio can be recomputed."""
    from pacer_bench.outputs import write_outputs

    command = " ".join(["pacer bench fidelity --runtime spark", *(f"--calibrated {c}" for c in calibrated),
                        f"--out {out}"])
    rows: list[dict[str, Any]] = []
    predicted: dict[str, Any] = {}
    for run in runs:
        sim = predict(run.report, calibrated)
        predicted[run.label] = sim
        rows += compare(run.report, sim, run.label)
    extra = {"fidelity": {"bounds": dict(BOUNDS), "calibrated": [str(c) for c in calibrated], "rows": rows,
                          "notes": list(notes), "predicted": predicted}}
    return write_outputs(out, "fidelity", runs, summary=summary, notes=notes, machine=machine,
                         sections=[_section(rows, calibrated, command)], extra=extra)


def rewrite(out: str | Path) -> dict[str, Path]:
    """Predict the Spark runs ``out/fidelity.json`` recorded again, with the simulator as it is now and the profiles
    they were predicted from, and rewrite ``out``'s outputs (its summary, notes and machine kept)."""
    import json

    doc = json.loads((Path(out) / "fidelity.json").read_text())
    runs = [BenchRun(r["label"], r["report"], baseline=r["baseline"], group=r["group"], deadline=r["deadline"],
                     tags=r["tags"], repeats=tuple(r["repeats"])) for r in doc["runs"]]
    machine = dict(doc.get("settings") or {}).get("machine")
    return write_fidelity(out, runs, doc["fidelity"]["calibrated"], summary=doc.get("summary", ""),
                          notes=doc["fidelity"].get("notes", ()), machine=machine)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pacer_bench.fidelity DIR``: :func:`rewrite` DIR and print its table."""
    import argparse

    parser = argparse.ArgumentParser(description=rewrite.__doc__)
    parser.add_argument("dir", help="a folder pacer bench fidelity wrote")
    paths = rewrite(parser.parse_args(argv).dir)
    print(paths["md"].read_text().split("<!-- readme:end -->")[0])
    return 0


__all__ = ["BOUNDS", "compare", "fidelity_plan", "main", "predict", "rewrite", "write_fidelity"]

if __name__ == "__main__":
    raise SystemExit(main())
