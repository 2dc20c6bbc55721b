"""``pacer run --runtime NAME``: the one run command, its common flags, and the parsers every command shares.

The flags that describe a run (workload, traffic, rate, strategies, deadline, duration, seed,
resources, overload, read caps, fallback) live here once and become a :class:`~pacer.run.RunConfig`;
each installed runtime adds its own flags in an argument group of its own
(:meth:`pacer.run.Runtime.configure`). ``--runtime`` defaults to ``spark``. A runtime's package may
offer an alias with the same flags (``pacer sim`` is ``pacer run --runtime sim``):
:func:`run_alias_command`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pacer import durations
from pacer.cli.commands import Command, UsageError
from pacer.controller import StrategyError
from pacer.plugins import PluginManager, UnknownRuntimeError, UnknownStrategyError
from pacer.report import summary_table, write_report
from pacer.run import OVERLOAD_CHOICES, QueryRun, RunConfig, Runtime
from pacer.runtime_api import (
    DEADLINE_ADMISSION,
    DEFAULT_ADMISSION,
    DEFAULT_OVERLOAD,
    default_admission,
    executor_bounds,
)

#: The runtime ``pacer run`` uses without ``--runtime`` (what the README and users run).
DEFAULT_RUNTIME = "spark"
#: Seconds of traffic when neither ``--duration`` nor the runtime says otherwise.
DEFAULT_DURATION = 300.0


def seconds_flag(flag: str, value: str | None) -> float | None:
    """A duration flag that must be > 0 (:func:`pacer.durations.parse_seconds`, the one duration parser); None stays
    None.

    :raises UsageError: naming ``flag`` and what a valid duration looks like, for an unreadable or non-positive value.
    """
    try:
        return durations.parse_seconds(value, flag, positive=True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def default_trigger_or_seconds_flag(flag: str, value: str | None) -> float | None:
    """A trigger interval flag: seconds >= 0, where 0 is Spark's default trigger
    (:func:`pacer.durations.parse_seconds`); None stays None.

    :raises UsageError: naming ``flag``, for an unreadable or negative value.
    """
    try:
        seconds = durations.parse_seconds(value, flag)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if seconds is not None and seconds < 0:
        raise UsageError(f"{flag} must be >= 0 seconds (0: Spark's default trigger), got {value!r}")
    return seconds


def parse_assignments(values: Sequence[str], what: str) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a malformed item raises :class:`UsageError`."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def traffic_value(text: str) -> float | str:
    """A ``--traffic-param`` value: a number when it reads as one (``30``, ``0.5``, ``1e3``), else the text
    (``file=my.csv``). The traffic pattern refuses text where it needs a number, naming the parameter."""
    try:
        return float(text)
    except ValueError:
        return text


def split_strategy_params(values: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--param admission.rho=0.5`` -> ``{"admission": {"rho": "0.5"}, "placement": {}, "scheduler": {},
    "scale": {}}``."""
    out: dict[str, dict[str, str]] = {"admission": {}, "placement": {}, "scheduler": {}, "scale": {}}
    for key, value in parse_assignments(values, "--param").items():
        decision, _, name = key.partition(".")
        if decision not in out or not name:
            raise UsageError(f"--param keys look like admission.NAME, scheduler.NAME, placement.NAME or scale.NAME; "
                             f"got {key!r}")
        out[decision][name] = value
    return out


def report_folder(path: str) -> Path:
    """Create the folder a ``--report`` file goes in, parents included.

    :raises UsageError: when ``path`` is a folder or its folder cannot be created.
    """
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"--report {path!r} is a folder; give a file name, e.g. {str(target / 'report.json')!r}")
    try:
        target.resolve().parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--report: cannot create the folder for {path!r} ({exc.strerror}); choose another path") \
            from None
    return target.resolve().parent


# ---------------------------------------------------------------------- flags


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that describe a run, shared by every runtime."""
    p.add_argument("--workload", nargs="+", action="extend",
                   help="lr1 lr1t lr2 lr3 cm1 cm2; several values (or repeats) run several queries")
    p.add_argument("--traffic", default="constant",
                   help="constant, random, sinusoidal, wave, binary, spike, increasing, decreasing, or trace (your "
                        "own traffic from a file: --traffic-param file=PATH) (default constant)")
    p.add_argument("--rate", type=float, default=1000.0, help="mean input rate in rows/s (default 1000)")
    p.add_argument("--traffic-param", action="append", default=[], metavar="KEY=VALUE",
                   help="traffic parameter, e.g. period=30, noise=0 (the exact shape, the same for every seed; "
                        "default 1: Poisson rows, burst onsets drawn from the seed) or file=my.csv (trace)")
    p.add_argument("--admission", help=f"admission strategy (default {DEADLINE_ADMISSION} with --deadline, which "
                                       f"meets it with the fewest batches, as attach(deadline=...) does; else "
                                       f"{DEFAULT_ADMISSION}: Spark's default trigger); `pacer strategies` lists them, "
                                       "e.g. zstream, fixed-point, lmstream, static, pid, min-rows")
    p.add_argument("--interval", help="the batch interval of admission static or pid, e.g. 10s, 500ms or 2 (seconds)")
    p.add_argument("--scheduler", default="fifo", help="scheduling strategy (default fifo)")
    p.add_argument("--placement", default="cpu-only", help="placement strategy (default cpu-only)")
    p.add_argument("--scale", default="fixed",
                   help="scaling strategy: how many executors to hold (default fixed; spark-dynamic is Spark's "
                        "dynamic allocation; deadline is pacer's deadline scaler, which holds the fewest executors "
                        "that meet each query's --deadline, the target it is named for); needs --executors")
    p.add_argument("--executors", metavar="MIN:MAX",
                   help="executors the scaler may hold, e.g. 1:8 (the run starts with MIN); each has "
                        "--cores-per-executor task slots")
    p.add_argument("--initial-executors", type=int, metavar="N",
                   help="with --executors: executors the run starts with (default MIN; Spark's "
                        "spark.dynamicAllocation.initialExecutors)")
    p.add_argument("--cores-per-executor", type=int, default=1, metavar="N",
                   help="task slots per executor, with --executors (default 1)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE",
                   help="strategy parameter, e.g. admission.rho=0.7")
    p.add_argument("--deadline", help="deadline for every query, e.g. 10s, 500ms or 10 (seconds); "
                                      "default: its window slide")
    p.add_argument("--overload", choices=OVERLOAD_CHOICES[::-1],
                   help=f"when a query's offered load cannot be served within its deadline by any batch size: keep "
                        f"(default {DEFAULT_OVERLOAD} for pacer run, pacer sim, pacer bench and attach alike: no data "
                        "is dropped unless asked, as in Spark) "
                        "drops nothing and only reports the overload; shed drops the buffered datasets that can no "
                        "longer make it (counted as missed, never read), so latency stays bounded for the rest")
    p.add_argument("--max-rows", type=int, default=0, metavar="N",
                   help="read cap: at most N rows per batch, whatever the admission (Spark's maxOffsetsPerTrigger; "
                        "default 0: none)")
    p.add_argument("--max-bytes", type=int, default=0, metavar="N",
                   help="read cap: at most N bytes per batch (Spark's maxBytesPerTrigger; default 0: none)")
    p.add_argument("--duration", type=durations.flag_seconds,
                   help="how long the traffic runs, e.g. 10m, '2 minutes' or 600 (seconds) (default: the runtime's, "
                        "sim 600 s, spark 120 s)")
    p.add_argument("--seed", type=int, default=7,
                   help="seed of the traffic (query i gets SEED+i) and of the simulator's noise (default 7)")
    p.add_argument("--cores", type=int, help="task slots (default: the runtime's; sim 2, Spark its parallelism)")
    p.add_argument("--gpus", type=int, help="GPUs (default: the runtime's; sim 0, Spark 1 when RAPIDS is loaded)")
    p.add_argument("--partitions", type=int, default=2,
                   help="partitions per batch: the most cores one batch uses (Spark's shuffle partitions; default 2)")
    p.add_argument("--monitor-interval", type=durations.flag_seconds, default=1.0,
                   help="time per row of the report's series, e.g. 1s or 500ms (default 1 s)")
    p.add_argument("--no-fallback", dest="fallback", action="store_false",
                   help="fallback is on by default: a strategy that raises is logged, counted and replaced by its "
                        "baseline (asap, fifo, cpu-only) for that decision; --no-fallback stops the run instead")
    p.add_argument("--fallback", dest="fallback", action="store_true", default=True,
                   help="accepted for compatibility: falling back is the default")
    p.add_argument("--config", metavar="FILE",
                   help="run this configuration (pacer.run/1 TOML or JSON, or a report's config.run) instead of the "
                        "flags above; the runtime's own flags still apply")
    p.add_argument("--save-config", metavar="FILE", help="write the run's configuration here (.toml or .json)")
    p.add_argument("--report", help="write the pacer.report/1 JSON here (missing folders are created)")


def config_from_args(args: argparse.Namespace, *, duration_default: float = DEFAULT_DURATION,
                     pm: PluginManager | None = None) -> RunConfig:
    """The :class:`RunConfig` the common flags describe (``--config``: the file's), checked for form.

    Strategies are checked by :func:`check_strategies`, workloads and traffic by the runtime. With ``pm``, a
    deadline stated with no ``--admission`` gets :data:`~pacer.runtime_api.DEADLINE_ADMISSION` only where it is
    installed, else Spark's default trigger with a warning, as ``attach`` does
    (:meth:`~pacer.plugins.PluginManager.default_admission`).

    :raises UsageError: naming the flag and what to do.
    """
    duration = args.duration if args.duration is not None else duration_default
    for flag, value in (("--duration", duration), ("--monitor-interval", args.monitor_interval)):
        if not value > 0:
            raise UsageError(f"{flag} must be > 0 seconds, got {value:g}")
    for flag, count, low in (("--rate", args.rate, 0), ("--cores", args.cores, 1), ("--partitions", args.partitions, 1),
                             ("--gpus", args.gpus, 0), ("--max-rows", args.max_rows, 0),
                             ("--max-bytes", args.max_bytes, 0)):
        if count is not None and count < low:
            raise UsageError(f"{flag} must be >= {low:g}, got {count:g}")
    if args.report is not None:
        report_folder(args.report)
    if args.config is not None:
        if args.workload:
            raise UsageError("--config FILE describes the run; drop --workload (or drop --config)")
        try:
            return RunConfig.load(args.config)
        except ValueError as exc:
            raise UsageError(f"--config: {exc}") from None
    if not args.workload:
        raise UsageError("give --workload W (lr1 lr1t lr2 lr3 cm1 cm2), or --config FILE")
    try:
        deadline = seconds_flag("--deadline", args.deadline)
    except UsageError as exc:
        raise UsageError(f"{exc}; omit --deadline to use each window's slide") from None
    params = split_strategy_params(args.param)
    interval = seconds_flag("--interval", args.interval)
    if interval is not None:
        params["admission"]["interval"] = str(interval)
    traffic_params = {key: traffic_value(value)
                      for key, value in parse_assignments(args.traffic_param, "--traffic-param").items()}
    admission = args.admission or default_admission(deadline is not None)
    if not args.admission and pm is not None:
        admission, fallback = pm.default_admission(deadline is not None)
        if fallback:
            print(f"pacer: {fallback}, or name one with --admission", file=sys.stderr)
    queries = tuple(
        QueryRun(workload, traffic=args.traffic, rate=args.rate, traffic_params=traffic_params,
                 admission=admission,
                 admission_params=params["admission"], placement=args.placement,
                 placement_params=params["placement"], deadline=deadline, max_rows=args.max_rows,
                 max_bytes=args.max_bytes)
        for workload in args.workload
    )
    executors = None
    if args.executors is not None:
        try:
            executors = executor_bounds(args.executors, args.initial_executors, setting="--executors")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if args.cores is not None:
            raise UsageError("--cores and --executors both size the cluster: give --executors MIN:MAX with "
                             "--cores-per-executor N, or --cores alone")
    elif args.initial_executors is not None:
        raise UsageError("--initial-executors needs --executors MIN:MAX")
    elif args.scale != "fixed" or params["scale"]:
        raise UsageError(f"--scale {args.scale} changes the executors: give the bounds with --executors MIN:MAX")
    if args.cores_per_executor < 1:
        raise UsageError(f"--cores-per-executor must be >= 1, got {args.cores_per_executor}")
    return RunConfig(queries, scheduler=args.scheduler, scheduler_params=params["scheduler"], duration=duration,
                     seed=args.seed, cores=args.cores, gpus=args.gpus, partitions=args.partitions,
                     overload=args.overload or DEFAULT_OVERLOAD, fallback=args.fallback,
                     monitor_interval=args.monitor_interval,
                     scale=args.scale, scale_params=params["scale"], executors=executors,
                     cores_per_executor=args.cores_per_executor, initial_executors=args.initial_executors)


def check_strategies(config: RunConfig, pm: PluginManager) -> None:
    """Every strategy of ``config`` is installed and takes its parameters.

    :raises UsageError: naming the strategy or parameter, with the installed ones.
    """
    try:  # every name first (admission, scheduler, placement), then the parameters
        admissions = [pm.find(q.admission, "admission") for q in config.queries]
        scheduler = pm.find(config.scheduler, "scheduling")
        scale = pm.find(config.scale, "scaling")
        placements = [pm.find(q.placement, "placement") for q in config.queries]
        for q, admission in zip(config.queries, admissions, strict=True):
            if "interval" in q.admission_params and "interval" not in {p.name for p in admission.params}:
                raise UsageError(f"--interval is the batch interval of an interval-based admission (static, pid); "
                                 f"{q.admission!r} has none: drop --interval or use --admission static")
        for q, admission, placement in zip(config.queries, admissions, placements, strict=True):
            admission.resolve_params(q.admission_params)
            placement.resolve_params(q.placement_params)
        scheduler.resolve_params(config.scheduler_params)
        scale.resolve_params(config.scale_params)
    except UnknownStrategyError as exc:
        raise UsageError(f"{exc}. Run `pacer strategies` to list them.") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _explicit(args: argparse.Namespace, group: argparse._ArgumentGroup) -> dict[str, Any]:
    """The flags of ``group`` given a value other than their default."""
    return {a.dest: getattr(args, a.dest) for a in group._group_actions
            if getattr(args, a.dest, a.default) != a.default}


# ---------------------------------------------------------------------- the command


def _run(args: argparse.Namespace, pm: PluginManager, runtime: Runtime,
         groups: Mapping[str, argparse._ArgumentGroup]) -> int:
    for other, group in groups.items():
        given = _explicit(args, group) if other != runtime.name else {}
        if given:
            flags = ", ".join("--" + dest.replace("_", "-") for dest in given)
            raise UsageError(f"{flags}: an option of runtime {other!r}; add --runtime {other} (or drop it)")
    defaults: Mapping[str, Any] = getattr(runtime, "defaults", {})
    config = config_from_args(args, duration_default=float(defaults.get("duration", DEFAULT_DURATION)), pm=pm)
    own = groups.get(runtime.name)
    if own is not None:
        config = config.with_options(runtime.name, **_explicit(args, own))
    try:
        config = runtime.from_args(args, config, pm)
    except ValueError as exc:  # the runtime's own flags, refused by the runtime (library code raises ValueError)
        raise UsageError(str(exc)) from None
    check_strategies(config, pm)
    if args.save_config:
        print(f"run configuration: {config.save(args.save_config)}")
    try:
        result = runtime.run(config, plugin_manager=pm)
    except StrategyError as exc:
        hint = ("drop --no-fallback to use the baseline for that decision instead" if not config.fallback
                else "see the strategy's package")
        if "GPU" in str(exc) and not config.gpus:
            hint = ("the run has no GPU: add --gpus N (N >= 1) where the runtime models one, or drop --no-fallback "
                    "to run the cpu-only baseline instead")
        raise UsageError(f"{exc} ({hint})") from None
    except ValueError as exc:  # a configuration the runtime refuses (unknown workload, traffic parameter, ...)
        raise UsageError(str(exc)) from None
    print(summary_table(result.report))
    for line in result.notes:
        print(line)
    if args.report:
        print(f"report: {write_report(result.report, args.report)}")
    return result.status


def _runtime_group(p: argparse.ArgumentParser, runtime: Runtime) -> argparse._ArgumentGroup:
    group = p.add_argument_group(f"runtime {runtime.name}", f"{runtime.summary} (only with --runtime {runtime.name})")
    runtime.configure(group)
    return group


def run_command(pm: PluginManager) -> Command:
    """``pacer run``: the common flags, ``--runtime`` and one argument group per installed runtime."""
    try:
        runtimes = pm.runtimes()
    except UnknownRuntimeError as exc:
        print(f"pacer: warning: {exc}", file=sys.stderr)
        runtimes = {}
    groups: dict[str, argparse._ArgumentGroup] = {}

    def configure(p: argparse.ArgumentParser) -> None:
        p.add_argument("--runtime", default=DEFAULT_RUNTIME,
                       help=f"where to run: {', '.join(sorted(runtimes)) or 'no runtime is installed'} "
                            f"(default {DEFAULT_RUNTIME})")
        add_run_arguments(p)
        for name, runtime in sorted(runtimes.items()):
            groups[name] = _runtime_group(p, runtime)

    def run(args: argparse.Namespace, pm: PluginManager) -> int:
        try:
            runtime = runtimes[args.runtime] if args.runtime in runtimes else pm.find_runtime(args.runtime)
        except UnknownRuntimeError as exc:
            raise UsageError(str(exc)) from None
        return _run(args, pm, runtime, groups)

    return Command("run", "run workloads under pacer's strategies on a runtime (--runtime spark or sim)",
                   configure, run)


def run_alias_command(name: str, runtime: Runtime, help: str) -> Command:
    """A command that is ``pacer run --runtime <runtime.name>``: the same flags (the runtime's only), the same output."""
    groups: dict[str, argparse._ArgumentGroup] = {}

    def configure(p: argparse.ArgumentParser) -> None:
        add_run_arguments(p)
        groups[runtime.name] = _runtime_group(p, runtime)

    def run(args: argparse.Namespace, pm: PluginManager) -> int:
        return _run(args, pm, runtime, groups)

    return Command(name, help, configure, run)
