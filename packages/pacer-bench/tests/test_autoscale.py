"""pacer bench autoscale: steps found in the traffic, settling after them, the offline optimum, and a short run of
every configuration on the simulator with its goal lines, table and plots."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from pacer_bench.autoscale import optimum_core_s, per_second, settling, steps

needs_scaler = pytest.mark.skipif(importlib.util.find_spec("pacer_scaler") is None,
                                  reason="pacer-scaler is not installed")


def _report(rates: list[float], changes: list[float], duration: float) -> dict[str, Any]:
    series = [{"t": float(t), "input_rows_per_s": r} for t, r in enumerate(rates)]
    return {"config": {"duration": duration}, "duration_s": duration, "queries": {"lr2": {"series": series}},
            "scaling": {"changes": [{"at": t} for t in changes]}}


def test_a_step_is_found_once_and_settling_counts_the_changes_after_it() -> None:
    rates = [100.0 + (i % 2) for i in range(600)] + [200.0 + (i % 3) for i in range(900)] + [100.0] * 500
    report = _report(rates, changes=[605.0, 610.0, 700.0, 1510.0], duration=2000.0)
    up, down = steps(report)
    assert 600.0 <= up <= 610.0 and 1500.0 <= down <= 1510.0  # 10 s averages cross the middle within 10 s
    first, second = settling(report)
    assert (first["changes"], first["settled"]) == (3, True) and first["settle_s"] == pytest.approx(700.0 - up)
    assert (second["changes"], second["settled"]) == (1, True)
    report["scaling"]["changes"].append({"at": 1750.0})  # a change 240 s after: not still for 300 s before the end
    assert settling(report)[1]["settled"] is False


@needs_scaler
def test_the_optimum_takes_each_minutes_highest_deadline_averaged_rate() -> None:
    from pacer_workloads import WORKLOADS, bytes_per_row

    per_row = bytes_per_row(WORKLOADS["lr2"].stream)
    k = 1.0 / (per_row * 1000.0)  # one core-second per 1000 rows; no fixed part: utilization limit 1
    queries = (("lr2", 10.0, 0.0),)
    # minute 1: 2000 rows/s (2 executors); minute 2: 5000 rows/s for 10 s within 1000 (the 10 s average peaks at 5)
    rates = [2000.0] * 60 + [1000.0] * 25 + [5000.0] * 10 + [1000.0] * 25
    optimum = optimum_core_s(_report(rates, [], 120.0), {"lr2": (k, 0.0)}, queries)
    assert optimum == pytest.approx(2 * 60 + 5 * 60)


@needs_scaler
def test_a_series_of_two_second_rows_gives_the_same_optimum_as_one_of_one_second_rows() -> None:
    """A long run's series has rows of 2 s or more (``series_interval_s``): each row stands for every second of its
    interval. Read as one second each, the optimum of a 2100 s step run came out at half (×optimum 2.98 for fixed at
    peak, against 1.53)."""
    from pacer_workloads import WORKLOADS, bytes_per_row

    k = 1.0 / (bytes_per_row(WORKLOADS["lr2"].stream) * 1000.0)
    rates = [2000.0] * 60 + [5000.0] * 60
    every_second = _report(rates, [], 120.0)
    every_other = _report(rates, [], 120.0)
    every_other["queries"]["lr2"]["series"] = every_other["queries"]["lr2"]["series"][::2]
    every_other["queries"]["lr2"]["series_interval_s"] = 2.0
    assert per_second(every_other["queries"]["lr2"], 120.0) == rates
    queries = (("lr2", 10.0, 0.0),)
    assert optimum_core_s(every_other, {"lr2": (k, 0.0)}, queries) == \
        optimum_core_s(every_second, {"lr2": (k, 0.0)}, queries) == pytest.approx(2 * 60 + 5 * 60)


@needs_scaler
def test_autoscale_on_the_simulator_writes_goal_lines_table_and_plots(tmp_path: Path) -> None:
    from pacer_bench.runner import run_scenario

    paths = run_scenario("autoscale", runtime="sim", out=tmp_path, quick=True, duration=240.0, progress=False)
    doc = json.loads(paths["json"].read_text())
    names = [r["config"] for r in doc["analysis"]]
    assert names == ["fixed at peak", "fixed at mean", "spark-dynamic", "deadline"] * 3
    assert any(line.startswith("GOAL wave / 1 query: deadline scaler") for line in doc["goals"])
    assert any(line.startswith("GOAL step / 1 query: settled") for line in doc["goals"])
    for row in doc["analysis"]:
        if row["config"] == "fixed at peak":
            assert row["vs_peak"] == 1.0 and row["reconfigurations"] == 0
        assert row["vs_optimum"] > 0
    assert {"executors_wave-1-query", "executors_step-1-query"} <= set(paths)
    assert "## Executors and what they cost" in paths["md"].read_text()
    # the slim raw file recomputes every ratio (autoscale-sim commits it; the full JSON is too large to)
    from pacer_bench.autoscale import analyse, load_raw

    again = analyse(load_raw(paths["raw"]))
    assert [(r["group"], r["config"], r["vs_peak"].median, r["vs_optimum"].median) for r in again] == \
        [(r["group"], r["config"], r["vs_peak"], r["vs_optimum"]) for r in doc["analysis"]]
