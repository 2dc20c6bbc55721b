"""pacer's ``spark`` plugin: the ``pacer run`` subcommand."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import hookimpl
from pacer.cli import Command


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer run``."""
    from pacer_spark.cli import RUN_COMMAND

    return [RUN_COMMAND]
