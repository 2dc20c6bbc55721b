"""``cold_start=scaled`` (the default since issue 20): an entry never measured in the batch's bucket is estimated
from the smaller buckets that measured it, normalised by size."""

from __future__ import annotations

import pytest

from pacer_dstream import Monitor

KW = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}


def _measure(m: Monitor, index: int, nbytes: float, device: str, seconds: float) -> None:
    table = m.table(index)
    table.count_batch(nbytes)
    table.update("scan", device, seconds, nbytes, [], **KW)  # type: ignore[arg-type]


def test_one_smaller_bucket_is_scaled_by_size_two_give_the_line() -> None:
    m = Monitor()
    _measure(m, 12, 2_500_000, "cpu", 3.0)  # 1.2 s per MB
    assert m.scaled(30, "scan", "cpu", 15_000_000) == pytest.approx(18.0)  # 6x the bytes: 6x the time
    assert m.lower_bound(30, "scan", "cpu", 15_000_000) == pytest.approx(3.0)  # bound: the small batch's time
    assert m.scaled(12, "scan", "cpu", 2_400_000) is None  # only smaller buckets say anything
    assert m.scaled(30, "scan", "gpu", 15_000_000) is None  # never ran on the GPU: the paper's 0 (explored)
    _measure(m, 20, 10_000_000, "cpu", 10.0)  # with 12's: a line of 7 s per 7.5 MB
    assert m.scaled(30, "scan", "cpu", 15_000_000) == pytest.approx(10.0 + 7.0 / 7.5 * 5)


def test_scaled_prefers_the_device_measured_cheaper_per_byte_when_batches_grow() -> None:
    """Issue 20, lr3 binary at 3x the CPU's capacity: the CPU measured on a 2.5 MB batch, the GPU on a 7.4 MB one,
    then a 14.8 MB batch. As a bound the CPU's small-batch time looked cheaper than the GPU's and the batch ran on
    the CPU (18.5 s where the GPU took ~12 s); scaled by size the GPU is cheaper, as it is."""
    m = Monitor()
    _measure(m, 11, 2_470_000, "cpu", 3.0)
    _measure(m, 16, 7_420_000, "gpu", 5.6)
    size = 14_840_000.0
    assert m.lower_bound(23, "scan", "cpu", size) < m.lower_bound(23, "scan", "gpu", size)  # type: ignore[operator]
    assert m.scaled(23, "scan", "gpu", size) < m.scaled(23, "scan", "cpu", size)  # type: ignore[operator]
