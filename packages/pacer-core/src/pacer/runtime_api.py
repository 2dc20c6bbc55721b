"""The runtime contract: the :class:`Runtime` protocol every runtime implements and the :class:`RunResult` it returns.

A leaf module: it imports nothing of pacer at run time (the names in its annotations only under
``TYPE_CHECKING``), so the hook specifications, the plugin manager and every runtime can import it
without an import cycle. :mod:`pacer.run` and :mod:`pacer` re-export both names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import argparse

    from pacer.controller import Controller
    from pacer.plugins import PluginManager
    from pacer.run import RunConfig

__all__ = ["RunResult", "Runtime"]


@dataclass
class RunResult:
    """What a runtime's :meth:`Runtime.run` returns.

    :ivar report: the ``pacer.report/1`` document.
    :ivar controller: the Controller that ran (read it through its views).
    :ivar status: 0, or 1 when the run did not drain or a query failed.
    :ivar notes: lines for the person who ran it, printed after the summary table.
    """

    report: dict[str, Any]
    controller: Controller
    status: int = 0
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Runtime(Protocol):
    """A runtime pacer runs on, registered through the ``pacer_runtimes`` hook.

    ``capabilities`` declares optional features: ``deterministic`` (same configuration, same
    report bytes), ``multi-query``, ``gpu`` (real or modelled GPU devices). A runtime may also have a
    ``defaults`` mapping: ``pacer run`` defaults of its own (``{"duration": 600.0}`` on the simulator).
    What a run's queries and resources leave to the runtime (``cores``/``gpus`` None) it decides.
    """

    name: str
    summary: str
    capabilities: frozenset[str]

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """Add this runtime's own flags to ``pacer run`` (in its own argument group)."""

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: PluginManager) -> RunConfig:
        """Check this runtime's flags (before anything starts) and fold them into ``config.options[name]``.

        :raises ValueError: with what to do (the command reports it as a usage error).
        """

    def run(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> RunResult:
        """Run ``config`` to completion (its traffic, then its backlog) and report it."""
