"""The inflection-point sweep behind ``pacer calibrate``: the rows LMStream's Eq. 10 starts from.

LMStream refits its inflection point (InfPT) by regression over (throughput, latency) -> InfPT
(Eq. 10) and seeds it with "pre-experimental results". pacer trains Eq. 10 on the InfPT each
batch was placed with, so without rows from *other* inflection points the fit returns InfPT_0
forever. The sweep runs inflection points (InfPT_0 x 0.25, 0.5, 1, 2, 4 by default, InfPT_0 the
paper's 150 KB unless given, or a given list) for one workload and rate on the simulator (pacer-sim),
each with LMStream's placement held at that point, and writes one row per point: the mean per-batch
throughput (bytes / processing time, Eq. 4) and the mean MaxLat after warm-up, i.e. exactly what
Eq. 10 learns from online. The file is :mod:`pacer_lmstream.calibration`'s; the strategy parameter
``initial_rows=FILE`` loads it.

Every sweep figure comes from the simulator and is *simulated*. On Spark the sweep is refused
(:data:`SPARK_REFUSAL`). Library code: what cannot run raises :class:`SweepError` (a ``ValueError``);
the ``pacer calibrate`` command (:mod:`pacer_lmstream.commands`) turns it into a usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pacer.plugins import PluginManager
from pacer_lmstream.calibration import write_rows
from pacer_lmstream.regression import Sample

#: The sweep around InfPT_0 when no list is given (x 0.25, 0.5, 1, 2, 4).
DEFAULT_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)

#: The runtime the sweep runs on: the simulator's per-batch reports are what Eq. 10 learns from.
SWEEP_RUNTIME = "sim"

SPARK_REFUSAL = (
    "calibrate does not run on Spark here: without a GPU and the RAPIDS Accelerator, pacer records "
    "placements but never enacts them, so every inflection point runs the same all-CPU plan and the rows "
    "would measure nothing about placement; and the bench runner returns whole-run reports, not the "
    "per-batch (throughput, MaxLat) rows Eq. 10 learns from. Calibrate with --runtime sim (add --kernels "
    "to time this machine's operator kernels)"
)


class SweepError(ValueError):
    """A sweep that cannot run as asked (a runtime other than the simulator, too few or non-positive inflection
    points, no batch after warm-up); the message says what to change."""


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


def refusal(runtime: str) -> str | None:
    """Why the sweep does not run on ``runtime`` (None for the simulator): :data:`SPARK_REFUSAL` for Spark."""
    if runtime == SWEEP_RUNTIME:
        return None
    if runtime == "spark":
        return SPARK_REFUSAL
    return (f"calibrate sweeps on the simulator only (its per-batch reports are the rows Eq. 10 learns from), "
            f"not on runtime {runtime!r}; use --runtime {SWEEP_RUNTIME}")


def sweep_points(base_bytes: float, factors: Sequence[float] = DEFAULT_FACTORS) -> list[float]:
    """InfPT_0 times each factor, ascending, without duplicates.

    :raises SweepError: for a non-positive base or factor.
    """
    if base_bytes <= 0 or any(f <= 0 for f in factors):
        raise SweepError(f"inflection points must be > 0 bytes; got base {base_bytes:g} and factors {list(factors)}")
    return sorted({base_bytes * f for f in factors})


def run_point(
    workload: str, rate: float, inflection_bytes: float, *, admission: str = "lmstream",
    admission_params: Mapping[str, Any] | None = None, placement_params: Mapping[str, Any] | None = None,
    duration: float = 60.0, warm_up: int = 10, seed: int = 3, cores: int = 2, gpus: int = 1, partitions: int = 2,
    plugin_manager: PluginManager | None = None, cost_model: Any = None,
) -> SweepPoint:
    """Simulate ``workload`` at ``rate`` rows/s with LMStream's placement held at ``inflection_bytes``.

    InfPT_0 is ``inflection_bytes`` (``inflection_profile=none``: no crossover from a cost profile) and the
    regression runs inline (``async_regression=False``): with every label equal it keeps InfPT where it is, so
    every batch of the run is placed with ``inflection_bytes``.

    :raises SweepError: when fewer than ``warm_up + 1`` batches complete (give a longer duration).
    """
    from pacer_sim import Simulation

    params = {**dict(placement_params or {}), "initial_inflection_bytes": inflection_bytes,
              "inflection_profile": "none", "async_regression": False, "initial_rows": ""}
    extra = {"cost_model": cost_model} if cost_model is not None else {}
    sim = Simulation(cores=cores, gpus=gpus, seed=seed, plugin_manager=plugin_manager, monitor_interval=10.0,
                     **extra)
    qid = sim.add_query(workload, rate=rate, admission=admission, admission_params=dict(admission_params or {}),
                        placement="lmstream", placement_params=params, duration=duration, partitions=partitions)
    sim.run(duration)
    measured = sim.controller.reports(qid)[warm_up:]
    if not measured:
        raise SweepError(f"{workload} at {rate:g} rows/s, InfPT {inflection_bytes:g} B: no batch completed after "
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
    workload: str, rate: float, inflections: Sequence[float], out: str | Path, *, runtime: str = SWEEP_RUNTIME,
    progress: bool = True, **run_options: Any,
) -> tuple[Path, list[SweepPoint]]:
    """Sweep ``inflections`` and write the calibration file LMStream's ``initial_rows`` loads.

    :param run_options: passed to :func:`run_point` (admission, params, duration, warm_up, seed, ...).
    :raises SweepError: for a runtime other than the simulator (see :func:`refusal`), fewer than 3 points
        (Eq. 10 has three coefficients), or a run without batches after warm-up.
    :return: the file written and the points, ascending by InfPT.
    """
    why = refusal(runtime)
    if why is not None:
        raise SweepError(why)
    if len(set(inflections)) < 3:
        raise SweepError(f"Eq. 10 has three coefficients: sweep at least 3 distinct inflection points, got "
                         f"{sorted(set(inflections))}")
    points = []
    for inflection in sorted(set(inflections)):
        if progress:
            print(f"pacer calibrate: {workload} at {rate:g} rows/s, InfPT {inflection / 1e3:g} KB ...", file=sys.stderr)
        points.append(run_point(workload, rate, inflection, **run_options))
    samples = [Sample(p.throughput_bytes_per_s, p.latency_s, p.inflection_bytes) for p in points]
    best = min(points, key=lambda p: p.processing_s)
    options = {k: v for k, v in run_options.items() if k not in ("plugin_manager", "cost_model")}
    if run_options.get("cost_model") is not None:
        options["cost_model"] = getattr(run_options["cost_model"], "source", "a measured cost profile")
    path = write_rows(
        samples, out, runtime=SWEEP_RUNTIME, simulated=True, workload=workload, rate_rows_per_s=rate,
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
