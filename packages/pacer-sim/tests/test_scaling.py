"""The simulator's executors: start-up delay, removal between batches, core-seconds held, and the scalers run on
it (pacer-scaler's ``deadline`` where installed)."""

from __future__ import annotations

import importlib.util
import itertools
from dataclasses import replace

import pytest

from pacer import QueryRun, RunConfig
from pacer_sim.runtime import SIM_RUNTIME

WAVE = {"period": 300.0}


def _config(scale: str, *, executors: tuple[int, int] = (1, 16), initial: int | None = 8, rate: float = 20000.0,
            duration: float = 600.0, cores: int | None = None) -> RunConfig:
    query = QueryRun("lr2", traffic="wave", rate=rate, traffic_params=WAVE, admission="zstream", deadline=10.0)
    if cores is not None:
        return RunConfig((query,), duration=duration, cores=cores, partitions=16)
    return RunConfig((query,), duration=duration, partitions=16, scale=scale, executors=executors,
                     initial_executors=initial, options={"sim": {"executor_startup": 20.0}})


def test_an_executor_runs_its_start_up_after_the_request_and_is_held_from_the_request() -> None:
    report = SIM_RUNTIME.run(_config("spark-dynamic", initial=1, duration=60.0)).report
    scaling = report["scaling"]
    asked = scaling["changes"][0]["at"]
    timeline = [tuple(p) for p in scaling["executors"]]
    assert (asked, 1, 2) in timeline  # held from the request
    assert next(t for t, running, _ in timeline if running >= 2) == asked + 20.0  # running 20 s later
    held = sum((b[0] - a[0]) * a[2] for a, b in itertools.pairwise(timeline))
    held += (report["duration_s"] - timeline[-1][0]) * timeline[-1][2]
    assert report["cost"]["allocated_core_s"] == pytest.approx(held, rel=1e-6)
    assert report["cost"]["allocated_core_s"] == pytest.approx(scaling["allocated_core_s"], rel=1e-6)


@pytest.mark.skipif(importlib.util.find_spec("pacer_scaler") is None, reason="pacer-scaler is not installed")
def test_an_executor_leaves_only_between_batches() -> None:
    config = replace(_config("deadline", duration=300.0), scale_params={"down_hold_s": 20.0})
    result = SIM_RUNTIME.run(config)
    timeline = result.report["scaling"]["executors"]
    removals = [b[0] for a, b in itertools.pairwise(timeline) if b[1] < a[1]]
    assert removals, timeline
    reports = result.controller.reports()
    assert len(reports) == result.report["queries"]["lr2"]["batches"]  # every batch is there to check against
    for t in removals:
        assert not [r for r in reports if r.started_at < t - 1e-6 and t + 1e-6 < r.completed_at], t  # times rounded


def test_same_seed_same_report_with_a_scaler() -> None:
    import json

    a = SIM_RUNTIME.run(_config("spark-dynamic", duration=120.0)).report
    b = SIM_RUNTIME.run(_config("spark-dynamic", duration=120.0)).report
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.skipif(importlib.util.find_spec("pacer_scaler") is None, reason="pacer-scaler is not installed")
def test_the_deadline_scaler_meets_the_deadline_holding_fewer_core_seconds_than_a_fixed_peak() -> None:
    scaled = SIM_RUNTIME.run(_config("deadline")).report
    peak = SIM_RUNTIME.run(_config("fixed", cores=16)).report
    late = scaled["queries"]["lr2"]["deadline_miss_ratio_rows"]
    assert late <= 0.01
    ratio = scaled["cost"]["allocated_core_s"] / peak["cost"]["allocated_core_s"]
    assert ratio <= 0.6, ratio
    assert scaled["scaling"]["reconfigurations"] >= 2  # it followed the wave down and up


def test_scale_without_executor_bounds_is_refused() -> None:
    query = QueryRun("lr2")
    with pytest.raises(ValueError, match=r"scale 'deadline' changes the executors: give their bounds"):
        SIM_RUNTIME.check(RunConfig((query,), scale="deadline"))
