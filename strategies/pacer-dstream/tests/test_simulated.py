"""Simulated check of dStream on its rate sweep (64 KB/s to 16 MB/s), with the sweep of ``results/reproduce.py``.

Every figure here is *simulated*; ``python strategies/pacer-dstream/results/reproduce.py`` prints the README table.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "results" / "reproduce.py"


def load_sweep() -> ModuleType:
    """The evidence script as a module (skips when pacer_sim cannot run it)."""
    pytest.importorskip("pacer_sim", reason="pacer_sim is not installed")
    spec = importlib.util.spec_from_file_location("pacer_dstream_results_reproduce", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("workload", ["lr2", "cm2"])
def test_dstream_within_5_percent_of_the_better_single_device_with_a_rising_gpu_share(workload: str) -> None:
    sweep = load_sweep()
    points = sweep.sweep((workload,), write=False)
    assert sweep.failures(points, "dstream") == []
    shares = [p["dstream"].gpu_share for p in points.values()]
    assert shares[0] == 0.0 and shares[-1] > 0.5, shares
