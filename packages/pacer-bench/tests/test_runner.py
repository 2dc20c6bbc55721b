"""``pacer bench`` end to end on the simulator, its argument checks, and one short real Spark run."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pacer import get_plugin_manager
from pacer.cli import main
from pacer_bench.runner import ScenarioError, resolve_configs, run_scenario
from pacer_bench.scenarios import SCENARIOS

PLOTS = ("latency_cdf", "max_latency", "batch_size", "batch_interval")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_every_scenario_resolves_on_the_simulator() -> None:
    pm = get_plugin_manager()
    for name in [n for n, s in SCENARIOS.items() if not s.calibrated]:
        for quick in (True, False):
            runtime, configs, _ = resolve_configs(name, runtime="sim", quick=quick, duration=None, seed=1,
                                                  plugin_manager=pm)
            assert runtime == "sim" and configs, name
            assert all(c.seed == 1 for c in configs)
            labels = [c.label for c in configs]
            assert len(labels) == len(set(labels)), f"{name}: duplicate labels"
            groups = {c.group for c in configs}
            for group in groups:  # every group has exactly one baseline to compare with
                assert sum(c.baseline for c in configs if c.group == group) == 1, (name, group)


def test_trigger_sweep_quick_writes_every_output(tmp_path: Path) -> None:
    paths = run_scenario("trigger-sweep", runtime="sim", out=tmp_path, quick=True, duration=30.0, progress=False)
    for kind in ("json", "csv", "md", "html", "meta", *PLOTS):
        assert paths[kind].exists() and paths[kind].stat().st_size > 0, kind
    rows = _rows(paths["csv"])
    assert [r["config"] for r in rows] == ["static 10s", "asap", "fixed-point", "zstream", "lmstream"]
    assert rows[0]["p99_vs_baseline"] == "1.0" and rows[0]["cost_vs_baseline"] == "1.0"
    assert {r["deadline_s"] for r in rows} == {"10.0"}  # static, asap and adaptive rows share one deadline
    assert "deadline 10 s (lr1)" in paths["md"].read_text()
    meta = json.loads(paths["meta"].read_text())
    assert meta["scenario"] == "trigger-sweep" and meta["runtime"] == "sim" and meta["quick"] is True
    assert "simulated" in paths["md"].read_text()
    doc = json.loads(paths["json"].read_text())
    for run in doc["runs"]:
        for q in run["report"]["queries"].values():
            assert q["datasets_in"] == q["datasets_processed"] > 0


def test_simulated_bench_is_deterministic(tmp_path: Path) -> None:
    a = run_scenario("resource-loss", runtime="sim", out=tmp_path / "a", quick=True, duration=30.0, progress=False)
    b = run_scenario("resource-loss", runtime="sim", out=tmp_path / "b", quick=True, duration=30.0, progress=False)
    assert a["csv"].read_text() == b["csv"].read_text()
    assert a["json"].read_text() == b["json"].read_text()


def test_device_sweep_compares_each_rate_with_its_own_cpu_baseline(tmp_path: Path) -> None:
    paths = run_scenario("device-sweep", runtime="sim", out=tmp_path, quick=True, duration=10.0, progress=False)
    rows = _rows(paths["csv"])
    assert len(rows) == 25
    assert json.loads(paths["json"].read_text())["runs"][0]["report"]["config"]["gpus"] == 1  # the GPU is modelled
    for row in rows:
        if row["config"].startswith("cpu-only"):
            assert row["proc_vs_baseline"] == "1.0" and float(row["gpu_ratio"]) == 0.0
        if row["config"].startswith("gpu-only"):
            assert float(row["gpu_ratio"]) > 0.5
    for plot in ("sweep_processing", "sweep_gpu_ratio", "sweep_latency", "sweep_throughput", "sweep_latency_cdf"):
        assert paths[plot].read_bytes().startswith(b"\x89PNG"), plot


def test_repetitions_are_interleaved_and_summarised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pacer_bench import runner

    order: list[tuple[str, int]] = []
    real = runner._run_one

    def recording(config, pm, spark, master):  # type: ignore[no-untyped-def]
        order.append((config.label, config.seed))
        return real(config, pm, spark, master)

    monkeypatch.setattr(runner, "_run_one", recording)
    paths = run_scenario("resource-loss", runtime="sim", out=tmp_path, quick=True, duration=20.0, progress=False,
                         repeat=2, vary_seed=True)
    labels = ["static 10s", "asap", "fixed-point"]
    assert order == [(label, 7) for label in labels] + [(label, 8) for label in labels]
    doc = json.loads(paths["json"].read_text())
    assert [len(r["repeats"]) for r in doc["runs"]] == [1, 1, 1]
    assert doc["runs"][0]["repeats"][0]["bench"]["repetition"] == 2
    rows = _rows(paths["csv"])
    assert all(r["reps"] == "2" and float(r["p99_ms_min"]) <= float(r["p99_ms"]) <= float(r["p99_ms_max"])
               for r in rows)
    meta = json.loads(paths["meta"].read_text())
    assert meta["repeat"] == 2 and meta["vary_seed"] is True


def test_latency_target_runs_deadline_free_configurations_once(tmp_path: Path) -> None:
    paths = run_scenario("latency-target", runtime="sim", out=tmp_path, quick=True, duration=30.0, progress=False)
    meta = json.loads(paths["meta"].read_text())
    names = [label.split(" / ")[1] for label in meta["configs"]]
    assert names == ["asap", "static 2s", "static 5s", "static 10s", "pid", "min-rows", "fixed-point", "lmstream",
                     "zstream @5s", "zstream @10s", "zstream @20s"]
    rows = _rows(paths["csv"])
    assert len(rows) == 3 * 9  # 8 deadline-free configurations and one zstream per deadline
    assert {r["config"] for r in rows if r["deadline_s"] == "5.0"} >= {"asap", "static 10s", "zstream @5s"}
    assert sum(r["mark"].startswith("oracle") for r in rows) <= 3
    winners = _rows(paths["winners"])
    assert [w["deadline_s"] for w in winners] == ["5.0", "10.0", "20.0"]
    for deadline in ("5", "10", "20"):
        assert paths[f"pareto_{deadline}s"].read_bytes().startswith(b"\x89PNG")
    md = paths["md"].read_text()
    assert "## Winners" in md and "<!-- readme:end -->" in md and "## Deadline 20 s" in md
    assert md.index("<!-- readme:end -->") < md.index("## Bounds")
    bounds = {b["deadline_s"]: b for b in json.loads(paths["json"].read_text())["bounds"]}
    # the fewer batches a longer deadline allows: the bound falls with the deadline
    assert 0 < bounds[20.0]["bound_s"] < bounds[10.0]["bound_s"] < bounds[5.0]["bound_s"]
    assert bounds[20.0]["min_batches"] < bounds[10.0]["min_batches"] < bounds[5.0]["min_batches"]
    assert all(b["datasets"] == 30 for b in bounds.values())
    for w in winners:
        assert float(w["bound_s"]) == bounds[float(w["deadline_s"])]["bound_s"]
    for r in rows:
        assert float(r["cost_vs_bound"]) == pytest.approx(float(r["engine_s"]) / float(r["bound_s"]), rel=2e-3)


def test_device_sweep_refuses_no_gpu_and_repeat_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--gpus 1"):
        run_scenario("device-sweep", runtime="sim", out=tmp_path, quick=True, gpus=0, progress=False)
    with pytest.raises(ScenarioError, match="--repeat"):
        run_scenario("frequency", runtime="sim", out=tmp_path, quick=True, repeat=0, progress=False)
    assert not any(tmp_path.iterdir())


def test_device_sweep_on_spark_without_rapids_runs_simulated_and_says_so(tmp_path: Path) -> None:
    paths = run_scenario("device-sweep", runtime="spark", out=tmp_path, quick=True, duration=5.0, progress=False)
    meta = json.loads(paths["meta"].read_text())
    assert meta["runtime"] == "sim" and meta["requested_runtime"] == "spark"
    assert any("RAPIDS" in n for n in meta["notes"])
    assert "RAPIDS" in paths["md"].read_text()


def test_resource_loss_is_refused_on_spark_before_it_starts(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="--runtime sim"):
        run_scenario("resource-loss", runtime="spark", out=tmp_path, quick=True, progress=False)
    assert not any(tmp_path.iterdir())


def test_spark_runtime_without_pacer_spark_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACER_PLUGINS", "sim,bench,calibrate,fixed-point,zstream,lmstream,dstream")  # no spark
    with pytest.raises(ScenarioError, match=r"pip install \./integrations/pacer-spark"):
        run_scenario("trigger-sweep", runtime="spark", out=tmp_path, quick=True, progress=False)


def test_cli_rejects_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:  # argparse lists the scenarios
        main(["bench", "no-such-scenario", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "trigger-sweep" in capsys.readouterr().err
    a_file = tmp_path / "f"
    a_file.write_text("")
    assert main(["bench", "frequency", "--out", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["bench", "frequency", "--out", str(tmp_path / "x"), "--duration", "0"]) == 2
    assert main(["bench", "latency-target", "--out", str(tmp_path / "x"), "--engine-profile", "/no/p.json"]) == 2
    assert "--engine-profile: engine profile '/no/p.json' does not exist" in capsys.readouterr().err
    from pacer.engine_profile import EngineProfile

    profile = EngineProfile(runtime="spark", workload="lr2", partitions=2, slots=2, fixed_s=0.5, fixed_core_s=0.4,
                            engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=2e-4, largest_bytes=10**6)
    path = profile.write(tmp_path / "lr2.json")
    assert main(["bench", "latency-target", "--out", str(tmp_path / "x"), "--engine-profile", str(path)]) == 2
    assert "was measured on spark, and this bench runs on --runtime sim: the simulator has its own cost model" in \
        capsys.readouterr().err


def test_cli_prints_the_table_and_writes_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "freq"
    assert main(["bench", "frequency", "--quick", "--duration", "20", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "| wave / fixed-point | 20 |" in printed.out
    assert "12/12" in printed.err  # the progress bar reached the end
    assert (out / "frequency.html").exists()


@pytest.mark.spark
@pytest.mark.full(reason="test_bench_kafka.py runs pacer bench on real Spark")
def test_trigger_sweep_runs_on_real_spark(tmp_path: Path) -> None:
    """A short quick trigger sweep on local Spark, in its own process (it owns its SparkSession)."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [sys.executable, "-m", "pacer.cli", "bench", "trigger-sweep", "--runtime", "spark", "--quick",
         "--duration", "12", "--out", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["runtime"] == "spark" and "PySpark" in meta["machine"]
    doc = json.loads((tmp_path / "trigger-sweep.json").read_text())
    assert [r["label"] for r in doc["runs"]] == ["static 10s", "asap", "fixed-point"]
    for run in doc["runs"]:
        assert run["report"]["runtime"] == "spark"
        q = run["report"]["queries"]["lr2"]
        assert q["datasets_in"] == q["datasets_processed"] == 12
    assert doc["runs"][0]["report"]["config"]["queries"][0]["admission"] == "static"


def test_fidelity_runs_on_spark_beside_the_calibrated_simulator_and_only_it_takes_calibrated(tmp_path: Path) -> None:
    """fidelity compares Spark with the simulator: refused on the simulator alone and without profiles; on Spark
    its configurations resolve (nothing runs yet); --calibrated is refused elsewhere."""
    from pacer.engine_profile import EngineProfile

    pm = get_plugin_manager()
    profile = EngineProfile(runtime="spark", workload="lr2", partitions=2, slots=2, fixed_s=0.4, fixed_core_s=0.2,
                            engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=1e-4, largest_bytes=10**6)
    path = str(profile.write(tmp_path / "lr2.json"))
    with pytest.raises(ScenarioError, match="run it with --runtime spark"):
        resolve_configs("fidelity", runtime="sim", quick=True, duration=None, seed=1, plugin_manager=pm,
                        calibrated=[path])
    with pytest.raises(ScenarioError, match="--calibrated FILE"):
        resolve_configs("fidelity", runtime="spark", quick=True, duration=None, seed=1, plugin_manager=pm)
    runtime, configs, _ = resolve_configs("fidelity", runtime="spark", quick=True, duration=None, seed=1,
                                          plugin_manager=pm, calibrated=[path])
    assert runtime == "spark" and len(configs) == 6 and all(c.duration == 60.0 for c in configs)
    assert {c.queries[0].workload for c in configs} == {"lr2", "cm1"}
    with pytest.raises(ScenarioError, match="takes --engine-profile"):
        resolve_configs("trigger-sweep", runtime="sim", quick=True, duration=None, seed=1, plugin_manager=pm,
                        calibrated=[path])
