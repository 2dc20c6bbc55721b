"""The simulator as a pacer runtime (``pacer run --runtime sim``, ``pacer sim``, ``pacer bench``, the conformance suite).

:class:`SimRuntime` turns a :class:`pacer.RunConfig` into a :class:`~pacer_sim.engine.Simulation`
(:meth:`SimRuntime.build`, the one adapter) and runs it. Its own settings live under
``config.options["sim"]``: ``gpu_profile``, ``cost_profile``, ``cost_param`` (``KEY=VALUE`` items),
``noise``, ``resource_loss`` (``START:END:FRACTION`` items or triples), ``measure_overhead``,
``executor_startup`` (seconds from asking for an executor to its running, with ``executors``), ``watermark``
(the queries' watermark delay in seconds, or ``none``: no watermark, so no Spark no-data batches), ``arrival_period``
(seconds between a query's datasets, 1 by default) and ``calibrated``
(engine profiles ``pacer calibrate --runtime spark`` wrote: a query whose workload one was measured on takes its
costs from it, :mod:`pacer_sim.calibrated`).
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from pacer.cli.run_command import parse_assignments
from pacer.durations import flag_seconds
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.run import RunConfig, RunResult
from pacer.scaler import Scaler
from pacer_sim.calibrated import load_profiles
from pacer_sim.costs import CostModel
from pacer_sim.engine import (
    EXECUTOR_STARTUP_S,
    MIN_ARRIVAL_PERIOD_S,
    ResourceChange,
    Simulation,
    check_arrival_period,
)
from pacer_sim.rapids import BUILTIN_PROFILE, DEFAULT_GPU_PROFILE
from pacer_sim.stateful import WATERMARK_S

#: Resources a run gets when its configuration leaves them to the runtime.
DEFAULT_CORES, DEFAULT_GPUS = 2, 0


def parse_resource_loss(value: str | Sequence[float]) -> tuple[float, float, float]:
    """``START:END:FRACTION`` (or a triple) -> a tuple; bad input raises ``ValueError``."""
    try:
        parts = value.split(":") if isinstance(value, str) else list(value)
        start, end, fraction = (float(x) for x in parts)
    except (ValueError, TypeError):
        raise ValueError(f"--resource-loss expects START:END:FRACTION (e.g. 200:400:0.25), got {value!r}") from None
    if not (0 <= start < end and 0 < fraction < 1):
        raise ValueError("--resource-loss needs 0 <= START < END and 0 < FRACTION < 1")
    return start, end, fraction


def arrival_period(options: Mapping[str, Any]) -> float:
    """``arrival_period``'s seconds (1 where not given), checked (``ValueError`` naming ``--arrival-period``)."""
    value = options.get("arrival_period")
    return 1.0 if value is None else check_arrival_period(float(value), "--arrival-period")


def parse_watermark(value: str | float | None) -> float | None:
    """``--watermark``'s value: seconds >= 0, or ``none`` (None: the queries have no watermark).

    :raises ValueError: for anything else.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "none"):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--watermark expects seconds >= 0 or 'none', got {value!r}") from None
    if not seconds >= 0:
        raise ValueError(f"--watermark expects seconds >= 0 or 'none', got {value!r}")
    return seconds


def check_workloads(config: RunConfig) -> None:
    """Every query's workload and traffic exist and the traffic takes its parameters.

    :raises ValueError: naming the bad one and the choices.
    """
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS, make_traffic

    for q in config.queries:
        if q.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {q.workload!r}; choose from {', '.join(WORKLOADS)}")
        if q.traffic not in TRAFFIC_PATTERNS:
            raise ValueError(f"unknown traffic {q.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
        try:
            make_traffic(q.traffic, rate=q.rate, duration=config.duration, **dict(q.traffic_params))
        except (ValueError, TypeError) as exc:
            raise ValueError(str(exc)) from None


_PROFILES: dict[str, Any] = {}


def _gpu_profile(name: str) -> Any:
    """:func:`pacer_sim.rapids.load_gpu_profile`, once per process (a failure too: mvn is slow to fail)."""
    from pacer_sim.rapids import load_gpu_profile

    if name not in _PROFILES:
        try:
            _PROFILES[name] = load_gpu_profile(name)
        except Exception as exc:
            _PROFILES[name] = exc
    found = _PROFILES[name]
    if isinstance(found, Exception):
        raise found
    return found


def build_cost_model(options: Mapping[str, Any], gpus: int) -> tuple[CostModel, str | None]:
    """The cost model ``gpu_profile``, ``cost_profile``, ``cost_param`` and ``noise`` ask for, and the warning
    line when the RAPIDS tools jar could not be had (the built-in curves are used then; the report says so)."""
    from pacer.infra.jars import JarResolutionError
    from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile
    from pacer_sim.rapids import rapids_cost_model

    cost, warning = CostModel(), None
    profile = str(options.get("gpu_profile", BUILTIN_PROFILE))
    if profile != BUILTIN_PROFILE and gpus > 0:
        try:
            cost = rapids_cost_model(_gpu_profile(profile))
        except ValueError as exc:
            raise ValueError(f"--gpu-profile: {exc}") from None
        except JarResolutionError as exc:
            warning = (f"--gpu-profile {profile}: GPU speed-ups fall back to pacer-sim's built-in curves "
                       f"(README 'Cost model defaults', config.cost_model) because NVIDIA's tools jar is "
                       f"unavailable: {exc}")
    if options.get("cost_profile"):
        try:
            cost = apply_cost_profile(cost, load_cost_profile(options["cost_profile"]), name=options["cost_profile"])
        except ValueError as exc:
            raise ValueError(f"--cost-profile: {exc}") from None
    try:
        cost = cost.with_overrides(parse_assignments(options.get("cost_param") or (), "--cost-param"))
        if options.get("noise") is not None:
            cost = replace(cost, noise=float(options["noise"]))
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    return cost, warning


class _RepeatFilter(logging.Filter):
    """Lets the first of each kind of Controller warning through (digits ignored) and counts the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[str] = set()
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        key = re.sub(r"\d+", "#", record.getMessage())
        if key in self.seen:
            self.suppressed += 1
            return False
        self.seen.add(key)
        return True


@contextmanager
def _once_per_kind(logger: str) -> Iterator[_RepeatFilter]:
    flt = _RepeatFilter()
    log = logging.getLogger(logger)
    log.addFilter(flt)
    try:
        yield flt
    finally:
        log.removeFilter(flt)


class SimRuntime:
    """The deterministic simulator: multi-query, modelled GPUs, byte-identical reports for one configuration."""

    name = "sim"
    summary = "pacer-sim's deterministic discrete-event simulator; every figure it gives is simulated"
    capabilities = frozenset({"deterministic", "multi-query", "gpu", "executors"})
    #: ``pacer run --runtime sim`` / ``pacer sim`` defaults that differ from the other runtimes'.
    defaults: Mapping[str, Any] = {"duration": 600.0}

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """The simulator's own flags."""
        group.add_argument("--resource-loss", action="append", default=[], metavar="START:END:FRACTION",
                           help="take a fraction of the cores away")
        group.add_argument("--noise", type=float, help="processing-time noise (log-normal sd, default 0.03)")
        group.add_argument("--cost-param", action="append", default=[], metavar="KEY=VALUE",
                           help="cost-model parameter, e.g. batch_overhead=0.4 or join.gpu_fixed=0.1 (see README)")
        group.add_argument("--gpu-profile", metavar="PLATFORM-GPU",
                           help=f"GPU speed-ups per operator from NVIDIA's RAPIDS qualification tool (Maven jar, "
                                f"fetched once with mvn), e.g. onprem-a100, dataproc-l4, emr-a10; '{BUILTIN_PROFILE}' "
                                f"keeps pacer-sim's built-in curves (default {DEFAULT_GPU_PROFILE}; read only when "
                                "--gpus > 0)")
        group.add_argument("--cost-profile", metavar="FILE",
                           help="measured kernel curves (pacer.cost-profile/1 from python -m pacer_sim.kernels)")
        group.add_argument("--executor-startup", type=flag_seconds, metavar="SECONDS",
                           help=f"with --executors: seconds from asking for an executor to its running "
                                f"(default {EXECUTOR_STARTUP_S:g}, a container starting)")
        group.add_argument("--watermark", metavar="SECONDS|none",
                           help=f"the queries' watermark delay: an aggregation then runs Spark's no-data batch after "
                                f"each batch that moved it (default {WATERMARK_S:g}, as pacer-spark's workloads; "
                                "'none': no watermark, no no-data batches)")
        group.add_argument("--arrival-period", type=flag_seconds, metavar="SECONDS",
                           help=f"seconds between a query's datasets (default 1, as pacer-gen writes; down to "
                                f"{MIN_ARRIVAL_PERIOD_S:g}): finer for records that arrive continuously, as on a "
                                "Kafka topic")
        group.add_argument("--calibrated", action="append", default=[], metavar="FILE",
                           help="an engine profile `pacer calibrate --runtime spark` wrote (repeatable, one per "
                                "workload): that workload's queries cost what Spark measured, not the built-in curves")
        group.add_argument("--measure-overhead", action="store_true",
                           help="time pacer's decisions (report no longer byte-identical)")

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: PluginManager) -> RunConfig:
        """The command line's defaults for what it left out (the RAPIDS GPU profile), checked before anything runs."""
        if "gpu_profile" not in config.options_for(self.name):
            config = config.with_options(self.name, gpu_profile=DEFAULT_GPU_PROFILE)
        self.check(config)
        return config

    def check(self, config: RunConfig) -> None:
        """Workloads, traffic and the simulator's options of ``config``.

        :raises ValueError: naming the problem.
        """
        check_workloads(config)
        options = config.options_for(self.name)
        for value in options.get("resource_loss") or ():
            parse_resource_loss(value)
        if config.executors is None and config.scale != "fixed":
            raise ValueError(f"scale {config.scale!r} changes the executors: give their bounds (--executors MIN:MAX)")
        if config.executors is not None and config.cores is not None:
            raise ValueError("cores and executors both size the cluster: give one")
        if float(options.get("executor_startup", 0.0)) < 0:
            raise ValueError(f"--executor-startup must be >= 0 s, got {options['executor_startup']}")
        parse_assignments(options.get("cost_param") or (), "--cost-param")
        parse_watermark(options.get("watermark", WATERMARK_S))
        arrival_period(options)
        load_profiles(options.get("calibrated"))

    def build(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> Simulation:
        """The :class:`Simulation` of ``config``: its queries added, not yet run (the warning, if any, is in its config).

        :raises ValueError: for a bad workload, traffic or simulator option.
        :raises ValueError: for a bad strategy parameter.
        """
        self.check(config)
        options = config.options_for(self.name)
        gpus = config.gpus if config.gpus is not None else DEFAULT_GPUS
        cost, warning = build_cost_model(options, gpus)
        profile = options.get("gpu_profile", BUILTIN_PROFILE)
        pm = plugin_manager or get_plugin_manager()
        scaler = None
        if config.executors is not None:
            scaler = Scaler(config.scale, config.scale_params, plugin_manager=pm, executors=config.executors,
                            initial=config.initial_executors, cores_per_executor=config.cores_per_executor, fallback=config.fallback)
        sim = Simulation(
            cores=config.cores or DEFAULT_CORES, gpus=gpus, scheduler=config.scheduler,
            scheduler_params=dict(config.scheduler_params) or None, seed=config.seed, cost_model=cost,
            resource_changes=[ResourceChange(*parse_resource_loss(v)) for v in options.get("resource_loss") or ()],
            measure_overhead=bool(options.get("measure_overhead")), fallback=config.fallback,
            plugin_manager=pm, monitor_interval=config.monitor_interval,
            overload=config.overload, scaler=scaler,
            executor_startup_s=float(options.get("executor_startup", EXECUTOR_STARTUP_S)),
            watermark_s=parse_watermark(options.get("watermark", WATERMARK_S)),
            engine_profiles=load_profiles(options.get("calibrated")),
            arrival_period_s=arrival_period(options),
            extra_config={"run": config.as_dict(), "gpu_profile": {
                "requested": profile, "read": gpus > 0 and profile != BUILTIN_PROFILE,
                "warning": warning and warning.split(" [remembered")[0]}},
        )
        for i, (qid, q) in enumerate(zip(config.query_ids(), config.queries, strict=True)):
            sim.add_query(
                q.workload, query_id=qid, traffic=q.traffic, rate=q.rate, traffic_params=q.traffic_params,
                admission=q.admission, admission_params=q.admission_params, placement=q.placement,
                placement_params=q.placement_params, deadline=q.deadline, partitions=config.partitions,
                duration=config.duration, max_rows=q.max_rows, max_bytes=q.max_bytes, seed=config.query_seed(i),
            )
        return sim

    def run(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> RunResult:
        """Simulate ``config`` (its traffic, then the drain); notes: fallbacks, speed, drain, the GPU-profile warning."""
        sim = self.build(config, plugin_manager=plugin_manager)
        warning = sim.extra_config["gpu_profile"]["warning"]
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
        t0 = time.perf_counter()
        with _once_per_kind("pacer.controller") as repeats:
            report = sim.run(config.duration)
        wall = time.perf_counter() - t0
        if repeats.suppressed:
            print(f"({repeats.suppressed} more warnings like the above; see the report's strategy_fallbacks and "
                  "overload)", file=sys.stderr)
        notes = []
        for query_id, q in report["queries"].items():
            if q.get("strategy_fallbacks"):
                placement = sim.controller.query(query_id).placement
                hint = " (no GPU: add --gpus N)" if sim.gpus == 0 and placement != "cpu-only" else ""
                notes.append(f"warning: {query_id}: {q['strategy_fallbacks']} decision(s) used the baseline because "
                             f"the strategy failed{hint}; gpu_operator_ratio {q['gpu_operator_ratio']:.2f} counts "
                             "what ran")
        notes.append(f"simulated {report['duration_s']:g} s ({config.duration:g} s of traffic + drain) in {wall:.2f} s "
                     f"wall ({sim.events / max(wall, 1e-9):,.0f} events/s); all figures are simulated")
        if not sim.drained:
            notes.append("warning: the drain limit was reached with data still buffered or running "
                         "(see datasets_pending)")
        return RunResult(report=report, controller=sim.controller, status=0, notes=notes)


#: The one instance the ``pacer_runtimes`` hook returns.
SIM_RUNTIME = SimRuntime()
