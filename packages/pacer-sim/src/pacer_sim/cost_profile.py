"""Load a measured ``pacer.cost-profile/1`` (:mod:`pacer_sim.kernels`) into the simulator's cost model.

Each measured kind and device replaces that curve of the model: seconds per partition are
interpolated piecewise linearly through the measured ``(bytes, seconds)`` points (and
extrapolated along the end segments). Kinds and devices the profile lacks keep the model's
curves (``scan``, ``state`` and ``sink`` are not measured; the GPU is not where the profile was
made without one). Where the profile measured PCIe copies, ``pcie_init`` and ``pcie_bandwidth``
are the least-squares fit ``seconds = init + bytes / bandwidth`` over both directions.

Every curve the model then holds is cited (``CostModel.citations``, the report's ``config.cost_model.citations``):
a measured one by its implementation, library version, machine and profile file (:func:`cite`), every other one
as "modelled, not measured" with the model's source. A profile's ``kinds`` are the implementations its ``curves``
name (numpy and cupy in a profile without ``curves``);
:func:`select_curves` takes another measured implementation's points instead (``numba`` on the CPU, say).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from pacer_sim.costs import CostModel

FORMAT = "pacer.cost-profile/1"
#: Which implementation a profile's curves are when it does not say (a profile without ``curves``).
LEGACY_CURVES = {"cpu": "numpy", "gpu": "cupy"}


def load_cost_profile(path: str | Path) -> dict[str, Any]:
    """Read and check a ``pacer.cost-profile/1`` JSON file.

    :raises ValueError: the file is missing, not JSON, of another format, or its points are malformed.
    """
    p = Path(path)
    try:
        profile = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"cost profile {str(p)!r} does not exist; write one with python -m pacer_sim.kernels "
                         "--out FILE") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"cost profile {str(p)!r} is not JSON: {exc}") from None
    if not isinstance(profile, dict) or profile.get("format") != FORMAT:
        raise ValueError(f"cost profile {str(p)!r} is not {FORMAT} (format: "
                         f"{profile.get('format') if isinstance(profile, dict) else type(profile).__name__!r})")
    kinds = profile.get("kinds")
    if not isinstance(kinds, dict) or not kinds:
        raise ValueError(f"cost profile {str(p)!r} measured no operator kind")
    for kind, devices in kinds.items():
        for device, points in devices.items():
            _check_points(f"{p.name}: kinds.{kind}.{device}", points)
    for direction, points in (profile.get("transfer") or {}).items():
        _check_points(f"{p.name}: transfer.{direction}", points)
    return profile


def _check_points(where: str, points: Any) -> None:
    ok = isinstance(points, list) and len(points) >= 2 and all(
        isinstance(pt, list) and len(pt) == 2 and all(isinstance(v, int | float) and v >= 0 for v in pt)
        for pt in points)
    if not ok:
        raise ValueError(f"{where}: expected >= 2 [bytes, seconds] pairs of non-negative numbers")


def apply_cost_profile(model: CostModel, profile: dict[str, Any], *, name: str = "") -> CostModel:
    """``model`` with the profile's measured curves (and PCIe fit) in place of its own.

    :param name: how the report's ``cost_model.source`` names the profile (its file name).
    :raises ValueError: the profile measures a kind the model does not know.
    """
    measured = {kind: dict(devs) for kind, devs in model.measured.items()}
    for kind, devices in profile["kinds"].items():
        if kind not in model.operators:
            raise ValueError(f"cost profile measures kind {kind!r}; the simulator knows {', '.join(sorted(model.operators))}")
        for device, points in devices.items():
            pts = tuple((float(b), float(s)) for b, s in sorted(points))
            measured.setdefault(kind, {})[device] = pts
    citations = dict(model.citations)
    modelled = f"modelled, not measured: {model.source}"
    for kind in model.operators:
        for device in ("cpu", "gpu"):
            citations.setdefault(f"{kind}.{device}", modelled)
    citations.setdefault("pcie", modelled)
    for kind, devices in profile["kinds"].items():
        for device in devices:
            citations[f"{kind}.{device}"] = cite(profile, device, name)
    changes: dict[str, Any] = {"measured": measured, "citations": citations}
    transfer = [pt for pts in (profile.get("transfer") or {}).values() for pt in pts]
    fit = _fit_transfer(transfer) if transfer else None
    if fit is not None:
        changes["pcie_init"], changes["pcie_bandwidth"] = fit
        citations["pcie"] = (f"fitted to copies measured with {_implementation(profile, 'gpu')} on "
                             f"{_machine(profile, 'gpu')} ({name or 'a cost profile'})")
    devices = sorted({d for devs in profile["kinds"].values() for d in devs})
    machine = profile.get("machine") or {}
    where = machine.get("gpu") or machine.get("processor") or "unknown machine"
    skipped = "; ".join(f"{d} not measured: {why}" for d, why in sorted((profile.get("skipped") or {}).items()))
    changes["source"] = (f"{model.source}; measured {'+'.join(devices)} kernels of "
                         f"{', '.join(sorted(profile['kinds']))} from {name or 'a cost profile'} ({where})"
                         + (f"; PCIe fitted: {fit[0] * 1e3:.3f} ms + bytes / {fit[1] / 1e9:.2f} GB/s" if fit else "")
                         + (f"; {skipped}" if skipped else ""))
    return dataclasses.replace(model, **changes)


def _implementation(profile: dict[str, Any], device: str) -> str:
    """The implementation (and library version) whose points are ``device``'s curves in ``profile``."""
    name = (profile.get("curves") or {}).get(device) or LEGACY_CURVES[device]
    library = ((profile.get("implementations") or {}).get(name) or {}).get("library")
    if library is None:  # a profile that does not record this implementation: NumPy or CuPy
        version = (profile.get("libraries") or {}).get(name)
        library = f"{name} {version}" if version else name
    return library if library.split(" ")[0] == name else f"{name} ({library})"


def _machine(profile: dict[str, Any], device: str) -> str:
    """The machine a profile's ``device`` curves were measured on, in words."""
    machine = profile.get("machine") or {}
    if device == "gpu" and machine.get("gpu"):
        return str(machine["gpu"])
    cores = f", {machine['cpu_count']} cores" if machine.get("cpu_count") else ""
    load = [x for x in machine.get("load_average") or [] if isinstance(x, int | float)]
    loaded = f", load average {max(load):g} while measured" if load else ""
    return (f"{machine.get('processor') or 'an unknown CPU'}{cores} ({machine.get('platform', 'unknown platform')})"
            f"{loaded}")


def cite(profile: dict[str, Any], device: str, name: str = "") -> str:
    """How a curve of ``device`` taken from ``profile`` is cited: measured, by which implementation, on what."""
    where = _machine(profile, device) if device == "gpu" else f"one core of {_machine(profile, device)}"
    return (f"measured: {_implementation(profile, device)} on {where}, median of {profile.get('repeats', '?')} "
            f"({name or 'a cost profile'})")


def select_curves(profile: dict[str, Any], curves: dict[str, str]) -> dict[str, Any]:
    """``profile`` with the curves of ``curves`` (device -> implementation) taken from its ``implementations``.

    :raises ValueError: the profile did not measure that implementation (the message lists those it did).
    """
    impls = profile.get("implementations") or {}
    kinds: dict[str, dict[str, Any]] = {kind: dict(devs) for kind, devs in profile["kinds"].items()}
    for device, name in curves.items():
        entry = impls.get(name) or {}
        if entry.get("device") != device or not entry.get("kinds"):
            measured = sorted(n for n, e in impls.items() if e.get("device") == device and e.get("kinds"))
            raise ValueError(f"the cost profile has no measured {device} implementation {name!r}; it measured "
                             f"{', '.join(measured) or 'none'}")
        for kind in kinds:
            kinds[kind].pop(device, None)
        for kind, points in entry["kinds"].items():
            _check_points(f"implementations.{name}.{kind}", points)
            kinds.setdefault(kind, {})[device] = points
    return {**profile, "kinds": kinds, "curves": {**(profile.get("curves") or {}), **curves}}


def _fit_transfer(points: list[list[float]]) -> tuple[float, float] | None:
    """Least-squares ``seconds = init + bytes / bandwidth``; None when the fit is degenerate."""
    n = len(points)
    xs = [float(b) for b, _ in points]
    ys = [float(s) for _, s in points]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 2 or sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if slope <= 0:
        return None
    return max(0.0, my - slope * mx), 1.0 / slope
