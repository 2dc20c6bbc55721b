"""What a ``pacer`` subcommand is, and the one error a command reports as a usage error.

A leaf module: the command line (:mod:`pacer.cli`), core's own commands (:mod:`pacer.cli.core_commands`) and every
plugin's commands import it, and it imports nothing of pacer's. Library code never raises :class:`UsageError`:
it raises ``ValueError`` (or its own subclass of it) naming the problem, and the command that called it turns
that into a usage error.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """A ``pacer`` subcommand, contributed through the ``pacer_cli_commands`` hook.

    :param name: the word after ``pacer``.
    :param help: one line for ``pacer --help``.
    :param configure: adds the subcommand's arguments to its parser.
    :param run: runs it with the parsed arguments and the plugin manager; returns the exit code.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Any], int]


class UsageError(Exception):
    """Bad arguments, detected before any runtime starts; the message says what to do. Raised by commands only."""
