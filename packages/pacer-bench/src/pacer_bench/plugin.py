"""Registers ``pacer bench`` with the pacer CLI. ``--runtime`` names any runtime an installed package provides
(the ``pacer_runtimes`` hook, checked before anything runs); ``--source`` is ``gen`` or a source another package
registers (:mod:`pacer_bench.traffic_sources`), which adds its own flags to the latency-target group. The scenarios
are the registry's (:data:`pacer_bench.scenarios.SCENARIOS`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pacer import durations, hookimpl
from pacer.cli.commands import Command, UsageError
from pacer.plugins import PluginManager
from pacer.runtime_api import DEFAULT_OVERLOAD, OVERLOAD_CHOICES


def _configure(parser: argparse.ArgumentParser) -> None:
    from pacer_bench.scenarios import SCENARIOS
    from pacer_bench.traffic_sources import GENERATED, load_sources

    parser.add_argument("scenario", choices=sorted(SCENARIOS), help="the experiment to run")
    parser.add_argument("--runtime", default="sim",
                        help="where to run it: an installed runtime, e.g. sim or spark (default: sim)")
    parser.add_argument("--out", required=True, help="folder for JSON, CSV, Markdown, PNG plots and the HTML page")
    parser.add_argument("--quick", action="store_true", help="a reduced version that finishes in minutes")
    parser.add_argument("--duration", type=durations.flag_seconds,
                        help="override every configuration's duration, e.g. 10m or 600 (seconds)")
    parser.add_argument("--seed", type=int, default=7, help="seed for traffic and noise (default 7)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run every configuration N times, interleaved; tables show median [min-max] (default 1)")
    parser.add_argument("--vary-seed", action="store_true",
                        help="give repetition i the seed SEED+i-1 (default: every repetition gets the same traffic)")
    parser.add_argument("--no-warm-up-stream", dest="warm_up_stream", action="store_false",
                        help="--runtime spark: skip the throwaway stream a fresh session runs before its measured one "
                             "(the small JIT job still runs; the first stateful batch's start-up then counts in the "
                             "figures)")
    parser.add_argument("--overload", choices=OVERLOAD_CHOICES, default=DEFAULT_OVERLOAD,
                        help="the Controller's overload policy: keep (default, as everywhere in pacer: every dataset "
                             "processed and counted, so runs compare) or shed (drop the datasets that can no longer "
                             "make their deadline)")
    parser.add_argument("--rate-scale", type=float, default=1.0, metavar="X",
                        help="multiply every query's input rate by X (default 1; e.g. 1.5 to contend the cores)")
    parser.add_argument("--gpus", type=int, metavar="N",
                        help="simulated GPUs (default: the scenario's, 1 in device-sweep so the GPU is modelled, else 0)")
    scaling = parser.add_argument_group("autoscale")
    scaling.add_argument("--executors", metavar="MIN:MAX",
                         help="on a standalone cluster (--runtime spark --master spark://...): the executors the "
                              "deadline scaler moves between; fixed at peak holds MAX (default 1:3)")
    grid = parser.add_argument_group("device-sweep")
    grid.add_argument("--grid", action="store_true",
                      help="device-sweep on the whole placement grid (simulated): lr1, lr3, cm1, cm2 x constant, wave, "
                           "random, binary traffic x 0.1-3x the CPU's capacity x 1 and 2 GPUs x --repeat seeds x keep "
                           "and shed, each placement per row processed against the better single device; "
                           "latency-target: zStream against the default trigger on every workload and traffic at "
                           "0.3-0.9x the CPU's capacity x --repeat seeds (simulated), does it run away")
    grid.add_argument("--jobs", type=int, metavar="N",
                      help="--grid: processes to run cells in (default: the machine's cores, at most 4)")
    target = parser.add_argument_group("latency-target")
    sources = load_sources()
    target.add_argument("--source", choices=(GENERATED, *sorted(sources)), default=GENERATED,
                        help="; ".join([f"{GENERATED}: pacer's generated traffic (default)",
                                        *(f"{name}: {sources[name].help}" for name in sorted(sources))]))
    flags: dict[str, list[tuple[str, str]]] = {}
    for name in sorted(sources):  # each source's own flags, e.g. kafka's --bootstrap-servers
        before = len(target._group_actions)
        sources[name].configure(target)
        flags[name] = [(a.dest, a.option_strings[0] if a.option_strings else a.dest)
                       for a in target._group_actions[before:]]
    parser.set_defaults(source_flags=flags)
    target.add_argument("--deadline", action="append", default=[], metavar="SECONDS",
                        help="judge against this deadline (10s, 10; repeatable; default 5, 10 and 20 s)")
    target.add_argument("--static", action="append", default=[], metavar="SECONDS",
                        help="run the static trigger at these intervals (repeatable; default the plan's, on Kafka "
                             "Spark's trigger at each deadline); 0 is Spark's default trigger, plain on Spark "
                             "(format('kafka') on --source kafka)")
    target.add_argument("--traffic", action="append", default=[], metavar="PATTERN",
                        help="only this traffic pattern (repeatable)")
    target.add_argument("--workload", action="append", default=[], metavar="QUERY",
                        help="only this workload (repeatable; lr2, cm2...)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME",
                        help="only configurations of this name or family (repeatable; latency-target: asap, "
                             "static, 'static 10s', zstream, 'zstream @10s', pid, min-rows, fixed-point, lmstream; "
                             "another scenario: a label of its table such as 'edf + zstream', a group such as "
                             "autoscale's 'wave / 1 query', or a family)")
    parser.add_argument("--master", default="local[2]", help="Spark master for --runtime spark")
    parser.add_argument("--engine-profile", metavar="FILE",
                        help="--runtime spark: what Spark measured the workload to cost (`pacer calibrate --runtime "
                             "spark`): pacer's queries start from it, and the bounds are computed from it")
    parser.add_argument("--calibrated", action="append", default=[], metavar="FILE",
                        help="fidelity: an engine profile `pacer calibrate --runtime spark` wrote (repeatable, one per "
                             "workload): the simulator predicts each Spark run with its workload's costs from it")
    parser.add_argument("--rapids-jar", action="append", default=[], metavar="JAR",
                        help="RAPIDS Accelerator jar(s): device-sweep then runs on Spark (else it is simulated)")


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    from pacer_bench.scenarios import ScenarioError
    from pacer_bench.traffic_sources import GENERATED

    if args.duration is not None and args.duration <= 0:
        raise UsageError("--duration must be > 0 seconds")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be >= 1, got {args.repeat}")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r} is a file; give a folder (it is created if missing)")
    for jar in args.rapids_jar:
        if not Path(jar).is_file():
            raise UsageError(f"--rapids-jar {jar!r} does not exist; download rapids-4-spark from Maven Central")
    from pacer.cli.run_command import seconds_flag

    flags: dict[str, list[tuple[str, str]]] = getattr(args, "source_flags", {})
    for name, own in sorted(flags.items()):
        given = [flag for dest, flag in own if getattr(args, dest, None)]
        if given and args.source != name:
            raise UsageError(f"{', '.join(given)} applies to --source {name}; add --source {name}")
    if args.engine_profile is not None:
        _check_engine_profile(args)
    _check_calibrated(args.calibrated)
    deadlines = [seconds_flag("--deadline", d) for d in args.deadline]
    statics = [_static_flag(s) for s in args.static]
    target = {"source": None if args.source == GENERATED else args.source, "deadlines": deadlines, "statics": statics,
              "traffics": args.traffic, "workloads": args.workload, "configs": args.config}
    source_options = {dest: getattr(args, dest, None) for dest, _ in flags.get(args.source, [])}
    if args.grid:
        return _run_grid(args, out)
    try:
        paths = _run_scenario(args, out, pm, target, source_options)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None
    print(paths["md"].read_text())
    print(f"wrote {len(paths)} files to {args.out} (open {paths['html']})")
    return 0


def _static_flag(value: str) -> float:
    """``--static``: seconds >= 0 (0: Spark's default trigger)."""
    from pacer.cli.run_command import default_trigger_or_seconds_flag

    seconds = default_trigger_or_seconds_flag("--static", value)
    if seconds is None:
        raise UsageError(f"--static must be >= 0 seconds (0: Spark's default trigger), got {value!r}")
    return seconds


def _check_engine_profile(args: argparse.Namespace) -> None:
    """``--engine-profile``: a profile file that reads and was measured on the runtime the bench runs on."""
    from pacer.engine_profile import EngineProfileError, load
    from pacer_bench.runtime_traits import runtime_traits

    try:
        profile = load(args.engine_profile)
    except EngineProfileError as exc:
        raise UsageError(f"--engine-profile: {exc}") from None
    if profile.runtime != args.runtime:
        raise UsageError(f"--engine-profile {args.engine_profile!r} was measured on {profile.runtime}, and this bench "
                         f"runs on --runtime {args.runtime}: "
                         + ("the simulator has its own cost model" if runtime_traits(args.runtime).simulated
                            else f"calibrate it there (pacer calibrate --runtime {args.runtime})"))


def _check_calibrated(paths: Sequence[str]) -> None:
    """``--calibrated``: profile files that read, measured on Spark, one per workload (pacer-sim's check)."""
    from pacer_sim.calibrated import load_profiles

    try:
        load_profiles(paths)
    except ValueError as exc:
        raise UsageError(f"--calibrated: {exc}") from None


def _run_grid(args: argparse.Namespace, out: Path) -> int:
    """``SCENARIO --grid``: the scenario's grid variant (device-sweep's: every cell simulated,
    :mod:`pacer_bench.device_grid`)."""
    from pacer_bench.runtime_traits import GPU, runtime_traits
    from pacer_bench.scenarios import SCENARIOS

    grid = SCENARIOS[args.scenario].grid
    if grid is None:
        raise UsageError(f"--grid applies to {', '.join(n for n, s in sorted(SCENARIOS.items()) if s.grid)}")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be >= 1, got {args.jobs}")
    needs_gpu = SCENARIOS[args.scenario].needs.get(GPU)
    if needs_gpu and args.gpus is not None and args.gpus < 1:
        raise UsageError(f"{args.scenario} --grid {needs_gpu} and needs --gpus >= 1 (default: 1 and 2)")
    if not runtime_traits(args.runtime).simulated:  # the grid runs on pacer-sim whatever --runtime asks
        print(f"pacer bench: {args.scenario} --grid runs on the simulator, not {args.runtime}", file=sys.stderr)
    paths = grid(out, quick=args.quick, duration=args.duration, seed=args.seed, repeat=args.repeat, gpus=args.gpus,
                 jobs=args.jobs)
    text = paths["md"].read_text()
    print(text.split("\n## ")[0])
    print(f"wrote {len(paths)} files to {args.out} (every cell in {paths['md']} and {paths['csv']})")
    return 0


def _run_scenario(args: argparse.Namespace, out: Path, pm: PluginManager, target: dict[str, Any],
                  source_options: dict[str, Any]) -> dict[str, Path]:
    from pacer_bench.runner import run_scenario

    return run_scenario(
        args.scenario, runtime=args.runtime, out=out, quick=args.quick, duration=args.duration,
        seed=args.seed, master=args.master, rapids_jars=args.rapids_jar, plugin_manager=pm,
        repeat=args.repeat, vary_seed=args.vary_seed, gpus=args.gpus, overload=args.overload, target=target,
        source_options=source_options, rate_scale=args.rate_scale, executors=args.executors,
        engine_profile=args.engine_profile, calibrated=args.calibrated, warm_up_stream=args.warm_up_stream,
    )


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer bench SCENARIO --runtime sim|spark --out DIR [--quick]``, and ``pacer demo`` (Spark's fixed trigger
    against pacer, on Spark: needs pacer-spark)."""
    from pacer_bench.demo import DEMO_COMMAND

    return [Command("bench", "run one of the papers' experiments side by side, with tables and plots", _configure, _run),
            DEMO_COMMAND]
