"""``pacer advise RECORDING``: what pacing would do for a query observed without it (pacer-spark's observe mode).

The recording (:mod:`pacer.observed`) holds the query's arrivals and what each batch cost Spark. The simulator
replays those arrivals, second by second, with the query's own costs (an engine profile fitted to the recorded
batches, or ``--calibrated FILE`` from ``pacer calibrate --runtime spark``):

Its datasets arrive as often as the recorded ones did (:meth:`pacer.observed.Observation.arrival_period_s`: a file a
second, or a Kafka topic's records as often as Spark's default trigger read them):

1. **as observed**: Spark's default trigger (``asap``) on the cores the query had, beside what Spark measured: how
   well the replay predicts this query (batches, busy core-s; the bounds of ``pacer bench fidelity``);
2. **paced**: the chosen admission and deadline on the same cores: rows late, batches, busy core-s, as ratios of (1);
3. **fewest executors**: the smallest executor count (``--cores-per-executor`` cores each, up to
   ``--max-executors``) on which the paced query keeps at most ``--late-pct`` of its rows past the deadline.

Every figure is the simulator's (its ``runtime`` says so), with the replay's own fidelity beside it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacer import QueryRun, RunConfig
from pacer.cli import Command, UsageError
from pacer.durations import parse_seconds
from pacer.engine_profile import EngineProfileError, fit_batches
from pacer.engine_profile import load as load_profile
from pacer.observed import Observation, ObservedError, read
from pacer.plugins import PluginManager

#: The query's id in the replays.
QUERY = "observed"
#: How close a prediction of Spark must come (``pacer bench fidelity``'s bounds, and the replay's here): batches
#: and busy core-s as a share of Spark's figure, rows late in points.
BOUNDS: Mapping[str, float] = {"batches": 0.15, "late_points": 1.0, "busy_core_s": 0.20}


@dataclass(frozen=True)
class AdviseConfig:
    """What to ask: the deadline (s) and admission to pace with, the plan shape (a built-in ``workload``; costs come
    from the recording or ``calibrated``), the executors to search and the share of rows allowed late (%)."""

    deadline_s: float
    admission: str = "zstream"
    workload: str = "lr1"
    calibrated: str | None = None
    cores_per_executor: int = 1
    max_executors: int = 16
    late_pct: float = 1.0
    seed: int = 7


def fitted_profile(observation: Observation, out: Path) -> Path:
    """An engine profile fitted to the recorded batches (:func:`pacer.engine_profile.fit_batches`: fixed and per-byte
    cost, per task where counted), written to ``out``.

    :raises ValueError: batches that cannot separate fixed and per-byte cost (all of one size): give ``--calibrated``.
    """
    points = observation.cost_points()
    partitions = int(observation.header.get("partitions") or 2)
    slots = int(observation.header.get("cores") or partitions)
    try:
        profile = fit_batches(points, runtime="spark", workload=None, partitions=partitions, slots=slots)
    except EngineProfileError as exc:
        raise ValueError(f"the recording's batches do not tell fixed from per-byte cost ({exc}); observe the query "
                         "longer, through a change of rate, or give --calibrated FILE from pacer calibrate --runtime "
                         "spark") from None
    return profile.write(out)


def advise(observation: Observation, config: AdviseConfig, *, plugin_manager: PluginManager | None = None,
           workdir: Path | None = None) -> dict[str, Any]:
    """The advice (module docstring) as a document: ``observed`` (Spark's figures), ``replay`` (the simulator's,
    with its ratios to Spark's), ``paced``, ``executors`` (per executor count tried) and ``fewest_executors``."""
    from pacer.plugins import get_plugin_manager
    from pacer_sim.engine import MIN_ARRIVAL_PERIOD_S
    from pacer_sim.runtime import SIM_RUNTIME

    pm = plugin_manager or get_plugin_manager()
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        trace = Path(tmp) / "rates.csv"
        trace.write_text("".join(f"{rate:g}\n" for rate in observation.rates()))
        profile = config.calibrated or str(fitted_profile(observation, Path(tmp) / "profile.json"))
        cores = int(observation.header.get("cores") or 2)
        partitions = int(observation.header.get("partitions") or 2)
        duration = float(len(observation.rates()))
        sim_options = {"calibrated": [profile], "watermark": "none",
                       "arrival_period": observation.arrival_period_s(finest=MIN_ARRIVAL_PERIOD_S)}

        def simulate(admission: str, cores: int, costs: str = profile) -> dict[str, float]:
            query = QueryRun(config.workload, query_id=QUERY, traffic="trace",
                             traffic_params={"file": str(trace), "format": "rates"}, admission=admission,
                             deadline=config.deadline_s)
            run = RunConfig((query,), duration=duration, seed=config.seed, cores=cores, partitions=partitions,
                            options={SIM_RUNTIME.name: {**sim_options, "calibrated": [costs]}})
            return figures(SIM_RUNTIME.run(run, plugin_manager=pm).report)

        spark = observed_figures(observation, config.deadline_s)
        replay = simulate("asap", cores)
        paced: dict[str, Any] = simulate(config.admission, cores)
        bounds = [simulate(config.admission, cores, variant) for variant in per_byte_bounds(Path(profile), Path(tmp))]
        if bounds:
            paced["busy_core_s_range"] = [min(b["busy_core_s"] for b in bounds), max(b["busy_core_s"] for b in bounds)]
            paced["batches_range"] = [min(b["batches"] for b in bounds), max(b["batches"] for b in bounds)]
        tried: list[dict[str, float]] = []
        fewest = None
        for executors in range(1, config.max_executors + 1):
            result = simulate(config.admission, executors * config.cores_per_executor)
            tried.append({"executors": executors, **result})
            if result["late_pct"] <= config.late_pct:
                fewest = executors
                break
    return {
        "runtime": "sim", "arrival_period_s": sim_options["arrival_period"],
        "profile": "recording" if config.calibrated is None else config.calibrated,
        "deadline_s": config.deadline_s, "admission": config.admission, "cores": cores,
        "observed": spark,
        "replay": {**replay, "batches_ratio": _ratio(replay["batches"], spark["batches"]),
                   "busy_ratio": _ratio(replay["busy_core_s"], spark["busy_core_s"]),
                   "late_points": replay["late_pct"] - spark["late_pct"],
                   "within_bounds": within_bounds(replay, spark)},
        "paced": {**paced, "batches_ratio": _ratio(paced["batches"], replay["batches"]),
                  "busy_ratio": _ratio(paced["busy_core_s"], replay["busy_core_s"])},
        "executors": tried, "fewest_executors": fewest, "cores_per_executor": config.cores_per_executor,
        "late_pct_allowed": config.late_pct,
    }


def per_byte_bounds(profile: Path, folder: Path) -> list[str]:
    """The profile at its per-byte cost less and more two standard errors (at least 0), written beside it: a paced
    batch is several times the batches recorded, so the recording's spread of that cost is what its prediction can
    be off by. None where the profile gives no standard error (a calibration's, or exact points)."""
    fitted = load_profile(profile)
    se = fitted.core_s_per_byte_se or 0.0
    if se <= 0.0:
        return []
    out = []
    for name, per_byte in (("low", max(0.0, fitted.core_s_per_byte - 2 * se)),
                           ("high", fitted.core_s_per_byte + 2 * se)):
        out.append(str(dataclasses.replace(fitted, core_s_per_byte=per_byte).write(folder / f"profile-{name}.json")))
    return out


def figures(report: Mapping[str, Any]) -> dict[str, float]:
    """A replay's batches, rows late (%: past the deadline it ran with, shed rows counted) and busy core-s."""
    q = report["queries"][QUERY]
    return {"batches": float(q["batches"]), "late_pct": 100.0 * float(q["deadline_miss_ratio_rows"]),
            "busy_core_s": float(q["cost"]["busy_core_s"])}


def observed_figures(observation: Observation, deadline_s: float) -> dict[str, float]:
    """What Spark measured in the recording: its batches with data, rows past ``deadline_s`` (%) and busy core-s."""
    batches = [b for b in observation.batches if b.rows > 0]
    rows = sum(n for b in batches for _, n in b.arrivals)
    late = sum(n for b in batches for t, n in b.arrivals if b.completed_at - t > deadline_s)
    busy = [b.busy_core_s for b in batches]
    return {"batches": float(len(batches)), "late_pct": 100.0 * late / rows if rows else 0.0,
            "busy_core_s": math.nan if any(v is None for v in busy) else float(sum(v or 0.0 for v in busy))}


def _ratio(value: float, base: float) -> float:
    return value / base if base else (1.0 if value == base else math.inf)


def within_bounds(predicted: Mapping[str, float], measured: Mapping[str, float]) -> bool:
    """Whether ``predicted``'s batches, rows late (%) and busy core-s are within :data:`BOUNDS` of ``measured``'s."""
    return (abs(_ratio(predicted["batches"], measured["batches"]) - 1.0) <= BOUNDS["batches"]
            and abs(predicted["late_pct"] - measured["late_pct"]) <= BOUNDS["late_points"]
            and abs(_ratio(predicted["busy_core_s"], measured["busy_core_s"]) - 1.0) <= BOUNDS["busy_core_s"])


def render(advice: Mapping[str, Any]) -> str:
    """The advice as text: one line per replay, then the fewest executors."""
    def line(name: str, f: Mapping[str, Any]) -> str:
        return (f"{name:<24} batches {f['batches']:>6.0f}  rows late {f['late_pct']:6.2f} %  "
                f"busy core-s {f['busy_core_s']:9.1f}")

    replay = advice["replay"]
    paced = advice["paced"]
    out = [f"deadline {advice['deadline_s']:g} s, {advice['admission']}; costs from {advice['profile']}; "
           f"{advice['cores']} cores (figures below the first line are the simulator's)",
           line("Spark, as observed", advice["observed"]),
           line("replayed as observed", replay) + f"  (x{replay['batches_ratio']:.2f} batches, "
           f"x{replay['busy_ratio']:.2f} busy core-s, {replay['late_points']:+.2f} points: "
           f"{'within' if replay['within_bounds'] else 'outside'} the fidelity bounds)",
           line(f"paced ({advice['admission']})", paced) + f"  (x{paced['batches_ratio']:.2f} batches, "
           f"x{paced['busy_ratio']:.2f} busy core-s of the replay)"]
    if "busy_core_s_range" in paced:
        low, high = paced["busy_core_s_range"]
        out.append(f"{'':<24} busy core-s {low:.1f}-{high:.1f}, batches {paced['batches_range'][0]:.0f}-"
                   f"{paced['batches_range'][1]:.0f}: the recorded batches pin their per-byte cost to +-2 standard "
                   "errors, and paced batches are larger than any recorded")
    fewest = advice["fewest_executors"]
    if fewest is None:
        out.append(f"no executor count up to {len(advice['executors'])} keeps rows late <= "
                   f"{advice['late_pct_allowed']:g} %: the deadline is out of reach on this traffic")
    else:
        out.append(f"fewest executors meeting the deadline: {fewest} x {advice['cores_per_executor']} cores "
                   f"(rows late <= {advice['late_pct_allowed']:g} %)")
    return "\n".join(out)


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinite float as None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recording", help="the file a query observed with .option('pacer.observe', PATH) wrote")
    parser.add_argument("--deadline", help="the latency target to pace for (10s, '1 minute'; default: the "
                                           "query's own pacer.deadline)")
    parser.add_argument("--admission", default="zstream", help="the admission strategy to pace with (zstream)")
    parser.add_argument("--calibrated", metavar="FILE", help="costs from pacer calibrate --runtime spark instead of "
                                                             "the recorded batches")
    parser.add_argument("--workload", default="lr1", help="the built-in plan shape the replay runs (lr1; its costs "
                                                          "are the recording's)")
    parser.add_argument("--cores-per-executor", type=int, default=1, help="cores of one executor (1)")
    parser.add_argument("--max-executors", type=int, default=16, help="the most executors to try (16)")
    parser.add_argument("--late-pct", type=float, default=1.0, help="rows allowed past the deadline, %% (1)")
    parser.add_argument("--seed", type=int, default=7, help="the replays' seed (7)")
    parser.add_argument("--out", metavar="JSON", help="also write the advice as JSON here")


def _run(args: argparse.Namespace, pm: PluginManager) -> int:
    try:
        observation = read(args.recording)
    except ObservedError as exc:
        raise UsageError(str(exc)) from None
    deadline = args.deadline or (observation.header.get("options") or {}).get("pacer.deadline") or \
        observation.header.get("deadline_s")
    if deadline is None:
        raise UsageError("--deadline is needed (the observed query set no pacer.deadline): the "
                         "latency target to pace for, e.g. --deadline 10s")
    try:
        deadline_s = parse_seconds(deadline, "--deadline", positive=True)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.cores_per_executor < 1 or args.max_executors < 1:
        raise UsageError("--cores-per-executor and --max-executors must be >= 1")
    assert deadline_s is not None  # given, and checked > 0
    config = AdviseConfig(deadline_s, args.admission, args.workload, args.calibrated,
                          args.cores_per_executor, args.max_executors, args.late_pct, args.seed)
    try:
        advice = advise(observation, config, plugin_manager=pm)
    except (ValueError, KeyError) as exc:
        print(f"pacer advise: {exc}", file=sys.stderr)
        return 1
    print(render(advice))
    if args.out:
        Path(args.out).write_text(json.dumps(_finite(advice), indent=2) + "\n")
    return 0


#: ``pacer advise RECORDING``, contributed by pacer-sim's plugin.
ADVISE_COMMAND = Command("advise", "what pacing would do for a query observed without it (pacer.observe)",
                         _configure, _run)
