"""Launching the numba-cuda kernels (:mod:`pacer_sim.kernels_cuda`) per operator kind: allocation, grid sizes,
the order of kernels, and the :class:`~pacer_sim.kernel_base.Implementation` ``numba-cuda`` that
:mod:`pacer_sim.kernels` times.

Without a GPU :func:`load` says why; on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``) it refuses to time the
simulator as a GPU, and ``load(simulator=True)`` runs the kernels there to check their results.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from pacer_sim.kernel_base import GROUPS, SHUFFLE_PARTITIONS, Columns, Implementation
    from pacer_sim.kernels_cuda import CHUNK, EMPTY, TPB, cuda
except ImportError:  # a plain script beside its siblings, where pacer is not installed (a GPU machine)
    from kernel_base import GROUPS, SHUFFLE_PARTITIONS, Columns, Implementation  # type: ignore[no-redef]
    from kernels_cuda import CHUNK, EMPTY, TPB, cuda  # type: ignore[no-redef]


@functools.cache
def _compiled() -> dict[str, Any]:
    """Every kernel above as a ``cuda.jit`` dispatcher (compiled for the device on first launch)."""
    names = ("flag_filter", "block_counts", "scan_blocks", "rank", "scatter6", "gather6", "project", "fill",
             "agg_zero", "agg_add", "agg_mean", "join_build", "join_probe", "join_scatter", "sort_init", "bitonic_step",
             "shuffle_hist", "shuffle_prefix", "shuffle_starts", "shuffle_scatter", "expand")
    try:
        from pacer_sim import kernels_cuda as device
    except ImportError:  # a plain script
        import kernels_cuda as device  # type: ignore[no-redef]
    return {name: cuda.jit(getattr(device, f"_{name}")) for name in names}


def _blocks(n: int) -> int:
    return max(1, (n + TPB - 1) // TPB)


def _empty(n: int, dtype: Any) -> Any:
    return cuda.device_array(n, dtype=dtype)


def _like6(b: Columns, n: int) -> tuple[Any, ...]:
    return tuple(_empty(n, b[c].dtype) for c in ("time", "vehicle", "speed", "highway", "direction", "segment"))


def _cols(b: Columns) -> tuple[Any, ...]:
    return b["time"], b["vehicle"], b["speed"], b["highway"], b["direction"], b["segment"]


def _positions(k: dict[str, Any], flags: Any) -> tuple[Any, int]:
    """Stream compaction: each flagged row's output position (-1: dropped) and how many were flagged."""
    n = flags.shape[0]
    nb = _blocks(n)
    block_sums, offsets, total, dest = _empty(nb, np.int64), _empty(nb, np.int64), _empty(1, np.int64), _empty(n, np.int64)
    k["block_counts"][nb, TPB](flags, block_sums)
    k["scan_blocks"][1, TPB](block_sums, offsets, total)
    k["rank"][nb, TPB](flags, offsets, dest)
    return dest, int(total.copy_to_host()[0])


def _run_filter(k: dict[str, Any], b: Columns) -> Any:
    n = b["speed"].shape[0]
    flags = _empty(n, np.int8)
    k["flag_filter"][_blocks(n), TPB](b["speed"], b["segment"], flags)
    dest, kept = _positions(k, flags)
    out = _like6(b, kept)
    k["scatter6"][_blocks(n), TPB](dest, *_cols(b), *out)
    return out


def _run_project(k: dict[str, Any], b: Columns) -> Any:
    n = b["time"].shape[0]
    t10, kmh = _empty(n, np.int64), _empty(n, np.float64)
    k["project"][_blocks(n), TPB](b["time"], b["speed"], t10, kmh)
    return t10, kmh, b["vehicle"]


def _run_aggregate(k: dict[str, Any], b: Columns) -> Any:
    n = b["speed"].shape[0]
    sums, counts, out = _empty(GROUPS, np.float64), _empty(GROUPS, np.int64), _empty(GROUPS, np.float64)
    k["agg_zero"][_blocks(GROUPS), TPB](sums, counts)
    k["agg_add"][_blocks(n), TPB](b["speed"], b["highway"], b["direction"], b["segment"], sums, counts)
    k["agg_mean"][_blocks(GROUPS), TPB](sums, counts, out)
    return out


def _run_join(k: dict[str, Any], b: Columns) -> Any:
    n = b["vehicle"].shape[0]
    cap = 1 << max(4, (2 * n - 1).bit_length())
    keys, first = _empty(cap, np.int64), _empty(cap, np.int64)
    k["fill"][_blocks(cap), TPB](keys, EMPTY)
    k["fill"][_blocks(cap), TPB](first, n)
    k["join_build"][_blocks(n), TPB](b["vehicle"], keys, first)
    match, flags = _empty(n, np.int64), _empty(n, np.int8)
    k["join_probe"][_blocks(n), TPB](b["vehicle"], keys, first, match, flags)
    dest, hits = _positions(k, flags)
    out = _empty(hits, np.int64), _empty(hits, np.int64), _empty(hits, np.float64)
    k["join_scatter"][_blocks(n), TPB](dest, match, b["time"], b["vehicle"], b["speed"], *out)
    return out


def _run_sort(k: dict[str, Any], b: Columns) -> Any:
    n = b["speed"].shape[0]
    m = 1 << max(0, (n - 1).bit_length())
    keys, rows = _empty(m, np.float64), _empty(m, np.int64)
    k["sort_init"][_blocks(m), TPB](b["speed"], keys, rows)
    size = 2
    while size <= m:
        step = size // 2
        while step > 0:
            k["bitonic_step"][_blocks(m), TPB](keys, rows, step, size)
            step //= 2
        size *= 2
    out = _like6(b, n)
    k["gather6"][_blocks(n), TPB](rows[:n], *_cols(b), *out)
    return out


def _run_shuffle(k: dict[str, Any], b: Columns) -> Any:
    n = b["vehicle"].shape[0]
    chunks = (n + CHUNK - 1) // CHUNK
    hist = cuda.device_array((chunks, SHUFFLE_PARTITIONS), dtype=np.int64)
    flat = hist.reshape(chunks * SHUFFLE_PARTITIONS)
    k["fill"][_blocks(chunks * SHUFFLE_PARTITIONS), TPB](flat, 0)
    totals, starts, order = _empty(SHUFFLE_PARTITIONS, np.int64), _empty(SHUFFLE_PARTITIONS, np.int64), _empty(n, np.int64)
    k["shuffle_hist"][_blocks(chunks), TPB](b["vehicle"], hist)
    k["shuffle_prefix"][_blocks(SHUFFLE_PARTITIONS), TPB](hist, totals)
    k["shuffle_starts"][1, 1](totals, starts)
    k["shuffle_scatter"][_blocks(chunks), TPB](b["vehicle"], hist, starts, order)
    out = _like6(b, n)
    k["gather6"][_blocks(n), TPB](order, *_cols(b), *out)
    return out, totals


def _run_expand(k: dict[str, Any], b: Columns) -> Any:
    n = b["time"].shape[0]
    out = _like6(b, 3 * n)
    window = _empty(3 * n, np.int64)
    k["expand"][_blocks(n), TPB](*_cols(b), *out, window)
    return (*out, window)


_HOST: dict[str, Callable[[dict[str, Any], Columns], Any]] = {
    "filter": _run_filter, "project": _run_project, "aggregate": _run_aggregate, "join": _run_join, "sort": _run_sort,
    "shuffle": _run_shuffle, "expand": _run_expand,
}


def _leaf(a: Any) -> list[np.ndarray]:
    return [a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)]


def gpu_reason() -> str | None:
    """None when numba-cuda sees a real GPU; else why its kernels cannot be timed here."""
    if cuda is None:
        return ("numba is not importable; from the checkout, pip install './packages/pacer-sim[numba]' (and on a GPU "
                "machine './packages/pacer-sim[cuda]')")
    from numba import config

    if getattr(config, "ENABLE_CUDASIM", False):
        return "NUMBA_ENABLE_CUDASIM=1: numba's CUDA simulator runs the kernels on the CPU; its times are no GPU's"
    try:
        if not cuda.is_available():
            cuda.current_context()  # raises the driver's own reason
            return "numba-cuda sees no CUDA GPU"
    except Exception as exc:
        return f"numba-cuda sees no CUDA GPU ({type(exc).__name__}: {' '.join(str(exc).split())})"
    return None


def load(*, simulator: bool = False) -> Implementation | str:
    """The numba-cuda kernels on the GPU (data already on the device), or why they cannot run here.

    :param simulator: accept numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``): for checking results, never timing.
    """
    why = gpu_reason()
    if why is not None and not (simulator and why.startswith("NUMBA_ENABLE_CUDASIM")):
        return why
    import numba

    kernels = _compiled()

    def bind(run: Callable[[dict[str, Any], Columns], Any]) -> Callable[[Columns], Any]:
        return lambda batch: run(kernels, batch)

    return Implementation("numba-cuda", "gpu", f"numba-cuda {_numba_cuda_version(numba.__version__)}",
                          lambda host: {name: cuda.to_device(col) for name, col in host.items()},
                          {kind: bind(run) for kind, run in _HOST.items()}, cuda.synchronize, _leaf,
                          lambda b: sum(int(c.nbytes) for c in b.values()))


def _numba_cuda_version(numba_version: str) -> str:
    """The numba-cuda package's version, or numba's (whose built-in ``numba.cuda`` is then in use)."""
    from importlib import metadata

    try:
        return metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        return f"built into numba {numba_version}"
