"""``pacer sim``: run strategies on the simulator and write a ``pacer.report/1`` file."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

from pacer import UnknownStrategyError, hookimpl
from pacer.cli import Command, UsageError
from pacer.plugins import PluginManager
from pacer.report import summary_table, write_report


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
    p.add_argument("--interval", type=float, help="the static trigger interval in seconds (admission static)")
    p.add_argument("--scheduler", default="fifo", help="scheduling strategy (default fifo)")
    p.add_argument("--placement", default="cpu-only", help="placement strategy (default cpu-only)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE", help="strategy parameter, e.g. admission.rho=0.7")
    p.add_argument("--deadline", type=float, help="deadline in seconds for every query (default: its window slide)")
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
    p.add_argument("--fallback", action="store_true", help="a raising strategy falls back to the baseline instead of stopping")
    p.add_argument("--measure-overhead", action="store_true", help="time pacer's decisions (report no longer byte-identical)")
    p.add_argument("--report", help="write the pacer.report/1 JSON here")


def build_simulation(args: argparse.Namespace, pm: PluginManager) -> Any:
    """Validate ``args`` (before anything runs) and return a ready :class:`Simulation`."""
    from dataclasses import replace

    from pacer_sim.costs import CostModel
    from pacer_sim.engine import ResourceChange, Simulation
    from pacer_workloads import TRAFFIC_PATTERNS, WORKLOADS

    for name in args.workload:
        if name not in WORKLOADS:
            raise UsageError(f"unknown workload {name!r}; choose from {', '.join(WORKLOADS)}")
    if args.traffic not in TRAFFIC_PATTERNS:
        raise UsageError(f"unknown traffic {args.traffic!r}; choose from {', '.join(TRAFFIC_PATTERNS)}")
    for flag, value, low in (("--rate", args.rate, 0), ("--duration", args.duration, 1e-9), ("--cores", args.cores, 1),
                             ("--partitions", args.partitions, 1), ("--monitor-interval", args.monitor_interval, 1e-9)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low:g}, got {value:g}")
    if args.deadline is not None and args.deadline <= 0:
        raise UsageError(f"--deadline must be > 0 seconds, got {args.deadline:g}; omit it to use each window's slide")
    params = split_strategy_params(args.param)
    try:
        infos = {kind: pm.find(name, kind) for kind, name in
                 (("admission", args.admission), ("scheduling", args.scheduler), ("placement", args.placement))}
    except UnknownStrategyError as exc:
        raise UsageError(str(exc)) from None
    if args.interval is not None:
        if args.interval <= 0:
            raise UsageError("--interval must be > 0 seconds")
        if "interval" not in {p.name for p in infos["admission"].params}:
            raise UsageError(f"--interval sets the static trigger; admission {args.admission!r} has no 'interval' "
                             "parameter (use --admission static)")
        params["admission"]["interval"] = str(args.interval)
    try:
        cost = CostModel().with_overrides(parse_assignments(args.cost_param, "--cost-param"))
        if args.noise is not None:
            cost = replace(cost, noise=args.noise)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    changes = [ResourceChange(*parse_resource_loss(v)) for v in args.resource_loss]
    sim = Simulation(
        cores=args.cores, gpus=args.gpus, scheduler=args.scheduler, scheduler_params=params["scheduler"] or None,
        seed=args.seed, cost_model=cost, resource_changes=changes, measure_overhead=args.measure_overhead,
        fallback=args.fallback, plugin_manager=pm, monitor_interval=args.monitor_interval,
        extra_config={"cli": cli_arguments(args)},
    )
    traffic_params = {k: float(v) for k, v in parse_assignments(args.traffic_param, "--traffic-param").items()}
    try:
        for workload in args.workload:
            sim.add_query(
                workload, traffic=args.traffic, rate=args.rate, traffic_params=traffic_params,
                admission=args.admission, admission_params=params["admission"], placement=args.placement,
                placement_params=params["placement"], deadline=args.deadline, partitions=args.partitions,
                duration=args.duration,
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return sim


def cli_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """Every ``pacer sim`` argument for the report's ``config.cli``, except ``--report`` (so two reports of the
    same run written to different files stay byte-identical) and the command plumbing."""
    skip = {"report", "command", "verbose"}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip and not k.startswith("_") and not callable(v)}


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    sim = build_simulation(args, pm)
    t0 = time.perf_counter()
    report = sim.run(args.duration)
    wall = time.perf_counter() - t0
    print(summary_table(report))
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
