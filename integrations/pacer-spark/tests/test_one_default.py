"""``attach`` and ``pacer run`` give a stated deadline the same admission and keep an overload alike: both read
:mod:`pacer.runtime_api` (no Spark session needed)."""

from __future__ import annotations

import argparse
import dataclasses

from pacer import runtime_api
from pacer.cli.run_command import add_run_arguments, config_from_args
from pacer_spark import config


def test_attach_and_pacer_run_share_the_deadline_admission() -> None:
    parser = argparse.ArgumentParser()
    add_run_arguments(parser)
    run = config_from_args(parser.parse_args(["--workload", "lr2", "--deadline", "5s"]))
    assert config.DEADLINE_ADMISSION == runtime_api.DEADLINE_ADMISSION == run.queries[0].admission


def test_attach_and_pacer_run_share_the_overload_default() -> None:
    attach = {f.name: f.default for f in dataclasses.fields(config.PacerConfig)}["overload"]
    assert attach == runtime_api.DEFAULT_OVERLOAD == runtime_api.RunConfig((runtime_api.QueryRun("lr2"),)).overload
