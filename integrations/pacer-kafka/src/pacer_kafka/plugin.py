"""pacer's ``kafka`` plugin: the ``pacer kafka`` and ``pacer produce`` subcommands."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import hookimpl
from pacer.cli import Command


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer kafka`` and ``pacer produce``."""
    from pacer_kafka.cli import KAFKA_COMMAND, PRODUCE_COMMAND

    return [KAFKA_COMMAND, PRODUCE_COMMAND]
