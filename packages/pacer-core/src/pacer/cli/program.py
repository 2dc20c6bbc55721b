"""The ``pacer`` command line: every subcommand comes through the ``pacer_cli_commands`` hook, core's own
(``strategies``, ``run``: :mod:`pacer.cli.core_commands`, an internal plugin) first; runtimes for ``pacer run`` come
through ``pacer_runtimes`` (:mod:`pacer.cli.run_command`).

``Command`` and ``UsageError`` live in the leaf module :mod:`pacer.cli.commands`; they are importable from here too.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from collections.abc import Sequence
from typing import Any

from pacer.cli import core_commands
from pacer.cli.commands import Command, UsageError
from pacer.plugins import PluginLoadError, PluginManager, get_plugin_manager

__all__ = ["Command", "UsageError", "build_parser", "main", "version_text"]


def installed_distributions() -> dict[str, str]:
    """Every installed pacer distribution (``pacer-*``; the workspace root left out) and its version, by name."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").strip().lower().replace("_", "-")
        if name.startswith("pacer-") and name != "pacer-workspace" and name not in found:
            found[name] = dist.version
    return dict(sorted(found.items()))


def version_text() -> str:
    """What ``pacer --version`` prints: pacer-core's version (:data:`pacer.__version__`) on the first line, then
    each installed pacer distribution and its version, one a line."""
    from pacer import __version__

    lines = [f"pacer {__version__}"]
    lines += [f"  {name} {version}" for name, version in installed_distributions().items()]
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` (read when asked, not at every start) and exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit(0)


def build_parser(pm: PluginManager) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    """The top-level parser with every core and plugin subcommand (core's are registered with ``pm`` here)."""
    core_commands.register(pm)
    parser = argparse.ArgumentParser(
        prog="pacer",
        description="Adaptive micro-batching, deadline-aware scheduling and CPU/GPU placement for stream processing.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--version", action=_VersionAction,
                        help="print pacer's version and every installed pacer distribution's, then exit")
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
    args_list = list(sys.argv[1:] if argv is None else argv)
    leading = next((i for i, arg in enumerate(args_list) if not arg.startswith("-")), len(args_list))
    if "--version" in args_list[:leading]:  # before the plugins load: a broken plugin does not hide the versions
        print(version_text())
        return 0
    try:
        pm = get_plugin_manager()
    except PluginLoadError as exc:
        print(f"pacer: error: {exc}", file=sys.stderr)
        return 2
    parser, commands = build_parser(pm)
    args = parser.parse_args(args_list)
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
