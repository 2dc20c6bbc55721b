"""The simulator takes a query's costs from the engine profile Spark measured for its workload (``--calibrated``):
a batch costs the profile's fixed part and per-byte part, its tasks the profile's core-seconds, a no-data batch the
profile's no-data figures; figures the profile did not measure stay the cost model's, and the report says which."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pacer import QueryRun, RunConfig
from pacer.engine_profile import EngineProfile
from pacer_sim import CostModel, Simulation
from pacer_sim.calibrated import load_profiles, profile_for
from pacer_sim.runtime import SIM_RUNTIME

QUIET = CostModel(noise=0.0)
#: 0.4 s a tiny batch, 0.2 core-s of it its 2 tasks' (25 % each), 2 core-s per MB, no-data batches 0.3 s / 0.1 core-s.
PROFILE = EngineProfile(runtime="spark", workload="lr2", partitions=2, slots=2, fixed_s=0.4, fixed_core_s=0.2,
                        engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=1.3e-4, largest_bytes=10**6,
                        no_data_s=0.3, no_data_core_s=0.1,
                        not_measured={"executor_warmup_s": "local[2]: no executor added"})


def test_a_calibrated_batch_costs_what_the_profile_measured() -> None:
    """Alone on the calibration's 2 slots, a batch of B bytes takes ``fixed_s + core_s_per_byte x B / 2`` (one wave)
    and its tasks run ``fixed_core_s + core_s_per_byte x B`` core-seconds; the built-in curves play no part."""
    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=None, engine_profiles=[PROFILE])
    sim.add_query("lr2", rate=200, admission="static", admission_params={"interval": 5.0}, duration=30)
    report = sim.run(30)
    batches = sim.controller.reports("lr2")
    assert len(batches) == 7
    for r in batches:
        assert r.busy_core_s == pytest.approx(0.2 + 2e-6 * r.bytes)
        assert r.processing_s == pytest.approx(0.4 + 1e-6 * r.bytes)
    calibrated = report["config"]["calibrated"]["lr2"]
    assert calibrated["scalars"]["fixed_task_share"] == {"measured": True, "value": 0.25}
    assert calibrated["scalars"]["executor_warmup_s"] == {"measured": False, "why": "local[2]: no executor added"}
    assert calibrated["scalars"]["state_reload_s"]["measured"] is False


def test_a_calibrated_no_data_batch_costs_the_profiles_no_data_figures() -> None:
    """ASAP, a dataset a second: each data batch moves the watermark and ends before the next dataset arrives, so a
    no-data batch follows it (under a static trigger the tick finds data and none runs within the run)."""
    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=10.0, engine_profiles=[PROFILE])
    sim.add_query("lr2", rate=200, admission="asap", duration=30)
    no_data = sim.run(30)["queries"]["lr2"]["cost"]["no_data"]
    assert no_data["batches"] > 0
    assert no_data["trigger_s"] == pytest.approx(0.3 * no_data["batches"])
    assert no_data["busy_core_s"] == pytest.approx(0.1 * no_data["batches"])


def test_only_the_workload_the_profile_was_measured_on_takes_its_costs() -> None:
    def busy(profiles: list[EngineProfile]) -> dict[str, float]:
        sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=None, engine_profiles=profiles)
        for workload in ("lr2", "cm1"):
            sim.add_query(workload, rate=200, admission="static", admission_params={"interval": 5.0}, duration=20)
        return {q: v["cost"]["busy_core_s"] for q, v in sim.run(20)["queries"].items()}

    built_in, calibrated = busy([]), busy([PROFILE])
    assert calibrated["cm1"] == built_in["cm1"] and calibrated["lr2"] != built_in["lr2"]
    assert profile_for([replace(PROFILE, workload=None), PROFILE], "lr2") is PROFILE  # its own before any query's
    assert profile_for([PROFILE], "cm1") is None


def test_measured_warm_up_and_reload_replace_the_defaults_and_the_rest_stay() -> None:
    from pacer_sim.calibrated import calibrated_model

    model = calibrated_model(QUIET, replace(PROFILE, state_reload_s=0.05))
    assert (model.batch_overhead, model.fixed_task_share) == (0.4, 0.25)
    assert model.state_reload_s == 0.05 and model.executor_warmup_s == QUIET.executor_warmup_s


def test_the_runtime_reads_calibrated_files_and_refuses_what_is_not_a_spark_profile(tmp_path: Path) -> None:
    path = str(PROFILE.write(tmp_path / "lr2.json"))
    config = RunConfig((QueryRun("lr2", rate=200, admission="static", admission_params={"interval": 5.0}),),
                       duration=20, options={"sim": {"calibrated": [path], "noise": 0.0, "watermark": "none"}})
    report = SIM_RUNTIME.run(config).report
    assert report["config"]["calibrated"]["lr2"]["fixed_s"] == 0.4
    assert load_profiles(path) == [PROFILE]
    sim_made = str(replace(PROFILE, runtime="sim").write(tmp_path / "sim.json"))
    with pytest.raises(ValueError, match="measured on 'sim'"):
        load_profiles([sim_made])
    with pytest.raises(ValueError, match="two profiles for lr2"):
        load_profiles([path, path])


def test_a_querys_first_batch_costs_the_profiles_first_batch_excess_once() -> None:
    """A profile that measured a query's first batch 1.0 s and 0.4 core-s dearer: the simulated query's first batch
    takes that much more (0.4 core-s on its tasks, the rest on the driver), its later batches what their size costs."""
    first = replace(PROFILE, first_batch_s=1.0, first_batch_core_s=0.4)
    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=None, engine_profiles=[first])
    sim.add_query("lr2", rate=200, admission="static", admission_params={"interval": 5.0}, duration=30)
    sim.run(30)
    head, *rest = sim.controller.reports("lr2")
    assert head.processing_s == pytest.approx(0.4 + 1e-6 * head.bytes + 1.0)
    assert head.busy_core_s == pytest.approx(0.2 + 2e-6 * head.bytes + 0.4)
    assert all(r.processing_s == pytest.approx(0.4 + 1e-6 * r.bytes) for r in rest)
