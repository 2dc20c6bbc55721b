"""The kernel part of ``pacer calibrate --kernels``: this machine's kernels timed into the profile the simulator
loads, and the cost model a profile gives (moved here from pacer-bench's test_calibrate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer_sim.kernel_calibration import cost_model_from_profile, measure_kernels
from pacer_sim.kernels import gpu_backend


def test_kernels_write_the_profile_the_simulator_loads(tmp_path: Path) -> None:
    notes: list[str] = []
    path = measure_kernels([1 << 14, 1 << 16], tmp_path / "profile.json", repeats=1, note=notes.append)
    profile = json.loads(path.read_text())
    assert profile["format"] == "pacer.cost-profile/1" and "cpu" in profile["kinds"]["filter"]
    model = cost_model_from_profile(path)
    assert "measured" in model.source and "profile.json" in model.source
    if gpu_backend()[0] is None:  # no GPU: said, GPU part skipped and recorded
        assert len(notes) == 1 and notes[0].startswith("no GPU here")
        assert "gpu" in profile["skipped"] and "gpu" not in profile["kinds"]["filter"]
    else:
        assert notes == [] and "gpu" in profile["kinds"]["filter"]


def test_bad_sizes_and_repeats_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least two batch sizes"):
        measure_kernels([1 << 14], tmp_path / "p.json", repeats=1)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        measure_kernels([1 << 14, 1 << 16], tmp_path / "p.json", repeats=0)
    assert not (tmp_path / "p.json").exists()


def test_a_missing_cost_profile_is_a_value_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nowhere.json"):
        cost_model_from_profile(tmp_path / "nowhere.json")
