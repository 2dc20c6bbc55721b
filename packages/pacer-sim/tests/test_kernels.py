"""Real kernel measurements (tiny sizes here) and the cost profile the simulator loads from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer.cli import main
from pacer_sim import CostModel
from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile
from pacer_sim.costs import MB
from pacer_sim.kernels import FORMAT, KINDS, gpu_backend, measure_profile, write_profile

SIZES = (4_096, 32_768)
H100_PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "h100-cupy.json"


def test_cpu_kernels_are_measured_for_every_kind_and_size(tmp_path: Path) -> None:
    profile = measure_profile(SIZES, devices=("cpu",), repeats=1)
    assert profile["format"] == FORMAT and set(profile["kinds"]) == set(KINDS)
    for kind in KINDS:
        points = profile["kinds"][kind]["cpu"]
        assert len(points) == 2 and points[0][0] < points[1][0]
        assert all(seconds > 0 for _, seconds in points)
    assert profile["libraries"]["numpy"] and profile["machine"]["cpu_count"] >= 1
    assert profile["transfer"] is None and "gpu" not in profile["skipped"]  # not asked for
    path = write_profile(profile, tmp_path / "sub" / "p.json")
    assert load_cost_profile(path)["kinds"]["join"]["cpu"] == profile["kinds"]["join"]["cpu"]


def test_gpu_part_is_skipped_with_its_reason_without_a_gpu() -> None:
    cupy, why = gpu_backend()
    if cupy is not None:
        pytest.skip("a GPU is visible here: test_gpu_kernels_are_measured covers it")
    profile = measure_profile(SIZES, repeats=1, kinds=("filter",))
    assert profile["skipped"]["gpu"] == why and why
    assert set(profile["kinds"]["filter"]) == {"cpu"}


def test_gpu_kernels_are_measured() -> None:
    cupy, why = gpu_backend()
    if cupy is None:
        pytest.skip(f"no GPU: {why}")
    profile = measure_profile(SIZES, devices=("gpu",), repeats=1)
    assert all(len(profile["kinds"][k]["gpu"]) == 2 for k in KINDS)
    assert len(profile["transfer"]["h2d"]) == 2 and profile["machine"]["gpu"]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least two batch sizes"):
        measure_profile((4096,))
    with pytest.raises(ValueError, match="unknown kind"):
        measure_profile(SIZES, kinds=("scan",))


def test_measured_points_replace_curves_and_transfers_are_fitted() -> None:
    """The H100 profile measured with this module (packages/pacer-sim/profiles/h100-cupy.json)."""
    profile = load_cost_profile(H100_PROFILE)
    model = apply_cost_profile(CostModel(), profile, name="h100-cupy.json")
    cpu = dict(map(tuple, profile["kinds"]["filter"]["cpu"]))  # type: ignore[arg-type]
    nbytes = sorted(cpu)[2]
    assert model.operator_seconds("filter", "cpu", nbytes / MB) == pytest.approx(cpu[nbytes])
    lo, hi = sorted(cpu)[2:4]
    assert model.operator_seconds("filter", "cpu", (lo + hi) / 2 / MB) == pytest.approx((cpu[lo] + cpu[hi]) / 2)
    assert model.operator_seconds("scan", "cpu", 1.0) == CostModel().operator_seconds("scan", "cpu", 1.0)
    assert 1e9 < model.pcie_bandwidth < 1e11 and model.pcie_init < 0.01  # measured H100 PCIe copies
    assert "NVIDIA H100" in model.source


def test_cli_loads_a_cost_profile_and_refuses_a_bad_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sim", "--workload", "cm1", "--duration", "20", "--gpus", "1", "--gpu-profile", "builtin",
            "--placement", "gpu-only"]
    assert main([*args, "--cost-profile", str(H100_PROFILE), "--report", str(tmp_path / "m.json")]) == 0
    assert main([*args, "--report", str(tmp_path / "b.json")]) == 0
    measured = json.loads((tmp_path / "m.json").read_text())
    builtin = json.loads((tmp_path / "b.json").read_text())
    assert "filter" in measured["config"]["cost_model"]["measured"]
    # NumPy/CuPy kernels cost far less than the built-in Spark-like curves: the engine time drops
    assert measured["queries"]["cm1"]["cost"]["engine_s"] < builtin["queries"]["cm1"]["cost"]["engine_s"]
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    assert main([*args, "--cost-profile", str(tmp_path / "bad.json")]) == 2
    assert "is not pacer.cost-profile/1" in capsys.readouterr().err
