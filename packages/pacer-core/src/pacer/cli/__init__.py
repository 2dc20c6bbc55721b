"""The ``pacer`` command line: ``main`` and its parser (``program``), what a subcommand is (``commands``), core's own
subcommands (``core_commands``: ``pacer strategies``, ``pacer run``) and the run command's flags and parsers
(``run_command``). Every subcommand comes through the ``pacer_cli_commands`` hook."""

from pacer.cli.commands import Command, UsageError
from pacer.cli.program import build_parser, main

__all__ = ["Command", "UsageError", "build_parser", "main"]
