"""Every kernel implementation computes NumPy's result (numba, pandas here; numba-cuda on numba's CUDA simulator;
CuPy and cudf where a GPU is), each one missing is skipped with its reason, and the profile and the cost model
say which implementation each measured curve came from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pacer_sim import CostModel
from pacer_sim.cost_profile import apply_cost_profile, load_cost_profile, select_curves
from pacer_sim.kernel_base import KINDS, canonical, make_host_batch, same_result
from pacer_sim.kernels import IMPLEMENTATIONS, LOADERS, check_implementation, measure_profile, write_profile
from pacer_sim.kernels_array import load_numpy

#: 300 rows: three blocks of the GPU kernels (128 threads), so their cross-block scans run too.
HOST = make_host_batch(48 * 300, seed=5)
SIZES = (4_096, 16_384)
H100_PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "h100-cupy.json"


def _load(name: str):  # type: ignore[no-untyped-def]
    got = LOADERS[name][1]()
    if isinstance(got, str):
        pytest.skip(f"{name}: {got}")
    return got


@pytest.mark.parametrize("name", [n for n in IMPLEMENTATIONS if n != "numpy"])
def test_every_implementation_computes_numpys_result(name: str) -> None:
    assert check_implementation(_load(name), load_numpy(), HOST) == {}


@pytest.mark.parametrize("name", ["cupy", "numba-cuda", "cudf"])
def test_a_gpu_implementation_without_a_gpu_is_skipped_saying_why(name: str) -> None:
    got = LOADERS[name][1]()
    if not isinstance(got, str):
        pytest.skip(f"{name} runs here: test_every_implementation_computes_numpys_result covers it")
    assert len(got) > 20 and ("pacer-sim[" in got or "GPU" in got or "CUDA" in got)


def test_numba_cuda_kernels_compute_numpys_result_on_the_cuda_simulator() -> None:
    """The @cuda.jit kernels run, thread by thread, on numba's CUDA simulator (no GPU); never timed there.
    Filter and join on 130 rows: two blocks of 128 threads, so the compactions' cross-block scan runs; the rest on
    100 rows (the shuffle's two chunks of 64; a bitonic sort over 128): ~3 s of CPU."""
    pytest.importorskip("numba", reason="numba is not installed: pip install './packages/pacer-sim[numba]'")
    code = ("from pacer_sim import kernels_cuda_host as k; from pacer_sim.kernels import check_implementation;"
            "from pacer_sim.kernels_array import load_numpy; from pacer_sim.kernel_base import make_host_batch;"
            "assert isinstance(k.load(), str) and 'simulator' in k.load();"
            "impl, ref = k.load(simulator=True), load_numpy();"
            "two_blocks = check_implementation(impl, ref, make_host_batch(48 * 130, seed=5), ('filter', 'join'));"
            "rest = ('project', 'aggregate', 'sort', 'shuffle', 'expand');"
            "print({**two_blocks, **check_implementation(impl, ref, make_host_batch(48 * 100, seed=5), rest)})")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "{}"


def test_canonical_results_catch_a_difference_and_ignore_undefined_order() -> None:
    numpy = load_numpy()
    batch = numpy.prepare(HOST)
    join = [np.asarray(a) for a in numpy.kernels["join"](batch)]
    shuffled = [a[::-1] for a in join]  # a join's rows are a set
    assert same_result("join", canonical("join", join), canonical("join", shuffled)) is None
    wrong = [join[0], join[1], join[2] + 1.0]
    assert same_result("join", canonical("join", join), canonical("join", wrong)) is not None
    sort = [np.asarray(a) for a in numpy.kernels["sort"](batch)]
    with pytest.raises(ValueError, match="not in non-decreasing order"):
        canonical("sort", [a[::-1] for a in sort])
    with pytest.raises(ValueError, match="expected 6 result arrays"):
        canonical("filter", sort[:5])


def test_the_profile_records_every_implementation_and_its_curves(tmp_path: Path) -> None:
    profile = measure_profile(SIZES, repeats=1, kinds=("filter", "join"))
    impls = profile["implementations"]
    assert list(impls) == list(IMPLEMENTATIONS)
    for name, entry in impls.items():
        if "skipped" in entry:  # said why, and listed among the skipped
            assert entry["skipped"] == profile["skipped"][name] and entry["skipped"]
        else:
            assert set(entry["kinds"]) == {"filter", "join"} and entry["library"].startswith(name.split("-")[0])
            assert entry.get("checked_against") in (None, "numpy") and "differs" not in entry
    assert profile["curves"]["cpu"] == "numpy"
    assert profile["kinds"]["join"]["cpu"] == impls["numpy"]["kinds"]["join"]
    if profile["curves"]["gpu"] is None:  # no GPU here: the GPU curve's reason is CuPy's
        assert profile["skipped"]["gpu"] == impls["cupy"]["skipped"]
    pandas = measure_profile(SIZES, devices=("cpu",), repeats=1, kinds=("filter",),
                             implementations=("numpy", "pandas"), curves={"cpu": "pandas"})
    assert pandas["kinds"]["filter"]["cpu"] == pandas["implementations"]["pandas"]["kinds"]["filter"]
    with pytest.raises(ValueError, match="unknown implementation"):
        measure_profile(SIZES, implementations=("polars",))
    with pytest.raises(ValueError, match="curve gpu=pandas"):
        measure_profile(SIZES, curves={"gpu": "pandas"})
    path = write_profile(profile, tmp_path / "p.json")
    assert load_cost_profile(path)["implementations"] == impls


def test_the_cost_model_cites_the_implementation_and_machine_of_each_curve(tmp_path: Path) -> None:
    profile = measure_profile(SIZES, devices=("cpu",), repeats=1, kinds=("filter",),
                              implementations=("numpy", "pandas"))
    model = apply_cost_profile(CostModel(), profile, name="p.json")
    assert model.citation("filter", "cpu").startswith("measured: numpy ") and "p.json" in model.citation("filter", "cpu")
    assert f"{profile['machine']['cpu_count']} cores" in model.citation("filter", "cpu")
    for kind, device in (("filter", "gpu"), ("join", "cpu"), ("scan", "cpu")):
        assert model.citation(kind, device).startswith("modelled, not measured: pacer-sim built-in curves")
    config = model.as_config()["citations"]
    assert len(config) == 2 * len(model.operators) + 1 and config["filter.cpu"] == model.citation("filter", "cpu")
    other = apply_cost_profile(CostModel(), select_curves(profile, {"cpu": "pandas"}), name="p.json")
    assert other.citation("filter", "cpu").startswith("measured: pandas ")
    with pytest.raises(ValueError, match="no measured cpu implementation 'numba'.*numpy, pandas"):
        select_curves(profile, {"cpu": "numba"})
    h100 = apply_cost_profile(CostModel(), load_cost_profile(H100_PROFILE), name="h100-cupy.json")
    assert h100.citation("sort", "gpu").startswith("measured: cupy 14.2.0 on NVIDIA H100")
    assert h100.citation("sort", "cpu").startswith("measured: numpy 2.5.2 on one core of x86_64, 16 cores")
    assert h100.citation("pcie").startswith("fitted to copies measured with cupy 14.2.0 on NVIDIA H100")
    assert CostModel().citation("join", "gpu").startswith("modelled, not measured")


def test_every_kind_has_an_implementation_in_every_module() -> None:
    from pacer_sim import kernels_array, kernels_cuda_host, kernels_frame, kernels_numba

    assert set(kernels_array.KERNELS) == set(KINDS) == set(kernels_cuda_host._HOST)
    assert set(kernels_frame._kinds(None, np, stable={})) == set(KINDS)
    assert set(kernels_numba._kinds(lambda f: f)) == set(KINDS)


def test_numba_cuda_kernels_compile_to_ptx_without_a_gpu() -> None:
    """Every (22) @cuda.jit kernel type-checks and compiles for an H100 (sm_90) with the types it is launched with.
    Needs only NVVM (the CUDA toolkit, or pip install './packages/pacer-sim[cuda]'), no GPU. Checked so with numba-cuda
    0.30.4 and the pip CUDA 12.9 toolkit."""
    pytest.importorskip("numba", reason="numba is not installed: pip install './packages/pacer-sim[numba]'")
    from pacer_sim import kernels_cuda

    try:
        compiled = kernels_cuda.compile_ptx()
    except Exception as exc:
        if "NVVM" not in str(exc) and "Nvvm" not in type(exc).__name__:
            raise
        pytest.skip(f"no NVVM to compile PTX with ({type(exc).__name__}: {' '.join(str(exc).split())[:120]}); "
                    "pip install './packages/pacer-sim[cuda]'")
    assert len(compiled) == 22 and all(n > 1000 for n in compiled.values())


def test_the_committed_cpu_profile_holds_numpy_numba_and_pandas_and_says_why_the_gpu_is_missing() -> None:
    """packages/pacer-sim/profiles/cpu-x86-2core.json: pacer calibrate --kernels on a 2-core x86 machine, no GPU."""
    path = Path(__file__).resolve().parents[1] / "profiles" / "cpu-x86-2core.json"
    profile = load_cost_profile(path)
    impls = profile["implementations"]
    assert all(set(impls[n]["kinds"]) == set(KINDS) for n in ("numpy", "numba", "pandas"))
    assert all(impls[n]["skipped"] for n in ("cupy", "numba-cuda", "cudf")) and profile["skipped"]["gpu"]
    numba = apply_cost_profile(CostModel(), select_curves(profile, {"cpu": "numba"}), name=path.name)
    assert numba.citation("join", "cpu").startswith("measured: numba 0.68.1 on one core of x86_64, 2 cores")
    assert numba.citation("join", "gpu").startswith("modelled, not measured")
