"""Run every configuration of a scenario on a runtime (the simulator, real Spark: found through the ``pacer_runtimes``
hook), then write the outputs. The scenario comes from the registry (:data:`pacer_bench.scenarios.SCENARIOS`), what
differs per runtime from :mod:`pacer_bench.runtime_traits`; latency-target's sources other than pacer's generator
(``--source kafka``) come from the packages that register them (:mod:`pacer_bench.traffic_sources`)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from pacer import Runtime, UnknownRuntimeError, UnknownStrategyError
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.runtime_api import executor_bounds
from pacer_bench.progress_bar import ProgressBar
from pacer_bench.runtime_traits import EXECUTORS, GPU, SIMULATOR, runtime_traits
from pacer_bench.scenarios import SCENARIOS, Config, Request, ScenarioError, ScenarioResult, find_scenario
from pacer_bench.tables import BenchRun, record_latencies
from pacer_bench.traffic_sources import GENERATED, BenchSource, UnknownSourceError, find_source

__all__ = ["ScenarioError", "machine_description", "record_latencies", "resolve_configs", "run_scenario"]


def _request(quick: bool, runtime: str, target: Mapping[str, Any] | None, source: BenchSource | None,
             master: str, executors: str | None, calibrated: Sequence[str] = ()) -> Request:
    """What the scenario builds its configurations (and its writer its outputs) from, on ``runtime``."""
    return Request(quick=quick, simulated=runtime_traits(runtime).simulated, target=dict(target or {}),
                   source=source, master=master, executors=None if executors is None else executor_bounds(executors),
                   calibrated=tuple(calibrated))


def resolve_configs(
    scenario: str, *, runtime: str, quick: bool, duration: float | None, seed: int,
    plugin_manager: PluginManager, rapids_jars: Sequence[str] = (), gpus: int | None = None,
    overload: str = "keep", target: Mapping[str, Any] | None = None, rate_scale: float = 1.0,
    master: str = "local[2]", executors: str | None = None, calibrated: Sequence[str] = (),
) -> tuple[str, list[Config], list[str]]:
    """Check a scenario before anything runs and return the runtime it will run on, its configurations
    and notes for the reader (e.g. why a Spark request runs simulated).

    :param gpus: simulated GPUs for every configuration (None: the scenario's own, 1 in device-sweep, else 0).
    :param overload: the Controller's overload policy in every run: ``keep`` (the default: every dataset is
        processed and counted, so a run that ignores the deadline behaves the same whatever the deadline, and
        placements process the same batches; pacer's default everywhere,
        :data:`pacer.runtime_api.DEFAULT_OVERLOAD`) or ``shed`` (drop the datasets that can no longer make it).
    :param rate_scale: multiply every query's input rate by this (e.g. to contend the cores harder).
    :param target: latency-target's choices (:func:`pacer_bench.scenarios.narrow_plan`); a ``source`` (other
        than pacer's generator: :mod:`pacer_bench.traffic_sources`) runs on the runtime it names (kafka: Spark).
    :param executors: autoscale on a standalone cluster: ``MIN:MAX`` executors (``--executors``).
    :param calibrated: fidelity: the engine profiles the simulator predicts from (``--calibrated``).
    :raises ScenarioError: for an unknown scenario (naming the registered ones), strategy, runtime (the installed
        ones come from the ``pacer_runtimes`` hook) or source, or a scenario that cannot run on ``runtime``.
    """
    chosen = find_scenario(scenario)
    notes: list[str] = []
    narrowing = {k: v for k, v in (target or {}).items() if v and k != "configs"}
    if chosen.sourced:
        narrowing.pop("source", None)
    if calibrated and not chosen.calibrated:
        raise ScenarioError(f"--calibrated gives {', '.join(n for n, s in sorted(SCENARIOS.items()) if s.calibrated)}"
                            f" its simulator's costs; {chosen.name} takes --engine-profile")
    if narrowing and not chosen.narrowed:
        raise ScenarioError("--source, --deadline, --traffic and --workload apply to latency-target (--source to "
                            "multi-query too)")
    source = _source(target)
    if source is not None:
        runtime = source.runtime  # e.g. Spark's Kafka source
    lacking = runtime_traits(runtime).lacking(chosen.needs, rapids_jars, master)
    if lacking:  # the scenario's point needs what the runtime cannot give: shown on the simulator instead
        notes.append(f"{chosen.name} ran on the simulator: {'; '.join(lacking.values())}; every figure is simulated")
        runtime = SIMULATOR
    traits = runtime_traits(runtime)
    try:
        plugin_manager.find_runtime(runtime)
    except UnknownRuntimeError as exc:
        raise ScenarioError(f"--runtime {runtime}: {exc}{traits.install_hint}") from None
    try:
        if executors is not None and EXECUTORS not in chosen.needs:
            raise ValueError(f"--executors sets the executors of a scenario that changes them (autoscale), not of "
                             f"{chosen.name}")
        configs = chosen.build(_request(quick, runtime, target, source, master, executors, calibrated))
    except ValueError as exc:
        raise ScenarioError(str(exc)) from None
    names = (target or {}).get("configs")
    if not chosen.narrowed and names:
        configs = chosen_configs(chosen.name, configs, names)
    refused = traits.lacking(set().union(*(c.needs for c in configs)), rapids_jars, master)
    if refused:
        raise ScenarioError(f"{chosen.name} cannot run on --runtime {runtime}: {'; '.join(refused.values())}; "
                            f"run it with --runtime {SIMULATOR}")
    if duration is not None:
        configs = [c.with_duration(duration) for c in configs]
    if overload not in ("keep", "shed"):
        raise ScenarioError(f"--overload must be keep or shed, got {overload!r}")
    configs = [c.with_seed(seed).with_overload(overload) for c in configs]
    if rate_scale <= 0:
        raise ScenarioError(f"--rate-scale must be > 0, got {rate_scale}")
    if rate_scale != 1.0:
        configs = [c.with_rate_scale(rate_scale) for c in configs]
    if gpus is not None:
        if gpus < 0:
            raise ScenarioError(f"--gpus must be >= 0, got {gpus}")
        if gpus == 0 and GPU in chosen.needs:
            raise ScenarioError(f"{chosen.name} {chosen.needs[GPU]} and needs a GPU: --gpus 1 (its default)")
        configs = [c.with_gpus(gpus) for c in configs]
    for config in configs:
        try:
            plugin_manager.find(config.scheduler, "scheduling")
            for q in config.queries:
                plugin_manager.find(q.admission, "admission").resolve_params(q.admission_params)
                plugin_manager.find(q.placement, "placement").resolve_params(q.placement_params)
        except UnknownStrategyError as exc:
            raise ScenarioError(f"{config.label}: {exc}. Install the strategy's package or pick another scenario.") from None
        except ValueError as exc:
            raise ScenarioError(f"{config.label}: {exc}") from None
    return runtime, configs, notes


def chosen_configs(scenario: str, configs: Sequence[Config], names: Sequence[str]) -> list[Config]:
    """``--config`` for a scenario other than latency-target: the configurations whose label (``edf + zstream``,
    ``fifo + static 10s``), group (``wave / 1 query``), name or family tag (``fixed at peak``, ``static``) ``names``
    lists, e.g. to run a few of them long.

    :raises ScenarioError: a name matches no configuration (the error lists the labels).
    """
    wanted = set(names)
    kept = [c for c in configs if wanted & {c.label, c.group, c.tags.get("family"), c.tags.get("name")}]
    matched = {n for c in kept for n in (c.label, c.group, c.tags.get("family"), c.tags.get("name"))}
    missing = sorted(wanted - matched)
    if missing:
        raise ScenarioError(f"--config {', '.join(missing)}: no {scenario} configuration has that label or family; "
                            f"its labels: {', '.join(repr(c.label) for c in configs)}")
    return kept


def _source(target: Mapping[str, Any] | None) -> BenchSource | None:
    """The registered source ``target["source"]`` names (None: pacer's generated traffic).

    :raises ScenarioError: no installed package registers it."""
    name = (target or {}).get("source")
    if not name:
        return None
    try:
        return find_source(name)
    except UnknownSourceError as exc:
        raise ScenarioError(str(exc)) from None


def machine_description(runtime: str, master: str) -> str:
    """``Linux x86_64, 2 cores, Python 3.11.7`` (+ what the runtime adds: the Spark version and master on Spark)."""
    text = f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return text + runtime_traits(runtime).machine(master)


def _run_one(config: Config, pm: PluginManager, runtime: Runtime,
             options: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """One configuration once on ``runtime`` with its ``options`` (the runtime's
    :attr:`~pacer_bench.runtime_traits.RuntimeTraits.run_options`), adapted to it
    (:attr:`~pacer_bench.runtime_traits.RuntimeTraits.adapt`); returns its report (every dataset latency kept, see
    :func:`record_latencies`) and whether it failed (Spark: did not drain, or a query failed)."""
    run = runtime_traits(runtime.name).adapt(config, config.run_config())
    if options:
        run = run.with_options(runtime.name, **options, label=config.label)
    result = runtime.run(run, plugin_manager=pm)
    record_latencies(result.report, result.controller)
    return result.report, bool(result.status)


def run_scenario(
    scenario: str,
    *,
    runtime: str = SIMULATOR,
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
    target: Mapping[str, Any] | None = None,
    source_options: Mapping[str, Any] | None = None,
    rate_scale: float = 1.0,
    executors: str | None = None,
    engine_profile: str | None = None,
    calibrated: Sequence[str] = (),
    warm_up_stream: bool = True,
) -> dict[str, Path]:
    """Run every configuration of ``scenario`` ``repeat`` times and write its outputs under ``out``.

    Repetitions are interleaved (repetition 1 of every configuration, then repetition 2, ...), so a slow
    spell of the machine does not fall on one configuration; each repetition uses the same seed (the same
    traffic) unless ``vary_seed`` (repetition i then uses ``seed + i - 1``). The runtime comes from the
    ``pacer_runtimes`` hook; on Spark all configurations share one SparkSession, warmed up once before the first. Besides the tables and plots it writes
    ``meta.json`` (scenario, runtime, date, machine, quick, repetitions, notes), from which
    ``scripts/gen_docs.py`` builds the documentation's Results page.

    latency-target takes ``target`` (:func:`pacer_bench.scenarios.narrow_plan`: deadlines, traffics,
    workloads, configs, source); with a ``source`` (:mod:`pacer_bench.traffic_sources`) every configuration runs through
    it, with ``source_options`` (its own flags, by ``dest``): ``kafka`` (pacer-kafka) reads a fresh topic per
    configuration on ``source_options["bootstrap_servers"]``, or on a scratch broker when None. ``engine_profile``
    (a file ``pacer calibrate`` wrote, on the runtime's options): the runs' queries start from it and the bounds
    use it (:func:`pacer_bench.bound.calibrated_fit`). ``calibrated`` (fidelity): the engine profiles the simulator
    predicts the Spark runs from. ``warm_up_stream=False`` (``--no-warm-up-stream``): a fresh Spark session runs no
    throwaway stream before its measured one (its JIT job still runs).

    The scenario is looked up in the registry (:func:`pacer_bench.scenarios.find_scenario`), which builds its
    configurations and writes its outputs (:attr:`pacer_bench.scenarios.Scenario.write`).

    :raises ScenarioError: before anything runs, for a bad scenario, strategy, runtime combination or ``repeat``.
    :return: the paths written, by kind (``meta`` included).
    """
    if repeat < 1:
        raise ScenarioError(f"--repeat must be >= 1, got {repeat}")
    chosen = find_scenario(scenario)
    pm = plugin_manager or get_plugin_manager()
    actual, configs, notes = resolve_configs(scenario, runtime=runtime, quick=quick, duration=duration, seed=seed,
                                             plugin_manager=pm, rapids_jars=rapids_jars, gpus=gpus,
                                             overload=overload, target=target, rate_scale=rate_scale,
                                             master=master, executors=executors, calibrated=calibrated)
    for note in notes:
        print(f"pacer bench: {note}", file=sys.stderr)
    bar = ProgressBar(len(configs) * repeat) if progress else None
    reports: dict[str, list[dict[str, Any]]] = {c.label: [] for c in configs}
    failures: list[str] = []
    runner = pm.find_runtime(actual)
    traits = runtime_traits(actual)
    options = traits.run_options(master, rapids_jars)
    if engine_profile is not None:  # every run's queries start from it; its reports name it (the bounds read it)
        options = {**options, "engine_profile": str(engine_profile)}
    if not warm_up_stream:
        options = {**options, "warm_up_stream": False}
    source = _source(target)
    with ExitStack() as stack:
        handle = stack.enter_context(source.open(source_options or {})) if source is not None else None
        stack.callback(getattr(runner, "close", lambda: None))  # a runtime that kept a session for every configuration
        if source is not None and configs:
            if bar is not None:
                bar.show(source.warm_up_message)
            source.warm_up(configs[0], pm, runner, options, handle)
        for rep in range(repeat):
            for config in configs:
                run_config = config.with_seed(seed + rep) if vary_seed else config
                tag = f"{config.label} (rep {rep + 1}/{repeat})" if repeat > 1 else config.label
                if bar is not None:
                    bar.show(f"running {tag}")
                if source is not None:
                    report, failed = source.run_one(run_config, pm, runner, options, handle, repetition=rep + 1)
                else:
                    report, failed = _run_one(run_config, pm, runner, options)
                if failed:
                    failures.append(tag)
                report["config"]["label"] = config.label
                report.setdefault("bench", {})["repetition"] = rep + 1
                reports[config.label].append(report)
                if bar is not None:
                    bar.advance(f"done {tag}")
    if failures:
        notes.append(f"did not drain or failed on Spark: {', '.join(failures)}")
    runs = [BenchRun(c.label, reports[c.label][0], baseline=c.baseline, group=c.group, x=c.x, series=c.series,
                     repeats=tuple(reports[c.label][1:]), deadline=c.deadline, tags=c.tags) for c in configs]
    summary = chosen.summary + traits.described
    if source is not None:
        summary += source.summary
    if quick:
        summary += ", quick version"
    machine = machine_description(actual, master)
    request = _request(quick, actual, target, source, master, executors, calibrated)
    paths = chosen.write(out, ScenarioResult(chosen.name, runs, request, summary, notes, machine))
    meta = {
        "scenario": scenario, "runtime": actual, "requested_runtime": runtime, "quick": quick, "seed": seed,
        "rate_scale": rate_scale,
        "repeat": repeat, "vary_seed": vary_seed, "overload": overload, "source": source.name if source is not None else GENERATED,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine, "configs": [c.label for c in configs], "notes": notes,
    }
    paths["meta"] = Path(out) / "meta.json"
    paths["meta"].write_text(json.dumps(meta, indent=2) + "\n")
    return paths
