"""The Controller's public read API: read-only views of a query and of a pending batch.

Runtimes, reports, tools and tests read a Controller through these and change it only through its
methods (``arrive``, ``poll``, ``schedule``, ``start``, ``complete``, ``record_enactment``); its
state (:class:`pacer.controller_state.ControllerState`) is private. A view reads that state each time it
is asked (nothing is copied when it is made); what it returns cannot change the Controller.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from pacer.controller_state import ControllerState
from pacer.engine_profile import EngineProfile
from pacer.model import Dataset, MicroBatch, Placement, QuerySpec
from pacer.query_state import QueryState, RunningBatch


@dataclass(frozen=True)
class OverloadStatus:
    """A query's overload so far (:mod:`pacer.overload`).

    :ivar overloaded: whether the query is overloaded at its last check.
    :ivar overloaded_s: seconds overloaded up to that check.
    :ivar episodes: how many times it became overloaded.
    :ivar checked_at: the clock at the last check (None before any).
    :ivar periods: the most recent periods overloaded, ``(start, end)`` (end None while still on).
    :ivar strained: whether the query is near overload at its last check (served at once under ``keep``).
    """

    overloaded: bool
    overloaded_s: float
    episodes: int
    checked_at: float | None
    periods: tuple[tuple[float, float | None], ...] = ()
    strained: bool = False

    def until(self, end: float) -> float:
        """Seconds overloaded up to ``end`` (an overload still on at ``end`` counts until then)."""
        if self.overloaded and self.checked_at is not None and end > self.checked_at:
            return self.overloaded_s + end - self.checked_at
        return self.overloaded_s


@dataclass(frozen=True)
class CatchUpStatus:
    """A query's catch-up so far (:mod:`pacer.catch_up`).

    :ivar enabled: whether its admission strategy lets the Controller catch up.
    :ivar active: whether an episode is on.
    :ivar seconds: seconds in finished episodes; ``rows``/``datasets``: what the catch-up batches took.
    :ivar episodes: how many episodes began.
    :ivar since: when the episode on began (None when none is).
    """

    enabled: bool
    active: bool
    seconds: float
    episodes: int
    rows: int
    datasets: int
    since: float | None

    def until(self, end: float) -> float:
        """Seconds in catch-up up to ``end`` (an episode still on counts until then)."""
        return self.seconds + (max(0.0, end - self.since) if self.since is not None else 0.0)


class QueryView:
    """A read-only view of one registered query (``Controller.query(id)``)."""

    __slots__ = ("_q", "_state")

    def __init__(self, q: QueryState, state: ControllerState) -> None:
        self._q = q
        self._state = state

    @property
    def id(self) -> str:
        """The query's id."""
        return self._q.spec.id

    @property
    def spec(self) -> QuerySpec:
        """Its spec (DAG, window, deadline, partitions); immutable."""
        return self._q.spec

    @property
    def admission(self) -> str:
        """The admission strategy chosen for it."""
        return self._q.selected["admission"]

    @property
    def placement(self) -> str:
        """The placement strategy chosen for it."""
        return self._q.selected["placement"]

    @property
    def selected(self) -> Mapping[str, str]:
        """Decision -> chosen strategy (``admission``, ``placement``)."""
        return MappingProxyType(self._q.selected)

    @property
    def params(self) -> Mapping[str, Mapping[str, Any]]:
        """Strategy name -> its resolved parameters."""
        return MappingProxyType({name: MappingProxyType(p) for name, p in self._q.params.items()})

    @property
    def states(self) -> Mapping[str, Any]:
        """Strategy name -> its per-query state (for inspection; strategies own them)."""
        return MappingProxyType(self._q.states)

    @property
    def buffered(self) -> tuple[Dataset, ...]:
        """Datasets waiting for admission, oldest first."""
        return tuple(self._q.buffer)

    @property
    def buffered_count(self) -> int:
        """How many datasets wait for admission."""
        return len(self._q.buffer)

    @property
    def in_flight(self) -> str | None:
        """The id of its admitted batch that has not completed (at most one), or None."""
        return self._q.in_flight

    @property
    def in_flight_started(self) -> bool:
        """True when its in-flight batch has started running (``Controller.start``)."""
        run = self._state.running.get(self._q.in_flight) if self._q.in_flight is not None else None
        return run is not None and run.started_at is not None

    @property
    def admitted(self) -> int:
        """How many batches it has admitted (the sequence number of the last one)."""
        return self._q.seq

    @property
    def fallbacks(self) -> int:
        """Decisions for it that fell back to a baseline because its strategy failed."""
        return self._q.fallbacks

    @property
    def shed(self) -> int:
        """Datasets dropped for it by the overload policy or its admission strategy."""
        return self._q.shed

    @property
    def max_rows(self) -> int:
        """Its read cap in rows per batch (0: none)."""
        return self._q.max_rows

    @property
    def max_bytes(self) -> int:
        """Its read cap in bytes per batch (0: none)."""
        return self._q.max_bytes

    @property
    def overload(self) -> OverloadStatus:
        """Its overload so far."""
        o = self._q.overload
        periods = tuple((float(start or 0.0), end) for start, end in o.periods)
        return OverloadStatus(o.overloaded, o.overloaded_s, o.episodes, o.checked_at, periods, o.strained)

    @property
    def catch_up(self) -> CatchUpStatus:
        """Its catch-up so far (:mod:`pacer.catch_up`)."""
        c = self._q.catch_up
        return CatchUpStatus(c.enabled, c.active, c.seconds, c.episodes, c.rows, c.datasets, c.active_since)

    @property
    def engine_profile(self) -> EngineProfile | None:
        """What the engine measured its batches to cost, where a profile was given (:mod:`pacer.engine_profile`)."""
        return self._q.engine_profile

    @property
    def service_time(self) -> dict[str, float | int]:
        """Its service-time model's fitted parts (``fixed_ms``, ``per_mb_ms``, ``margin``, ``observations``)."""
        return self._q.service.describe()


@dataclass(frozen=True)
class BatchView:
    """A read-only view of an admitted batch that has not completed (``Controller.batch(id)``).

    :ivar batch: the batch (its datasets, placement with its enactment, estimate).
    :ivar started_at: when it started running, None while it waits.
    :ivar interval_s: seconds since the query's previous admission.
    """

    batch: MicroBatch
    started_at: float | None
    interval_s: float

    @property
    def id(self) -> str:
        """The batch id."""
        return self.batch.id

    @property
    def query_id(self) -> str:
        """The query it belongs to."""
        return self.batch.query_id

    @property
    def started(self) -> bool:
        """True once it started running."""
        return self.started_at is not None

    @property
    def placement(self) -> Placement | None:
        """Its placement (with ``enacted`` and ``note`` as recorded)."""
        return self.batch.placement

    @classmethod
    def of(cls, run: RunningBatch) -> BatchView:
        """The view of a pending batch."""
        return cls(run.batch, run.started_at, run.interval_s)


class QueryViews(Mapping[str, QueryView]):
    """Query id -> :class:`QueryView`, read only, in registration order (``Controller.queries``)."""

    __slots__ = ("_state",)

    def __init__(self, state: ControllerState) -> None:
        self._state = state

    def __getitem__(self, query_id: str) -> QueryView:
        return QueryView(self._state.query(query_id), self._state)

    def __iter__(self) -> Iterator[str]:
        return iter(self._state.queries)

    def __len__(self) -> int:
        return len(self._state.queries)
