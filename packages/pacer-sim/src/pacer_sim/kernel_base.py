"""What every kernel implementation shares: the operator kinds, the measured batch, and one implementation's record.

An implementation (NumPy, CuPy, numba ``@njit``, numba-cuda, pandas, cudf) runs one kernel per operator kind on
a Linear-Road-like columnar batch (int64 time, vehicle, highway, direction, segment; float64 speed; 48 bytes a
row). Every implementation of one kind computes the same result on the same input; :func:`canonical` turns a
kernel's output into host NumPy arrays in an order-independent form where the operator's order is not defined
(a join's rows, rows tied in a sort, rows inside one shuffle partition), so any two implementations can be
compared exactly (integers) or within float tolerance (means).

This module imports only NumPy, so the kernel modules beside it run as plain scripts on a GPU machine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

KINDS = ("filter", "project", "aggregate", "join", "sort", "shuffle", "expand")
DEVICES = ("cpu", "gpu")
#: Column names of the measured batch, in the order every kernel returns them.
COLUMNS = ("time", "vehicle", "speed", "highway", "direction", "segment")
#: Bytes of one row of the measured batch (six 8-byte columns).
ROW_BYTES = 48
SHUFFLE_PARTITIONS = 200
#: Groups of the aggregate: highway (10) x direction (2) x segment (100).
GROUPS = 2000
#: The multiplier of the shuffle's partition hash (Knuth's multiplicative hash).
HASH_MULTIPLIER = 2654435761

Columns = dict[str, Any]


def make_host_batch(nbytes: int, seed: int = 0) -> dict[str, np.ndarray]:
    """A Linear-Road-like columnar batch of about ``nbytes`` bytes in host memory (NumPy arrays, :data:`COLUMNS`)."""
    rows = max(16, nbytes // ROW_BYTES)
    rng = np.random.default_rng(seed)
    return {
        "time": np.sort(rng.integers(0, 10_000, rows)).astype(np.int64),
        "vehicle": rng.integers(0, max(4, rows // 4), rows).astype(np.int64),
        "speed": rng.uniform(0.0, 100.0, rows),
        "highway": rng.integers(0, 10, rows).astype(np.int64),
        "direction": rng.integers(0, 2, rows).astype(np.int64),
        "segment": rng.integers(0, 100, rows).astype(np.int64),
    }


@dataclass(frozen=True)
class Implementation:
    """One library's kernels for every operator kind, and how to feed and read them.

    :param name: ``numpy``, ``cupy``, ``numba``, ``numba-cuda``, ``pandas`` or ``cudf``.
    :param device: ``cpu`` or ``gpu``.
    :param library: the library and its version, as a profile cites it (``numba 0.68.1``).
    :param prepare: host batch (:func:`make_host_batch`) -> this implementation's batch (device arrays, a frame).
    :param kernels: kind -> kernel of one argument, the prepared batch.
    :param sync: waits for the device to finish (a no-op on the CPU).
    :param leaf: one leaf of a kernel's result (an array, a column, a frame) -> its host NumPy arrays.
    :param size_of: the prepared batch's in-memory bytes.
    """

    name: str
    device: str
    library: str
    prepare: Callable[[dict[str, np.ndarray]], Any]
    kernels: Mapping[str, Callable[[Any], Any]]
    sync: Callable[[], None]
    leaf: Callable[[Any], list[np.ndarray]]
    size_of: Callable[[Any], int]


def flatten(result: Any, leaf: Callable[[Any], list[np.ndarray]]) -> list[np.ndarray]:
    """A kernel's (possibly nested: tuples, lists, dicts) result as a flat list of host NumPy arrays."""
    out: list[np.ndarray] = []

    def walk(obj: Any) -> Iterator[np.ndarray]:
        if isinstance(obj, dict):
            for value in obj.values():
                yield from walk(value)
        elif isinstance(obj, list | tuple):
            for value in obj:
                yield from walk(value)
        else:
            yield from leaf(obj)

    out.extend(walk(result))
    return out


#: How many flat arrays each kind's result has (expand: the six columns and the window; shuffle: + counts).
ARITY = {"filter": 6, "project": 3, "aggregate": 1, "join": 3, "sort": 6, "shuffle": 7, "expand": 7}


def _rows_sorted(cols: list[np.ndarray], *, first: np.ndarray | None = None) -> list[np.ndarray]:
    """``cols`` with their rows in lexicographic order (by ``first`` first, where given, then column by column)."""
    keys = [c for c in reversed(cols)] + ([first] if first is not None else [])
    order = np.lexsort(keys)
    return [c[order] for c in cols]


def canonical(kind: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """The order-independent form of one kind's flat result, for comparing implementations.

    Filter, project, aggregate and expand keep their order (it is defined); a join's rows are a set, so they
    are sorted; a sort's key column must be non-decreasing, and rows tied on it are sorted; a shuffle's rows
    must be grouped by partition in partition order, and rows inside a partition are sorted.

    :raises ValueError: for a result of the wrong shape, an unsorted sort, or an ungrouped shuffle.
    """
    if len(arrays) != ARITY[kind]:
        raise ValueError(f"{kind}: expected {ARITY[kind]} result arrays, got {len(arrays)}")
    arrays = [np.asarray(a) for a in arrays]
    if len({a.shape[0] for a in (arrays[:-1] if kind == "shuffle" else arrays)}) > 1 and kind != "aggregate":
        raise ValueError(f"{kind}: result columns of different lengths {[a.shape[0] for a in arrays]}")
    if kind == "join":
        return _rows_sorted(arrays)
    if kind == "sort":
        speed = arrays[COLUMNS.index("speed")]
        if np.any(np.diff(speed) < 0):
            raise ValueError("sort: the speed column is not in non-decreasing order")
        return _rows_sorted(arrays, first=speed)
    if kind == "shuffle":
        cols, counts = arrays[:-1], arrays[-1]
        part = (cols[COLUMNS.index("vehicle")] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS
        if np.any(np.diff(part) < 0):
            raise ValueError("shuffle: rows are not grouped by partition in partition order")
        return [*_rows_sorted(cols, first=part), counts.astype(np.int64)]
    return arrays


def same_result(kind: str, expected: list[np.ndarray], got: list[np.ndarray]) -> str | None:
    """None when two canonical results agree (integers exactly, floats within 1e-9 relative); else why not."""
    for i, (e, g) in enumerate(zip(expected, got, strict=True)):
        if e.shape != g.shape:
            return f"{kind}: result array {i} has shape {g.shape}, expected {e.shape}"
        if np.issubdtype(e.dtype, np.floating) or np.issubdtype(g.dtype, np.floating):
            if not np.allclose(e.astype(np.float64), g.astype(np.float64), rtol=1e-9, atol=1e-12):
                return f"{kind}: result array {i} differs beyond float tolerance"
        elif not np.array_equal(e, g):
            return f"{kind}: result array {i} differs"
    return None
