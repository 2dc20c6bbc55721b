"""Measure real operator kernels on the CPU (NumPy) and, where one is visible, the GPU (CuPy); write a cost profile.

Each operator kind pacer's DAGs use gets one kernel that does that kind's work on a
Linear-Road-like columnar batch (int64 time, vehicle, highway, direction, segment; float64
speed; 48 bytes a row): ``filter`` (a predicate and a compaction), ``project`` (two derived
columns), ``aggregate`` (group-by average over highway x direction x segment), ``join`` (probe
of a hash-partitioned build side on vehicle), ``sort`` (by time, every column gathered),
``shuffle`` (hash partitioning into 200 partitions: partition ids, a stable sort, counts) and
``expand`` (three sliding windows per row). The same algorithm runs on both devices, so their
ratio is the device's, not the algorithm's. Per kind, device and batch size the median of
``repeats`` timed runs after one warm-up is kept; on the GPU the data is already on the device
(the PCIe transfer is measured on its own, host->device and device->host) and every run ends
with a device synchronisation.

The result is a ``pacer.cost-profile/1`` document::

    {"format": "pacer.cost-profile/1", "kinds": {"filter": {"cpu": [[bytes, seconds], ...], "gpu": [...]}, ...},
     "transfer": {"h2d": [[bytes, seconds], ...], "d2h": [...]} | null, "skipped": {"gpu": "reason"},
     "machine": {...}, "libraries": {...}, "sizes": [...], "repeats": 5, "rows_per_byte": ...}

that ``pacer sim --cost-profile FILE`` loads (:mod:`pacer_sim.cost_profile`). This module is
self-contained: NumPy, and CuPy where importable; no pacer import, no Java, no network, so it
runs as a plain script on a GPU machine too::

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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "pacer.cost-profile/1"
KINDS = ("filter", "project", "aggregate", "join", "sort", "shuffle", "expand")
DEVICES = ("cpu", "gpu")
#: Bytes of one row of the measured batch (six 8-byte columns).
ROW_BYTES = 48
#: Default batch sizes: 64 KB to 64 MB, x4 apart.
DEFAULT_SIZES = (1 << 16, 1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26)
SHUFFLE_PARTITIONS = 200

Columns = dict[str, Any]


def make_batch(xp: Any, nbytes: int, seed: int = 0) -> Columns:
    """A Linear-Road-like columnar batch of about ``nbytes`` bytes on the array module ``xp`` (numpy or cupy)."""
    rows = max(16, nbytes // ROW_BYTES)
    rng = np.random.default_rng(seed)
    host = {
        "time": np.sort(rng.integers(0, 10_000, rows)).astype(np.int64),
        "vehicle": rng.integers(0, max(4, rows // 4), rows).astype(np.int64),
        "speed": rng.uniform(0.0, 100.0, rows),
        "highway": rng.integers(0, 10, rows).astype(np.int64),
        "direction": rng.integers(0, 2, rows).astype(np.int64),
        "segment": rng.integers(0, 100, rows).astype(np.int64),
    }
    return {name: xp.asarray(col) for name, col in host.items()}


def _filter(xp: Any, b: Columns) -> Any:
    mask = (b["speed"] < 40.0) & (b["segment"] >= 0)
    return [col[mask] for col in b.values()]


def _project(xp: Any, b: Columns) -> Any:
    return b["time"] - b["time"] % 10, b["speed"] * 1.609344, b["vehicle"]


def _aggregate(xp: Any, b: Columns) -> Any:
    key = (b["highway"] * 2 + b["direction"]) * 100 + b["segment"]
    sums = xp.bincount(key, weights=b["speed"], minlength=2000)
    counts = xp.bincount(key, minlength=2000)
    return sums / xp.maximum(counts, 1)


def _join(xp: Any, b: Columns) -> Any:
    # build side: one row per vehicle (its latest speed); probe: every row of the batch
    build_keys, first = xp.unique(b["vehicle"], return_index=True)
    build_speed = b["speed"][first]
    pos = xp.searchsorted(build_keys, b["vehicle"])
    pos = xp.minimum(pos, build_keys.shape[0] - 1)
    hit = build_keys[pos] == b["vehicle"]
    return b["time"][hit], b["vehicle"][hit], build_speed[pos[hit]]


def _sort(xp: Any, b: Columns) -> Any:
    order = xp.argsort(b["speed"])
    return [col[order] for col in b.values()]


def _shuffle(xp: Any, b: Columns) -> Any:
    part = (b["vehicle"] * 2654435761) % SHUFFLE_PARTITIONS
    order = xp.argsort(part, kind="stable") if xp is np else xp.argsort(part)
    counts = xp.bincount(part, minlength=SHUFFLE_PARTITIONS)
    return [col[order] for col in b.values()], counts


def _expand(xp: Any, b: Columns) -> Any:
    out = {name: xp.repeat(col, 3) for name, col in b.items()}
    offsets = xp.tile(xp.asarray([0, 10, 20], dtype=xp.int64), b["time"].shape[0])
    out["window"] = out["time"] - out["time"] % 10 - offsets
    return out


KERNELS: dict[str, Callable[[Any, Columns], Any]] = {
    "filter": _filter, "project": _project, "aggregate": _aggregate, "join": _join,
    "sort": _sort, "shuffle": _shuffle, "expand": _expand,
}


def gpu_backend() -> tuple[Any | None, str]:
    """CuPy with a visible device, or (None, why not)."""
    try:
        import cupy  # type: ignore[import-not-found, unused-ignore]
    except Exception as exc:  # ImportError, or a CUDA library that fails to load
        return None, f"CuPy is not importable ({type(exc).__name__}: {exc}); install cupy-cuda12x/13x on a GPU machine"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        return None, f"no CUDA device visible to CuPy ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "no CUDA device visible to CuPy"
    return cupy, ""


def _bind(kernel: Callable[[Any, Any], Any], xp: Any, batch: Any) -> Callable[[], Any]:
    """``kernel(xp, batch)`` as a function of no arguments (what :func:`_timed` runs)."""
    return lambda: kernel(xp, batch)


def _timed(run: Callable[[], Any], sync: Callable[[], None], repeats: int) -> float:
    run()
    sync()  # warm-up: allocations, CuPy's kernel compilation
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        sync()
        samples.append(time.perf_counter() - t0)
    return float(statistics.median(samples))


def measure_profile(sizes: Sequence[int] = DEFAULT_SIZES, *, devices: Sequence[str] = DEVICES, repeats: int = 5,
                    kinds: Sequence[str] = KINDS, seed: int = 0) -> dict[str, Any]:
    """Time every kernel of ``kinds`` on every device of ``devices`` over batches of ``sizes`` bytes.

    :param sizes: batch sizes in bytes (at least two, so the simulator can interpolate).
    :param devices: ``cpu`` and/or ``gpu``; the GPU part is skipped, with its reason in
        ``profile["skipped"]["gpu"]``, when CuPy or a device is missing.
    :param repeats: timed runs per point (the median is kept), after one warm-up.
    :return: the ``pacer.cost-profile/1`` document.
    :raises ValueError: for an unknown kind or device, fewer than two sizes, or ``repeats < 1``.
    """
    sizes = sorted({int(s) for s in sizes})
    if len(sizes) < 2 or sizes[0] < ROW_BYTES:
        raise ValueError(f"need at least two batch sizes of >= {ROW_BYTES} bytes, got {sizes}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    unknown = sorted(set(kinds) - set(KERNELS)) + sorted(set(devices) - set(DEVICES))
    if unknown:
        raise ValueError(f"unknown kind(s)/device(s) {unknown}; kinds are {', '.join(KINDS)}, devices cpu and gpu")
    skipped: dict[str, str] = {}
    backends: dict[str, tuple[Any, Callable[[], None]]] = {}
    if "cpu" in devices:
        backends["cpu"] = (np, lambda: None)
    if "gpu" in devices:
        cupy, why = gpu_backend()
        if cupy is None:
            skipped["gpu"] = why
        else:
            backends["gpu"] = (cupy, cupy.cuda.Device().synchronize)
    result: dict[str, dict[str, list[list[float]]]] = {k: {} for k in kinds}
    for device, (xp, sync) in backends.items():
        for nbytes in sizes:
            batch = make_batch(xp, nbytes, seed)
            actual = sum(int(col.nbytes) for col in batch.values())
            for kind in kinds:
                seconds = _timed(_bind(KERNELS[kind], xp, batch), sync, repeats)
                result[kind].setdefault(device, []).append([float(actual), seconds])
    transfer = _measure_transfer(backends["gpu"][0], sizes, repeats) if "gpu" in backends else None
    return {
        "format": FORMAT,
        "created_by": "pacer_sim.kernels",
        "bytes": "in-memory bytes of the batch's input columns; seconds: median wall time of one kernel run on one "
                 "CPU core (NumPy) or one GPU (CuPy), data already on the device",
        "sizes": sizes,
        "repeats": repeats,
        "rows_per_byte": 1.0 / ROW_BYTES,
        "kinds": {k: v for k, v in result.items() if v},
        "transfer": transfer,
        "skipped": skipped,
        "machine": _machine(backends.get("gpu", (None, None))[0]),
        "libraries": _libraries(backends.get("gpu", (None, None))[0]),
    }


def _measure_transfer(cupy: Any, sizes: Sequence[int], repeats: int) -> dict[str, list[list[float]]]:
    """Host->device and device->host copy times (pageable host memory, as Spark's columnar batches are)."""
    sync = cupy.cuda.Device().synchronize
    out: dict[str, list[list[float]]] = {"h2d": [], "d2h": []}
    for nbytes in sizes:
        host = np.ones(max(1, nbytes // 8), dtype=np.float64)
        dev = cupy.asarray(host)
        out["h2d"].append([float(host.nbytes), _timed(_bind(lambda xp, a: xp.asarray(a), cupy, host), sync, repeats)])
        out["d2h"].append([float(host.nbytes), _timed(_bind(lambda xp, a: a.get(), cupy, dev), sync, repeats)])
    return out


def _machine(cupy: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(), "python": platform.python_version(), "gpu": None,
    }
    if cupy is not None:
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        name = props.get("name", b"")
        info["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        info["gpu_memory_bytes"] = int(props.get("totalGlobalMem", 0))
    return info


def _libraries(cupy: Any) -> dict[str, str]:
    libs = {"numpy": np.__version__}
    try:
        import pandas

        libs["pandas"] = pandas.__version__
    except ImportError:
        pass
    if cupy is not None:
        libs["cupy"] = cupy.__version__
        libs["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
    return libs


def write_profile(profile: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``profile`` as JSON to ``path`` (parents created); return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return out


def format_table(profile: dict[str, Any]) -> str:
    """A short text table: per kind and size, CPU and GPU milliseconds and the GPU's speed-up."""
    lines = [f"{'kind':<10} {'bytes':>11} {'cpu ms':>9} {'gpu ms':>9} {'speed-up':>8}"]
    for kind, devices in profile["kinds"].items():
        gpu = {int(b): s for b, s in devices.get("gpu", [])}
        for nbytes, cpu_s in devices.get("cpu", []):
            g = gpu.get(int(nbytes))
            lines.append(f"{kind:<10} {int(nbytes):>11} {1000 * cpu_s:>9.3f} "
                         f"{'-' if g is None else f'{1000 * g:.3f}':>9} {'-' if not g else f'{cpu_s / g:.1f}':>8}")
    for direction, points in (profile.get("transfer") or {}).items():
        for nbytes, seconds in points:
            lines.append(f"{direction:<10} {int(nbytes):>11} {'':>9} {1000 * seconds:>9.3f} {'':>8}")
    return "\n".join(lines)


def _size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(float(text[:-1] if scale > 1 else text) * scale)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pacer_sim.kernels --out FILE``: measure, print a table, write the profile."""
    p = argparse.ArgumentParser(prog="python -m pacer_sim.kernels", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="write the pacer.cost-profile/1 JSON here")
    p.add_argument("--sizes", default=",".join(str(s) for s in DEFAULT_SIZES),
                   help="batch sizes in bytes, comma-separated, K/M suffixes allowed (default 64K..64M)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per point, median kept (default 5)")
    p.add_argument("--devices", default="cpu,gpu", help="cpu, gpu or both (default cpu,gpu)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"operator kinds (default {','.join(KINDS)})")
    args = p.parse_args(argv)
    try:
        profile = measure_profile([_size(s) for s in args.sizes.split(",") if s.strip()],
                                  devices=[d.strip() for d in args.devices.split(",") if d.strip()],
                                  repeats=args.repeats, kinds=[k.strip() for k in args.kinds.split(",") if k.strip()])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for device, why in profile["skipped"].items():
        print(f"skipped {device}: {why}", file=sys.stderr)
    print(format_table(profile))
    print(f"profile: {write_profile(profile, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
