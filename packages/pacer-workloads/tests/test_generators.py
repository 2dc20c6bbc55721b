from __future__ import annotations

import io

import pandas as pd
import pyarrow as pa
import pytest

from pacer_workloads import STREAMS, bytes_per_row, generate, generate_arrow, spark_schema_ddl

EXPECTED_DTYPES = {
    "linear_road": {
        "timestamp": "datetime64[us]", "vehicle": "int32", "speed": "float64", "highway": "int32",
        "lane": "int32", "direction": "int32", "segment": "int32",
    },
    "cluster_monitoring": {
        "timestamp": "datetime64[us]", "jobId": "int64", "taskIndex": "int32", "machineId": "int64",
        "eventType": "int32", "userId": "object", "category": "int32", "priority": "int32",
        "cpu": "float64", "ram": "float64", "disk": "float64",
    },
}
SPARK_TYPES = {"datetime64[us]": "TIMESTAMP", "int32": "INT", "int64": "BIGINT", "float64": "DOUBLE", "object": "STRING"}


def _csv_bytes(frame: pd.DataFrame) -> int:
    buf = io.StringIO()
    frame.to_csv(buf, index=False, header=False)
    return len(buf.getvalue().encode())


@pytest.mark.parametrize("stream", STREAMS)
def test_same_seed_and_index_give_the_same_rows(stream: str) -> None:
    a = generate(stream, 500, seed=3, index=7, start_time=1.7e9)
    b = generate(stream, 500, seed=3, index=7, start_time=1.7e9)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(generate(stream, 500, seed=3, index=8, start_time=1.7e9))
    assert not a.equals(generate(stream, 500, seed=4, index=7, start_time=1.7e9))


@pytest.mark.parametrize("stream", STREAMS)
def test_dtypes_and_the_spark_schema_agree(stream: str) -> None:
    frame = generate(stream, 10, seed=1, index=0)
    assert {c: str(t) for c, t in frame.dtypes.items()} == EXPECTED_DTYPES[stream]
    ddl = [part.split() for part in spark_schema_ddl(stream).split(", ")]
    assert [name for name, _ in ddl] == list(frame.columns)
    assert [spark for _, spark in ddl] == [SPARK_TYPES[t] for t in EXPECTED_DTYPES[stream].values()]
    empty = generate(stream, 0, seed=1, index=0)
    assert len(empty) == 0 and {c: str(t) for c, t in empty.dtypes.items()} == EXPECTED_DTYPES[stream]


@pytest.mark.parametrize("stream", STREAMS)
def test_arrow_holds_the_same_rows(stream: str) -> None:
    table = generate_arrow(stream, 300, seed=2, index=5, start_time=1.7e9, duration=2.0)
    assert table.schema.field("timestamp").type == pa.timestamp("us")
    pd.testing.assert_frame_equal(table.to_pandas(), generate(stream, 300, seed=2, index=5, start_time=1.7e9, duration=2.0))
    assert generate_arrow(stream, 0, seed=1, index=0).num_rows == 0


def test_event_times_lie_in_the_chunk_window_and_are_sorted() -> None:
    frame = generate("linear_road", 1000, seed=1, index=0, start_time=100.0, duration=2.0)
    seconds = frame["timestamp"].astype("int64") / 1e6
    assert seconds.min() >= 100.0 and seconds.max() < 102.0
    assert seconds.is_monotonic_increasing
    assert seconds.max() - seconds.min() > 1.9, "spread over the whole duration"
    epoch = generate("cluster_monitoring", 10, seed=1, index=0, start_time=1.7e9)
    assert epoch["timestamp"].min() >= pd.Timestamp(1.7e9, unit="s")


def test_linear_road_has_congestion_and_stable_vehicles() -> None:
    frame = generate("linear_road", 20_000, seed=1, index=0, duration=30.0)
    assert 250 <= frame["vehicle"].nunique() <= 300
    assert set(frame["direction"].unique()) == {0, 1}
    assert frame["lane"].between(0, 4).all() and frame["segment"].between(0, 99).all()
    per_segment = frame.groupby(["highway", "direction", "segment"])["speed"].mean()
    assert (per_segment < 40).sum() > 0, "HAVING avgSpeed < 40 selects something"
    assert (per_segment >= 40).sum() > (per_segment < 40).sum(), "but most segments flow"
    assert 0.85 < frame["speed"].between(20, 70).mean()
    other = generate("linear_road", 20_000, seed=1, index=1, start_time=30.0, duration=30.0)
    assert len(set(frame["vehicle"]) & set(other["vehicle"])) > 250, "the LR1 self-join finds matches across chunks"


def test_linear_road_vehicles_move_along_their_expressway() -> None:
    early = generate("linear_road", 5000, seed=1, index=0, start_time=0.0, duration=1.0)
    late = generate("linear_road", 5000, seed=1, index=9, start_time=3600.0, duration=1.0)
    for frame in (early, late):
        # a vehicle keeps its expressway and direction; within one second it is in one segment or crosses into the next
        per_vehicle = frame.groupby("vehicle")[["highway", "direction", "segment"]].nunique()
        assert (per_vehicle[["highway", "direction"]] == 1).all().all() and per_vehicle["segment"].max() <= 2
        assert (per_vehicle["segment"] == 1).mean() > 0.9
    first = early.groupby("vehicle")[["highway", "direction", "segment"]].first()
    hour = late.groupby("vehicle")[["highway", "direction", "segment"]].first()
    both = first.join(hour, rsuffix="_later", how="inner")
    assert (both["highway"] == both["highway_later"]).all() and (both["direction"] == both["direction_later"]).all()
    assert (both["segment"] != both["segment_later"]).mean() > 0.9, "an hour later, vehicles are elsewhere"


def test_cluster_monitoring_values() -> None:
    frame = generate("cluster_monitoring", 20_000, seed=1, index=0)
    assert frame["eventType"].between(0, 8).all() and frame["category"].between(0, 3).all()
    assert set(frame["eventType"].unique()) == set(range(9))
    assert 0.25 < (frame["eventType"] == 1).mean() < 0.45, "SCHEDULE is common"
    for column in ("cpu", "ram", "disk"):
        assert frame[column].between(0, 1).all()
    assert frame["userId"].str.len().eq(44).all() and frame["userId"].nunique() > 100
    assert frame.groupby("jobId")["userId"].nunique().max() == 1, "a job belongs to one user"
    assert frame.groupby("jobId")["category"].nunique().max() == 1, "a job has one scheduling class"


def test_byte_sizes_are_close_to_the_papers() -> None:
    # LMStream: 1000 rows are about 60-70 KB of Linear Road and 150-200 KB of Cluster Monitoring.
    assert 60 <= bytes_per_row("linear_road") <= 70
    assert 150 <= bytes_per_row("cluster_monitoring") <= 200
    for seed in (3, 9):
        lr = _csv_bytes(generate("linear_road", 1000, seed=seed, index=4, start_time=1.7e9))
        cm = _csv_bytes(generate("cluster_monitoring", 1000, seed=seed, index=4, start_time=1.7e9))
        assert 60_000 <= lr <= 70_000 and 150_000 <= cm <= 200_000
        assert lr == pytest.approx(1000 * bytes_per_row("linear_road"), rel=0.02)
        assert cm == pytest.approx(1000 * bytes_per_row("cluster_monitoring"), rel=0.02)


def test_zero_rows_and_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown stream 'tweets'; known streams: linear_road, cluster_monitoring"):
        generate("tweets", 1, seed=1, index=0)
    with pytest.raises(ValueError, match="rows must be >= 0"):
        generate("linear_road", -1, seed=1, index=0)
    with pytest.raises(ValueError, match="duration must be >= 0"):
        generate("linear_road", 1, seed=1, index=0, duration=-1)
    with pytest.raises(ValueError, match="unknown stream"):
        spark_schema_ddl("tweets")
    with pytest.raises(ValueError, match="unknown stream"):
        bytes_per_row("tweets")

