"""The dataframe kernels: one algorithm written against pandas' API, run with pandas (CPU) or cudf (GPU).

cudf is the library the RAPIDS Accelerator runs Spark's operators on; pandas is its CPU counterpart. Per kind:
``filter`` is a boolean mask, ``project`` column arithmetic, ``aggregate`` a group-by mean reindexed to every
group, ``join`` an inner merge with a build side of each vehicle's first row (``drop_duplicates``), ``sort``
``sort_values``, ``shuffle`` a partition column, a sort on it and ``value_counts``, ``expand`` ``take`` of every
row three times and a window column. The same code runs on both libraries, so their ratio is the device's.
cudf is a large wheel for CUDA 12 (``pip install './packages/pacer-sim[cudf]'``), absent from the lent GPU machines; where
it (or a GPU) is missing, :func:`load` says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from pacer_sim.kernel_base import GROUPS, HASH_MULTIPLIER, SHUFFLE_PARTITIONS, Implementation
except ImportError:  # a plain script beside its siblings, where pacer is not installed (a GPU machine)
    from kernel_base import GROUPS, HASH_MULTIPLIER, SHUFFLE_PARTITIONS, Implementation  # type: ignore[no-redef]


def _kinds(lib: Any, xp: Any, *, stable: dict[str, str]) -> dict[str, Callable[[Any], Any]]:
    """Every kind's kernel over a frame of the library ``lib`` whose arrays are of the array module ``xp``.

    :param stable: extra ``sort_values`` keywords that make the shuffle's sort stable (pandas: ``kind="stable"``).
    """

    def filter_(df: Any) -> Any:
        return df[(df["speed"] < 40.0) & (df["segment"] >= 0)]

    def project(df: Any) -> Any:
        return df["time"] - df["time"] % 10, df["speed"] * 1.609344, df["vehicle"]

    def aggregate(df: Any) -> Any:
        key = (df["highway"] * 2 + df["direction"]) * 100 + df["segment"]
        means = df["speed"].groupby(key, sort=False).mean()
        return means.reindex(lib.RangeIndex(GROUPS), fill_value=0.0)

    def join(df: Any) -> Any:
        build = df[["vehicle", "speed"]].drop_duplicates("vehicle", keep="first")
        return df[["time", "vehicle"]].merge(build, on="vehicle", how="inner")

    def sort(df: Any) -> Any:
        return df.sort_values("speed")

    def shuffle(df: Any) -> Any:
        part = (df["vehicle"] * HASH_MULTIPLIER) % SHUFFLE_PARTITIONS
        shuffled = df.assign(_part=part).sort_values("_part", **stable).drop(columns="_part")
        counts = part.value_counts().reindex(lib.RangeIndex(SHUFFLE_PARTITIONS), fill_value=0)
        return shuffled, counts

    def expand(df: Any) -> Any:
        rows = len(df)
        out = df.take(xp.repeat(xp.arange(rows), 3))
        out.index = lib.RangeIndex(3 * rows)
        out["window"] = out["time"] - out["time"] % 10 - xp.tile(xp.asarray([0, 10, 20], dtype=xp.int64), rows)
        return out

    return {"filter": filter_, "project": project, "aggregate": aggregate, "join": join, "sort": sort,
            "shuffle": shuffle, "expand": expand}


def _host(obj: Any) -> list[np.ndarray]:
    """A frame's columns, or a series, as host NumPy arrays (cudf copies them off the device)."""
    if hasattr(obj, "columns"):
        return [obj[c].to_numpy() for c in obj.columns]
    return [obj.to_numpy()]


def load_pandas() -> Implementation | str:
    """The kernels with pandas on one CPU core, or why pandas cannot run here."""
    try:
        import pandas
    except Exception as exc:
        return (f"pandas is not importable ({type(exc).__name__}: {exc}); pip install './packages/pacer-sim[pandas]' "
                "from the checkout")
    return Implementation("pandas", "cpu", f"pandas {pandas.__version__}", pandas.DataFrame,
                          _kinds(pandas, np, stable={"kind": "stable"}), lambda: None, _host,
                          lambda df: int(df.memory_usage(index=False).sum()))


def load_cudf() -> Implementation | str:
    """The kernels with cudf on the GPU (the frame already on the device), or why cudf cannot run here."""
    try:
        import cudf  # type: ignore[import-not-found, unused-ignore]
        import cupy  # type: ignore[import-not-found, unused-ignore]
    except Exception as exc:  # ImportError, or cudf failing to find a GPU or its CUDA libraries
        return (f"cudf is not importable ({type(exc).__name__}: {exc}); it needs an NVIDIA GPU and CUDA 12: "
                "pip install './packages/pacer-sim[cudf]' from the checkout (a large wheel; the lent GPU machines "
                "lack it)")
    try:
        if int(cupy.cuda.runtime.getDeviceCount()) < 1:
            return "cudf is installed but no CUDA device is visible"
    except Exception as exc:
        return f"cudf is installed but no CUDA device is visible ({type(exc).__name__}: {exc})"
    # cudf's sorts on one key are not documented as stable; the shuffle's result is compared up to the order of
    # rows inside a partition (kernel_base.canonical), so none is asked for.
    return Implementation("cudf", "gpu", f"cudf {cudf.__version__}", cudf.DataFrame, _kinds(cudf, cupy, stable={}),
                          cupy.cuda.Device().synchronize, _host,
                          lambda df: int(df.memory_usage(index=False).sum()))
