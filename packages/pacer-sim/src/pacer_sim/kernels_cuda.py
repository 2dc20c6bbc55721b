"""The GPU kernels written with numba-cuda (``@cuda.jit``): what a hand-written CUDA engine would run per kind.

``filter`` and the join's output are stream compactions (flags, per-block counts by a shared-memory reduction,
one block scanning the block counts, each block ranking its rows by a shared-memory scan, then a scatter);
``aggregate`` accumulates sums and counts per group with atomics; ``join`` builds an open-addressing hash table
of each vehicle's first row with atomic compare-and-swap and atomic min, then probes it with every row; ``sort``
is a bitonic sort of (speed, row) pairs padded to a power of two, then a gather; ``shuffle`` is a stable
counting sort (per-chunk histograms, a prefix per partition, a scatter that keeps each chunk's order);
``project`` and ``expand`` are one thread per row. Data is on the device before a kernel runs; the only copies
are a compaction's 8-byte output count. Results equal :mod:`pacer_sim.kernels_array`'s (the aggregate's float
sums within tolerance: atomics add in any order).

The kernels are plain Python until :func:`load` compiles them, so this module imports without numba; without a
GPU :func:`load` says why. ``NUMBA_ENABLE_CUDASIM=1`` runs them on numba's CUDA simulator (on the CPU, slowly):
the tests check their results that way, and :func:`load` refuses to time the simulator as a GPU.
"""

from __future__ import annotations

import functools
import math
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

cuda: Any
I64: Any
try:
    from numba import cuda
    from numba import int64 as I64
except Exception:  # numba absent: load() says so
    cuda = I64 = None

#: Threads per block (a power of two: the block reductions and scans halve and double it).
TPB = 128
#: Rows one thread of the shuffle's counting sort handles, in order (what keeps the sort stable).
CHUNK = 64
#: An empty slot of the join's hash table (vehicle ids are >= 0).
EMPTY = -(2**63)


def _flag_filter(speed: Any, segment: Any, flags: Any) -> None:
    i = cuda.grid(1)
    if i < speed.shape[0]:
        flags[i] = 1 if speed[i] < 40.0 and segment[i] >= 0 else 0


def _block_counts(flags: Any, block_sums: Any) -> None:
    tid, i = cuda.threadIdx.x, cuda.grid(1)
    buf = cuda.shared.array(TPB, I64)
    buf[tid] = flags[i] if i < flags.shape[0] else 0
    cuda.syncthreads()
    step = TPB // 2
    while step > 0:
        if tid < step:
            buf[tid] += buf[tid + step]
        cuda.syncthreads()
        step //= 2
    if tid == 0:
        block_sums[cuda.blockIdx.x] = buf[0]


def _scan_blocks(block_sums: Any, offsets: Any, total: Any) -> None:
    # one block: each thread sums a segment of block sums serially, the block scans the partial sums
    tid, nb = cuda.threadIdx.x, block_sums.shape[0]
    seg = (nb + TPB - 1) // TPB
    lo = tid * seg
    hi = min(lo + seg, nb)
    s = 0
    for j in range(lo, hi):
        s += block_sums[j]
    buf = cuda.shared.array(TPB, I64)
    buf[tid] = s
    cuda.syncthreads()
    d = 1  # inclusive Hillis-Steele scan of the block's buf
    while d < TPB:
        v = buf[tid - d] if tid >= d else 0
        cuda.syncthreads()
        buf[tid] += v
        cuda.syncthreads()
        d *= 2
    run = buf[tid] - s
    for j in range(lo, hi):
        offsets[j] = run
        run += block_sums[j]
    if tid == TPB - 1:
        total[0] = buf[tid]


def _rank(flags: Any, offsets: Any, dest: Any) -> None:
    tid, i = cuda.threadIdx.x, cuda.grid(1)
    f = flags[i] if i < flags.shape[0] else 0
    buf = cuda.shared.array(TPB, I64)
    buf[tid] = f
    cuda.syncthreads()
    d = 1  # inclusive Hillis-Steele scan of the block's buf
    while d < TPB:
        v = buf[tid - d] if tid >= d else 0
        cuda.syncthreads()
        buf[tid] += v
        cuda.syncthreads()
        d *= 2
    if i < flags.shape[0]:
        dest[i] = offsets[cuda.blockIdx.x] + buf[tid] - 1 if f else -1


def _scatter6(dest: Any, t: Any, v: Any, s: Any, h: Any, d: Any, g: Any,
              ot: Any, ov: Any, os: Any, oh: Any, od: Any, og: Any) -> None:
    i = cuda.grid(1)
    if i < dest.shape[0] and dest[i] >= 0:
        j = dest[i]
        ot[j], ov[j], os[j], oh[j], od[j], og[j] = t[i], v[i], s[i], h[i], d[i], g[i]


def _gather6(order: Any, t: Any, v: Any, s: Any, h: Any, d: Any, g: Any,
             ot: Any, ov: Any, os: Any, oh: Any, od: Any, og: Any) -> None:
    j = cuda.grid(1)
    if j < ot.shape[0]:
        i = order[j]
        ot[j], ov[j], os[j], oh[j], od[j], og[j] = t[i], v[i], s[i], h[i], d[i], g[i]


def _project(time: Any, speed: Any, t10: Any, kmh: Any) -> None:
    i = cuda.grid(1)
    if i < time.shape[0]:
        t10[i] = time[i] - time[i] % 10
        kmh[i] = speed[i] * 1.609344


def _fill(a: Any, value: Any) -> None:
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] = value


def _agg_add(speed: Any, highway: Any, direction: Any, segment: Any, sums: Any, counts: Any) -> None:
    i = cuda.grid(1)
    if i < speed.shape[0]:
        key = (highway[i] * 2 + direction[i]) * 100 + segment[i]
        cuda.atomic.add(sums, key, speed[i])
        cuda.atomic.add(counts, key, 1)


def _agg_mean(sums: Any, counts: Any, out: Any) -> None:
    k = cuda.grid(1)
    if k < out.shape[0]:
        out[k] = sums[k] / max(counts[k], 1)


def _join_build(vehicle: Any, keys: Any, first: Any) -> None:
    i = cuda.grid(1)
    if i < vehicle.shape[0]:
        mask = keys.shape[0] - 1
        k = vehicle[i]
        slot = (k * HASH_MULTIPLIER) & mask
        while True:
            old = cuda.atomic.cas(keys, slot, EMPTY, k)
            if old == EMPTY or old == k:
                cuda.atomic.min(first, slot, i)
                break
            slot = (slot + 1) & mask


def _join_probe(vehicle: Any, keys: Any, first: Any, match: Any, flags: Any) -> None:
    i = cuda.grid(1)
    if i < vehicle.shape[0]:
        mask = keys.shape[0] - 1
        k = vehicle[i]
        slot = (k * HASH_MULTIPLIER) & mask
        while keys[slot] != EMPTY and keys[slot] != k:
            slot = (slot + 1) & mask
        hit = keys[slot] == k
        match[i] = first[slot] if hit else -1
        flags[i] = 1 if hit else 0


def _join_scatter(dest: Any, match: Any, time: Any, vehicle: Any, speed: Any, ot: Any, ov: Any, os: Any) -> None:
    i = cuda.grid(1)
    if i < dest.shape[0] and dest[i] >= 0:
        j = dest[i]
        ot[j], ov[j], os[j] = time[i], vehicle[i], speed[match[i]]


def _sort_init(speed: Any, keys: Any, rows: Any) -> None:
    i = cuda.grid(1)
    if i < keys.shape[0]:
        keys[i] = speed[i] if i < speed.shape[0] else math.inf
        rows[i] = i


def _bitonic_step(keys: Any, rows: Any, j: int, k: int) -> None:
    i = cuda.grid(1)
    if i < keys.shape[0]:
        p = i ^ j
        if p > i:
            up = (i & k) == 0
            after = keys[i] > keys[p] or (keys[i] == keys[p] and rows[i] > rows[p])
            if after == up:
                keys[i], keys[p] = keys[p], keys[i]
                rows[i], rows[p] = rows[p], rows[i]


def _shuffle_hist(vehicle: Any, hist: Any) -> None:
    c = cuda.grid(1)
    if c < hist.shape[0]:
        for i in range(c * CHUNK, min((c + 1) * CHUNK, vehicle.shape[0])):
            hist[c, (vehicle[i] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS] += 1


def _shuffle_prefix(hist: Any, totals: Any) -> None:
    p = cuda.grid(1)
    if p < SHUFFLE_PARTITIONS:
        run = 0
        for c in range(hist.shape[0]):
            v = hist[c, p]
            hist[c, p] = run
            run += v
        totals[p] = run


def _shuffle_starts(totals: Any, starts: Any) -> None:
    if cuda.grid(1) == 0:
        run = 0
        for p in range(SHUFFLE_PARTITIONS):
            starts[p] = run
            run += totals[p]


def _shuffle_scatter(vehicle: Any, hist: Any, starts: Any, order: Any) -> None:
    c = cuda.grid(1)
    if c < hist.shape[0]:
        for i in range(c * CHUNK, min((c + 1) * CHUNK, vehicle.shape[0])):
            p = (vehicle[i] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS
            order[starts[p] + hist[c, p]] = i
            hist[c, p] += 1


def _expand(t: Any, v: Any, s: Any, h: Any, d: Any, g: Any,
            ot: Any, ov: Any, os: Any, oh: Any, od: Any, og: Any, window: Any) -> None:
    i = cuda.grid(1)
    if i < t.shape[0]:
        for w in range(3):
            j = 3 * i + w
            ot[j], ov[j], os[j], oh[j], od[j], og[j] = t[i], v[i], s[i], h[i], d[i], g[i]
            window[j] = t[i] - t[i] % 10 - 10 * w



@functools.cache
def _compiled() -> dict[str, Any]:
    """Every kernel above as a ``cuda.jit`` dispatcher (compiled for the device on first launch)."""
    names = ("flag_filter", "block_counts", "scan_blocks", "rank", "scatter6", "gather6", "project", "fill",
             "agg_add", "agg_mean", "join_build", "join_probe", "join_scatter", "sort_init", "bitonic_step",
             "shuffle_hist", "shuffle_prefix", "shuffle_starts", "shuffle_scatter", "expand")
    return {name: cuda.jit(globals()[f"_{name}"]) for name in names}


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
    k["fill"][_blocks(GROUPS), TPB](sums, 0.0)
    k["fill"][_blocks(GROUPS), TPB](counts, 0)
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
        return "numba is not importable; pip install 'pacer-sim[numba]' (and on a GPU machine 'pacer-sim[cuda]')"
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


def compile_ptx(cc: tuple[int, int] = (9, 0)) -> dict[str, int]:
    """Compile every kernel to PTX for compute capability ``cc`` with the argument types the host code launches it
    with; no GPU or driver is needed (NVVM only, from the CUDA toolkit or ``pip install 'pacer-sim[cuda]'``).

    :return: kernel name -> characters of PTX.
    :raises Exception: numba's own error for a kernel that does not compile, or for a missing NVVM.
    """
    from numba import types as t

    i64, f64, i8, h2 = t.int64[:], t.float64[:], t.int8[:], t.int64[:, :]
    six = (i64, i64, f64, i64, i64, i64)
    signatures: dict[str, tuple[Any, ...]] = {
        "flag_filter": (f64, i64, i8), "block_counts": (i8, i64), "scan_blocks": (i64, i64, i64),
        "rank": (i8, i64, i64), "scatter6": (i64, *six, *six), "gather6": (i64, *six, *six),
        "project": (i64, f64, i64, f64), "fill": (f64, t.float64), "fill_i64": (i64, t.int64),
        "agg_add": (f64, i64, i64, i64, f64, i64), "agg_mean": (f64, i64, f64), "join_build": (i64, i64, i64),
        "join_probe": (i64, i64, i64, i64, i8), "join_scatter": (i64, i64, i64, i64, f64, i64, i64, f64),
        "sort_init": (f64, f64, i64), "bitonic_step": (f64, i64, t.int64, t.int64), "shuffle_hist": (i64, h2),
        "shuffle_prefix": (h2, i64), "shuffle_starts": (i64, i64), "shuffle_scatter": (i64, h2, i64, i64),
        "expand": (*six, *six, i64),
    }
    out = {}
    for name, sig in signatures.items():
        ptx, _ = cuda.compile_ptx(globals()[f"_{name.removesuffix('_i64')}"], t.void(*sig), cc=cc)
        out[name] = len(ptx)
    return out
