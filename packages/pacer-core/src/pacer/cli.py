"""The ``pacer`` command line. Installed packages add subcommands through ``pacer_cli_commands``
and runtimes for ``pacer run`` through ``pacer_runtimes`` (:mod:`pacer.run_cli`)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pacer.plugins import PluginLoadError, PluginManager, get_plugin_manager


@dataclass(frozen=True)
class Command:
    """A ``pacer`` subcommand.

    :param name: the word after ``pacer``.
    :param help: one line for ``pacer --help``.
    :param configure: adds the subcommand's arguments to its parser.
    :param run: runs it with the parsed arguments and the plugin manager; returns the exit code.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, PluginManager], int]


class UsageError(Exception):
    """Bad arguments, detected before any runtime starts; the message says what to do."""


def _configure_strategies(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument(
        "--decision", choices=("admission", "scheduling", "placement"), help="only strategies for this decision"
    )


def _run_strategies(args: argparse.Namespace, pm: PluginManager) -> int:
    infos = [s for s in pm.strategies() if args.decision is None or args.decision in s.provides]
    if args.json:
        print(json.dumps([s.as_json() for s in infos], indent=2))
        return 0
    rows = [(s.name, ",".join(sorted(s.provides)), f"{s.package} {s.version}", s.summary) for s in infos]
    widths = [max(len(r[i]) for r in [*rows, ("name", "provides", "package", "")]) for i in range(3)]
    print(f"{'name':<{widths[0]}}  {'provides':<{widths[1]}}  {'package':<{widths[2]}}  summary")
    pad = " " * (widths[0] + 2)
    for info, row in zip(infos, rows, strict=True):
        print(f"{row[0]:<{widths[0]}}  {row[1]:<{widths[1]}}  {row[2]:<{widths[2]}}  {row[3]}")
        for param in info.params:
            print(f"{pad}  {param.name}={param.default!r}: {param.doc}")
    print("\nSelect with --admission/--scheduler/--placement NAME; set a parameter with --param DECISION.NAME=VALUE "
          "(pacer run, pacer sim).")
    return 0


CORE_COMMANDS = (Command("strategies", "list installed strategies", _configure_strategies, _run_strategies),)


def build_parser(pm: PluginManager) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every core and plugin subcommand."""
    parser = argparse.ArgumentParser(
        prog="pacer",
        description="Adaptive micro-batching, deadline-aware scheduling and CPU/GPU placement for stream processing.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    from pacer.run_cli import run_command

    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands: dict[str, Command] = {}
    plugin_commands = [c for group in pm.hook.pacer_cli_commands() for c in group]
    for command in (*CORE_COMMANDS, run_command(pm), *plugin_commands):
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
