"""The array kernels: one algorithm written against an array module ``xp``, run with NumPy (CPU) or CuPy (GPU).

Per kind: ``filter`` (a predicate and a compaction), ``project`` (two derived columns), ``aggregate`` (group-by
average over highway x direction x segment, by ``bincount``), ``join`` (probe of a build side of one row per
vehicle, its first, through a sorted key array), ``sort`` (by speed, every column gathered), ``shuffle`` (hash
partitioning into 200 partitions: partition ids, a stable sort, counts) and ``expand`` (three sliding windows per
row). The same code runs on both devices, so their ratio is the device's, not the algorithm's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from pacer_sim.kernel_base import GROUPS, HASH_MULTIPLIER, SHUFFLE_PARTITIONS, Columns, Implementation
except ImportError:  # a plain script beside its siblings, where pacer is not installed (a GPU machine)
    from kernel_base import (  # type: ignore[no-redef]
        GROUPS,
        HASH_MULTIPLIER,
        SHUFFLE_PARTITIONS,
        Columns,
        Implementation,
    )


def _filter(xp: Any, b: Columns) -> Any:
    mask = (b["speed"] < 40.0) & (b["segment"] >= 0)
    return [col[mask] for col in b.values()]


def _project(xp: Any, b: Columns) -> Any:
    return b["time"] - b["time"] % 10, b["speed"] * 1.609344, b["vehicle"]


def _aggregate(xp: Any, b: Columns) -> Any:
    key = (b["highway"] * 2 + b["direction"]) * 100 + b["segment"]
    sums = xp.bincount(key, weights=b["speed"], minlength=GROUPS)
    counts = xp.bincount(key, minlength=GROUPS)
    return sums / xp.maximum(counts, 1)


def _join(xp: Any, b: Columns) -> Any:
    # build side: one row per vehicle (its first speed); probe: every row of the batch
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
    part = (b["vehicle"] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS
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
        return None, (f"CuPy is not importable ({type(exc).__name__}: {exc}); install cupy-cuda12x/13x on a GPU "
                      "machine (pip install './packages/pacer-sim[cuda]' from the checkout)")
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        return None, f"no CUDA device visible to CuPy ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "no CUDA device visible to CuPy"
    return cupy, ""


def _bound(xp: Any) -> dict[str, Callable[[Any], Any]]:
    def bind(kernel: Callable[[Any, Columns], Any]) -> Callable[[Any], Any]:
        return lambda batch: kernel(xp, batch)

    return {kind: bind(kernel) for kind, kernel in KERNELS.items()}


def _columns_bytes(batch: Columns) -> int:
    return sum(int(col.nbytes) for col in batch.values())


def load_numpy() -> Implementation:
    """The NumPy kernels on one CPU core."""
    return Implementation("numpy", "cpu", f"numpy {np.__version__}", lambda host: dict(host), _bound(np),
                          lambda: None, lambda a: [np.asarray(a)], _columns_bytes)


def load_cupy() -> Implementation | str:
    """The same kernels with CuPy on the GPU (data already on the device), or why they cannot run here."""
    cupy, why = gpu_backend()
    if cupy is None:
        return why
    return Implementation("cupy", "gpu", f"cupy {cupy.__version__}",
                          lambda host: {name: cupy.asarray(col) for name, col in host.items()}, _bound(cupy),
                          cupy.cuda.Device().synchronize, lambda a: [cupy.asnumpy(a)], _columns_bytes)
