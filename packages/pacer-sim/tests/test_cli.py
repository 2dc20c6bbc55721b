"""``pacer sim`` flags shared with ``pacer run``: durations, fallback, overload, read caps, GPU validation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pacer.cli import main
from pacer_sim import Simulation

BASE = ["sim", "--workload", "lr2", "--duration", "40", "--gpu-profile", "builtin"]


def run(tmp_path: Path, *extra: str, name: str = "r.json") -> dict[str, Any]:
    assert main([*BASE, *extra, "--report", str(tmp_path / name)]) == 0
    report: dict[str, Any] = json.loads((tmp_path / name).read_text())
    return report


def test_durations_take_units(tmp_path: Path) -> None:
    units = run(tmp_path, "--admission", "static", "--interval", "5s", "--deadline", "7500ms", name="u.json")
    plain = run(tmp_path, "--admission", "static", "--interval", "5", "--deadline", "7.5", name="p.json")
    assert units["queries"] == plain["queries"]
    assert units["queries"]["lr2"]["deadline_ms"] == 7500.0
    assert units["config"]["queries"][0]["admission_params"]["interval"] == "5.0"


def test_bad_durations_say_what_is_wrong(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--workload", "lr2", "--duration", "0"]) == 2
    assert "--duration must be > 0 seconds, got 0" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr2", "--deadline", "soon"]) == 2
    assert "--deadline expects a duration such as 10s, 500ms" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr2", "--admission", "static", "--interval", "0ms"]) == 2
    assert "--interval must be > 0 seconds" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr2", "--max-rows", "-1"]) == 2
    assert "--max-rows must be >= 0" in capsys.readouterr().err


def test_fallback_is_on_by_default_and_no_fallback_turns_it_off(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    report = run(tmp_path, "--placement", "gpu-only")  # default --gpus 0
    q = report["queries"]["lr2"]
    assert report["config"]["fallback"] is True and q["strategy_fallbacks"] == q["batches"] > 0
    assert q["gpu_operator_ratio"] == 0.0  # nothing ran on a GPU, nothing is reported as GPU
    assert "add --gpus N" in capsys.readouterr().out
    assert run(tmp_path, "--placement", "gpu-only", "--fallback", name="f.json")["queries"] == report["queries"]
    assert main([*BASE, "--placement", "gpu-only", "--no-fallback"]) == 2
    err = capsys.readouterr().err
    assert "add --gpus N" in err and "Traceback" not in err
    assert run(tmp_path, "--placement", "gpu-only", "--gpus", "1", name="g.json")["queries"]["lr2"][
        "gpu_operator_ratio"] > 0.5


def test_overload_policy_and_read_caps_reach_the_controller(tmp_path: Path) -> None:
    args = ("--rate", "20000",)  # about twice what 2 cores process (simulated)
    shed = run(tmp_path, *args, "--overload", "shed", name="s.json")["queries"]["lr2"]
    keep = run(tmp_path, *args, "--overload", "keep", name="k.json")["queries"]["lr2"]
    assert shed["overload"]["shed"] > 0 and shed["datasets_processed"] < shed["datasets_in"]
    assert keep["overload"]["shed"] == 0 and keep["datasets_processed"] == keep["datasets_in"]
    assert keep["overload"]["overloaded_s"] > 0  # reported, not acted on
    capped = run(tmp_path, "--admission", "static", "--interval", "5s", "--rate", "1000", "--max-rows", "2000",
                 "--overload", "keep", name="c.json")
    assert capped["config"]["queries"][0]["max_rows"] == 2000
    sim = Simulation(cores=2, seed=7)
    sim.add_query("lr2", rate=1000, admission="static", admission_params={"interval": 5.0}, max_rows=2000, duration=40)
    sim.run(40)
    assert max(r.rows for r in sim.controller.reports()) <= 2000


def test_engine_time_is_the_batch_service_time(tmp_path: Path) -> None:
    sim = Simulation(cores=2, seed=7)
    sim.add_query("lr2", rate=1000, duration=20)
    report = sim.run(20)
    batches = sim.controller.reports()
    assert all(r.engine_s == pytest.approx(r.completed_at - r.started_at) for r in batches)
    cost = report["queries"]["lr2"]["cost"]  # the engine's time: pacer's batches and Spark's no-data batches
    assert cost["no_data"]["batches"] > 0  # the 60 s watermark moves from the first batch, as Spark's does
    assert cost["engine_s"] == pytest.approx(sum(r.engine_s or 0 for r in batches) + cost["no_data"]["trigger_s"])
    out = run(tmp_path)
    assert out["queries"]["lr2"]["cost"]["engine_share"] > 0


def test_pacer_sim_is_pacer_run_runtime_sim(tmp_path: Path) -> None:
    """``pacer run --runtime sim`` twice with one seed writes byte-identical reports, and ``pacer sim`` with the
    same flags writes the same bytes; the report's ``config.run`` repeats the run exactly (``--config``)."""
    flags = ["--workload", "lr2", "cm2", "--traffic", "random", "--rate", "1500", "--duration", "30", "--seed", "3",
             "--admission", "fixed-point", "--deadline", "5s", "--gpu-profile", "builtin"]
    paths = [tmp_path / f"{name}.json" for name in ("run1", "run2", "sim", "again")]
    assert main(["run", "--runtime", "sim", *flags, "--report", str(paths[0])]) == 0
    assert main(["run", "--runtime", "sim", *flags, "--report", str(paths[1])]) == 0
    assert main(["sim", *flags, "--report", str(paths[2])]) == 0
    assert paths[0].read_bytes() == paths[1].read_bytes() == paths[2].read_bytes()
    assert main(["run", "--runtime", "sim", "--config", str(paths[0]), "--gpu-profile", "builtin",
                 "--report", str(paths[3])]) == 0
    assert paths[3].read_bytes() == paths[0].read_bytes()
    run = json.loads(paths[0].read_text())["config"]["run"]
    assert [q["workload"] for q in run["queries"]] == ["lr2", "cm2"] and run["seed"] == 3


def test_flags_of_another_runtime_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--runtime", "sim", "--workload", "lr2", "--master", "local[4]"]) == 2
    err = capsys.readouterr().err
    assert "--master: an option of runtime 'spark'; add --runtime spark" in err
