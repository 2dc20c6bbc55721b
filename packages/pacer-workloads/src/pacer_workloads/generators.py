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

# Linear Road: a few hundred vehicles driving on 10 expressways x 2 directions x 100 one-mile segments.
LR_VEHICLES = 300
LR_HIGHWAYS = 10
LR_SEGMENTS = 100
LR_LANES = 5  # 0 = entrance ramp, 1-3 = travel lanes, 4 = exit ramp (Linear Road)
LR_VEHICLE_BASE = 100_000_000
#: (highway, direction, segment) -> congested; about 12 % of the segments.
LR_CONGESTED = np.random.default_rng(20240101).random((LR_HIGHWAYS, 2, LR_SEGMENTS)) < 0.12
_LR_FLEET = np.random.default_rng(20240102)
_LR_START_MILE = _LR_FLEET.random(LR_VEHICLES) * LR_SEGMENTS  # position at t = 0
_LR_CRUISE_MPH = np.clip(_LR_FLEET.normal(55.0, 8.0, LR_VEHICLES), 30.0, 80.0)
_LR_LANE_P = np.array([0.05, 0.30, 0.30, 0.30, 0.05])

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


@cache
def _user_pool_numpy() -> np.ndarray:
    return np.array(_user_ids(), dtype=object)


@cache
def _user_pool_arrow() -> pa.Array:
    return pa.array(_user_ids(), type=pa.string())


def _event_seconds(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> np.ndarray:
    """Sorted event times in seconds, uniform over ``[start_time, start_time + duration)``, on whole microseconds."""
    offsets = np.sort(rng.random(rows)) * max(duration, 0.0)
    return np.round((start_time + offsets) * 1e6) / 1e6


def _to_micros(seconds: np.ndarray) -> np.ndarray:
    return np.round(seconds * 1e6).astype("int64").astype("datetime64[us]")


# A chunk as plain columns; "userId" holds indices into the user pool until the frame or table is built.
_Columns = dict[str, np.ndarray]


def _linear_road(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> _Columns:
    seconds = _event_seconds(rng, rows, start_time, duration)
    vehicle = rng.integers(0, LR_VEHICLES, rows)
    highway = vehicle % LR_HIGHWAYS
    direction = (vehicle // LR_HIGHWAYS) % 2
    # Each vehicle cruises along its expressway, wrapping round; its segment follows from the event time,
    # so consecutive chunks see the same vehicles moving on (one segment per ~65 s at 55 mph).
    miles = _LR_START_MILE[vehicle] + _LR_CRUISE_MPH[vehicle] * (seconds / 3600.0)
    travelled = np.floor(miles).astype("int64") % LR_SEGMENTS
    segment = np.where(direction == 0, travelled, LR_SEGMENTS - 1 - travelled)
    lane = rng.choice(LR_LANES, rows, p=_LR_LANE_P)
    congested = LR_CONGESTED[highway, direction, segment]
    speed = np.where(congested, rng.normal(28.0, 6.0, rows), rng.normal(_LR_CRUISE_MPH[vehicle], 6.0))
    return {
        "timestamp": _to_micros(seconds),
        "vehicle": (LR_VEHICLE_BASE + vehicle).astype("int32"),
        "speed": np.clip(speed, 5.0, 90.0).astype("float64"),
        "highway": highway.astype("int32"),
        "lane": lane.astype("int32"),
        "direction": direction.astype("int32"),
        "segment": segment.astype("int32"),
    }


def _cluster_monitoring(rng: np.random.Generator, rows: int, start_time: float, duration: float) -> _Columns:
    seconds = _event_seconds(rng, rows, start_time, duration)
    job = rng.integers(0, CM_JOBS, rows)
    return {
        "timestamp": _to_micros(seconds),
        "jobId": (CM_JOB_BASE + job).astype("int64"),
        "taskIndex": rng.integers(0, 1000, rows).astype("int32"),
        "machineId": (CM_MACHINE_BASE + rng.integers(0, CM_MACHINES, rows)).astype("int64"),
        "eventType": rng.choice(9, rows, p=CM_EVENT_WEIGHTS).astype("int32"),
        "userId": job % CM_USERS,
        "category": (job % 4).astype("int32"),
        "priority": rng.integers(0, 12, rows).astype("int32"),
        "cpu": np.round(rng.beta(1.2, 30.0, rows), 14),
        "ram": np.round(rng.beta(1.1, 40.0, rows), 14),
        "disk": np.round(rng.beta(1.0, 300.0, rows), 14),
    }


def _columns(stream: str, rows: int, seed: int, index: int, start_time: float, duration: float) -> _Columns:
    _check_stream(stream)
    if rows < 0:
        raise ValueError(f"rows must be >= 0, got {rows}")
    if not duration >= 0:
        raise ValueError(f"duration must be >= 0 seconds, got {duration}")
    rng = _rng(stream, seed, index)
    if stream == "linear_road":
        return _linear_road(rng, rows, start_time, duration)
    return _cluster_monitoring(rng, rows, start_time, duration)


def generate(
    stream: str, rows: int, *, seed: int, index: int, start_time: float = 0.0, duration: float = 1.0
) -> pd.DataFrame:
    """Rows of chunk ``index`` of ``stream``, deterministic for ``(stream, seed, index, rows)``.

    :param stream: ``"linear_road"`` or ``"cluster_monitoring"``.
    :param rows: number of rows (0 gives an empty frame with the schema).
    :param seed: the run's seed.
    :param index: the chunk (dataset) number.
    :param start_time: event time of the chunk's start, seconds since the epoch.
    :param duration: event times spread uniformly over ``[start_time, start_time + duration)``, sorted.
    :raises ValueError: for an unknown stream, negative ``rows`` or negative ``duration``.
    """
    columns = _columns(stream, rows, seed, index, start_time, duration)
    if "userId" in columns:
        columns["userId"] = _user_pool_numpy()[columns["userId"]]
    return pd.DataFrame(columns)


def generate_arrow(
    stream: str, rows: int, *, seed: int, index: int, start_time: float = 0.0, duration: float = 1.0
) -> pa.Table:
    """:func:`generate` as an Arrow table (same rows; built from the arrays directly, without pandas)."""
    columns = _columns(stream, rows, seed, index, start_time, duration)
    arrays: dict[str, pa.Array] = {}
    for name, values in columns.items():
        if name == "userId":
            arrays[name] = _user_pool_arrow().take(pa.array(values))
        else:
            arrays[name] = pa.array(values)
    return pa.table(arrays)


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
    """CSV-encoded bytes per row (no header, pandas' ``to_csv``), measured on 2000 generated rows.

    The value formats are chosen so that 1000 rows land where LMStream reports them:
    60-70 KB of Linear Road and 150-200 KB of Cluster Monitoring.
    """
    _check_stream(stream)
    frame = generate(stream, 2000, seed=0, index=0, start_time=1.7e9, duration=1.0)
    buf = io.StringIO()
    frame.to_csv(buf, index=False, header=False)
    return len(buf.getvalue().encode()) / len(frame)
