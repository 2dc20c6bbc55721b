"""Traffic parameters carry text as well as numbers (``--traffic-param file=my.csv`` for the ``trace`` pattern):
the command line reads a number when the value is one, and a run file keeps either kind."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pacer import QueryRun, RunConfig
from pacer.cli.run_command import add_run_arguments, config_from_args, traffic_value


def _config(*flags: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return config_from_args(parser.parse_args(["--workload", "lr2", *flags]))


def test_a_value_is_a_number_when_it_reads_as_one() -> None:
    assert [traffic_value(v) for v in ("30", "0.5", "1e3", "-2", "0")] == [30.0, 0.5, 1000.0, -2.0, 0.0]
    assert all(isinstance(traffic_value(v), float) for v in ("30", "0.5"))
    assert [traffic_value(v) for v in ("my.csv", "data/last-tuesday.csv", "rates", "")] == \
        ["my.csv", "data/last-tuesday.csv", "rates", ""]


def test_the_command_line_keeps_numbers_and_text() -> None:
    config = _config("--traffic", "trace", "--traffic-param", "file=my.csv", "--traffic-param", "scale=2",
                     "--traffic-param", "format = rates")
    assert dict(config.queries[0].traffic_params) == {"file": "my.csv", "scale": 2.0, "format": "rates"}
    assert dict(_config("--traffic-param", "period=30").queries[0].traffic_params) == {"period": 30.0}


TRACE_RUN = RunConfig((QueryRun("lr2", traffic="trace", traffic_params={"file": "traces/tuesday.csv", "noise": 1.0,
                                                                        "format": "timestamps"}),
                       QueryRun("cm2", traffic="binary", traffic_params={"period": 10.0, "noise": 0.0})),
                      duration=30.0, seed=3)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_run_file_keeps_text_and_numbers(tmp_path: Path, suffix: str) -> None:
    path = TRACE_RUN.save(tmp_path / f"run{suffix}")
    loaded = RunConfig.load(path)
    assert loaded == TRACE_RUN
    assert loaded.queries[0].traffic_params == {"file": "traces/tuesday.csv", "noise": 1.0, "format": "timestamps"}
    if suffix == ".toml":
        assert 'traffic_params = {"file" = "traces/tuesday.csv", "noise" = 1.0, "format" = "timestamps"}' in \
            path.read_text()


def test_an_old_run_file_still_loads(tmp_path: Path) -> None:
    """A run file written before traffic parameters could be text: numbers only."""
    (tmp_path / "old.toml").write_text(
        'schema = "pacer.run/1"\nduration = 60.0\nseed = 11\n\n[[queries]]\nworkload = "lr2"\ntraffic = "wave"\n'
        'rate = 1500.0\ntraffic_params = {"period" = 30.0, "min" = 500}\n')
    run = RunConfig.load(tmp_path / "old.toml")
    assert run.queries[0].traffic == "wave" and dict(run.queries[0].traffic_params) == {"period": 30.0, "min": 500}
