"""Deterministic generators of the Linear Road and Cluster Monitoring streams.

Every chunk is a pure function of ``(stream, seed, index, rows)``: a Spark
source's ``read()`` rebuilds exactly the rows the driver admitted, on any
executor, from the seed and the offsets alone.
"""

from __future__ import annotations

import io
from functools import cache

import numpy as np
import pandas as pd
import pyarrow as pa

STREAMS: tuple[str, ...] = ("linear_road", "cluster_monitoring")
_STREAM_CODE = {"linear_road": 1, "cluster_monitoring": 2}

# Linear Road: a few hundred vehicles on 10 highways x 100 segments; ~12 % of segments congested.
LR_VEHICLES = 300
LR_HIGHWAYS = 10
LR_SEGMENTS = 100
LR_VEHICLE_BASE = 100_000_000
_CONGESTED = np.random.default_rng(20240101).random((LR_HIGHWAYS, 2, LR_SEGMENTS)) < 0.12

# Cluster Monitoring (Google cluster trace, task events).
CM_JOBS = 2_000
CM_JOB_BASE = 6_000_000_000
CM_MACHINES = 5_000
CM_MACHINE_BASE = 300_000_000
CM_USERS = 200
# eventType 0..8: SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL, LOST, UPDATE_PENDING, UPDATE_RUNNING
CM_EVENT_WEIGHTS = np.array([0.30, 0.35, 0.02, 0.03, 0.20, 0.06, 0.01, 0.01, 0.02])


def _check_stream(stream: str) -> None:
    if stream not in _STREAM_CODE:
        raise ValueError(f"unknown stream {stream!r}; known streams: {', '.join(STREAMS)}")


def _rng(stream: str, seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, _STREAM_CODE[stream], int(index)]))


@cache
def _user_ids() -> tuple[str, ...]:
    # Google trace user ids are 44-character base64 hashes; make a fixed pool of the same shape.
    rng = np.random.default_rng(7)
    alphabet = np.array(list("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"))
    return tuple("".join(rng.choice(alphabet, 43)) + "=" for _ in range(CM_USERS))


def _timestamps(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> np.ndarray:
    offsets = np.sort(rng.random(rows)) * max(duration, 0.0)
    micros = np.round((start_time + offsets) * 1e6).astype("int64")
    return micros.astype("datetime64[us]")


def _linear_road(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> pd.DataFrame:
    vehicle_idx = rng.integers(0, LR_VEHICLES, rows)
    highway = vehicle_idx % LR_HIGHWAYS
    direction = (vehicle_idx // LR_HIGHWAYS) % 2
    lane = rng.integers(0, 4, rows)
    segment = rng.integers(0, LR_SEGMENTS, rows)
    congested = _CONGESTED[highway, direction, segment]
    speed = np.where(congested, rng.normal(28.0, 6.0, rows), rng.normal(55.0, 8.0, rows))
    speed = np.round(np.clip(speed, 5.0, 90.0), 10)
    return pd.DataFrame(
        {
            "timestamp": _timestamps(rng, rows, start_time, duration),
            "vehicle": (LR_VEHICLE_BASE + vehicle_idx).astype("int32"),
            "speed": speed.astype("float64"),
            "highway": highway.astype("int32"),
            "lane": lane.astype("int32"),
            "direction": direction.astype("int32"),
            "segment": segment.astype("int32"),
        }
    )


def _cluster_monitoring(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> pd.DataFrame:
    job = rng.integers(0, CM_JOBS, rows)
    users = np.array(_user_ids(), dtype=object)
    return pd.DataFrame(
        {
            "timestamp": _timestamps(rng, rows, start_time, duration),
            "jobId": (CM_JOB_BASE + job).astype("int64"),
            "taskIndex": rng.integers(0, 1000, rows).astype("int32"),
            "machineId": (CM_MACHINE_BASE + rng.integers(0, CM_MACHINES, rows)).astype("int64"),
            "eventType": rng.choice(9, rows, p=CM_EVENT_WEIGHTS).astype("int32"),
            "userId": users[job % CM_USERS],
            "category": (job % 4).astype("int32"),
            "priority": rng.integers(0, 12, rows).astype("int32"),
            "cpu": np.round(rng.beta(1.2, 30.0, rows), 14),
            "ram": np.round(rng.beta(1.1, 40.0, rows), 14),
            "disk": np.round(rng.beta(1.0, 300.0, rows), 14),
        }
    )


def generate(
    stream: str, rows: int, *, seed: int, index: int, start_time: float = 0.0, duration: float = 1.0
) -> pd.DataFrame:
    """Rows of chunk ``index`` of ``stream``, deterministic for ``(stream, seed, index, rows)``.

    :param stream: ``"linear_road"`` or ``"cluster_monitoring"``.
    :param rows: number of rows (0 gives an empty frame with the schema).
    :param seed: the run's seed.
    :param index: the chunk (dataset) number.
    :param start_time: event time of the chunk's start, seconds since the epoch.
    :param duration: event times spread uniformly over ``[start_time, start_time + duration)``.
    """
    _check_stream(stream)
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    rng = _rng(stream, seed, index)
    if stream == "linear_road":
        return _linear_road(rng, rows, start_time, duration)
    return _cluster_monitoring(rng, rows, start_time, duration)


def generate_arrow(
    stream: str, rows: int, *, seed: int, index: int, start_time: float = 0.0, duration: float = 1.0
) -> pa.Table:
    """:func:`generate` as an Arrow table."""
    frame = generate(stream, rows, seed=seed, index=index, start_time=start_time, duration=duration)
    return pa.Table.from_pandas(frame, preserve_index=False)


_DDL = {
    "linear_road": "timestamp TIMESTAMP, vehicle INT, speed DOUBLE, highway INT, lane INT, direction INT, segment INT",
    "cluster_monitoring": (
        "timestamp TIMESTAMP, jobId BIGINT, taskIndex INT, machineId BIGINT, eventType INT, userId STRING, "
        "category INT, priority INT, cpu DOUBLE, ram DOUBLE, disk DOUBLE"
    ),
}


def spark_schema_ddl(stream: str) -> str:
    """The stream's schema as a Spark DDL string."""
    _check_stream(stream)
    return _DDL[stream]


@cache
def bytes_per_row(stream: str) -> float:
    """CSV-encoded bytes per row, measured on 2000 generated rows."""
    _check_stream(stream)
    frame = generate(stream, 2000, seed=0, index=0, start_time=1.7e9, duration=1.0)
    buf = io.StringIO()
    frame.to_csv(buf, index=False, header=False)
    return len(buf.getvalue().encode()) / len(frame)
