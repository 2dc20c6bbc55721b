from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from pacer_workloads import STREAMS, bytes_per_row, generate, generate_arrow, spark_schema_ddl


@pytest.mark.parametrize("stream", STREAMS)
def test_same_seed_and_index_give_the_same_rows(stream: str) -> None:
    a = generate(stream, 500, seed=3, index=7, start_time=1.7e9)
    b = generate(stream, 500, seed=3, index=7, start_time=1.7e9)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(generate(stream, 500, seed=3, index=8, start_time=1.7e9))
    assert not a.equals(generate(stream, 500, seed=4, index=7, start_time=1.7e9))


@pytest.mark.parametrize("stream", STREAMS)
def test_columns_match_the_spark_schema(stream: str) -> None:
    frame = generate(stream, 10, seed=1, index=0)
    ddl_columns = [part.split()[0] for part in spark_schema_ddl(stream).split(", ")]
    assert list(frame.columns) == ddl_columns
    assert str(frame["timestamp"].dtype).startswith("datetime64")
    assert generate_arrow(stream, 10, seed=1, index=0).num_rows == 10


def test_event_times_lie_in_the_chunk_window() -> None:
    frame = generate("linear_road", 1000, seed=1, index=0, start_time=100.0, duration=2.0)
    seconds = frame["timestamp"].astype("int64") / 1e6
    assert seconds.min() >= 100.0 and seconds.max() < 102.0
    assert seconds.is_monotonic_increasing


def test_linear_road_has_congestion_and_stable_vehicles() -> None:
    frame = generate("linear_road", 20_000, seed=1, index=0)
    assert 200 <= frame["vehicle"].nunique() <= 300
    assert set(frame["direction"].unique()) == {0, 1}
    per_segment = frame.groupby(["highway", "direction", "segment"])["speed"].mean()
    assert (per_segment < 40).sum() > 0, "HAVING avgSpeed < 40 selects something"
    assert 0.5 < ((frame["speed"] >= 20) & (frame["speed"] <= 70)).mean()
    other = generate("linear_road", 20_000, seed=1, index=1)
    assert len(set(frame["vehicle"]) & set(other["vehicle"])) > 200, "the LR1 self-join finds matches across chunks"


def test_cluster_monitoring_values() -> None:
    frame = generate("cluster_monitoring", 20_000, seed=1, index=0)
    assert frame["eventType"].between(0, 8).all() and frame["category"].between(0, 3).all()
    assert 0.25 < (frame["eventType"] == 1).mean() < 0.45, "SCHEDULE is common"
    assert frame["cpu"].between(0, 1).all() and frame["userId"].str.len().eq(44).all()


def test_byte_sizes_are_close_to_the_papers() -> None:
    # LMStream: 1000 rows are about 60-70 KB of Linear Road and 150-200 KB of Cluster Monitoring.
    assert 55 <= bytes_per_row("linear_road") <= 70
    assert 145 <= bytes_per_row("cluster_monitoring") <= 200
    buf = io.StringIO()
    generate("linear_road", 1000, seed=9, index=0, start_time=1.7e9).to_csv(buf, index=False, header=False)
    assert 55_000 <= len(buf.getvalue()) <= 70_000


def test_zero_rows_and_bad_arguments() -> None:
    assert len(generate("cluster_monitoring", 0, seed=1, index=0)) == 0
    with pytest.raises(ValueError, match="unknown stream 'tweets'"):
        generate("tweets", 1, seed=1, index=0)
    with pytest.raises(ValueError, match="rows must be >= 0"):
        generate("linear_road", -1, seed=1, index=0)


def test_speed() -> None:
    frame = generate("linear_road", 100_000, seed=1, index=0)
    assert len(frame) == 100_000 and np.isfinite(frame["speed"]).all()
