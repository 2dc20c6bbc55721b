"""``pacer calibrate``: the rows LMStream's Eq. 10 starts from, and (``--kernels``) a measured cost profile.

LMStream refits its inflection point (InfPT) by regression over (throughput, latency) -> InfPT
(Eq. 10) and seeds it with "pre-experimental results". pacer trains Eq. 10 on the InfPT each
batch was placed with, so without rows from *other* inflection points the fit returns InfPT_0
forever. This command runs a short sweep of inflection points (InfPT_0 x 0.25, 0.5, 1, 2, 4 by
default, or a given list) for one workload and rate, each with LMStream's placement held at that
point, and writes one row per point: the mean per-batch throughput (bytes / processing time,
Eq. 4) and the mean MaxLat after warm-up, i.e. exactly what Eq. 10 learns from online. Load them
with the LMStream parameter ``initial_rows=FILE``.

``--kernels`` times real CPU (and, where one is present, GPU) operator kernels through
``pacer_sim.kernels`` and writes the cost profile ``pacer sim --cost-profile FILE`` loads.

Every sweep figure comes from the simulator and is *simulated*. On Spark the sweep is refused:
without a GPU and the RAPIDS Accelerator pacer's placements are recorded, never enacted, so every
inflection point would run the same all-CPU plan and the rows would say nothing about placement.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pacer import UnknownStrategyError, hookimpl
from pacer.cli import Command, UsageError
from pacer.plugins import PluginManager

#: The sweep around InfPT_0 when no list is given (issue 13: x 0.25, 0.5, 1, 2, 4).
DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)

SPARK_REFUSAL = (
    "calibrate does not run on Spark here: without a GPU and the RAPIDS Accelerator, pacer records "
    "placements but never enacts them, so every inflection point runs the same all-CPU plan and the rows "
    "would measure nothing about placement; and the bench runner returns whole-run reports, not the "
    "per-batch (throughput, MaxLat) rows Eq. 10 learns from. Calibrate with --runtime sim (add --kernels "
    "to time this machine's operator kernels)"
)


@dataclass(frozen=True)
class SweepPoint:
    """One inflection point of the sweep, after warm-up (every figure simulated).

    :param inflection_bytes: the InfPT LMStream placed every batch with.
    :param throughput_bytes_per_s: mean per-batch bytes / processing time (Eq. 4).
    :param latency_s: mean per-batch MaxLat (completion - arrival of its oldest dataset).
    :param processing_s: mean per-batch processing time.
    :param gpu_share: mean share of operators placed on the GPU.
    :param batches: batches measured (after warm-up).
    """

    inflection_bytes: float
    throughput_bytes_per_s: float
    latency_s: float
    processing_s: float
    gpu_share: float
    batches: int


def sweep_points(base_bytes: float, factors: Sequence[float] = DEFAULT_FACTORS) -> list[float]:
    """InfPT_0 times each factor, ascending, without duplicates.

    :raises UsageError: for a non-positive base or factor.
    """
    if base_bytes <= 0 or any(f <= 0 for f in factors):
        raise UsageError(f"inflection points must be > 0 bytes; got base {base_bytes:g} and factors {list(factors)}")
    return sorted({base_bytes * f for f in factors})


def _lmstream_calibration() -> ModuleType:
    try:
        return importlib.import_module("pacer_lmstream.calibration")
    except ImportError:
        raise UsageError("calibrate writes LMStream's Eq. 10 rows and needs pacer-lmstream: "
                         "pip install -e strategies/pacer-lmstream") from None


def run_point(
    workload: str, rate: float, inflection_bytes: float, *, admission: str = "lmstream",
    admission_params: Mapping[str, Any] | None = None, placement_params: Mapping[str, Any] | None = None,
    duration: float = 60.0, warm_up: int = 10, seed: int = 3, cores: int = 2, gpus: int = 1, partitions: int = 2,
    plugin_manager: PluginManager | None = None, cost_model: Any = None,
) -> SweepPoint:
    """Simulate ``workload`` at ``rate`` rows/s with LMStream's placement held at ``inflection_bytes``.

    The regression runs inline (``async_regression=False``): with every label equal it keeps InfPT
    where it is, so every batch of the run is placed with ``inflection_bytes``.

    :raises UsageError: when fewer than ``warm_up + 1`` batches complete (give a longer duration).
    """
    from pacer_sim import Simulation

    params = {**dict(placement_params or {}), "initial_inflection_bytes": inflection_bytes,
              "async_regression": False, "initial_rows": ""}
    extra = {"cost_model": cost_model} if cost_model is not None else {}
    sim = Simulation(cores=cores, gpus=gpus, seed=seed, plugin_manager=plugin_manager, monitor_interval=10.0,
                     **extra)
    qid = sim.add_query(workload, rate=rate, admission=admission, admission_params=dict(admission_params or {}),
                        placement="lmstream", placement_params=params, duration=duration, partitions=partitions)
    sim.run(duration)
    measured = sim.controller.reports(qid)[warm_up:]
    if not measured:
        raise UsageError(f"{workload} at {rate:g} rows/s, InfPT {inflection_bytes:g} B: no batch completed after "
                         f"the {warm_up} warm-up batches in {duration:g} s; give a longer --duration or a smaller "
                         "--warm-up")
    n = len(measured)
    return SweepPoint(
        inflection_bytes=float(inflection_bytes),
        throughput_bytes_per_s=sum(r.throughput_bytes_per_s for r in measured) / n,
        latency_s=sum(r.max_latency_s for r in measured) / n,
        processing_s=sum(r.processing_s for r in measured) / n,
        gpu_share=sum(r.placement.gpu_ratio for r in measured if r.placement) / n,
        batches=n,
    )


def calibrate(
    workload: str, rate: float, inflections: Sequence[float], out: str | Path, *, runtime: str = "sim",
    progress: bool = True, **run_options: Any,
) -> tuple[Path, list[SweepPoint]]:
    """Sweep ``inflections`` and write the calibration file LMStream's ``initial_rows`` loads.

    :param run_options: passed to :func:`run_point` (admission, params, duration, warm_up, seed, ...).
    :raises UsageError: on Spark (see :data:`SPARK_REFUSAL`), for fewer than 3 points (Eq. 10 has three
        coefficients), or a run without batches after warm-up.
    :return: the file written and the points, ascending by InfPT.
    """
    if runtime == "spark":
        raise UsageError(SPARK_REFUSAL)
    if runtime != "sim":
        raise UsageError(f"unknown runtime {runtime!r}; use sim")
    if len(set(inflections)) < 3:
        raise UsageError(f"Eq. 10 has three coefficients: sweep at least 3 distinct inflection points, got "
                         f"{sorted(set(inflections))}")
    rows_format = _lmstream_calibration()
    points = []
    for inflection in sorted(set(inflections)):
        if progress:
            print(f"pacer calibrate: {workload} at {rate:g} rows/s, InfPT {inflection / 1e3:g} KB ...", file=sys.stderr)
        points.append(run_point(workload, rate, inflection, **run_options))
    from pacer_lmstream.regression import Sample

    samples = [Sample(p.throughput_bytes_per_s, p.latency_s, p.inflection_bytes) for p in points]
    best = min(points, key=lambda p: p.processing_s)
    options = {k: v for k, v in run_options.items() if k not in ("plugin_manager", "cost_model")}
    if run_options.get("cost_model") is not None:
        options["cost_model"] = getattr(run_options["cost_model"], "source", "a measured cost profile")
    path: Path = rows_format.write_rows(
        samples, out, runtime="sim", simulated=True, workload=workload, rate_rows_per_s=rate,
        best_inflection_bytes=best.inflection_bytes, options=options, points=[asdict(p) for p in points],
    )
    return path, points


def table(points: Sequence[SweepPoint]) -> str:
    """The sweep as a Markdown table (every figure simulated)."""
    best = min(p.processing_s for p in points)
    lines = ["| InfPT KB | processing s | / best | throughput KB/s | MaxLat s | GPU share | batches |",
             "|---|---|---|---|---|---|---|"]
    for p in points:
        lines.append(f"| {p.inflection_bytes / 1e3:g} | {p.processing_s:.3f} | {p.processing_s / best:.3f} "
                     f"| {p.throughput_bytes_per_s / 1e3:.1f} | {p.latency_s:.2f} | {p.gpu_share:.2f} | {p.batches} |")
    return "\n".join(lines)


def measure_kernels(sizes: Sequence[int] | None, out: str | Path, *, repeats: int = 5) -> Path:
    """Time CPU (and GPU, where one is visible) operator kernels through ``pacer_sim.kernels``; write the
    ``pacer.cost-profile/1`` file ``pacer sim --cost-profile`` loads. Without a GPU it says so on stderr
    and times the CPU only (the profile records why the GPU was skipped).

    :param sizes: batch sizes in bytes (None: the kernels module's default, 64 KB-64 MB).
    :raises UsageError: when ``pacer_sim.kernels`` is not installed, or for bad sizes/repeats.
    """
    try:
        kernels = importlib.import_module("pacer_sim.kernels")
    except ImportError:
        raise UsageError("--kernels needs pacer_sim.kernels (measure_profile, write_profile), which this pacer-sim "
                         "does not have; update pacer-sim") from None
    backend, why = kernels.gpu_backend()
    if backend is None:  # measure_profile skips the GPU too and records why in profile["skipped"]
        print(f"pacer calibrate: no GPU here ({why}): timing the CPU kernels only; the GPU part is skipped and "
              "the simulator keeps its modelled GPU curves", file=sys.stderr)
    try:
        profile = kernels.measure_profile(list(sizes) if sizes else kernels.DEFAULT_SIZES, devices=("cpu", "gpu"),
                                          repeats=repeats)
    except ValueError as exc:
        raise UsageError(f"--kernels: {exc}") from None
    path: Path = kernels.write_profile(profile, out)
    return path


def cost_model_from_profile(path: str | Path) -> Any:
    """The simulator's default cost model with the measured curves of a ``pacer.cost-profile/1`` file.

    :raises UsageError: for a missing or malformed profile (the message names it).
    """
    from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile
    from pacer_sim.costs import CostModel

    try:
        return apply_cost_profile(CostModel(), load_cost_profile(path), name=Path(path).name)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


# ---------------------------------------------------------------------------------------------- CLI


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", choices=("sim", "spark"), default="sim", help="where to sweep (default sim; "
                   "spark is refused: placement is not enacted without a GPU and RAPIDS)")
    p.add_argument("--workload", help="lr1 lr1t lr2 lr3 cm1 cm2: sweep inflection points for it")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--rate", type=float, help="input rate in rows/s")
    rate.add_argument("--rate-kbps", type=float, help="input rate in KB/s (1 KB = 1000 bytes of the stream's CSV)")
    p.add_argument("--out", help="calibration file to write (JSON; LMStream's initial_rows loads it)")
    p.add_argument("--inflection-points", type=float, nargs="+", metavar="BYTES",
                   help="InfPT values to sweep (default: InfPT_0 x 0.25 0.5 1 2 4)")
    p.add_argument("--admission", default="lmstream", help="admission during the sweep (default lmstream)")
    p.add_argument("--param", action="append", default=[], metavar="DECISION.KEY=VALUE",
                   help="strategy parameter, e.g. admission.max_datasets=1 or placement.initial_inflection_bytes=2e5")
    p.add_argument("--duration", type=float, default=60.0, help="seconds of traffic per point (default 60)")
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


def _check(args: argparse.Namespace, pm: PluginManager) -> tuple[float, list[float], dict[str, dict[str, str]]]:
    """Validate the sweep arguments before anything runs: (rate rows/s, inflection points, params)."""
    from pacer.run_cli import split_strategy_params
    from pacer_workloads import WORKLOADS, bytes_per_row

    if args.runtime == "spark":
        raise UsageError(SPARK_REFUSAL)
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
    try:
        resolved = pm.find("lmstream", "placement").resolve_params(params["placement"])
        pm.find(args.admission, "admission").resolve_params(params["admission"])
    except UnknownStrategyError as exc:
        raise UsageError(f"{exc}. Install pacer-lmstream (pip install -e strategies/pacer-lmstream).") from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    points = (list(args.inflection_points) if args.inflection_points
              else sweep_points(float(resolved["initial_inflection_bytes"])))
    if any(x <= 0 for x in points):
        raise UsageError(f"--inflection-points must be > 0 bytes, got {points}")
    return rate, points, params


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
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
        profile = measure_kernels(args.kernel_sizes, args.profile_out, repeats=args.repeats)
        print(f"cost profile: {profile} (pacer sim --cost-profile {profile})")
    if checked is None:
        return 0
    rate, points, params = checked
    cost_model = cost_model_from_profile(profile) if profile else None
    path, swept = calibrate(
        args.workload, rate, points, args.out, runtime=args.runtime, admission=args.admission,
        admission_params=params["admission"], placement_params=params["placement"], duration=args.duration,
        warm_up=args.warm_up, seed=args.seed, cores=args.cores, gpus=args.gpus, partitions=args.partitions,
        plugin_manager=pm, cost_model=cost_model,
    )
    print(f"### {args.workload} at {rate:g} rows/s (simulated)\n\n{table(swept)}\n")
    print(f"calibration rows: {path}\nuse them: --placement lmstream --param placement.initial_rows={path}")
    return 0


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer calibrate --runtime sim --workload W --rate R --out FILE [--kernels --profile-out P]``."""
    return [Command("calibrate", "sweep LMStream inflection points into the rows Eq. 10 starts from; "
                    "--kernels: time operator kernels into a cost profile", _configure, _run)]
