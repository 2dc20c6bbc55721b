"""Core's own subcommands, ``pacer strategies`` and ``pacer run``, registered as an internal plugin.

The command line (:func:`pacer.cli.build_parser`) registers :class:`CoreCommands` with the plugin manager it is
given (as pytest registers its default plugins and tox its ``internal_plugins``), so it builds every subcommand,
core's and plugins', through the same ``pacer_cli_commands`` hook; core's come first, so a plugin cannot shadow
them. The plugin manager itself knows nothing of the command line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pacer.cli.commands import Command
from pacer.cli.run_command import run_command
from pacer.dag import DECISION_KINDS
from pacer.hookspecs import hookimpl

if TYPE_CHECKING:
    from pacer.plugins import PluginManager

#: The name :class:`CoreCommands` is registered under.
PLUGIN_NAME = "pacer.cli.core_commands"


def _configure_strategies(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument(
        "--decision", choices=DECISION_KINDS, help="only strategies for this decision"
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


class CoreCommands:
    """The internal plugin: ``strategies`` and ``run`` (whose runtime flags come from the installed runtimes).

    :param pm: the plugin manager it is registered with (``pacer run`` lists its runtimes).
    """

    def __init__(self, pm: PluginManager) -> None:
        self.pm = pm

    @hookimpl(tryfirst=True)
    def pacer_cli_commands(self) -> Sequence[Command]:
        """``pacer strategies`` and ``pacer run``."""
        return (Command("strategies", "list installed strategies", _configure_strategies, _run_strategies),
                run_command(self.pm))


def register(pm: PluginManager) -> None:
    """Register core's commands with ``pm`` (once: a second call, or a plugin manager that has them, is left as is)."""
    if pm.get_plugin(PLUGIN_NAME) is None and not pm.is_blocked(PLUGIN_NAME):
        pm.register(CoreCommands(pm), name=PLUGIN_NAME)
