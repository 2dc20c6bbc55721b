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


def _late(tmp_path: Path, traffic: str, admission: str, seed: int) -> dict:
    report = tmp_path / f"{traffic}-{admission}-{seed}.json"
    assert main(["run", "--runtime", "sim", "--workload", "lr3", "--traffic", traffic, "--rate", "12000",
                 "--admission", admission, "--deadline", "10s", "--duration", "300", "--seed", str(seed),
                 "--overload", "keep", "--report", str(report)]) == 0
    return json.loads(report.read_text())["queries"]["lr3"]


@pytest.mark.parametrize(("traffic", "seed"), [("wave", 11), ("wave", 16), ("binary", 11), ("binary", 19), ("random", 12)])
def test_zstream_misses_no_more_than_the_default_trigger_when_bursts_overload_the_engine(
        tmp_path: Path, traffic: str, seed: int) -> None:
    default = _late(tmp_path, traffic, "asap", seed)
    zstream = _late(tmp_path, traffic, "zstream", seed)
    assert default["deadline_miss_ratio"] > 0.05  # infeasible: the default trigger misses too
    assert zstream["deadline_miss_ratio"] <= default["deadline_miss_ratio"] + TOLERANCE
    overload = zstream["overload"]
    assert overload["episodes"] >= 3 and overload["overloaded_s"] > 60  # reported, with when and how long
    assert all(p["seconds"] > 0 for p in overload["periods"])
