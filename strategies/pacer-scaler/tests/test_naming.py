"""``deadline`` is both the latency target and this scaler's name: every place that offers the scaler says which."""

from __future__ import annotations

import argparse
from pathlib import Path

from pacer.cli.run_command import add_run_arguments
from pacer_scaler.plugin import pacer_strategies

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_scaler_is_still_chosen_as_deadline_and_says_it_is_not_the_target() -> None:
    (info,) = pacer_strategies()
    assert info.name == "deadline" and info.provides == frozenset({"scaling"})  # saved runs and confs keep working
    assert info.summary.startswith("The deadline scaler (scale=deadline; the target is deadline=)")


def test_the_readme_and_pacer_run_s_help_tell_the_two_apart() -> None:
    text = " ".join(README.read_text().split())
    assert "**Two things called deadline.**" in text
    assert 'attach(deadline="10s")' in text and 'attach(scale="deadline", executors=(1, 8))' in text
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    help_text = " ".join(parser.format_help().split())
    assert "deadline is pacer's deadline scaler, which holds the fewest executors that meet each query's --deadline" \
        in help_text
