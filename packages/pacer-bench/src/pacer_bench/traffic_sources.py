"""Where latency-target's traffic comes from besides pacer's own generator (``--source gen``): sources that other
packages register, so that pacer-bench imports none of them.

A source is an object registered under the entry-point group :data:`ENTRY_POINT_GROUP` (``pacer_bench.sources``;
the entry point's name is the ``--source`` value) that follows :class:`BenchSource`. pacer-bench registers
``kafka`` (:mod:`pacer_bench.kafka_source`, with its ``kafka`` extra): every configuration a
``pacer run --source kafka`` on a fresh topic.
A source adds its own flags to ``pacer bench`` (:meth:`BenchSource.configure`); their values reach it as the
``options`` of :meth:`BenchSource.open`. It runs on the runtime it names (:attr:`BenchSource.runtime`), found
through the ``pacer_runtimes`` hook like any other. Sources are found whatever ``PACER_PLUGINS`` says (it
selects ``pacer`` plugins, and a source is one only once ``--source`` names it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from pacer import Runtime
from pacer.plugins import PluginManager

#: The entry-point group latency-target's sources are registered under.
ENTRY_POINT_GROUP = "pacer_bench.sources"
#: The ``--source`` of pacer's own generated traffic (no source object: the runtime generates it).
GENERATED = "gen"
#: What to install for a source pacer-bench knows of when it is not installed (added to the error).
INSTALL_HINTS = {"kafka": " (from the checkout: pip install ./integrations/pacer-kafka, or the README's development "
                          "install)"}


class UnknownSourceError(ValueError):
    """A ``--source`` that no installed package registers (or whose registration fails to load)."""


@runtime_checkable
class BenchSource(Protocol):
    """A latency-target source (see the module's docstring).

    :ivar name: the ``--source`` value.
    :ivar runtime: the runtime every configuration runs on with this source (``pacer_runtimes``).
    :ivar help: what ``--source NAME`` does, for ``pacer bench --help``.
    :ivar summary: what the scenario's summary line adds when this source ran (starts with ``, ``).
    :ivar warm_up_message: the progress line while :meth:`warm_up` runs.

    A source may also set ``statics_at_deadlines = True`` (read with ``getattr``, default False): latency-target's
    static triggers are then the engine's trigger at each deadline, the baseline a user of that source runs,
    instead of the plan's intervals.
    """

    name: str
    runtime: str
    help: str
    summary: str
    warm_up_message: str

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """Add this source's own flags (their values are :meth:`open`'s ``options``, by ``dest``)."""

    def open(self, options: Mapping[str, Any]) -> AbstractContextManager[Any]:
        """What every run of one bench invocation shares (e.g. a broker), entered once and left at the end."""

    def warm_up(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any) -> None:
        """A run before the first measured one, not measured (or nothing)."""

    def run_one(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any, *, repetition: int) -> tuple[dict[str, Any], bool]:
        """One configuration (a :class:`pacer_bench.scenarios.Config`) once: its report, figures where the tables
        read them, and whether it failed."""


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    return sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def source_names() -> list[str]:
    """The names of the installed sources (without loading them), ``gen`` not included."""
    return sorted({ep.name for ep in _entry_points() if ep.name != GENERATED})


def load_sources(*, warn: bool = True) -> dict[str, BenchSource]:
    """Every installed source, by name. One that fails to load is left out (with a warning on stderr when
    ``warn``): ``pacer bench`` still runs on the others."""
    found: dict[str, BenchSource] = {}
    for ep in _entry_points():
        if ep.name == GENERATED or ep.name in found:
            continue
        try:
            source = ep.load()
        except Exception as exc:
            if warn:
                dist = ep.dist.name if ep.dist is not None else "an unknown distribution"
                print(f"pacer bench: warning: source {ep.name!r} ({ep.value}) from {dist} failed to load: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        found[ep.name] = source
    return found


def find_source(name: str) -> BenchSource:
    """The installed source called ``name``.

    :raises UnknownSourceError: none is installed under that name.
    """
    sources = load_sources(warn=False)
    if name not in sources:
        installed = ", ".join([GENERATED, *sorted(sources)])
        hint = INSTALL_HINTS.get(name, "")
        raise UnknownSourceError(f"unknown --source {name!r}: no installed package registers it under the "
                                 f"{ENTRY_POINT_GROUP!r} entry points{hint}. Installed sources: {installed}")
    return sources[name]
