"""Run every configuration of a scenario on the simulator or on real Spark, then write the outputs."""

from __future__ import annotations

import datetime as _dt
import importlib.util
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
from pacer_bench.outputs import BenchRun, write_outputs
from pacer_bench.progress import ProgressBar
from pacer_bench.scenarios import SCENARIOS, Config, QueryConfig

#: Seconds a Spark configuration may take after its traffic ends to finish its backlog.
SPARK_DRAIN_TIMEOUT = 120.0


def resolve_configs(
    scenario: str, *, runtime: str, quick: bool, duration: float | None, seed: int,
    plugin_manager: PluginManager, rapids_jars: Sequence[str] = (),
) -> tuple[str, list[Config], list[str]]:
    """Check a scenario before anything runs and return the runtime it will run on, its configurations
    and notes for the reader (e.g. why a Spark request runs simulated).

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
    configs = [c.with_seed(seed) for c in configs]
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

    sim = Simulation(
        cores=config.cores, gpus=config.gpus, scheduler=config.scheduler, seed=config.seed,
        resource_changes=[ResourceChange(*config.resource_loss)] if config.resource_loss else (),
        plugin_manager=plugin_manager, extra_config={"label": config.label},
    )
    for q in config.queries:
        sim.add_query(
            q.workload, traffic=q.traffic, rate=q.rate, traffic_params=q.traffic_params, admission=q.admission,
            admission_params=q.admission_params, placement=q.placement, placement_params=q.placement_params,
            deadline=q.deadline, query_id=q.query_id, duration=config.duration,
        )
    report: dict[str, Any] = sim.run(config.duration)
    return report


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
    session = pacer_spark.attach(spark, scheduler=config.scheduler, fallback=True, plugin_manager=plugin_manager)

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
           "master": master, "queries": [q.as_dict() for q in config.queries]}
    return drive(session, start_queries, cfg, duration=config.duration, drain_timeout=SPARK_DRAIN_TIMEOUT,
                 progress_every=progress_every, label=config.label)


def machine_description(runtime: str, master: str) -> str:
    """``Linux x86_64, 2 cores, Python 3.11.7`` (+ the Spark version and master on Spark)."""
    text = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    if runtime == "spark":
        import pyspark

        text += f", PySpark {pyspark.__version__} {master}"
    return text


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
) -> dict[str, Path]:
    """Run every configuration of ``scenario`` one after the other and write its outputs under ``out``.

    On Spark all configurations share one local SparkSession, warmed up once before the first.
    Besides :func:`~pacer_bench.outputs.write_outputs`' files it writes ``meta.json`` (scenario,
    runtime, date, machine, quick, notes), from which ``scripts/gen_readme.py`` builds the README's
    results section.

    :raises UsageError: before anything runs, for a bad scenario, strategy or runtime combination.
    :return: the paths written, by kind (``meta`` included).
    """
    pm = plugin_manager or get_plugin_manager()
    actual, configs, notes = resolve_configs(scenario, runtime=runtime, quick=quick, duration=duration, seed=seed,
                                             plugin_manager=pm, rapids_jars=rapids_jars)
    for note in notes:
        print(f"pacer bench: {note}", file=sys.stderr)
    bar = ProgressBar(len(configs)) if progress else None
    runs: list[BenchRun] = []
    failures: list[str] = []
    spark = None
    try:
        if actual == "spark":
            from pacer_spark.cli import build_session, warm_up

            spark = build_session(master, f"pacer bench {scenario}", rapids_jars=list(rapids_jars))
            warm_up(spark)
        for config in configs:
            if bar is not None:
                bar.show(f"running {config.label}")
            if spark is not None:
                report, status = run_on_spark(spark, config, pm, master=master)
                if status:
                    failures.append(config.label)
            else:
                report = run_simulated(config, pm)
            report["config"]["label"] = config.label
            runs.append(BenchRun(config.label, report, baseline=config.baseline, group=config.group,
                                 x=config.x, series=config.series))
            if bar is not None:
                bar.advance(f"done {config.label}")
    finally:
        if spark is not None:
            spark.stop()
    if failures:
        notes.append(f"did not drain or failed on Spark: {', '.join(failures)}")
    summary = SCENARIOS[scenario].summary + (" — simulated (pacer-sim)" if actual == "sim" else " — real Spark")
    if quick:
        summary += ", quick version"
    paths = write_outputs(out, scenario, runs, summary=summary, notes=notes)
    meta = {
        "scenario": scenario, "runtime": actual, "requested_runtime": runtime, "quick": quick, "seed": seed,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine_description(actual, master), "configs": [c.label for c in configs], "notes": notes,
    }
    paths["meta"] = Path(out) / "meta.json"
    paths["meta"].write_text(json.dumps(meta, indent=2) + "\n")
    return paths
