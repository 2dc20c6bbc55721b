"""Infeasible load (issue 18, item 5): where bursts exceed what any batching serves within the deadline, zStream
does no worse than Spark's default trigger on the records, and the report says when and how long it was overloaded.

Simulated (pacer-sim): LR3 at 12 000 rows/s is about all two cores serve, so every burst of wave and binary traffic
overloads it, and random traffic's larger ones; the default trigger misses too (random seed 12: the first batches
are of one size, so the service-time fit cannot tell fixed from per-byte cost, and the average cost per byte
stands in). Before the Controller served a strained query at once and held the
eager service for as long as an overload lasted, zStream's waiting between bursts left the engine idle and every
later burst found a larger backlog: 60.2 % of rows late against the default trigger's 50.7 % (wave, seed 11-26
median), 21.8 % against 20.0 % (binary).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer.cli import main

#: Share of rows late zStream may exceed the default trigger by (simulated, so almost exact).
TOLERANCE = 0.005


def _late(tmp_path: Path, traffic: str, admission: str, seed: int, extra: tuple[str, ...] = ()) -> dict:
    report = tmp_path / f"{traffic}-{admission}-{seed}.json"
    assert main(["run", "--runtime", "sim", "--workload", "lr3", "--traffic", traffic, "--rate", "12000",
                 "--admission", admission, "--deadline", "10s", "--duration", "300", "--seed", str(seed),
                 "--overload", "keep", "--report", str(report), *extra]) == 0
    return json.loads(report.read_text())["queries"]["lr3"]


#: binary as measured (issue 18, item 5): SPBench's periodic bursts, each at the start of its period (noise=0).
PERIODIC = ("--traffic-param", "noise=0")


@pytest.mark.parametrize(("traffic", "seed", "extra"), [("wave", 11, ()), ("wave", 16, ()), ("binary", 11, PERIODIC),
                                                        ("binary", 19, PERIODIC), ("random", 12, ())])
def test_zstream_misses_no_more_than_the_default_trigger_when_bursts_overload_the_engine(
        tmp_path: Path, traffic: str, seed: int, extra: tuple[str, ...]) -> None:
    default = _late(tmp_path, traffic, "asap", seed, extra)
    zstream = _late(tmp_path, traffic, "zstream", seed, extra)
    assert default["deadline_miss_ratio"] > 0.05  # infeasible: the default trigger misses too
    assert zstream["deadline_miss_ratio"] <= default["deadline_miss_ratio"] + TOLERANCE
    overload = zstream["overload"]
    assert overload["episodes"] >= 3 and overload["overloaded_s"] > 60  # reported, with when and how long
    assert all(p["seconds"] > 0 for p in overload["periods"])


@pytest.mark.xfail(strict=True, reason="with binary's burst onsets drawn from the seed (the traffic default), zStream "
                   "misses more rows than the default trigger at 4 of seeds 11-20: 0.303 against 0.267 (seed 13), "
                   "0.353/0.293 (12), 0.246/0.231 (19), 0.314/0.271 (20); the same at the other six (simulated). Was "
                   "0.28-0.85 against 0.23-0.37 before the overload hold-over followed recurring bursts")
def test_zstream_misses_no_more_than_the_default_trigger_when_the_bursts_come_at_random(tmp_path: Path) -> None:
    """Known: zStream's waiting between bursts pays when the next burst comes on time, not when it may come early."""
    default = _late(tmp_path, "binary", "asap", 13)
    zstream = _late(tmp_path, "binary", "zstream", 13)
    assert default["deadline_miss_ratio"] > 0.05
    assert zstream["deadline_miss_ratio"] <= default["deadline_miss_ratio"] + TOLERANCE
