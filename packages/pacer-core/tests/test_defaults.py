"""One default per decision: the admission a stated deadline gets and the overload policy, read from
:mod:`pacer.runtime_api` by ``pacer run``/``pacer sim``, ``pacer bench`` and (pacer-spark's test) ``attach``."""

from __future__ import annotations

import argparse

from pacer.cli.run_command import add_run_arguments, config_from_args
from pacer.runtime_api import DEADLINE_ADMISSION, DEFAULT_ADMISSION, DEFAULT_OVERLOAD, QueryRun, RunConfig


def _config(*argv: str) -> RunConfig:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    return config_from_args(parser.parse_args(["--workload", "lr2", *argv]))


def test_a_stated_deadline_gets_the_deadline_admission() -> None:
    assert DEADLINE_ADMISSION == "zstream" and DEFAULT_ADMISSION == "asap"
    assert [q.admission for q in _config("--deadline", "5s").queries] == [DEADLINE_ADMISSION]
    assert [q.admission for q in _config().queries] == [DEFAULT_ADMISSION]  # no deadline: Spark's default trigger
    assert [q.admission for q in _config("--deadline", "5s", "--admission", "asap").queries] == ["asap"]


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
