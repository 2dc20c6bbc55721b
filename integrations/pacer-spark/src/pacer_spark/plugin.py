"""pacer's ``spark`` plugin: the ``pacer run`` and ``pacer demo`` subcommands."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import hookimpl
from pacer.cli import Command


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer run`` and ``pacer demo``."""
    from pacer_spark.cli import RUN_COMMAND
    from pacer_spark.demo import DEMO_COMMAND

    return [RUN_COMMAND, DEMO_COMMAND]
