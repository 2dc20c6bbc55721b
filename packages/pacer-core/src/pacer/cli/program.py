"""The ``pacer`` command line: every subcommand comes through the ``pacer_cli_commands`` hook, core's own
(``strategies``, ``run``: :mod:`pacer.cli.core_commands`, an internal plugin) first; runtimes for ``pacer run`` come
through ``pacer_runtimes`` (:mod:`pacer.cli.run_command`).

``Command`` and ``UsageError`` live in the leaf module :mod:`pacer.cli.commands`; they are importable from here too.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pacer.cli import core_commands
from pacer.cli.commands import Command, UsageError
from pacer.plugins import PluginLoadError, PluginManager, get_plugin_manager

__all__ = ["Command", "UsageError", "build_parser", "main"]


def build_parser(pm: PluginManager) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every core and plugin subcommand (core's are registered with ``pm`` here)."""
    core_commands.register(pm)
    parser = argparse.ArgumentParser(
        prog="pacer",
        description="Adaptive micro-batching, deadline-aware scheduling and CPU/GPU placement for stream processing.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, Command] = {}
    for command in (c for group in pm.hook.pacer_cli_commands() for c in group):
        if command.name in commands:
            continue
        commands[command.name] = command
        command.configure(sub.add_parser(command.name, help=command.help, description=command.help))
    return parser, commands


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pacer`` script."""
    try:
        pm = get_plugin_manager()
    except PluginLoadError as exc:
        print(f"pacer: error: {exc}", file=sys.stderr)
        return 2
    parser, commands = build_parser(pm)
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not args.command:
        parser.print_help()
        return 2
    try:
        return commands[args.command].run(args, pm)
    except UsageError as exc:
        print(f"pacer {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"pacer {args.command}: interrupted", file=sys.stderr)
        return 130
