"""Algorithm 1 and Eq. 6."""

from __future__ import annotations

import pytest

from pacer import BatchReport, Dataset, DatasetBuffer
from pacer_lmstream import MaxLatencyAverage, construct_micro_batch, estimate_max_latency


def _buffer(*arrivals: tuple[float, int]) -> DatasetBuffer:
    return DatasetBuffer(Dataset(f"d{i}", t, b, 1) for i, (t, b) in enumerate(arrivals))


def _report(arrival: float, completed: float) -> BatchReport:
    return BatchReport("q#1", "q", 1, arrival, arrival, completed, 1, 1, (("d", completed - arrival),), arrival, 0.0)


def test_eq6_buffering_of_the_oldest_plus_bytes_over_avg_throughput() -> None:
    buf = _buffer((1.0, 300), (2.0, 500))
    # max Buff = 4 - 1 = 3 s; sum Part = 800 B at 200 B/s = 4 s
    assert estimate_max_latency(buf, 4.0, 200.0) == pytest.approx(7.0)
    assert estimate_max_latency(buf, 4.0, None) == pytest.approx(3.0)


def test_cold_start_admits_the_first_batch_at_once() -> None:
    d = construct_micro_batch(_buffer((0.0, 10)), 0.0, slide_time=5.0, avg_throughput=None, past_max_latency=None)
    assert d.count == 1


def test_sliding_window_admits_when_estimate_reaches_slide_time() -> None:
    buf = _buffer((0.0, 100), (1.0, 100))
    kwargs = {"slide_time": 5.0, "avg_throughput": 100.0, "past_max_latency": 1.0}
    assert not construct_micro_batch(buf, 2.9, **kwargs).admits  # 2.9 + 2 = 4.9 < 5
    decision = construct_micro_batch(buf, 3.0, **kwargs)  # 3 + 2 = 5 >= 5
    assert decision.count == 2 and decision.shed == 0


def test_tumbling_window_targets_the_mean_past_max_latency() -> None:
    buf = _buffer((0.0, 100))
    kwargs = {"slide_time": 0.0, "avg_throughput": 100.0}
    assert not construct_micro_batch(buf, 1.9, past_max_latency=3.0, **kwargs).admits  # 1.9 + 1 < 3
    assert construct_micro_batch(buf, 2.0, past_max_latency=3.0, **kwargs).admits


def test_max_latency_average_is_over_every_past_batch() -> None:
    avg = MaxLatencyAverage()
    assert avg.mean is None
    avg.add(_report(0.0, 2.0))
    avg.add(_report(10.0, 14.0))
    assert avg.mean == pytest.approx(3.0)
