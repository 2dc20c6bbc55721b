"""Overload, made explicit for every admission strategy, and the read cap every admission honours.

A query is **overloaded** when its offered load exceeds what *any* batch size can
serve within its deadline. With the query's service-time model
``service(bytes) = fixed + per_byte × bytes`` (margin applied) and the arrival
rate ``r`` (bytes per second over the last ``window_s``), a batch formed every
``T`` seconds keeps up when ``fixed + per_byte × r × T ≤ T``: the shortest such
cycle is ``T* = fixed / (1 - per_byte × r)`` and then the oldest dataset of a
batch waits one cycle and is processed in another, so its latency is about
``2 T*``. The load is infeasible when ``per_byte × r ≥ 1`` (no batch size keeps
up) or ``2 T* > deadline`` (keeping up costs more than the deadline).

Then no admission strategy can keep its promise; the Controller says so (time
overloaded and episodes, in the report and the progress line) and, under the
``shed`` policy, drops the buffered datasets that can no longer meet the
deadline even alone in a batch — counted, logged, never silent — so latency
stays bounded for what is admitted. Under ``keep`` it serves the query as Spark's
default trigger would (:meth:`OverloadMonitor.eager`), and also when the query is
*strained* (its per-byte work alone, ``per_byte × r``, takes at least 80 % of the
engine: batching can save little there, and a waiting strategy would spend the slack
the next burst needs), before the model can judge when the load already looks that
heavy, and in the hold-over after an overload.

This module judges the overload (:class:`OverloadMonitor`) and caps reads (:func:`read_cap_count`); it knows
nothing of the Controller's per-query state. Acting on the judgement, shedding, is :mod:`pacer.shedding`'s.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from pacer.model import DatasetBuffer
from pacer.service_time import ServiceTimeModel

#: Shortest span of arrivals the rate estimate needs before overload is judged (seconds).
MIN_RATE_SPAN_S = 1.0
#: Completed batches the service-time model needs before overload is judged.
MIN_OBSERVATIONS = 3
#: Share of the engine the per-byte work alone may take before a query is *strained*: near overload, where batching
#: saves little and a waiting strategy would spend the slack the next burst needs.
STRAIN_UTILISATION = 0.8
#: Overload periods a monitor remembers (the most recent; totals stay exact).
RECENT_PERIODS = 64
#: The long-run arrival rate's time constant, in rate windows: what the engine must keep up with on average, bursts
#: included (a spike's minute, wave's and binary's periods).
LONG_RUN_WINDOWS = 30


@dataclass
class OverloadMonitor:
    """Detects a query's overload from its arrival rate and its service-time model.

    :param deadline: the query's latency target, seconds.
    :param window_s: the arrival rate is measured over this many recent seconds
        (default: the deadline, at least 5 s).
    """

    deadline: float
    window_s: float = 0.0
    overloaded: bool = False
    strained: bool = False
    overloaded_s: float = 0.0
    episodes: int = 0
    shed_episode: int = 0
    #: The most recent periods overloaded, ``[start, end]`` (end None while still on).
    periods: deque[list[float | None]] = field(default_factory=lambda: deque(maxlen=RECENT_PERIODS))
    _window: deque[tuple[float, int]] = field(default_factory=deque)
    _window_bytes: int = 0
    _first_arrival: float | None = None
    _last_check: float | None = None
    _long_bytes: float = 0.0  # bytes arrived, decayed with time constant LONG_RUN_WINDOWS x window_s
    _long_at: float = 0.0

    def __post_init__(self) -> None:
        if self.window_s <= 0:
            self.window_s = max(self.deadline, 5.0)

    def arrived(self, at: float, nbytes: int) -> None:
        """Count an arrival of ``nbytes`` at time ``at``."""
        if self._first_arrival is None:
            self._first_arrival = self._long_at = at
        self._window.append((at, nbytes))
        self._window_bytes += nbytes
        self._long_bytes = self._long_bytes * math.exp(-max(0.0, at - self._long_at) / self._long_s) + nbytes
        self._long_at = max(self._long_at, at)

    @property
    def _long_s(self) -> float:
        return LONG_RUN_WINDOWS * self.window_s

    def long_run_rate_bytes_per_s(self, now: float) -> float | None:
        """Bytes per second on average over the last ``LONG_RUN_WINDOWS`` rate windows (exponentially weighted),
        bursts and the quiet between them together; None before ``MIN_RATE_SPAN_S`` of arrivals."""
        if self._first_arrival is None or now - self._first_arrival < MIN_RATE_SPAN_S:
            return None
        tau = self._long_s
        decayed = self._long_bytes * math.exp(-max(0.0, now - self._long_at) / tau)
        return decayed / (tau * (1.0 - math.exp(-(now - self._first_arrival) / tau)))

    def keeps_up_on_average(self, now: float, service: ServiceTimeModel) -> bool:
        """Whether the long-run rate leaves the engine room (its per-byte work below :data:`STRAIN_UTILISATION`):
        an overload then passes, and serving what can still meet its deadline first costs no throughput that
        matters; where it does not, only throughput (the fewest batches) limits the rows late."""
        rate = self.long_run_rate_bytes_per_s(now)
        return rate is not None and service.per_byte_s * rate < STRAIN_UTILISATION

    def rate_bytes_per_s(self, now: float) -> float | None:
        """Bytes per second over the last ``window_s``; None before ``MIN_RATE_SPAN_S`` of arrivals."""
        horizon = now - self.window_s
        while self._window and self._window[0][0] < horizon:
            self._window_bytes -= self._window.popleft()[1]
        if self._first_arrival is None:
            return None
        span = min(self.window_s, now - self._first_arrival)
        if span < MIN_RATE_SPAN_S:
            return None
        return self._window_bytes / span

    def infeasible(self, rate: float, service: ServiceTimeModel) -> bool:
        """True when no batch size serves ``rate`` bytes/s within the deadline (module docstring).

        Judged on the fitted model without its safety margin: overload is declared only where
        the expected service, not a pessimistic one, cannot keep up.
        """
        fixed = service.fixed_s
        utilisation = service.per_byte_s * rate
        if utilisation >= 1.0:
            return True
        return 2.0 * fixed / (1.0 - utilisation) > self.deadline

    def check(self, now: float, service: ServiceTimeModel) -> bool:
        """Re-judge the overload at ``now``, account its duration and episodes; True while overloaded."""
        rate = self.rate_bytes_per_s(now)
        was = self.overloaded
        if rate is not None and service.observations >= MIN_OBSERVATIONS:
            self.overloaded = self.infeasible(rate, service)
            self.strained = self.overloaded or service.per_byte_s * service.margin * rate >= STRAIN_UTILISATION
        if was and self._last_check is not None:
            self.overloaded_s += max(0.0, now - self._last_check)
        if self.overloaded and not was:
            self.episodes += 1
            self.periods.append([now, None])
        elif was and not self.overloaded and self.periods:
            self.periods[-1][1] = now
        self._last_check = now
        return self.overloaded

    def eager(self, now: float, service: ServiceTimeModel) -> bool:
        """Whether the Controller should serve the query as Spark's default trigger does (every buffered dataset
        admitted at once) instead of letting a waiting strategy decide.

        That is while the query is overloaded or strained; while the model has at most :data:`MIN_OBSERVATIONS`
        batches (too few sizes to tell fixed from per-byte cost), when the load already looks strained by the
        batches' average cost per byte, an upper bound of the per-byte part (engine time left idle by waiting is
        never won back if the load turns out infeasible); and within the hold-over after an overload period: as
        long as the period lasted, at least one deadline (its backlog is still draining and bursts come in spells),
        and, where periods recur, as long as the quiet between the last two (a burst due again finds no batch held
        back: one that waited would go late with it, where Spark's default trigger would have processed it).
        """
        if self.overloaded or self.strained:
            return True
        if service.ready and service.observations <= MIN_OBSERVATIONS:
            rate = self.rate_bytes_per_s(now)
            if rate is not None and service.average_s_per_byte * rate >= STRAIN_UTILISATION:
                return True
        last = self.periods[-1] if self.periods else None
        if last is None or last[0] is None or last[1] is None:
            return False
        hold = max(self.deadline, last[1] - last[0])
        if len(self.periods) >= 2 and (before := self.periods[-2][1]) is not None:
            hold = max(hold, last[0] - before)
        return now - last[1] <= hold

    @property
    def checked_at(self) -> float | None:
        """The clock at the last :meth:`check` (None before any)."""
        return self._last_check

    def hopeless(self, buffer: DatasetBuffer, now: float, service: ServiceTimeModel) -> int:
        """How many of the oldest buffered datasets cannot meet the deadline even alone in a batch
        (by the fitted service time without margin: only those certain to miss).

        The newest is never counted: the query always keeps one dataset to process, so its service-time model
        goes on learning. A model that predicts every dataset hopeless (fitted on batches that cost more than
        the ones to come, e.g. under a placement that has since changed) would otherwise shed all data for
        good and never see the batch that corrects it.
        """
        count = 0
        last = len(buffer) - 1
        for dataset in buffer:
            if count >= last or now - dataset.arrival + service.predict_raw(dataset.bytes) <= self.deadline:
                break
            count += 1
        return count

    def feasible_prefix(self, buffer: DatasetBuffer, count: int, now: float, service: ServiceTimeModel) -> int:
        """The largest prefix of the ``count`` oldest datasets predicted to finish within the deadline
        of the oldest (at least one): how big a batch may be while overloaded."""
        earliest = buffer.earliest_arrival
        if earliest is None or count <= 1:
            return count
        budget = self.deadline - (now - earliest)
        nbytes = 0
        for taken, dataset in enumerate(buffer):
            if taken >= count:
                break
            nbytes += dataset.bytes
            if taken and service.predict_raw(nbytes) > budget:
                return taken
        return count

    def summary(self) -> dict[str, float | int | bool]:
        """``overloaded_s``, ``episodes`` and whether the query is overloaded now."""
        return {"overloaded_s": self.overloaded_s, "episodes": self.episodes, "now": self.overloaded}


def read_cap_count(buffer: DatasetBuffer, count: int, max_rows: int, max_bytes: int) -> int:
    """The largest prefix of the ``count`` oldest datasets within the read cap (at least one of them).

    :param max_rows: at most this many rows (0: no cap), Spark's ``maxOffsetsPerTrigger``.
    :param max_bytes: at most this many bytes (0: no cap), Spark's ``maxBytesPerTrigger``.
    """
    if count <= 1 or (not max_rows and not max_bytes):
        return count
    rows = nbytes = 0
    for taken, dataset in enumerate(buffer):
        if taken >= count:
            return count
        rows += dataset.rows
        nbytes += dataset.bytes
        if taken and ((max_rows and rows > max_rows) or (max_bytes and nbytes > max_bytes)):
            return taken
    return count
