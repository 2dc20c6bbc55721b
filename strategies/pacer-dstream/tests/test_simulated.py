"""Simulated check of dStream on its rate sweep (64 KB/s to 16 MB/s), with the sweep of ``results/reproduce.py``.

Every figure here is *simulated*; ``python strategies/pacer-dstream/results/reproduce.py`` prints the README table.
"""

from __future__ import annotations

from types import ModuleType

import pytest


@pytest.mark.parametrize("workload", ["lr2", "cm2"])
def test_dstream_within_5_percent_of_the_better_single_device_with_a_rising_gpu_share(
    reproduce: ModuleType, workload: str
) -> None:
    points = reproduce.sweep((workload,), write=False, strategies=("dstream",))
    assert reproduce.failures(points, "dstream") == []
    shares = [p["dstream"].gpu_share for p in points.values()]
    assert shares[0] == 0.0 and shares[-1] > 0.5, shares
