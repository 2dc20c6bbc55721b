"""pacer-sim's plugin: the ``sim`` runtime (``pacer run --runtime sim``), ``pacer sim``, its alias, and ``pacer advise``
(what pacing would do for a query observed without it)."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import Runtime, hookimpl
from pacer.cli import Command
from pacer.cli.run_command import run_alias_command
from pacer_sim.runtime import SIM_RUNTIME


@hookimpl
def pacer_runtimes() -> Sequence[Runtime]:
    """The simulator."""
    return [SIM_RUNTIME]


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer sim``: ``pacer run --runtime sim`` with the same flags and output; ``pacer advise RECORDING``."""
    from pacer_sim.advise import ADVISE_COMMAND

    return [run_alias_command("sim", SIM_RUNTIME, "run strategies on the deterministic simulator "
                              "(an alias of pacer run --runtime sim)"), ADVISE_COMMAND]
