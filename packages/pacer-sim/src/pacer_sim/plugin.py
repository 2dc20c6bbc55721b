"""``pacer sim``: run strategies on the simulator and write a ``pacer.report/1`` file."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pacer import StrategyError, UnknownStrategyError, hookimpl
from pacer.cli import Command, UsageError
from pacer.plugins import PluginManager
from pacer.report import summary_table, write_report
from pacer_sim.rapids import BUILTIN_PROFILE, DEFAULT_GPU_PROFILE


def parse_assignments(values: Sequence[str], what: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a malformed item raises :class:`UsageError`."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def split_strategy_params(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--param admission.rho=0.5`` -> ``{"admission": {"rho": "0.5"}}``."""
    out: dict[str, dict[str, str]] = {"admission": {}, "placement": {}, "scheduler": {}}
    for key, value in parse_assignments(values, "--param").items():
        decision, _, name = key.partition(".")
        if decision not in out or not name:
            raise UsageError(f"--param keys look like admission.NAME, placement.NAME or scheduler.NAME; got {key!r}")
        out[decision][name] = value
    return out


_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|min|h)?\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_seconds(flag: str, value: str | None) -> float | None:
    """``"10s"``, ``"500ms"``, ``"2m"`` or plain seconds (``"2.5"``) -> seconds (> 0); None stays None.

    :raises UsageError: for anything else, or a value that is not > 0.
    """
    if value is None:
        return None
    match = _DURATION.match(str(value))
    if not match:
        raise UsageError(f"{flag} expects a duration such as 10s, 500ms, 2m or plain seconds, got {value!r}")
    seconds = float(match.group(1)) * _UNIT_S[match.group(2) or "s"]
    if seconds <= 0:
        raise UsageError(f"{flag} must be > 0 seconds, got {value!r}")
    return seconds


def parse_resource_loss(value: str) -> tuple[float, float, float]:
    """``START:END:FRACTION`` -> a tuple; bad input raises :class:`UsageError`."""
    try:
        start, end, fraction = (float(x) for x in value.split(":"))
    except ValueError:
        raise UsageError(f"--resource-loss expects START:END:FRACTION (e.g. 200:400:0.25), got {value!r}") from None
    if not (0 <= start < end and 0 < fraction < 1):
        raise UsageError("--resource-loss needs 0 <= START < END and 0 < FRACTION < 1")
    return start, end, fraction


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", nargs="+", action="extend", required=True,
                   help="lr1 lr1t lr2 lr3 cm1 cm2; several values (or repeats) run several queries")
    p.add_argument("--traffic", default="constant", help="constant, random, sinusoidal, wave, binary, spike, increasing, decreasing")
    p.add_argument("--rate", type=float, default=1000.0, help="mean input rate in rows/s (default 1000)")
    p.add_argument("--traffic-param", action="append", default=[], metavar="KEY=VALUE", help="traffic parameter, e.g. period=30")
    p.add_argument("--admission", default="asap", help="admission strategy (default asap)")
    p.add_argument("--interval", help="the static trigger interval, e.g. 10s, 500ms or plain seconds (admission static)")
    p.add_argument("--scheduler", default="fifo", help="scheduling strategy (default fifo)")
    p.add_argument("--placement", default="cpu-only", help="placement strategy (default cpu-only)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE", help="strategy parameter, e.g. admission.rho=0.7")
    p.add_argument("--deadline", help="deadline for every query, e.g. 10s, 500ms or plain seconds (default: its window slide)")
    p.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (default 600)")
    p.add_argument("--seed", type=int, default=7, help="seed of traffic and noise (default 7)")
    p.add_argument("--cores", type=int, default=2, help="task slots (default 2)")
    p.add_argument("--gpus", type=int, default=0, help="modelled GPUs (default 0)")
    p.add_argument("--partitions", type=int, default=2, help="partitions per batch (default 2)")
    p.add_argument("--resource-loss", action="append", default=[], metavar="START:END:FRACTION", help="take a fraction of the cores away")
    p.add_argument("--monitor-interval", type=float, default=1.0, help="seconds per row of the report's series (default 1)")
    p.add_argument("--noise", type=float, help="processing-time noise (log-normal sd, default 0.03)")
    p.add_argument("--cost-param", action="append", default=[], metavar="KEY=VALUE",
                   help="cost-model parameter, e.g. batch_overhead=0.4 or join.gpu_fixed=0.1 (see README)")
    p.add_argument("--gpu-profile", default=DEFAULT_GPU_PROFILE, metavar="PLATFORM-GPU",
                   help=f"GPU speed-ups per operator from NVIDIA's RAPIDS qualification tool (Maven jar, fetched once "
                        f"with mvn), e.g. onprem-a100, dataproc-l4, emr-a10; '{BUILTIN_PROFILE}' keeps pacer-sim's "
                        f"built-in curves (default {DEFAULT_GPU_PROFILE}; read only when --gpus > 0)")
    p.add_argument("--cost-profile", metavar="FILE",
                   help="measured kernel curves (pacer.cost-profile/1 from python -m pacer_sim.kernels)")
    p.add_argument("--overload", choices=("shed", "keep"), default="shed",
                   help="a query no batch size can serve within its deadline: shed the datasets that cannot make it "
                        "(default, the Controller's) or keep everything and only report it")
    p.add_argument("--max-rows", type=int, default=0, metavar="N",
                   help="read cap: at most N rows per batch (Spark's maxOffsetsPerTrigger; 0: none)")
    p.add_argument("--max-bytes", type=int, default=0, metavar="N",
                   help="read cap: at most N bytes per batch (Spark's maxBytesPerTrigger; 0: none)")
    p.add_argument("--no-fallback", dest="fallback", action="store_false",
                   help="stop on a raising or ill-formed strategy decision instead of using its baseline "
                        "(asap, fifo, cpu-only) for that decision, as pacer run does")
    p.add_argument("--fallback", dest="fallback", action="store_true", default=True,
                   help="accepted for compatibility: falling back is the default")
    p.add_argument("--measure-overhead", action="store_true", help="time pacer's decisions (report no longer byte-identical)")
    p.add_argument("--report", help="write the pacer.report/1 JSON here")


def build_simulation(args: argparse.Namespace, pm: PluginManager) -> Any:
    """Validate ``args`` (before anything runs) and return a ready :class:`Simulation`."""
    from dataclasses import replace

    from pacer_sim.engine import ResourceChange, Simulation
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS

    for name in args.workload:
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if args.traffic not in TRAFFIC_PATTERNS:
        raise UsageError(f"unknown traffic {args.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
    for flag, value in (("--duration", args.duration), ("--monitor-interval", args.monitor_interval)):
        if not value > 0:
            raise UsageError(f"{flag} must be > 0 seconds, got {value:g}")
    for flag, value, low in (("--rate", args.rate, 0), ("--cores", args.cores, 1), ("--partitions", args.partitions, 1),
                             ("--gpus", args.gpus, 0), ("--max-rows", args.max_rows, 0),
                             ("--max-bytes", args.max_bytes, 0)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low:g}, got {value:g}")
    try:
        deadline = parse_seconds("--deadline", args.deadline)
    except UsageError as exc:
        raise UsageError(f"{exc}; omit --deadline to use each window's slide") from None
    interval = parse_seconds("--interval", args.interval)
    params = split_strategy_params(args.param)
    try:
        infos = {kind: pm.find(name, kind) for kind, name in
                 (("admission", args.admission), ("scheduling", args.scheduler), ("placement", args.placement))}
    except UnknownStrategyError as exc:
        raise UsageError(str(exc)) from None
    if interval is not None:
        if "interval" not in {p.name for p in infos["admission"].params}:
            raise UsageError(f"--interval sets the static trigger; admission {args.admission!r} has no 'interval' "
                             "parameter (use --admission static)")
        params["admission"]["interval"] = str(interval)
    cost, warning = build_cost_model(args)
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    try:
        cost = cost.with_overrides(parse_assignments(args.cost_param, "--cost-param"))
        if args.noise is not None:
            cost = replace(cost, noise=args.noise)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    changes = [ResourceChange(*parse_resource_loss(v)) for v in args.resource_loss]
    sim = Simulation(
        cores=args.cores, gpus=args.gpus, scheduler=args.scheduler, scheduler_params=params["scheduler"] or None,
        seed=args.seed, cost_model=cost, resource_changes=changes, measure_overhead=args.measure_overhead,
        fallback=args.fallback, plugin_manager=pm, monitor_interval=args.monitor_interval, overload=args.overload,
        extra_config={"cli": cli_arguments(args), "gpu_profile": {
            "requested": args.gpu_profile, "read": args.gpus > 0 and args.gpu_profile != BUILTIN_PROFILE,
            "warning": warning and warning.split(" [remembered")[0]}},
    )
    traffic_params = {k: float(v) for k, v in parse_assignments(args.traffic_param, "--traffic-param").items()}
    try:
        for workload in args.workload:
            sim.add_query(
                workload, traffic=args.traffic, rate=args.rate, traffic_params=traffic_params,
                admission=args.admission, admission_params=params["admission"], placement=args.placement,
                placement_params=params["placement"], deadline=deadline, partitions=args.partitions,
                duration=args.duration, max_rows=args.max_rows, max_bytes=args.max_bytes,
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return sim


def cli_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Every ``pacer sim`` argument for the report's ``config.cli``, except ``--report`` (so two reports of the
    same run written to different files stay byte-identical) and the command plumbing."""
    skip = {"report", "command", "verbose"}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip and not k.startswith("_") and not callable(v)}


def build_cost_model(args: argparse.Namespace) -> tuple[Any, str | None]:
    """The cost model ``--gpu-profile`` and ``--cost-profile`` ask for, and the warning line when the RAPIDS
    tools jar could not be had (the built-in curves are used then, and the warning goes into the report)."""
    from pacer.jars import JarResolutionError
    from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile
    from pacer_sim.costs import CostModel
    from pacer_sim.rapids import rapids_cost_model

    cost, warning = CostModel(), None
    if args.gpu_profile != BUILTIN_PROFILE and args.gpus > 0:
        try:
            cost = rapids_cost_model(_gpu_profile(args.gpu_profile))
        except ValueError as exc:
            raise UsageError(f"--gpu-profile: {exc}") from None
        except JarResolutionError as exc:
            warning = (f"--gpu-profile {args.gpu_profile}: GPU speed-ups fall back to pacer-sim's built-in curves "
                       f"(README 'Cost model defaults', config.cost_model) because NVIDIA's tools jar is "
                       f"unavailable: {exc}")
    if args.cost_profile:
        try:
            cost = apply_cost_profile(cost, load_cost_profile(args.cost_profile), name=args.cost_profile)
        except ValueError as exc:
            raise UsageError(f"--cost-profile: {exc}") from None
    return cost, warning


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


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    sim = build_simulation(args, pm)
    t0 = time.perf_counter()
    with _once_per_kind("pacer.controller") as repeats:
        try:
            report = sim.run(args.duration)
        except StrategyError as exc:
            if args.gpus == 0 and "GPU" in str(exc):
                raise UsageError(f"{exc}. The simulation has no GPU: add --gpus N (N >= 1) to model one, or drop "
                                 "--no-fallback to run the cpu-only baseline instead") from None
            raise UsageError(f"{exc} (drop --no-fallback to use the baseline for that decision instead)") from None
    wall = time.perf_counter() - t0
    if repeats.suppressed:
        print(f"({repeats.suppressed} more warnings like the above; see the report's strategy_fallbacks and overload)",
              file=sys.stderr)
    print(summary_table(report))
    for query_id, q in report["queries"].items():
        if q.get("strategy_fallbacks"):
            hint = " (no GPU: add --gpus N)" if args.gpus == 0 and args.placement != "cpu-only" else ""
            print(f"warning: {query_id}: {q['strategy_fallbacks']} decision(s) used the baseline because the strategy "
                  f"failed{hint}; gpu_operator_ratio {q['gpu_operator_ratio']:.2f} counts what ran")
    print(f"simulated {report['duration_s']:g} s ({args.duration:g} s of traffic + drain) in {wall:.2f} s wall "
          f"({sim.events / max(wall, 1e-9):,.0f} events/s); all figures are simulated")
    if not sim.drained:
        print("warning: the drain limit was reached with data still buffered or running (see datasets_pending)")
    if args.report:
        print(f"report: {write_report(report, args.report)}")
    return 0


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer sim``."""
    return [Command("sim", "run strategies on the deterministic simulator", _configure, _run)]
