"""``pacer bench --overload`` defaults to pacer's one overload default, and its help says so."""

from __future__ import annotations

import argparse

from pacer.runtime_api import DEFAULT_OVERLOAD
from pacer_bench.plugin import _configure


def test_bench_overload_default_is_pacers() -> None:
    parser = argparse.ArgumentParser()
    _configure(parser)
    action = next(a for a in parser._actions if "--overload" in a.option_strings)
    assert action.default == DEFAULT_OVERLOAD == "keep"
    text = " ".join(parser.format_help().split())
    assert "keep (default, as everywhere in pacer" in text and "pacer's default for users" not in text
