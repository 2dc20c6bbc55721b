"""The CPU kernels written as loops and compiled with numba's ``@njit`` (one core, no parallel loops).

Each kind computes what :mod:`pacer_sim.kernels_array` computes, by the algorithm a compiled engine would use:
``filter`` counts then copies the kept rows; ``project`` is one pass; ``aggregate`` accumulates sums and counts
per group; ``join`` builds an open-addressing hash table of each vehicle's first row and probes it with every
row; ``sort`` is numba's quicksort of the speed column and a gather; ``shuffle`` is a stable counting sort into
200 partitions; ``expand`` writes three rows per row. The functions are plain Python until :func:`load` compiles
them, so this module imports without numba (``pip install './packages/pacer-sim[numba]'``).
"""

from __future__ import annotations

import functools
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


def _filter(time: Any, vehicle: Any, speed: Any, highway: Any, direction: Any, segment: Any) -> Any:
    n = speed.shape[0]
    keep = 0
    for i in range(n):
        if speed[i] < 40.0 and segment[i] >= 0:
            keep += 1
    t, v, s = np.empty(keep, np.int64), np.empty(keep, np.int64), np.empty(keep, np.float64)
    h, d, g = np.empty(keep, np.int64), np.empty(keep, np.int64), np.empty(keep, np.int64)
    j = 0
    for i in range(n):
        if speed[i] < 40.0 and segment[i] >= 0:
            t[j], v[j], s[j], h[j], d[j], g[j] = time[i], vehicle[i], speed[i], highway[i], direction[i], segment[i]
            j += 1
    return t, v, s, h, d, g


def _project(time: Any, speed: Any, vehicle: Any) -> Any:
    n = time.shape[0]
    t10, kmh = np.empty(n, np.int64), np.empty(n, np.float64)
    for i in range(n):
        t10[i] = time[i] - time[i] % 10
        kmh[i] = speed[i] * 1.609344
    return t10, kmh, vehicle


def _aggregate(speed: Any, highway: Any, direction: Any, segment: Any) -> Any:
    sums = np.zeros(GROUPS, np.float64)
    counts = np.zeros(GROUPS, np.int64)
    for i in range(speed.shape[0]):
        key = (highway[i] * 2 + direction[i]) * 100 + segment[i]
        sums[key] += speed[i]
        counts[key] += 1
    out = np.empty(GROUPS, np.float64)
    for k in range(GROUPS):
        out[k] = sums[k] / max(counts[k], 1)
    return out


def _join(time: Any, vehicle: Any, speed: Any) -> Any:
    n = vehicle.shape[0]
    cap = 16
    while cap < 2 * n:
        cap *= 2
    mask = cap - 1
    keys = np.empty(cap, np.int64)
    first = np.full(cap, -1, np.int64)
    for i in range(n):  # build: the first row of every vehicle
        k = vehicle[i]
        slot = (k * HASH_MULTIPLIER) & mask
        while first[slot] != -1 and keys[slot] != k:
            slot = (slot + 1) & mask
        if first[slot] == -1:
            keys[slot] = k
            first[slot] = i
    match = np.empty(n, np.int64)
    hits = 0
    for i in range(n):  # probe: every row
        k = vehicle[i]
        slot = (k * HASH_MULTIPLIER) & mask
        while first[slot] != -1 and keys[slot] != k:
            slot = (slot + 1) & mask
        match[i] = first[slot]
        if first[slot] != -1:
            hits += 1
    t, v, s = np.empty(hits, np.int64), np.empty(hits, np.int64), np.empty(hits, np.float64)
    j = 0
    for i in range(n):
        if match[i] != -1:
            t[j], v[j], s[j] = time[i], vehicle[i], speed[match[i]]
            j += 1
    return t, v, s


def _gather(order: Any, time: Any, vehicle: Any, speed: Any, highway: Any, direction: Any, segment: Any) -> Any:
    n = order.shape[0]
    t, v, s = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.float64)
    h, d, g = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    for j in range(n):
        i = order[j]
        t[j], v[j], s[j], h[j], d[j], g[j] = time[i], vehicle[i], speed[i], highway[i], direction[i], segment[i]
    return t, v, s, h, d, g


def _sort_order(speed: Any) -> Any:
    return np.argsort(speed)  # numba's own quicksort, compiled


def _shuffle_order(vehicle: Any) -> Any:
    n = vehicle.shape[0]
    part = np.empty(n, np.int64)
    counts = np.zeros(SHUFFLE_PARTITIONS, np.int64)
    for i in range(n):
        part[i] = (vehicle[i] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS
        counts[part[i]] += 1
    start = np.empty(SHUFFLE_PARTITIONS, np.int64)
    total = 0
    for p in range(SHUFFLE_PARTITIONS):
        start[p] = total
        total += counts[p]
    order = np.empty(n, np.int64)
    for i in range(n):  # stable: rows keep their order inside a partition
        order[start[part[i]]] = i
        start[part[i]] += 1
    return order, counts


def _expand(time: Any, vehicle: Any, speed: Any, highway: Any, direction: Any, segment: Any) -> Any:
    n = time.shape[0]
    t, v, s = np.empty(3 * n, np.int64), np.empty(3 * n, np.int64), np.empty(3 * n, np.float64)
    h, d, g = np.empty(3 * n, np.int64), np.empty(3 * n, np.int64), np.empty(3 * n, np.int64)
    window = np.empty(3 * n, np.int64)
    for i in range(n):
        for w in range(3):
            j = 3 * i + w
            t[j], v[j], s[j], h[j], d[j], g[j] = time[i], vehicle[i], speed[i], highway[i], direction[i], segment[i]
            window[j] = time[i] - time[i] % 10 - 10 * w
    return t, v, s, h, d, g, window


def _kinds(jit: Callable[[Any], Any]) -> dict[str, Callable[[Columns], Any]]:
    """Every kind's kernel over a batch of columns, its loops compiled with ``jit``."""
    filt, proj, agg, join = jit(_filter), jit(_project), jit(_aggregate), jit(_join)
    gather, shuffle_order, expand = jit(_gather), jit(_shuffle_order), jit(_expand)
    sort_order = jit(_sort_order)

    def cols(b: Columns) -> tuple[Any, ...]:
        return b["time"], b["vehicle"], b["speed"], b["highway"], b["direction"], b["segment"]

    def shuffle(b: Columns) -> Any:
        order, counts = shuffle_order(b["vehicle"])
        return gather(order, *cols(b)), counts

    return {
        "filter": lambda b: filt(*cols(b)),
        "project": lambda b: proj(b["time"], b["speed"], b["vehicle"]),
        "aggregate": lambda b: agg(b["speed"], b["highway"], b["direction"], b["segment"]),
        "join": lambda b: join(b["time"], b["vehicle"], b["speed"]),
        "sort": lambda b: gather(sort_order(b["speed"]), *cols(b)),
        "shuffle": shuffle,
        "expand": lambda b: expand(*cols(b)),
    }


#: Cache compiled kernels on disk only when imported as pacer_sim's module: a plain script's module has another
#: name, and numba's cache entries name the module they were compiled in.
_CACHE = __name__ == "pacer_sim.kernels_numba"


@functools.cache
def load() -> Implementation | str:
    """The kernels compiled with ``numba.njit`` (on first call, then cached on disk beside this module where it
    is writable), or why numba cannot run here."""
    try:
        import numba
    except Exception as exc:  # ImportError, or a numba built for another NumPy
        return (f"numba is not importable ({type(exc).__name__}: {exc}); pip install './packages/pacer-sim[numba]' "
                "from the checkout")
    return Implementation("numba", "cpu", f"numba {numba.__version__}", lambda host: dict(host),
                          _kinds(lambda f: numba.njit(cache=_CACHE, nogil=True)(f)), lambda: None,
                          lambda a: [np.asarray(a)], lambda b: sum(int(c.nbytes) for c in b.values()))
