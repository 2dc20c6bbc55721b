"""GPU curves from a RAPIDS qualification-tool jar, read at run time from the cache pacer.infra.jars fills.

The jar here is one these tests write, in the tool's file format (``CPUOperator,Score``;
``Exec,Supported,...``) with made-up scores: NVIDIA's files are never copied into the repository.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from pacer.cli import main
from pacer.infra import jars
from pacer_sim import CostModel, Simulation
from pacer_sim import runtime as sim_runtime
from pacer_sim.rapids import TOOLS_ARTIFACT, TOOLS_GROUP, exec_name, profiles_in, rapids_cost_model, read_tools_jar

SCORES = "CPUOperator,Score\nFilterExec,5.0\nProjectExec,2.0\nHashAggregateExec,4.0\nShuffleExchangeExec,8.0\n" \
         "SortMergeJoinExec,20.0\nSortExec,6.0\nExpandExec,3.0\nBatchScanExec,3.0\nAbs,4\n"
EXECS = "Exec,Supported,Notes,Params,BOOLEAN\n" + "".join(
    f"{name},{s},None,Input/Output,S\n" for name, s in (
        ("FilterExec", "S"), ("ProjectExec", "S"), ("HashAggregateExec", "S"), ("ShuffleExchangeExec", "S"),
        ("SortMergeJoinExec", "S"), ("SortExec", "S"), ("ExpandExec", "S"), ("BatchScanExec", "S"),
        ("CollectLimitExec", "NS")))


def make_tools_jar(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("operatorsScore-test-x1.csv", SCORES)
        zf.writestr("operatorsScore-other-y2.csv", SCORES.replace("5.0", "2.5"))
        zf.writestr("supportedExecs.csv", EXECS)
    return path


def test_scores_and_gpu_support_become_gpu_curves(tmp_path: Path) -> None:
    jar = make_tools_jar(tmp_path / "tools.jar")
    assert profiles_in(jar) == ["other-y2", "test-x1"]
    profile = read_tools_jar(jar, "test-x1")
    assert profile.speedup("filter") == 5.0 and profile.speedup("shuffle") == 8.0
    assert profile.speedup("state") is None  # no streaming state store exec on the GPU
    assert exec_name("Exchange") == "ShuffleExchangeExec" and exec_name("HashAggregate") == "HashAggregateExec"
    model = rapids_cost_model(profile, CostModel())
    base = CostModel()
    assert model.operators["filter"].gpu_per_mb == pytest.approx(base.operators["filter"].cpu_per_mb / 5.0)
    assert model.operators["aggregate"].gpu_per_mb == pytest.approx(base.operators["aggregate"].cpu_per_mb / 4.0)
    assert model.operators["filter"].gpu_fixed == base.operators["filter"].gpu_fixed  # launch cost: pacer's own
    assert model.gpu_join_factor == pytest.approx(1 / 20.0)
    assert {"StreamingSymmetricHashJoin", "StateStoreSave", "StateStoreRestore", "MicroBatchScan"} <= \
        model.cpu_only_operators
    assert "HashAggregate" not in model.cpu_only_operators and "Filter" not in model.cpu_only_operators
    assert "test-x1" in model.source
    with pytest.raises(ValueError, match="other-y2, test-x1"):
        read_tools_jar(jar, "onprem-h100")


def test_operators_without_a_gpu_exec_stay_on_the_cpu_and_are_not_counted_as_gpu(tmp_path: Path) -> None:
    model = rapids_cost_model(read_tools_jar(make_tools_jar(tmp_path / "tools.jar"), "test-x1"), CostModel(noise=0))
    sim = Simulation(cores=2, gpus=1, seed=1, cost_model=model)
    sim.add_query("lr1", rate=1000, placement="gpu-only", duration=10)
    report = sim.run(10)
    batch = sim.controller.reports("lr1")[0]
    ran = {m.operator_id: m.device for m in batch.operator_metrics}
    placed = dict(batch.placement.devices) if batch.placement else {}
    assert ran["join#9"] == "cpu" and ran["scan#0"] == "cpu"  # StreamingSymmetricHashJoin, MicroBatchScan
    assert ran["exchange#4"] == "gpu" and ran["filter#2"] == "gpu"
    assert placed == ran  # the placement saw the CPU-only operators: it reports what ran
    gpu_share = sum(d == "gpu" for d in ran.values()) / len(ran)
    assert report["queries"]["lr1"]["gpu_operator_ratio"] == pytest.approx(gpu_share)


def test_cli_reads_the_profile_from_the_cached_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv("PACER_RAPIDS_TOOLS_VERSION", "0.0-test")
    make_tools_jar(jars.jar_path(TOOLS_GROUP, TOOLS_ARTIFACT, "0.0-test"))
    args = ["sim", "--workload", "lr2", "--duration", "20", "--gpus", "1", "--placement", "gpu-only",
            "--gpu-profile", "test-x1", "--report", str(tmp_path / "r.json")]
    assert main(args) == 0
    assert "warning" not in capsys.readouterr().err
    config = json.loads((tmp_path / "r.json").read_text())["config"]
    assert "0.0-test operatorsScore-test-x1.csv" in config["cost_model"]["source"]
    assert config["cost_model"]["operators"]["filter"]["gpu_per_mb"] == pytest.approx(0.15 / 5.0)
    assert main([*args[:-4], "--gpu-profile", "nope-z9"]) == 2
    assert "GPU profile 'nope-z9' is not in" in capsys.readouterr().err


def test_without_the_jar_the_cli_warns_once_and_uses_the_builtin_curves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(sim_runtime, "_PROFILES", {})  # forget a profile an earlier test of the process resolved
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # and no PyPI for the wheel that carries the jar
    args = ["sim", "--workload", "lr2", "--duration", "10", "--gpus", "1", "--gpu-profile", "onprem-a100",
            "--report", str(tmp_path / "r.json")]
    assert main(args) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "fall back to pacer-sim's built-in curves" in warnings[0]
    assert "'mvn' is not on PATH" in warnings[0]
    config = json.loads((tmp_path / "r.json").read_text())["config"]
    assert config["cost_model"] == CostModel().as_config()
    assert "built-in curves" in config["gpu_profile"]["warning"]
