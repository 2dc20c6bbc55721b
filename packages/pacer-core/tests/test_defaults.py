"""One default per decision: the admission a stated deadline gets and the overload policy, read from
:mod:`pacer.runtime_api` by ``pacer run``/``pacer sim``, ``pacer bench`` and (pacer-spark's test) ``attach``."""

from __future__ import annotations

import argparse

import pytest

from pacer.cli.run_command import add_run_arguments, config_from_args
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.runtime_api import DEADLINE_ADMISSION, DEFAULT_ADMISSION, DEFAULT_OVERLOAD, QueryRun, RunConfig


def _config(*argv: str, pm: PluginManager | None = None) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return config_from_args(parser.parse_args(["--workload", "lr2", *argv]), pm=pm)


def test_a_stated_deadline_gets_the_deadline_admission() -> None:
    assert DEADLINE_ADMISSION == "zstream" and DEFAULT_ADMISSION == "asap"
    assert [q.admission for q in _config("--deadline", "5s").queries] == [DEADLINE_ADMISSION]
    assert [q.admission for q in _config().queries] == [DEFAULT_ADMISSION]  # no deadline: Spark's default trigger
    assert [q.admission for q in _config("--deadline", "5s", "--admission", "asap").queries] == ["asap"]


def test_without_the_deadline_admission_installed_a_deadline_runs_spark_s_trigger_saying_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    """As ``attach`` does (pacer-spark's ``runtime.attach``): the deadline's default is used where installed."""
    assert [q.admission for q in _config("--deadline", "5s", pm=get_plugin_manager()).queries] == [DEADLINE_ADMISSION]
    assert capsys.readouterr().err == ""
    baselines = get_plugin_manager(entry_points=False)
    two = _config("--deadline", "5s", "--workload", "cm1", pm=baselines).queries
    assert [q.admission for q in two] == [DEFAULT_ADMISSION] * 2
    said = capsys.readouterr().err  # once for the run, not once per query
    assert said.count("'zstream' (pacer's default for a deadline) is not installed, so Spark's default trigger (asap) "
                      "runs: pip install ./strategies/pacer-zstream from the checkout, or name one with --admission") \
        == 1, said
    assert [q.admission for q in _config("--deadline", "5s", "--admission", "pid", pm=baselines).queries] == ["pid"]


def test_overload_keeps_by_default_everywhere() -> None:
    assert DEFAULT_OVERLOAD == "keep"
    assert _config().overload == _config("--deadline", "5s").overload == DEFAULT_OVERLOAD
    assert RunConfig((QueryRun("lr2"),)).overload == DEFAULT_OVERLOAD
    assert QueryRun("lr2").admission == DEFAULT_ADMISSION


def test_help_texts_name_the_same_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert f"default {DEADLINE_ADMISSION} with --deadline" in text and f"default {DEFAULT_OVERLOAD} for" in text
