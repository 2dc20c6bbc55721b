"""Run every configuration of a scenario on the simulator or on real Spark, then write the outputs."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import inspect
import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pacer import UnknownStrategyError
from pacer.cli import UsageError
from pacer.plugins import PluginManager, get_plugin_manager
from pacer_bench.latency_target import write_latency_target
from pacer_bench.outputs import write_outputs
from pacer_bench.progress import ProgressBar
from pacer_bench.scenarios import SCENARIOS, Config, QueryConfig, latency_target_plan
from pacer_bench.tables import BenchRun

#: Seconds a Spark configuration may take after its traffic ends to finish its backlog.
SPARK_DRAIN_TIMEOUT = 120.0


def resolve_configs(
    scenario: str, *, runtime: str, quick: bool, duration: float | None, seed: int,
    plugin_manager: PluginManager, rapids_jars: Sequence[str] = (), gpus: int | None = None,
    overload: str = "keep",
) -> tuple[str, list[Config], list[str]]:
    """Check a scenario before anything runs and return the runtime it will run on, its configurations
    and notes for the reader (e.g. why a Spark request runs simulated).

    :param gpus: simulated GPUs for every configuration (None: the scenario's own, 1 in device-sweep, else 0).
    :param overload: the Controller's overload policy in every run: ``keep`` (the default: every dataset is
        processed and counted, so a run that ignores the deadline behaves the same whatever the deadline, and
        placements process the same batches) or ``shed`` (pacer's default for users).
    :raises UsageError: for an unknown scenario or strategy, or a scenario that cannot run on ``runtime``.
    """
    if scenario not in SCENARIOS:
        raise UsageError(f"unknown scenario {scenario!r}; choose from {', '.join(sorted(SCENARIOS))}")
    if runtime not in ("sim", "spark"):
        raise UsageError(f"unknown runtime {runtime!r}; use sim or spark")
    notes: list[str] = []
    if runtime == "spark" and scenario == "device-sweep" and not rapids_jars:
        notes.append("device-sweep ran on the simulator: placement on Spark needs a GPU and the RAPIDS Accelerator "
                     "jar (--rapids-jar), and neither is here; every figure is simulated")
        runtime = "sim"
    if runtime == "spark" and importlib.util.find_spec("pacer_spark") is None:
        raise UsageError("--runtime spark needs pacer-spark: pip install 'pacer-bench[spark]' (or the README's "
                         "development install)")
    configs = SCENARIOS[scenario].build(quick, runtime)
    if runtime == "spark" and any(c.resource_loss for c in configs):
        raise UsageError(f"{scenario} takes cores away mid-run, which local Spark cannot do; run it with --runtime sim")
    if duration is not None:
        configs = [c.with_duration(duration) for c in configs]
    if overload not in ("keep", "shed"):
        raise UsageError(f"--overload must be keep or shed, got {overload!r}")
    configs = [c.with_seed(seed).with_overload(overload) for c in configs]
    if gpus is not None:
        if gpus < 0:
            raise UsageError(f"--gpus must be >= 0, got {gpus}")
        if scenario == "device-sweep" and gpus == 0:
            raise UsageError("device-sweep compares CPU and GPU placements and needs a GPU: --gpus 1 (its default)")
        configs = [c.with_gpus(gpus) for c in configs]
    for config in configs:
        try:
            plugin_manager.find(config.scheduler, "scheduling")
            for q in config.queries:
                plugin_manager.find(q.admission, "admission").resolve_params(q.admission_params)
                plugin_manager.find(q.placement, "placement").resolve_params(q.placement_params)
        except UnknownStrategyError as exc:
            raise UsageError(f"{config.label}: {exc}. Install the strategy's package or pick another scenario.") from None
        except ValueError as exc:
            raise UsageError(f"{config.label}: {exc}") from None
    return runtime, configs, notes


def run_simulated(config: Config, plugin_manager: PluginManager) -> dict[str, Any]:
    """One configuration on the deterministic simulator; returns its ``pacer.report/1``."""
    from pacer_sim import Simulation
    from pacer_sim.engine import ResourceChange

    options: dict[str, Any] = {}
    if "overload" in inspect.signature(Simulation).parameters:
        options["overload"] = config.overload
    sim = Simulation(
        cores=config.cores, gpus=config.gpus, scheduler=config.scheduler, seed=config.seed,
        resource_changes=[ResourceChange(*config.resource_loss)] if config.resource_loss else (),
        plugin_manager=plugin_manager, extra_config={"label": config.label, "overload": config.overload},
        **options,
    )
    if "overload" not in options:  # a pacer-sim without the option: set the policy its Controller enforces
        sim.controller.overload_policy = config.overload
    for q in config.queries:
        sim.add_query(
            q.workload, traffic=q.traffic, rate=q.rate, traffic_params=q.traffic_params, admission=q.admission,
            admission_params=q.admission_params, placement=q.placement, placement_params=q.placement_params,
            deadline=q.deadline, query_id=q.query_id, duration=config.duration,
        )
    report: dict[str, Any] = sim.run(config.duration)
    record_latencies(report, sim.controller)
    return report


def record_latencies(report: dict[str, Any], controller: Any) -> None:
    """Keep every dataset latency (s) of every query under ``report["bench"]["latencies_s"]``, so the tables can
    judge a run against any deadline exactly (a static trigger ran once is judged against 5, 10 and 20 s)."""
    latencies = {
        query_id: sorted(round(lat, 4) for r in controller.reports(query_id) for _, lat in r.dataset_latencies)
        for query_id in report["queries"]
    }
    report.setdefault("bench", {})["latencies_s"] = latencies


def _spark_trigger(q: QueryConfig) -> str | None:
    """Static admission on Spark is Spark's own processing-time trigger (pacer only observes)."""
    if q.admission != "static":
        return None
    return f"{float(q.admission_params.get('interval', 10.0)):g} seconds"


def run_on_spark(spark: Any, config: Config, plugin_manager: PluginManager, *, master: str,
                 progress_every: float = 0.0) -> tuple[dict[str, Any], int]:
    """One configuration on an existing SparkSession (``pacer-gen`` traffic); returns the report and a status."""
    import pacer_spark
    from pacer_spark.cli import drive

    # GPUs: the session counts one when the RAPIDS plugin is loaded, none otherwise (config.gpus is the sim's).
    session = pacer_spark.attach(spark, scheduler=config.scheduler, fallback=True, plugin_manager=plugin_manager,
                                 overload=config.overload)

    def start_queries() -> None:
        for i, q in enumerate(config.queries):
            session.run_workload(
                q.workload, query_id=q.query_id or q.workload, traffic=q.traffic, rate=q.rate,
                duration=config.duration, seed=config.seed + i, traffic_params=dict(q.traffic_params),
                deadline=q.deadline, admission=q.admission, placement=q.placement,
                admission_params=dict(q.admission_params), placement_params=dict(q.placement_params),
                trigger=_spark_trigger(q),
            )

    cfg = {"label": config.label, "scheduler": config.scheduler, "duration_s": config.duration, "seed": config.seed,
           "master": master, "overload": config.overload, "queries": [q.as_dict() for q in config.queries]}
    report, status = drive(session, start_queries, cfg, duration=config.duration, drain_timeout=SPARK_DRAIN_TIMEOUT,
                           progress_every=progress_every, label=config.label)
    with session.lock:
        record_latencies(report, session.controller)
    return report, status


def machine_description(runtime: str, master: str) -> str:
    """``Linux x86_64, 2 cores, Python 3.11.7`` (+ the Spark version and master on Spark)."""
    text = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if runtime == "spark":
        import pyspark

        text += f", PySpark {pyspark.__version__} {master}"
    return text


def _run_one(config: Config, pm: PluginManager, spark: Any, master: str) -> tuple[dict[str, Any], bool]:
    """One configuration once; returns its report and whether it failed (Spark: did not drain, or an error)."""
    if spark is not None:
        report, status = run_on_spark(spark, config, pm, master=master)
        return report, bool(status)
    return run_simulated(config, pm), False


def run_scenario(
    scenario: str,
    *,
    runtime: str = "sim",
    out: str | Path,
    quick: bool = False,
    duration: float | None = None,
    seed: int = 7,
    master: str = "local[2]",
    rapids_jars: Sequence[str] = (),
    plugin_manager: PluginManager | None = None,
    progress: bool = True,
    repeat: int = 1,
    vary_seed: bool = False,
    gpus: int | None = None,
    overload: str = "keep",
) -> dict[str, Path]:
    """Run every configuration of ``scenario`` ``repeat`` times and write its outputs under ``out``.

    Repetitions are interleaved (repetition 1 of every configuration, then repetition 2, ...), so a slow
    spell of the machine does not fall on one configuration; each repetition uses the same seed (the same
    traffic) unless ``vary_seed`` (repetition i then uses ``seed + i - 1``). On Spark all configurations share
    one local SparkSession, warmed up once before the first. Besides the tables and plots it writes
    ``meta.json`` (scenario, runtime, date, machine, quick, repetitions, notes), from which
    ``scripts/gen_readme.py`` builds the README's results section.

    :raises UsageError: before anything runs, for a bad scenario, strategy, runtime combination or ``repeat``.
    :return: the paths written, by kind (``meta`` included).
    """
    if repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {repeat}")
    pm = plugin_manager or get_plugin_manager()
    actual, configs, notes = resolve_configs(scenario, runtime=runtime, quick=quick, duration=duration, seed=seed,
                                             plugin_manager=pm, rapids_jars=rapids_jars, gpus=gpus,
                                             overload=overload)
    for note in notes:
        print(f"pacer bench: {note}", file=sys.stderr)
    bar = ProgressBar(len(configs) * repeat) if progress else None
    reports: dict[str, list[dict[str, Any]]] = {c.label: [] for c in configs}
    failures: list[str] = []
    spark = None
    try:
        if actual == "spark":
            from pacer_spark.cli import build_session, warm_up

            spark = build_session(master, f"pacer bench {scenario}", rapids_jars=list(rapids_jars))
            warm_up(spark)
        for rep in range(repeat):
            for config in configs:
                run_config = config.with_seed(seed + rep) if vary_seed else config
                tag = f"{config.label} (rep {rep + 1}/{repeat})" if repeat > 1 else config.label
                if bar is not None:
                    bar.show(f"running {tag}")
                report, failed = _run_one(run_config, pm, spark, master)
                if failed:
                    failures.append(tag)
                report["config"]["label"] = config.label
                report.setdefault("bench", {})["repetition"] = rep + 1
                reports[config.label].append(report)
                if bar is not None:
                    bar.advance(f"done {tag}")
    finally:
        if spark is not None:
            spark.stop()
    if failures:
        notes.append(f"did not drain or failed on Spark: {', '.join(failures)}")
    runs = [BenchRun(c.label, reports[c.label][0], baseline=c.baseline, group=c.group, x=c.x, series=c.series,
                     repeats=tuple(reports[c.label][1:]), deadline=c.deadline, tags=c.tags) for c in configs]
    summary = SCENARIOS[scenario].summary + (" — simulated (pacer-sim)" if actual == "sim" else " — real Spark")
    if quick:
        summary += ", quick version"
    machine = machine_description(actual, master)
    if scenario == "latency-target":
        paths = write_latency_target(out, runs, latency_target_plan(quick, actual)["deadlines"], summary=summary,
                                     notes=notes, machine=machine)
    else:
        paths = write_outputs(out, scenario, runs, summary=summary, notes=notes, machine=machine)
    meta = {
        "scenario": scenario, "runtime": actual, "requested_runtime": runtime, "quick": quick, "seed": seed,
        "repeat": repeat, "vary_seed": vary_seed, "overload": overload,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine, "configs": [c.label for c in configs], "notes": notes,
    }
    paths["meta"] = Path(out) / "meta.json"
    paths["meta"].write_text(json.dumps(meta, indent=2) + "\n")
    return paths
