"""Plugin discovery and strategy lookup.

Installed packages register through the ``pacer`` entry-point group. The
baselines in :mod:`pacer.baselines` are registered by default, ``trylast``.

Environment:

``PACER_PLUGINS``
    Comma-separated entry-point names or distribution names to load; others
    are ignored. Empty string: load none (baselines only). Unset: load all.
``PACER_TRACE``
    Set to 1 to log every hook call and result at DEBUG level on the
    ``pacer.trace`` logger.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import os
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import pluggy

from pacer import hookspecs
from pacer.runtime_api import DEADLINE_ADMISSION, DEFAULT_ADMISSION, default_admission
from pacer.strategy import StrategyInfo

if TYPE_CHECKING:
    from pacer.runtime_api import Runtime

ENTRY_POINT_GROUP = "pacer"
PLUGINS_ENV = "PACER_PLUGINS"
TRACE_ENV = "PACER_TRACE"
DEFAULT_PLUGINS: tuple[str, ...] = (
    "pacer.baselines.admission",
    "pacer.baselines.scheduling",
    "pacer.baselines.placement",
    "pacer.baselines.scaling",
    "pacer.baselines.scheduled",
    "pacer.baselines.dstream_ratio",
)

log = logging.getLogger("pacer.plugins")


class UnknownStrategyError(LookupError):
    """A strategy name that no installed plugin provides, or that several provide."""


class UnknownRuntimeError(LookupError):
    """A runtime name that no installed plugin provides, or that several provide."""


class PluginLoadError(ImportError):
    """An installed plugin's entry point could not be imported."""


def _core_version() -> str:
    try:
        return importlib.metadata.version("pacer-core")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - source checkout
        return "0+unknown"


def _allowed_plugins() -> set[str] | None:
    raw = os.environ.get(PLUGINS_ENV)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


class PluginManager(pluggy.PluginManager):
    """pluggy's manager plus pacer's strategy catalogue."""

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        self._catalogue: list[StrategyInfo] | None = None
        self._dist_of: dict[int, tuple[str, str]] = {}

    def register_default_plugins(self) -> None:
        """Register pacer's built-in baselines. (Core's own subcommands are the command line's:
        :func:`pacer.cli.build_parser` registers :mod:`pacer.cli.core_commands`.)"""
        for name in DEFAULT_PLUGINS:
            module = importlib.import_module(name)
            self.register(module, name=name)
            self._dist_of[id(module)] = ("pacer-core", _core_version())
        self._catalogue = None

    def load_entry_points(self, allowed: Iterable[str] | None = None) -> list[str]:
        """Load plugins of the ``pacer`` entry-point group, honouring ``PACER_PLUGINS``.

        :param allowed: entry-point or distribution names to load (overrides the
            environment); None loads all.
        :return: the names of the entry points loaded.
        """
        only = set(allowed) if allowed is not None else _allowed_plugins()
        loaded = []
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            dist = ep.dist.name if ep.dist is not None else ""
            if only is not None and ep.name not in only and dist not in only:
                continue
            if self.get_plugin(ep.name) is not None or self.is_blocked(ep.name):
                continue
            try:
                plugin = ep.load()
            except Exception as exc:
                raise PluginLoadError(
                    f"pacer plugin {ep.name!r} ({ep.value}) from {dist or 'an unknown distribution'} failed to load: "
                    f"{type(exc).__name__}: {exc}. Reinstall or uninstall it, or leave it out with {PLUGINS_ENV}."
                ) from exc
            self.register(plugin, name=ep.name)
            version = ep.dist.version if ep.dist is not None else ""
            self._dist_of[id(plugin)] = (dist, version)
            loaded.append(ep.name)
        self.check_pending()
        self._catalogue = None
        return loaded

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        """Register a plugin object; invalidates the strategy catalogue."""
        result = super().register(plugin, name)
        self._catalogue = None
        return result

    def per_plugin_callers(self, name: str) -> list[tuple[str, Any, Any]]:
        """``(plugin name, plugin, caller)`` for every plugin implementing hook ``name``, in registration order.

        Each caller is a pluggy subset hook caller that runs that one plugin's implementation (plus any
        hook wrappers) through the plugin manager, so ``PACER_TRACE`` and wrappers see every call, while
        the caller can tell which plugin answered or raised.
        """
        hook = getattr(self.hook, name)
        impls = hook.get_hookimpls()
        wrappers = {id(i.plugin) for i in impls if i.hookwrapper or i.wrapper}
        plugins = [p for _, p in self.list_name_plugin()]
        callers = []
        for impl in reversed(impls):  # registration order
            if impl.hookwrapper or impl.wrapper:
                continue
            others = [p for p in plugins if p is not impl.plugin and id(p) not in wrappers]
            callers.append((impl.plugin_name, impl.plugin, self.subset_hook_caller(name, remove_plugins=others)))
        return callers

    def strategies(self) -> list[StrategyInfo]:
        """Every declared strategy, with its package and version filled in."""
        if self._catalogue is None:
            found: list[StrategyInfo] = []
            for _, plugin, caller in self.per_plugin_callers("pacer_strategies"):
                dist, version = self._dist_of.get(id(plugin), ("", ""))
                declared = [info for answer in caller() for info in cast("Iterable[StrategyInfo]", answer or ())]
                for info in declared:
                    found.append(replace(info, package=info.package or dist, version=info.version or version))
            self._catalogue = found
        return list(self._catalogue)

    def runtimes(self) -> dict[str, Runtime]:
        """Every runtime installed plugins declare through ``pacer_runtimes``, by name.

        :raises UnknownRuntimeError: when two plugins declare the same name.
        """
        found: dict[str, Runtime] = {}
        for plugin_name, _, caller in self.per_plugin_callers("pacer_runtimes"):
            for runtime in [r for answer in caller() for r in cast("Iterable[Runtime]", answer or ())]:
                if runtime.name in found:
                    raise UnknownRuntimeError(
                        f"runtime {runtime.name!r} is provided twice (again by plugin {plugin_name!r}); "
                        f"restrict the plugins that load with {PLUGINS_ENV} or uninstall one"
                    )
                found[runtime.name] = runtime
        return found

    def find_runtime(self, name: str) -> Runtime:
        """The installed runtime called ``name``.

        :raises UnknownRuntimeError: when none is; the message lists what is installed and what to do.
        """
        runtimes = self.runtimes()
        if name not in runtimes:
            installed = ", ".join(sorted(runtimes)) or "none"
            hint = {"sim": "from the checkout: pip install ./packages/pacer-sim",
                    "spark": "from the checkout: pip install ./integrations/pacer-spark"}.get(name,
                                                                                             "install its package")
            raise UnknownRuntimeError(
                f"unknown runtime {name!r}: no installed package provides it ({hint}, or check {PLUGINS_ENV}). "
                f"Installed runtimes: {installed}"
            )
        return runtimes[name]

    def describe_installed(self, decision: str | None = None) -> str:
        """A one-line list of installed strategies, for error messages."""
        names = sorted(
            {f"{s.name} ({s.package or '?'})" for s in self.strategies() if decision is None or decision in s.provides}
        )
        return ", ".join(names) or "none"

    def provides(self, name: str, decision: str) -> bool:
        """Whether exactly one installed strategy called ``name`` provides ``decision``."""
        return sum(1 for s in self.strategies() if s.name == name and decision in s.provides) == 1

    def default_admission(self, deadline_stated: bool) -> tuple[str, str | None]:
        """The admission a query that names none gets here, and why it is not pacer's default where it is not:
        :func:`~pacer.runtime_api.default_admission`, or where a deadline's (zStream) is not installed, Spark's
        default trigger with the reason (``attach`` logs it, ``pacer run`` prints it, each adding how to name one)."""
        admission = default_admission(deadline_stated)
        if admission == DEADLINE_ADMISSION and not self.provides(admission, "admission"):
            return DEFAULT_ADMISSION, (f"a deadline is stated and no admission named; {admission!r} (pacer's default "
                                       f"for a deadline) is not installed, so Spark's default trigger "
                                       f"({DEFAULT_ADMISSION}) runs: pip install ./strategies/pacer-zstream from "
                                       "the checkout")
        return admission, None

    def find(self, name: str, decision: str) -> StrategyInfo:
        """The one strategy called ``name`` that provides ``decision``.

        :raises UnknownStrategyError: when none or several match; the message
            lists what is installed and what to do.
        """
        matches = [s for s in self.strategies() if s.name == name and decision in s.provides]
        if not matches:
            other = [s for s in self.strategies() if s.name == name]
            hint = (
                f"{name!r} is installed but provides only {sorted(other[0].provides)}"
                if other
                else f"no installed package provides {name!r} (install it, or check {PLUGINS_ENV})"
            )
            raise UnknownStrategyError(
                f"unknown {decision} strategy {name!r}: {hint}. "
                f"Installed {decision} strategies: {self.describe_installed(decision)}"
            )
        if len(matches) > 1:
            packages = ", ".join(sorted(s.package or "?" for s in matches))
            raise UnknownStrategyError(
                f"ambiguous {decision} strategy {name!r}: provided by {packages}. "
                f"Restrict the plugins that load with {PLUGINS_ENV}=<package> or uninstall one."
            )
        return matches[0]


def _enable_tracing(pm: PluginManager) -> None:
    trace_log = logging.getLogger("pacer.trace")

    def before(hook_name: str, impls: Any, kwargs: Any) -> None:
        trace_log.debug("call %s(%s)", hook_name, ", ".join(sorted(kwargs)))

    def after(outcome: Any, hook_name: str, impls: Any, kwargs: Any) -> None:
        trace_log.debug(
            "result %s -> %r", hook_name, outcome.get_result() if outcome.exception is None else outcome.exception
        )

    pm.add_hookcall_monitoring(before, after)


def get_plugin_manager(*, entry_points: bool = True, allowed: Iterable[str] | None = None) -> PluginManager:
    """A plugin manager with the baselines and (by default) every installed plugin.

    :param entry_points: load the ``pacer`` entry-point group.
    :param allowed: restrict entry points to these names (overrides ``PACER_PLUGINS``).
    """
    pm = PluginManager()
    pm.register_default_plugins()
    if entry_points:
        pm.load_entry_points(allowed)
    else:
        pm.check_pending()
    if os.environ.get(TRACE_ENV, "") not in ("", "0"):
        _enable_tracing(pm)
    return pm
