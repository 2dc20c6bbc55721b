"""How a package declares its strategies, and the context every hook call receives."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pacer.durations import parse_boolean
from pacer.model import DECISION_KINDS, QueryHistory, QuerySpec
from pacer.service_time import ServiceTimeModel


@dataclass(frozen=True, slots=True)
class Param:
    """One tunable parameter of a strategy.

    :param name: keyword name (``"rho"``).
    :param default: default value; its type is the parameter's type.
    :param doc: one line saying what it does.
    """

    name: str
    default: Any
    doc: str

    def coerce(self, value: Any) -> Any:
        """Convert ``value`` (often a string from a CLI or a Spark conf) to the default's type."""
        kind = type(self.default)
        if self.default is None or (isinstance(value, kind) and not isinstance(value, float)):
            return value
        if kind is bool:
            return parse_boolean(value, f"parameter {self.name!r} (default {self.default!r})")
        try:
            coerced = kind(value)
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(
                f"parameter {self.name!r} expects {kind.__name__} (default {self.default!r}), got {value!r}"
            ) from exc
        if kind is float and not math.isfinite(coerced) and math.isfinite(self.default):
            raise ValueError(f"parameter {self.name!r} must be a finite number (default {self.default!r}), got "
                             f"{value!r}")
        return coerced


#: Builds a strategy's state for one query (or, for a scheduler, for the whole runtime).
StateFactory = Callable[[QuerySpec | None, Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class StrategyInfo:
    """A strategy as a package declares it through ``pacer_strategies``.

    :param name: the selection name (``"zstream"``); one name may provide several decisions.
    :param provides: the decisions it implements: ``admission``, ``scheduling``, ``placement``.
    :param summary: one line saying what it does and which paper it follows.
    :param params: its parameters with defaults and docs.
    :param state: builds the per-query state object handed back as ``ctx.state``;
        None for stateless strategies (``ctx.state`` is then an empty dict).
    :param catch_up: for an admission strategy: whether the Controller forms the batches itself while the
        query's oldest data is already past its deadline (:mod:`pacer.catch_up`); False for strategies that
        stand for a fixed Spark trigger and must batch by their own rule.
    :param package: the distribution that provides it (filled in by the plugin manager).
    :param version: that distribution's version (filled in by the plugin manager).
    """

    name: str
    provides: frozenset[str]
    summary: str = ""
    params: tuple[Param, ...] = ()
    state: StateFactory | None = None
    catch_up: bool = True
    package: str = ""
    version: str = ""

    def __post_init__(self) -> None:
        unknown = set(self.provides) - set(DECISION_KINDS)
        if unknown or not self.provides:
            raise ValueError(
                f"strategy {self.name!r}: provides must be a non-empty subset of {DECISION_KINDS}, got {sorted(self.provides)}"
            )
        names = [p.name.lower() for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"strategy {self.name!r}: parameter names must differ in more than case (Spark hands a "
                             f"source's options lowercased), got {sorted(p.name for p in self.params)}")

    def resolve_params(self, given: Mapping[str, Any] | None) -> dict[str, Any]:
        """Defaults overlaid with ``given``, its names read whatever their case (as Spark reads an option's: the JVM
        hands ``pacer.param.admission.maxRows`` over as ``maxrows``); an unknown name raises with the known ones."""
        known = {p.name.lower(): p for p in self.params}
        out = {p.name: p.default for p in self.params}
        for key, value in (given or {}).items():
            param = known.get(str(key).lower())
            if param is None:
                raise ValueError(f"strategy {self.name!r} has no parameter {key!r}; its parameters are "
                                 f"{sorted(p.name for p in self.params) or 'none'}")
            out[param.name] = param.coerce(value)
        return out

    def as_json(self) -> dict[str, Any]:
        """The ``pacer strategies --json`` form."""
        return {
            "name": self.name,
            "provides": sorted(self.provides),
            "package": self.package,
            "version": self.version,
            "summary": self.summary,
            "params": [{"name": p.name, "default": p.default, "doc": p.doc} for p in self.params],
        }


@dataclass(slots=True)
class StrategyContext:
    """Handed to every hook call: who is chosen, with which parameters and state.

    Implementations answer only when they are the chosen strategy::

        @hookimpl
        def pacer_admit(ctx, buffer, now, system):
            if ctx.chosen != "zstream":
                return None
            return ctx.state.admit(buffer, now, system, ctx)

    :ivar decision: ``admission``, ``scheduling``, ``placement`` or ``feedback``.
    :ivar chosen: the strategy name selected for this decision (for feedback: "").
    :ivar query: the query the call is about (None for scheduling).
    :ivar params: the chosen strategy's parameters, defaults applied.
    :ivar state: the chosen strategy's state for this query (built by its factory).
    :ivar history: the query's completed batches (an empty history for scheduling).
    :ivar selected: decision kind -> strategy name in force for this query.
    :ivar states: strategy name -> state, for every strategy selected for this query.
    :ivar service: the query's service-time model (admission → completion as ``fixed + per-byte``,
        with a safety margin), learned by the Controller from every completed batch; an unfitted
        model for scheduling.
    """

    decision: str
    chosen: str
    query: QuerySpec | None
    params: Mapping[str, Any]
    state: Any
    history: QueryHistory
    selected: Mapping[str, str] = field(default_factory=dict)
    states: Mapping[str, Any] = field(default_factory=dict)
    service: ServiceTimeModel = field(default_factory=ServiceTimeModel)

    def state_of(self, name: str) -> Any:
        """The state of strategy ``name`` for this query, or None when it is not selected."""
        return self.states.get(name)
