"""pacer bench autoscale: steps found in the traffic and settling after them; the cheapest fixed count's bisection
and the oracle's capacity walk, each on a made-up model whose answer is known; the oracle's window levels from the
traffic function; and a short run of one group on the simulator, its references checked against their own probes and
its ratios recomputed from autoscale.json."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pacer import QueryRun, RunConfig
from pacer_bench import autoscale, oracle
from pacer_bench.autoscale import settling, steps
from pacer_bench.cheapest_fixed import cheapest_fixed
from pacer_bench.oracle import Capacity, rounded_level, timetable, window_levels

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


def _late(*shares: float) -> list[dict[str, Any]]:
    return [{"queries": {"q": {"deadline_miss_ratio_rows": s}}} for s in shares]


def test_the_bisection_returns_the_smallest_count_every_seed_meets_with_the_one_below_probed_and_missed() -> None:
    probed: list[int] = []

    def probe(n: int) -> list[dict[str, Any]]:  # seed 1 meets the limit from 23 executors, seed 2 from 40
        probed.append(n)
        return _late(0.0 if n >= 23 else 0.5, 0.0 if n >= 40 else 0.02)

    for start in (3, 64, 40, 1000):
        probed.clear()
        found = cheapest_fixed(probe, limit=0.01, start=start)
        assert found.count == 40 and found.late[39] == [0.0, 0.02] and found.late[40] == [0.0, 0.0], start
        assert len(probed) == len(set(probed)) <= 12, (start, probed)  # each count once, about log2 of them
        assert found.reports == _late(0.0, 0.0)  # the reports at the count found, every seed
    with pytest.raises(ValueError, match="no fixed count up to 4096"):
        cheapest_fixed(lambda n: _late(0.02), limit=0.01, start=1024)


def _model_run(config: RunConfig) -> dict[str, Any]:
    """A made-up engine: ``cores`` keep a level on time while cores >= 10 x level (level: rate over 100 rows/s)."""
    level = config.queries[0].rate / 100.0
    late = 0 if (config.cores or 0) >= math.ceil(10 * level - 1e-9) else 50
    return {"queries": {"q": {"series_interval_s": 1.0, "series": [
        {"t": float(t), "input_rows_per_s": 100.0, "late_rows": late} for t in range(int(config.duration))]}}}


def test_the_capacity_walk_finds_each_levels_fewest_executors_probing_each_count_once() -> None:
    base = RunConfig((QueryRun("lr2", rate=100.0, deadline=10.0),), cores=1)
    capacity = Capacity(base, _model_run)
    levels = [3.0, 0.5, 1.0, 1.2, 9.0, 1.0]
    assert capacity.needs(levels, low=1, high=64) == {0.5: 5, 1.0: 10, 1.2: 12, 3.0: 30, 9.0: 64}  # 9: none fits
    assert capacity.needs([2.0], low=1, high=64) == {2.0: 20}  # from what the levels below it need
    for level, count in ((0.5, 5), (1.0, 10), (1.2, 12), (3.0, 30), (2.0, 20)):
        assert capacity.fits(count, level) and not capacity.fits(count - 1, level)
    assert len(capacity.probes) <= 45, sorted(capacity.probes)


def test_the_oracle_levels_read_the_traffic_function_ahead_and_add_the_headroom() -> None:
    wave = QueryRun("lr2", traffic="wave", rate=100.0, traffic_params={"min": 20.0, "max": 180.0, "period": 600.0},
                    deadline=10.0)
    levels = window_levels(RunConfig((wave,), duration=600.0, seed=7), headroom=0.15)
    assert len(levels) == 60
    assert max(levels) == rounded_level(1.8 * 1.15)
    assert rounded_level(0.2 * 1.15) <= min(levels) <= rounded_level(0.21 * 1.15)
    for k, level in enumerate(levels):  # the window [10k, 10k + 10) and its 10 s deadline before it, x 1.15
        seen = max(1.0 + 0.8 * math.sin(2 * math.pi * (10 * k + j / 10) / 600.0) for j in range(-100, 101)) * 1.15
        assert seen - 1e-3 <= level <= seen * (1 + oracle.LEVEL_STEP) + 1e-3, (k, level, seen)
    # a spike's bursts start where each seed draws them: the oracle foresees the seed's own
    spike = QueryRun("lr2", traffic="spike", rate=100.0, traffic_params={"min": 50.0, "spike": 0.4, "period": 300.0},
                     deadline=10.0)
    seven, eight = (window_levels(RunConfig((spike,), duration=600.0, seed=s), headroom=0.0) for s in (7, 8))
    assert seven != eight and abs(math.log(max(seven) / max(eight))) <= math.log1p(oracle.LEVEL_STEP) + 1e-9
    assert timetable([1.0, 1.0, 2.0, 2.0, 1.0], {1.0: 4, 2.0: 9}, bounds=(2, 8)) == "0:4,20:8,40:4"


@needs_scaler
def test_autoscale_runs_a_group_with_its_cheapest_fixed_count_and_oracle_and_writes_what_recomputes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pacer_bench.autoscale import analyse, load_raw
    from pacer_bench.runner import run_scenario

    monkeypatch.setattr(oracle, "PROBE_S", 90.0)  # shorter probes than a committed run's, for CI
    monkeypatch.setattr(oracle, "WARM_UP_S", 20.0)
    monkeypatch.setattr(autoscale, "_CAPACITY", {})
    paths = run_scenario("autoscale", runtime="sim", out=tmp_path, quick=True, duration=180.0, progress=False,
                         target={"configs": ["wave / 1 query"]})
    doc = json.loads(paths["json"].read_text())
    rows = {r["config"]: r for r in doc["analysis"]}
    assert list(rows) == [*autoscale.CONFIGS, *autoscale.REFERENCES]
    runs = {r["tags"]["name"]: r["report"] for r in doc["runs"]}
    refs = doc["references"]["wave / 1 query"]
    # cheapest fixed: every seed within the limit at its count, and a seed over it one executor below
    count = refs["cheapest_fixed"]["count"]
    probes = refs["cheapest_fixed"]["probes"]
    assert max(probes[str(count)]) <= autoscale.LATE_LIMIT < max(probes[str(count - 1)])
    assert runs["cheapest fixed"]["config"]["cores"] == count and rows["cheapest fixed"]["late_max"] <= 0.01
    # the oracle: each level's count fits it, one fewer does not; its timetable never asks for more than fixed at
    # peak holds, and the run held what the timetable says, each rise asked for ahead
    found = {float(level): n for level, n in refs["executors_for_level"].items()}
    late = {(int(k.split("@")[0]), float(k.split("@")[1])): v for k, v in refs["capacity_probes"].items()}
    high = autoscale.most_useful([QueryRun("lr2")])
    for level, n in found.items():  # (a level may take a higher one's count: a count that fits more fits less)
        assert n == high or any(late.get((n, lv), 1.0) <= oracle.LATE_LIMIT for lv in found if lv >= level), level
        assert n in (1, high) or any(late.get((n - 1, lv), 0.0) > oracle.LATE_LIMIT for lv in found), level
    peak = runs["fixed at peak"]["config"]["cores"]
    table = [(float(t), int(n)) for t, n in (e.split(":") for e in refs["oracle_timetables"][0].split(","))]
    assert len(table) >= 2 and max(n for _, n in table) <= peak
    held = runs["oracle"]["scaling"]["executors"]  # (time, running, held)
    assert held[0][2] == table[0][1] and runs["oracle"]["scaling"]["reconfigurations"] >= 1
    for (at, n), (_, before) in zip(table[1:], table, strict=False):
        if n > before:  # a rise: asked for (held, starting) by the time its entry begins
            assert [h for t, _, h in held if t <= at][-1] >= n, (at, n, held)
    per_s = {name: runs[name]["cost"]["allocated_core_s"] / runs[name]["duration_s"] for name in runs}
    assert per_s["oracle"] <= per_s["fixed at peak"] + 1e-6  # never more than fixed at peak held, each second
    # the ratios, from autoscale.json alone (its reports without their per-dataset lists and series)
    assert all("latencies_s" not in r["report"]["bench"] and not r["report"]["queries"]["lr2"]["series"]
               for r in doc["runs"])
    again = {r["config"]: r for r in analyse(load_raw(paths["json"]))}
    for name, row in rows.items():
        cheap = runs[name]["cost"]["allocated_core_s"] / runs["cheapest fixed"]["cost"]["allocated_core_s"]
        assert row["vs_cheapest"] == pytest.approx(cheap) == again[name]["vs_cheapest"].median, name
        assert row["vs_oracle"] == pytest.approx(again[name]["vs_oracle"].median), name
    assert any(line.startswith("GOAL wave / 1 query: deadline scaler") and "cheapest fixed" in line
               for line in doc["goals"])
    assert "executors_wave-1-query" in paths and "## Executors and what they cost" in paths["md"].read_text()
