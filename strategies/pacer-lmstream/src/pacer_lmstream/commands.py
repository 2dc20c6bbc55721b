"""``pacer calibrate``: the rows LMStream's Eq. 10 starts from, (``--kernels``) a measured cost profile, and
(``--runtime spark``) what a workload's batches cost the engine (:mod:`pacer.engine_profile`).

Registered through the ``pacer_cli_commands`` hook (entry point ``calibrate`` of the ``pacer`` group). The sweep
is :mod:`pacer_lmstream.sweep` (run on the simulator, pacer-sim); ``--kernels`` times this machine's operator
kernels through :mod:`pacer_sim.kernel_calibration` and writes the cost profile ``pacer sim --cost-profile FILE``
loads (and the sweep then runs on it). ``--runtime`` names an installed runtime (``pacer_runtimes``); the sweep
runs on ``sim`` only. On a runtime that measures itself (:class:`pacer.runtime_api.CalibratesEngine`: Spark),
calibrate measures the engine instead: the runtime runs the workload in tiny and in large batches and writes the
engine profile ``pacer run --engine-profile`` starts from. The library raises ``ValueError``; only this command
turns it into a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pacer import UnknownRuntimeError, UnknownStrategyError, hookimpl
from pacer.cli.commands import Command, UsageError
from pacer.durations import flag_seconds
from pacer.plugins import PluginManager

#: ``--runtime spark``: the large batches' rate (rows/s), triggers (seconds) and batches per trigger by default:
#: 4 000 to 20 000 rows, three of each.
ENGINE_RATE = 2000.0
ENGINE_INTERVALS = (2.0, 5.0, 10.0)
ENGINE_BATCHES = 3


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", default="sim", help="sim (default): sweep LMStream's inflection points on the "
                   "simulator; spark (or another runtime that measures itself): measure what the workload's batches "
                   "cost it into an engine profile (--out FILE; pacer run --engine-profile FILE)")
    p.add_argument("--workload", help="lr1 lr1t lr2 lr3 cm1 cm2: sweep inflection points for it, or measure it")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--rate", type=float, help=f"input rate in rows/s (measuring an engine: the large batches' "
                      f"rate, default {ENGINE_RATE:g})")
    rate.add_argument("--rate-kbps", type=float, help="input rate in KB/s (1 KB = 1000 bytes of the stream's CSV)")
    p.add_argument("--out", help="calibration file to write (JSON; LMStream's initial_rows loads it)")
    p.add_argument("--inflection-points", type=float, nargs="+", metavar="BYTES",
                   help="InfPT values to sweep (default: InfPT_0 x 0.25 0.5 1 2 4, InfPT_0 "
                   "placement.initial_inflection_bytes or the paper's 150 KB)")
    p.add_argument("--admission", default="lmstream", help="admission during the sweep (default lmstream)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE",
                   help="strategy parameter, e.g. admission.max_datasets=1 or placement.initial_inflection_bytes=2e5")
    p.add_argument("--duration", type=flag_seconds, default=60.0,
                   help="traffic per point, e.g. 60, 60s or 1m (default 60 s)")
    p.add_argument("--warm-up", type=int, default=10, help="batches dropped at the start of each point (default 10)")
    p.add_argument("--seed", type=int, default=3, help="seed of traffic and noise (default 3)")
    p.add_argument("--cores", type=int, default=2, help="task slots (default 2)")
    p.add_argument("--gpus", type=int, default=1, help="modelled GPUs (default 1)")
    p.add_argument("--partitions", type=int, default=2, help="partitions per batch (default 2)")
    p.add_argument("--kernels", action="store_true", help="time real operator kernels (pacer_sim.kernels) and "
                   "write the cost profile pacer sim --cost-profile loads")
    p.add_argument("--profile-out", help="cost profile to write with --kernels")
    p.add_argument("--kernel-sizes", type=int, nargs="+", metavar="BYTES",
                   help="batch sizes --kernels times (default: pacer_sim.kernels', 64 KB-64 MB)")
    p.add_argument("--cost-profile", help="sweep on the simulator with this measured cost profile "
                   "(with --kernels: the profile just written)")
    p.add_argument("--repeats", type=int, default=5, help="timings per kernel and size with --kernels (default 5)")
    p.add_argument("--kernel-implementations", nargs="+", metavar="IMPL",
                   help="implementations --kernels times: numpy numba pandas cupy numba-cuda cudf (default: all; "
                   "each one whose library or GPU is missing is skipped, saying why)")
    engine = p.add_argument_group("measuring an engine (--runtime spark)")
    engine.add_argument("--intervals", type=flag_seconds, nargs="+", default=list(ENGINE_INTERVALS), metavar="SECONDS",
                        help="fixed triggers whose batches are measured: rate x interval rows each (default "
                        f"{' '.join(f'{t:g}' for t in ENGINE_INTERVALS)})")
    engine.add_argument("--batches", type=int, default=ENGINE_BATCHES,
                        help=f"batches measured per interval (default {ENGINE_BATCHES})")
    engine.add_argument("--master", help="Spark master (default local[2]; spark://HOST:PORT also measures an "
                        "executor's start-up)")
    p.add_argument("--kernel-curves", nargs="+", default=[], metavar="DEVICE=IMPL",
                   help="whose points become the simulator's curves, e.g. cpu=numba gpu=numba-cuda (default: "
                   "numpy on the CPU and cupy on the GPU, else the next measured)")


def _check_runtime(name: str, pm: PluginManager, *, sweep: bool) -> None:
    """``--runtime`` names an installed runtime (``pacer_runtimes``; an unknown one is refused, listing those
    installed); the sweep runs on the simulator only, so with ``sweep`` any other is refused, saying why."""
    from pacer_lmstream.sweep import SWEEP_RUNTIME, refusal

    why = refusal(name)
    if why is None:
        return
    if name != "spark":  # Spark's refusal says why whether or not pacer-spark is installed
        try:
            pm.find_runtime(name)
        except UnknownRuntimeError as exc:
            raise UsageError(f"--runtime {name}: {exc}; calibrate sweeps on --runtime {SWEEP_RUNTIME}") from None
    if sweep:
        raise UsageError(why)


def _check(args: argparse.Namespace, pm: PluginManager) -> tuple[float, list[float], dict[str, dict[str, str]]]:
    """Validate the sweep arguments before anything runs: (rate rows/s, inflection points, params)."""
    from pacer.cli.run_command import split_strategy_params
    from pacer_lmstream.profile import PAPER_INFLECTION_BYTES
    from pacer_lmstream.sweep import SweepError, sweep_points
    from pacer_workloads import WORKLOADS, bytes_per_row

    if args.workload not in WORKLOADS:
        raise UsageError(f"unknown workload {args.workload!r}; choose from {', '.join(WORKLOADS)}")
    if args.out is None:
        raise UsageError("--out FILE is required: the calibration file LMStream's initial_rows loads")
    if Path(args.out).is_dir():
        raise UsageError(f"--out {args.out!r} is a folder; give a file name, e.g. {args.out}/lmstream-rows.json")
    if args.rate is None and args.rate_kbps is None:
        raise UsageError("give the input rate: --rate ROWS_PER_S or --rate-kbps KB_PER_S")
    rate = args.rate if args.rate is not None else args.rate_kbps * 1e3 / bytes_per_row(WORKLOADS[args.workload].stream)
    for flag, value, low in (("--rate/--rate-kbps", rate, 1e-9), ("--duration", args.duration, 1e-9),
                             ("--cores", args.cores, 1), ("--partitions", args.partitions, 1), ("--gpus", args.gpus, 0),
                             ("--warm-up", args.warm_up, 0)):
        if value < low:
            raise UsageError(f"{flag} must be >= {low:g}, got {value:g}")
    if args.gpus == 0:
        print("pacer calibrate: --gpus 0: every placement runs on the CPU and every row will be the same",
              file=sys.stderr)
    params = split_strategy_params(args.param)
    if params["placement"].get("initial_rows"):
        raise UsageError("placement.initial_rows would move InfPT during the sweep; the sweep holds each point fixed")
    if "inflection_profile" in params["placement"]:
        raise UsageError("placement.inflection_profile would set InfPT during the sweep; the sweep holds each point "
                         "fixed (centre it with placement.initial_inflection_bytes or give --inflection-points)")
    try:
        resolved = pm.find("lmstream", "placement").resolve_params(params["placement"])
        pm.find(args.admission, "admission").resolve_params(params["admission"])
    except UnknownStrategyError as exc:
        raise UsageError(f"{exc}. Install pacer-lmstream (pip install -e strategies/pacer-lmstream).") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    try:
        points = (list(args.inflection_points) if args.inflection_points
                  else sweep_points(float(resolved["initial_inflection_bytes"]) or PAPER_INFLECTION_BYTES))
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    if any(x <= 0 for x in points):
        raise UsageError(f"--inflection-points must be > 0 bytes, got {points}")
    return rate, points, params


def _curves(items: Sequence[str]) -> dict[str, str]:
    """``--kernel-curves cpu=numba gpu=cudf`` as a mapping; a malformed item is a usage error."""
    curves: dict[str, str] = {}
    for item in items:
        device, eq, impl = item.partition("=")
        if not eq or device not in ("cpu", "gpu") or not impl:
            raise UsageError(f"--kernel-curves {item!r}: expected cpu=IMPL or gpu=IMPL")
        curves[device] = impl
    return curves


def _measure_kernels(args: argparse.Namespace) -> Path:
    """Time the kernels, then list per implementation what was measured, what was skipped and why, and where each
    of the simulator's curves comes from."""
    from pacer_sim.kernel_calibration import describe_profile, measure_kernels

    def note(text: str) -> None:
        print(f"pacer calibrate: {text}", file=sys.stderr)

    curves = _curves(args.kernel_curves)
    try:
        path = measure_kernels(args.kernel_sizes, args.profile_out, repeats=args.repeats, note=note,
                               implementations=args.kernel_implementations, curves=curves)
    except ValueError as exc:
        raise UsageError(f"--kernels: {exc}") from None
    print(describe_profile(path))
    return path


def _cost_model(profile: str | Path, curves: dict[str, str]) -> Any:
    from pacer_sim.kernel_calibration import cost_model_from_profile

    try:
        return cost_model_from_profile(profile, curves=curves)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _measure_engine(args: argparse.Namespace, pm: PluginManager) -> int:
    """``--runtime`` other than the simulator: measure the workload's costs there into an engine profile."""
    from pacer import QueryRun, RunConfig
    from pacer.engine_profile import EngineProfileError
    from pacer.runtime_api import CalibratesEngine
    from pacer_lmstream.sweep import refusal
    from pacer_workloads import WORKLOADS, bytes_per_row

    sweep_only = [flag for flag, given in (("--inflection-points", args.inflection_points), ("--param", args.param),
                                           ("--cost-profile", args.cost_profile)) if given]
    if sweep_only:
        raise UsageError(f"{sweep_only[0]} belongs to the inflection-point sweep, which does not run here: "
                         f"{refusal(args.runtime) or 'it runs on --runtime sim'}. On --runtime {args.runtime}, "
                         "calibrate measures the engine: --workload W --out FILE")
    if args.workload not in WORKLOADS:
        raise UsageError(f"give the workload to measure: --workload {{{','.join(WORKLOADS)}}}")
    if args.out is None or Path(args.out).is_dir():
        raise UsageError("--out FILE is required: the engine profile to write (pacer run --engine-profile FILE)")
    rate = args.rate_kbps * 1e3 / bytes_per_row(WORKLOADS[args.workload].stream) if args.rate_kbps else \
        (args.rate or ENGINE_RATE)
    if not rate > 0 or args.batches < 1 or any(not t > 0 for t in args.intervals) or args.partitions < 1:
        raise UsageError(f"--rate, --intervals and --partitions must be > 0 and --batches >= 1; got {rate:g}, "
                         f"{args.intervals}, {args.partitions} and {args.batches}")
    try:
        runtime = pm.find_runtime(args.runtime)
    except UnknownRuntimeError as exc:
        raise UsageError(f"--runtime {args.runtime}: {exc}; calibrate sweeps on --runtime sim and measures "
                         "--runtime spark") from None
    if not isinstance(runtime, CalibratesEngine):
        raise UsageError(f"--runtime {args.runtime} does not measure itself; sweep inflection points with "
                         "--runtime sim, or measure Spark with --runtime spark")
    config = RunConfig(queries=(QueryRun(args.workload, rate=rate),), partitions=args.partitions, seed=args.seed)
    if args.master:
        config = config.with_options(args.runtime, master=args.master)

    def note(text: str) -> None:
        print(f"pacer calibrate: {text}", file=sys.stderr)

    try:
        profile = runtime.calibrate_engine(config, intervals=args.intervals, batches=args.batches, note=note)
    except EngineProfileError as exc:
        print(f"pacer calibrate: {exc}", file=sys.stderr)
        return 1
    path = profile.write(args.out)
    print(f"{profile.describe()}\nengine profile: {path}\nuse it: pacer run --runtime {args.runtime} --workload "
          f"{args.workload} --engine-profile {path} (or the conf spark.pacer.engineProfile={path})")
    return 0


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    from pacer_lmstream.sweep import SWEEP_RUNTIME

    if args.runtime != SWEEP_RUNTIME and not args.kernels:
        return _measure_engine(args, pm)
    _check_runtime(args.runtime, pm, sweep=args.workload is not None)
    if not args.kernels and args.workload is None:
        raise UsageError("give --workload W --rate R --out FILE to sweep inflection points, and/or --kernels "
                         "--profile-out FILE to time operator kernels")
    if args.kernels and not args.profile_out:
        raise UsageError("--kernels writes a cost profile: give --profile-out FILE")
    if args.kernels and args.cost_profile:
        raise UsageError("--kernels sweeps on the profile it writes (--profile-out); leave out --cost-profile")
    checked = _check(args, pm) if args.workload is not None else None
    profile = args.cost_profile
    if args.kernels:
        profile = _measure_kernels(args)
        print(f"cost profile: {profile} (pacer sim --cost-profile {profile})")
    if checked is None:
        return 0
    from pacer_lmstream.sweep import SweepError, calibrate, table

    rate, points, params = checked
    cost_model = _cost_model(profile, _curves(args.kernel_curves)) if profile else None
    try:
        path, swept = calibrate(
            args.workload, rate, points, args.out, runtime=args.runtime, admission=args.admission,
            admission_params=params["admission"], placement_params=params["placement"], duration=args.duration,
            warm_up=args.warm_up, seed=args.seed, cores=args.cores, gpus=args.gpus, partitions=args.partitions,
            plugin_manager=pm, cost_model=cost_model,
        )
    except SweepError as exc:
        raise UsageError(str(exc)) from None
    print(f"### {args.workload} at {rate:g} rows/s (simulated)\n\n{table(swept)}\n")
    print(f"calibration rows: {path}\nuse them: --placement lmstream --param placement.initial_rows={path}")
    return 0


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer calibrate --runtime sim --workload W --rate R --out FILE [--kernels --profile-out P]``."""
    return [Command("calibrate", "sweep LMStream inflection points into the rows Eq. 10 starts from; "
                    "--kernels: time operator kernels into a cost profile", _configure, _run)]
