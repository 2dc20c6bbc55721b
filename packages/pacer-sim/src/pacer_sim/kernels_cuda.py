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

This module holds the device code; :mod:`pacer_sim.kernels_cuda_host` launches it (``load``). The kernels are plain
Python until compiled, so this module imports without numba. ``NUMBA_ENABLE_CUDASIM=1`` runs them on numba's CUDA
simulator (on the CPU, slowly): the tests check their results that way; :func:`compile_ptx` compiles them for a
GPU without one.
"""

from __future__ import annotations

import math
from typing import Any

try:
    from pacer_sim.kernel_base import HASH_MULTIPLIER, SHUFFLE_PARTITIONS
except ImportError:  # a plain script beside its siblings, where pacer is not installed (a GPU machine)
    from kernel_base import HASH_MULTIPLIER, SHUFFLE_PARTITIONS  # type: ignore[no-redef]

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


def _agg_zero(sums: Any, counts: Any) -> None:
    k = cuda.grid(1)
    if k < sums.shape[0]:
        sums[k] = 0.0
        counts[k] = 0


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



def compile_ptx(cc: tuple[int, int] = (9, 0)) -> dict[str, int]:
    """Compile every kernel to PTX for compute capability ``cc`` with the argument types the host code launches it
    with; no GPU or driver is needed (NVVM only, from the CUDA toolkit or ``pip install './packages/pacer-sim[cuda]'``).

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
        "agg_zero": (f64, i64), "agg_add": (f64, i64, i64, i64, f64, i64), "agg_mean": (f64, i64, f64), "join_build": (i64, i64, i64),
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
