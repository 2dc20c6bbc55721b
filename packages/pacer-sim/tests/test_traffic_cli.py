"""Traffic through the command line: every pattern random under ``--seed``, ``noise``, and ``--traffic trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pacer.cli import main

BASE = ["--workload", "lr2", "--duration", "40", "--gpu-profile", "builtin"]


def _report(tmp_path: Path, *args: str, name: str = "r.json") -> dict[str, Any]:
    assert main([*args, *BASE, "--report", str(tmp_path / name)]) == 0
    report: dict[str, Any] = json.loads((tmp_path / name).read_text())
    return report


def _arrivals(report: dict[str, Any]) -> list[float]:
    """Rows that arrived in each second (the report's series, one row a second)."""
    return [row["input_rows_per_s"] for row in report["queries"]["lr2"]["series"]]


def test_two_seeds_of_binary_traffic_give_different_arrivals(tmp_path: Path) -> None:
    one = _report(tmp_path, "sim", "--traffic", "binary", "--seed", "1", name="1.json")
    two = _report(tmp_path, "sim", "--traffic", "binary", "--seed", "2", name="2.json")
    again = _report(tmp_path, "run", "--runtime", "sim", "--traffic", "binary", "--seed", "1", name="1b.json")
    assert _arrivals(one) != _arrivals(two)
    assert _arrivals(one) == _arrivals(again)
    assert one["config"]["queries"][0]["traffic_params"] == {"min": 500.0, "max": 1500.0, "period": 20.0,
                                                             "noise": 1.0}


def test_noise_0_is_the_exact_shape_for_every_seed(tmp_path: Path) -> None:
    exact = ("--traffic", "binary", "--traffic-param", "noise=0", "--traffic-param", "period=10")
    one = _report(tmp_path, "sim", *exact, "--seed", "1", name="1.json")
    two = _report(tmp_path, "sim", *exact, "--seed", "2", name="2.json")
    assert _arrivals(one) == _arrivals(two) == [0.0] + ([1500.0] * 5 + [500.0] * 5) * 4


def test_a_trace_of_per_second_rates_replays_through_pacer_run(tmp_path: Path) -> None:
    rates = [800 + (37 * i) % 900 for i in range(40)]
    trace = tmp_path / "tuesday.csv"
    trace.write_text("second,rate\n" + "".join(f"{1715040000 + i},{r}\n" for i, r in enumerate(rates)))
    report = _report(tmp_path, "run", "--runtime", "sim", "--traffic", "trace", "--traffic-param", f"file={trace}",
                     "--save-config", str(tmp_path / "run.toml"))
    assert _arrivals(report)[1:] == [float(r) for r in rates]
    assert report["queries"]["lr2"]["rows_in"] == sum(rates)
    assert report["config"]["queries"][0]["traffic_params"] == {"file": str(trace), "format": "rates", "scale": 1.0,
                                                                "noise": 0.0}
    other_seed = _report(tmp_path, "sim", "--traffic", "trace", "--traffic-param", f"file={trace}", "--seed", "9",
                         name="9.json")
    assert _arrivals(other_seed) == _arrivals(report), "a trace replays exactly whatever the seed"
    assert main(["sim", "--config", str(tmp_path / "run.toml"), "--gpu-profile", "builtin",
                 "--report", str(tmp_path / "c.json")]) == 0
    again = json.loads((tmp_path / "c.json").read_text())
    assert again["queries"] == report["queries"], "the saved run file keeps the trace's file"


def test_a_bad_trace_or_parameter_is_a_usage_error_saying_what_to_do(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("100\n200\nlots\n")
    assert main(["sim", *BASE, "--traffic", "trace", "--traffic-param", f"file={bad}"]) == 2
    err = capsys.readouterr().err
    assert f"file {str(bad)!r} line 3: rate 'lots' is not a number; fix or remove that line" in err
    assert "Traceback" not in err
    assert main(["sim", *BASE, "--traffic", "trace", "--traffic-param", f"file={tmp_path / 'none.csv'}"]) == 2
    assert "does not exist; give file=PATH of a trace" in capsys.readouterr().err
    assert main(["sim", *BASE, "--traffic", "trace"]) == 2
    assert "traffic 'trace' needs file=PATH" in capsys.readouterr().err
    assert main(["sim", *BASE, "--traffic", "binary", "--traffic-param", "period=soon"]) == 2
    assert "traffic 'binary': parameter 'period' must be a number, got 'soon'" in capsys.readouterr().err


def test_a_finer_arrival_period_splits_the_same_rows_into_more_datasets(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``--arrival-period 0.25``: four datasets a second holding the same rows (a Kafka topic that Spark's default
    trigger reads as often as it can), so the default trigger runs more, smaller batches; outside 0.05-1 s refused."""
    exact = ("sim", "--traffic", "binary", "--traffic-param", "noise=0", "--admission", "asap")
    second = _report(tmp_path, *exact, name="1s.json")
    quarter = _report(tmp_path, *exact, "--arrival-period", "0.25", name="q.json")
    one, four = second["queries"]["lr2"], quarter["queries"]["lr2"]
    assert (one["datasets_in"], four["datasets_in"]) == (40, 160)
    assert four["rows_in"] == one["rows_in"] and four["batches"] > one["batches"]
    assert main(["sim", *BASE, "--arrival-period", "0"]) == 2
    assert "--arrival-period must be within 0.05-1 s, got 0" in capsys.readouterr().err
