"""Measure real operator kernels with every implementation installed here; write a cost profile.

Six implementations of one kernel per operator kind (``filter``, ``project``, ``aggregate``, ``join``, ``sort``,
``shuffle``, ``expand``) on a Linear-Road-like columnar batch (:mod:`pacer_sim.kernel_base`):

==============  ======  ==========================================================================
implementation  device  module
==============  ======  ==========================================================================
``numpy``       cpu     :mod:`pacer_sim.kernels_array` (array code, one core)
``numba``       cpu     :mod:`pacer_sim.kernels_numba` (loops compiled with ``@njit``, one core)
``pandas``      cpu     :mod:`pacer_sim.kernels_frame` (dataframe code, one core)
``cupy``        gpu     :mod:`pacer_sim.kernels_array` (the NumPy code on CuPy)
``numba-cuda``  gpu     :mod:`pacer_sim.kernels_cuda` (``@cuda.jit`` kernels; launched by ``kernels_cuda_host``)
``cudf``        gpu     :mod:`pacer_sim.kernels_frame` (the pandas code on cudf, RAPIDS' library)
==============  ======  ==========================================================================

An implementation whose library or device is missing is skipped with its reason. Before timing, each
implementation's result for every kind is compared with NumPy's on the smallest batch (a kind that differs is
skipped with the difference). Per kind, implementation and batch size the median of ``repeats`` timed runs after
one warm-up (compilation, allocation) is kept; on the GPU the data is already on the device (PCIe copies are
timed on their own) and every run ends with a device synchronisation.

The result is a ``pacer.cost-profile/1`` document::

    {"format": "pacer.cost-profile/1", "kinds": {"filter": {"cpu": [[bytes, seconds], ...], "gpu": [...]}, ...},
     "curves": {"cpu": "numpy", "gpu": "cupy"},
     "implementations": {"numba": {"device": "cpu", "library": "numba 0.68.1", "kinds": {...}, "skipped": "..."}},
     "transfer": {"h2d": [[bytes, seconds], ...], "d2h": [...]} | null, "skipped": {"gpu": "reason", "cudf": ...},
     "machine": {..., "load_average": [before, after]}, "libraries": {...}, "sizes": [...], "repeats": 5, ...}

``kinds`` holds the curves the simulator uses (``pacer sim --cost-profile FILE``, :mod:`pacer_sim.cost_profile`):
per device the implementation ``curves`` names (by default the first measured of numpy, numba, pandas on the CPU
and cupy, numba-cuda, cudf on the GPU); ``implementations`` holds every implementation's points. This module and
its siblings need only NumPy (and each implementation's library); no pacer import, so it runs as a plain script
on a GPU machine too::

    python -m pacer_sim.kernels --out profile.json          # or: python path/to/kernels.py --out profile.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    from pacer_sim import kernels_array, kernels_cuda, kernels_cuda_host, kernels_frame, kernels_numba
    from pacer_sim.kernel_base import (
        DEVICES,
        KINDS,
        ROW_BYTES,
        Implementation,
        canonical,
        flatten,
        make_host_batch,
    )
    from pacer_sim.kernel_base import same_result as _same
except ImportError:  # a plain script beside its siblings, where pacer is not installed (a GPU machine)
    import kernels_array  # type: ignore[no-redef]
    import kernels_cuda  # type: ignore[no-redef]
    import kernels_cuda_host  # type: ignore[no-redef]
    import kernels_frame  # type: ignore[no-redef]
    import kernels_numba  # type: ignore[no-redef]
    from kernel_base import (  # type: ignore[no-redef]
        DEVICES,
        KINDS,
        ROW_BYTES,
        Implementation,
        canonical,
        flatten,
        make_host_batch,
    )
    from kernel_base import same_result as _same  # type: ignore[no-redef]

FORMAT = "pacer.cost-profile/1"
#: Default batch sizes: 64 KB to 64 MB, x4 apart.
DEFAULT_SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26)
#: Every implementation, its device and its loader (an Implementation, or why it cannot run here).
LOADERS: dict[str, tuple[str, Callable[[], Implementation | str]]] = {
    "numpy": ("cpu", kernels_array.load_numpy),
    "numba": ("cpu", kernels_numba.load),
    "pandas": ("cpu", kernels_frame.load_pandas),
    "cupy": ("gpu", kernels_array.load_cupy),
    "numba-cuda": ("gpu", kernels_cuda_host.load),
    "cudf": ("gpu", kernels_frame.load_cudf),
}
IMPLEMENTATIONS = tuple(LOADERS)
#: Per device, the implementations whose points become the simulator's curve, first measured first.
CURVE_PREFERENCE = {"cpu": ("numpy", "numba", "pandas"), "gpu": ("cupy", "numba-cuda", "cudf")}
#: The reference every implementation's results are compared with.
REFERENCE = "numpy"

gpu_backend = kernels_array.gpu_backend
KERNELS = kernels_array.KERNELS
__all__ = ["DEFAULT_SIZES", "DEVICES", "FORMAT", "IMPLEMENTATIONS", "KINDS", "ROW_BYTES", "check_implementation",
           "format_status", "format_table", "gpu_backend", "make_batch", "measure_profile", "write_profile"]


def make_batch(xp: Any, nbytes: int, seed: int = 0) -> dict[str, Any]:
    """A Linear-Road-like columnar batch of about ``nbytes`` bytes on the array module ``xp`` (numpy or cupy)."""
    return {name: xp.asarray(col) for name, col in make_host_batch(nbytes, seed).items()}


def check_implementation(impl: Implementation, reference: Implementation, host: Mapping[str, np.ndarray],
                         kinds: Sequence[str] = KINDS) -> dict[str, str]:
    """Run every kind of ``impl`` and ``reference`` on the same host batch; kind -> how they differ (empty: none)."""
    batch, ref_batch = impl.prepare(dict(host)), reference.prepare(dict(host))
    differ: dict[str, str] = {}
    for kind in kinds:
        try:
            got = canonical(kind, flatten(impl.kernels[kind](batch), impl.leaf))
            expected = canonical(kind, flatten(reference.kernels[kind](ref_batch), reference.leaf))
            why = _same(kind, expected, got)
        except Exception as exc:  # a kernel that fails is reported, not fatal to the whole profile
            why = f"{kind}: {type(exc).__name__}: {exc}"
        if why is not None:
            differ[kind] = why
    return differ


def _timed(run: Callable[[], Any], sync: Callable[[], None], repeats: int) -> float:
    run()
    sync()  # warm-up: allocations, compilation (numba, CuPy)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        sync()
        samples.append(time.perf_counter() - t0)
    return float(statistics.median(samples))


def _bind(kernel: Callable[[Any], Any], batch: Any) -> Callable[[], Any]:
    return lambda: kernel(batch)


def _load(names: Sequence[str]) -> tuple[dict[str, Implementation], dict[str, str]]:
    loaded: dict[str, Implementation] = {}
    skipped: dict[str, str] = {}
    for name in names:
        got = LOADERS[name][1]()
        if isinstance(got, str):
            skipped[name] = got
        else:
            loaded[name] = got
    return loaded, skipped


def measure_profile(sizes: Sequence[int] = DEFAULT_SIZES, *, devices: Sequence[str] = DEVICES, repeats: int = 5,
                    kinds: Sequence[str] = KINDS, seed: int = 0, implementations: Sequence[str] | None = None,
                    curves: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Time every kernel of ``kinds`` with every implementation asked for over batches of ``sizes`` bytes.

    :param sizes: batch sizes in bytes (at least two, so the simulator can interpolate).
    :param devices: ``cpu`` and/or ``gpu``: the implementations of other devices are left out.
    :param implementations: names from :data:`IMPLEMENTATIONS` (None: all of ``devices``); one whose library or
        device is missing is skipped, with its reason in ``profile["skipped"][name]``.
    :param curves: device -> the implementation whose points are the simulator's curve (default: the first
        measured of :data:`CURVE_PREFERENCE`); a device with none measured has its reason in ``skipped[device]``.
    :param repeats: timed runs per point (the median is kept), after one warm-up.
    :return: the ``pacer.cost-profile/1`` document.
    :raises ValueError: for an unknown kind, device or implementation, fewer than two sizes, ``repeats < 1``, or a
        curve implementation of the wrong device or not asked for.
    """
    sizes = sorted({int(s) for s in sizes})
    if len(sizes) < 2 or sizes[0] < ROW_BYTES:
        raise ValueError(f"need at least two batch sizes of >= {ROW_BYTES} bytes, got {sizes}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    unknown = sorted(set(kinds) - set(KINDS)) + sorted(set(devices) - set(DEVICES))
    if unknown:
        raise ValueError(f"unknown kind(s)/device(s) {unknown}; kinds are {', '.join(KINDS)}, devices cpu and gpu")
    names = list(IMPLEMENTATIONS if implementations is None else implementations)
    if set(names) - set(LOADERS):
        raise ValueError(f"unknown implementation(s) {sorted(set(names) - set(LOADERS))}; "
                         f"they are {', '.join(IMPLEMENTATIONS)}")
    names = [n for n in IMPLEMENTATIONS if n in names and LOADERS[n][0] in devices]
    for device, name in (curves or {}).items():
        if device not in devices or name not in names or LOADERS[name][0] != device:
            raise ValueError(f"curve {device}={name}: give an implementation of that device that is measured "
                             f"({', '.join(n for n in names if LOADERS[n][0] == device) or 'none'})")
    load_before = _load_average()
    loaded, skipped = _load(names)
    reference = loaded.get(REFERENCE) or kernels_array.load_numpy()
    host_check = make_host_batch(sizes[0], seed)
    measured: dict[str, dict[str, Any]] = {}
    for name, impl in loaded.items():
        differ = check_implementation(impl, reference, host_check, kinds) if name != REFERENCE else {}
        entry: dict[str, Any] = {"device": impl.device, "library": impl.library, "kinds": {},
                                 "checked_against": None if name == REFERENCE else REFERENCE}
        if differ:
            entry["differs"] = differ
        for nbytes in sizes:
            host = make_host_batch(nbytes, seed)
            batch = impl.prepare(host)
            actual = float(sum(int(col.nbytes) for col in host.values()))
            for kind in kinds:
                if kind not in differ:
                    seconds = _timed(_bind(impl.kernels[kind], batch), impl.sync, repeats)
                    entry["kinds"].setdefault(kind, []).append([actual, seconds])
        measured[name] = entry
    chosen = _choose_curves(devices, measured, curves)
    result: dict[str, dict[str, list[list[float]]]] = {k: {} for k in kinds}
    for device, curve in chosen.items():
        if curve is None:
            wanted = [curves[device]] if curves and device in curves else CURVE_PREFERENCE[device]
            first = next((n for n in wanted if n in skipped), None)
            skipped[device] = skipped[first] if first else f"no {device} implementation was measured"
            continue
        for kind, points in measured[curve]["kinds"].items():
            result[kind][device] = points
    gpu = loaded.get("cupy") or loaded.get("numba-cuda")
    return {
        "format": FORMAT,
        "created_by": "pacer_sim.kernels",
        "bytes": "in-memory bytes of the batch's input columns; seconds: median wall time of one kernel run on one "
                 "CPU core or one GPU, data already on the device",
        "sizes": sizes,
        "repeats": repeats,
        "rows_per_byte": 1.0 / ROW_BYTES,
        "kinds": {k: v for k, v in result.items() if v},
        "curves": chosen,
        "implementations": {n: measured.get(n) or {"device": LOADERS[n][0], "skipped": skipped[n]} for n in names},
        "transfer": _measure_transfer(gpu, sizes, repeats) if gpu is not None else None,
        "skipped": skipped,
        "machine": {**_machine(loaded), "load_average": [load_before, _load_average()]},
        "libraries": _libraries(loaded),
    }


def _choose_curves(devices: Sequence[str], measured: Mapping[str, dict[str, Any]],
                   curves: Mapping[str, str] | None) -> dict[str, str | None]:
    """Device -> the implementation whose points are its curve (None: none measured)."""
    chosen: dict[str, str | None] = {}
    for device in devices:
        wanted = [curves[device]] if curves and device in curves else list(CURVE_PREFERENCE[device])
        chosen[device] = next((n for n in wanted if n in measured and measured[n]["kinds"]), None)
    return chosen


def _measure_transfer(impl: Implementation, sizes: Sequence[int], repeats: int) -> dict[str, list[list[float]]]:
    """Host->device and device->host copy times (pageable host memory, as Spark's columnar batches are)."""
    out: dict[str, list[list[float]]] = {"h2d": [], "d2h": []}
    for nbytes in sizes:
        host = {"x": np.ones(max(1, nbytes // 8), dtype=np.float64)}
        dev = impl.prepare(host)
        out["h2d"].append([float(host["x"].nbytes), _timed(_bind(impl.prepare, host), impl.sync, repeats)])
        out["d2h"].append([float(host["x"].nbytes), _timed(_bind(impl.leaf, dev["x"]), impl.sync, repeats)])
    return out


def _load_average() -> float | None:
    """The 1-minute load average (other processes competing for the cores the CPU kernels ran on), or None."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def _machine(loaded: Mapping[str, Implementation]) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "python": platform.python_version(), "gpu": None,
    }
    if "cupy" in loaded:
        import cupy  # type: ignore[import-not-found, unused-ignore]

        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props.get("name", b"")
        info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        info["gpu_memory_bytes"] = int(props.get("totalGlobalMem", 0))
    elif "numba-cuda" in loaded:
        name = kernels_cuda.cuda.get_current_device().name
        info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
    return info


def _libraries(loaded: Mapping[str, Implementation]) -> dict[str, str]:
    libs = {"numpy": np.__version__}
    for impl in loaded.values():
        library, _, version = impl.library.partition(" ")
        libs[library] = version
    if "cupy" in loaded:
        import cupy  # type: ignore[import-not-found, unused-ignore]

        libs["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
    return libs


def write_profile(profile: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as JSON to ``path`` (parents created); return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def _ordered(entries: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A profile's implementations in :data:`IMPLEMENTATIONS` order (JSON sorts them by name)."""
    return sorted(entries.items(), key=lambda item: IMPLEMENTATIONS.index(item[0]) if item[0] in LOADERS else 99)


def format_status(profile: Mapping[str, Any]) -> list[str]:
    """One line per implementation: what was measured (and checked against NumPy), or what was skipped and why."""
    lines = []
    curves = profile.get("curves") or {}
    for name, entry in _ordered(profile.get("implementations") or {}):
        head = f"{name} ({entry['device']})"
        if "skipped" in entry:
            lines.append(f"{head}: skipped: {entry['skipped']}")
            continue
        kinds = sorted(entry["kinds"], key=KINDS.index)
        checked = f"; results equal {entry['checked_against']}'s" if entry.get("checked_against") else ""
        curve = "; the simulator's curve" if curves.get(entry["device"]) == name else ""
        lines.append(f"{head}, {entry['library']}: measured {', '.join(kinds) or 'nothing'} at "
                     f"{len(profile['sizes'])} sizes{checked}{curve}")
        for kind, why in (entry.get("differs") or {}).items():
            lines.append(f"{head}: {kind} skipped: checked against {entry['checked_against']}: {why}")
    return lines


def format_table(profile: Mapping[str, Any]) -> str:
    """Per kind and size, each measured implementation's milliseconds and its time over NumPy's (x)."""
    impls = {n: e for n, e in _ordered(profile.get("implementations") or {}) if e.get("kinds")}
    if not impls:  # a profile without ``implementations``: its curves, as cpu and gpu
        impls = {d: {"kinds": {k: devs[d] for k, devs in profile["kinds"].items() if d in devs}} for d in DEVICES}
    base = impls.get(REFERENCE) or impls.get("cpu") or {"kinds": {}}
    lines = [f"{'kind':<10} {'bytes':>11} " + " ".join(f"{n + ' ms':>16}" for n in impls)]
    for kind in profile["kinds"]:
        ref = base["kinds"].get(kind, [])
        rows = max((len(e["kinds"].get(kind, [])) for e in impls.values()), default=0)
        for i in range(rows):
            nbytes = next(e["kinds"][kind][i][0] for e in impls.values() if len(e["kinds"].get(kind, [])) > i)
            cells = []
            for entry in impls.values():
                points = entry["kinds"].get(kind, [])
                s = points[i][1] if len(points) > i else None
                r = ref[i][1] if len(ref) > i else None
                cells.append(f"{'-' if s is None else f'{1000 * s:.3f}' + (f' ({s / r:.2g}x)' if r else ''):>16}")
            lines.append(f"{kind:<10} {int(nbytes):>11} " + " ".join(cells))
    for direction, points in (profile.get("transfer") or {}).items():
        for nbytes, seconds in points:
            lines.append(f"{direction:<10} {int(nbytes):>11} {1000 * seconds:>11.3f} ms")
    return "\n".join(lines)


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pacer_sim.kernels --out FILE``: measure, print what ran and a table, write the profile."""
    p = argparse.ArgumentParser(prog="python -m pacer_sim.kernels", description=(__doc__ or "").split("\n")[0])
    p.add_argument("--out", required=True, help="write the pacer.cost-profile/1 JSON here")
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                   help="batch sizes in bytes, comma-separated, K/M suffixes allowed (default 64K..64M)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per point, median kept (default 5)")
    p.add_argument("--devices", default="cpu,gpu", help="cpu, gpu or both (default cpu,gpu)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"operator kinds (default {','.join(KINDS)})")
    p.add_argument("--implementations", default=",".join(IMPLEMENTATIONS),
                   help=f"implementations to time (default all: {','.join(IMPLEMENTATIONS)})")
    p.add_argument("--curves", default="", help="DEVICE=IMPL,...: whose points are the simulator's curves "
                   "(default: numpy on the CPU, cupy on the GPU, else the next measured)")
    args = p.parse_args(argv)
    try:
        curves = dict(item.split("=", 1) for item in _split(args.curves))
        profile = measure_profile([_size(s) for s in _split(args.sizes)], devices=_split(args.devices),
                                  repeats=args.repeats, kinds=_split(args.kinds),
                                  implementations=_split(args.implementations), curves=curves)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(format_status(profile)))
    print(format_table(profile))
    print(f"profile: {write_profile(profile, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
