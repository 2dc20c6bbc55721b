"""The fourth decision's runner: asks the chosen scaling strategy how many executors to hold, and keeps the record.

A runtime that can change its executors (the simulator; Spark on a cluster manager) owns one :class:`Scaler`. Every
:attr:`Scaler.every_s` seconds, between admissions, it calls :meth:`Scaler.decide` with the executors it has; the
Scaler builds each query's :class:`~pacer.scaling.QueryLoad` from what the Controller measured, calls
``pacer_scale``, clamps the answer to the user's bounds and records a change. The runtime enacts it and reports the
executors it really has through :meth:`Scaler.observe`; :meth:`Scaler.report` is the report's ``scaling`` section
(executors over time, each change and why, the core-seconds held). With ``recommend_only`` the strategy is asked and
its answers are recorded (:attr:`Scaler.recommendations`), but the executors stay as they are: what it would hold,
seen without enacting it.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacer.model import BatchReport, QueryHistory
from pacer.plugins import PluginManager
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import StrategyContext

log = logging.getLogger("pacer.scaler")

#: Seconds between two scaling decisions when the caller does not say.
DEFAULT_EVERY_S = 5.0
#: Seconds of arrivals the input rate is measured over, and (longer) its trend.
RATE_WINDOW_S = 5.0
TREND_WINDOW_S = 30.0
#: Recent batches whose fixed part :func:`fixed_part` takes the median of.
FIXED_BATCHES = 20
#: Seconds after which a measured core-seconds-per-byte weighs half.
COST_HALFLIFE_S = 60.0


class ScalingError(RuntimeError):
    """The scaling strategy failed and fallback is off: the message names the strategy and the cause."""


@dataclass
class _Sampled:
    """One query's samples between decisions: arrived bytes over time, and the decayed busy/bytes sums."""

    arrived: deque[tuple[float, int]] = field(default_factory=deque)
    busy_core_s: float = 0.0
    bytes_processed: int = 0
    busy_sum: float = 0.0
    bytes_sum: float = 0.0
    late_rows: int = 0
    done_rows: int = 0
    seen_seq: int = -1  # the newest batch looked at for a reload after a removal
    reload_s: float | None = None  # measured: what the first batch on fewer cores took beyond the usual


class Scaler:
    """Runs one scaling strategy for a runtime (module docstring).

    :param name: the scaling strategy (``fixed``, ``spark-dynamic``, ``deadline``...).
    :param params: its parameters.
    :param plugin_manager: where it comes from.
    :param executors: ``(min, max)`` executors the user allows.
    :param initial: executors the run starts with (None: min).
    :param cores_per_executor: task slots per executor.
    :param every_s: seconds between decisions.
    :param fallback: a strategy that raises keeps the executors as they are (logged, counted) instead of failing
        the run with :class:`ScalingError`.
    :param recommend_only: ask the strategy and record what it recommends (:attr:`recommended`,
        :attr:`recommendations`), but answer the executors held as they are: the runtime enacts nothing.
    """

    def __init__(self, name: str, params: Mapping[str, Any] | None = None, *, plugin_manager: PluginManager,
                 executors: tuple[int, int], initial: int | None = None, cores_per_executor: int = 1,
                 every_s: float = DEFAULT_EVERY_S, fallback: bool = True, recommend_only: bool = False) -> None:
        if cores_per_executor < 1:
            raise ValueError(f"cores per executor must be >= 1, got {cores_per_executor}")
        if not every_s > 0:
            raise ValueError(f"the scaler's period must be > 0 s, got {every_s}")
        self.info = plugin_manager.find(name, "scaling")
        self.params = self.info.resolve_params(params)
        self.state = self.info.state(None, self.params) if self.info.state else {}
        self.pm = plugin_manager
        self.min_executors, self.max_executors = executors
        self.initial = self.min_executors if initial is None else initial
        if not self.min_executors <= self.initial <= self.max_executors:
            raise ValueError(f"initial executors {self.initial} outside {executors}")
        self.cores_per_executor = cores_per_executor
        self.every_s = every_s
        self.fallback = fallback
        self.fallbacks = 0
        self.recommend_only = recommend_only
        #: the strategy's last answer, clamped (enacted unless ``recommend_only``), and each change of it where not
        self.recommended: int | None = None
        self.recommendations: list[dict[str, Any]] = []
        self.wanted: int | None = None
        self.changed_at: float | None = None
        self.last_call: float | None = None
        self.changes: list[dict[str, Any]] = []
        self.timeline: list[tuple[float, int, int]] = []  # (time, running, held) at each change the runtime saw
        self._samples: dict[str, _Sampled] = {}
        self._history = QueryHistory()

    @property
    def name(self) -> str:
        """The scaling strategy's name."""
        return self.info.name

    def due(self, now: float) -> bool:
        """Whether a decision is due at ``now`` (the first one is always due)."""
        return self.last_call is None or now - self.last_call >= self.every_s - 1e-9

    # ------------------------------------------------------------------ what the strategy sees

    def loads(self, controller: Any, now: float) -> tuple[QueryLoad, ...]:
        """Every query's :class:`QueryLoad` at ``now``, sampling what the Controller measured since the last call."""
        out = []
        for query_id in controller.query_ids():
            view = controller.query(query_id)
            record = controller.recorder.record(query_id)
            s = self._samples.setdefault(query_id, _Sampled())
            s.arrived.append((now, record.bytes_in))
            while len(s.arrived) > 2 and now - s.arrived[1][0] >= TREND_WINDOW_S:
                s.arrived.popleft()
            recent = [p for p in s.arrived if now - p[0] <= RATE_WINDOW_S + 1e-9]
            decay = 0.5 ** ((now - self.last_call) / COST_HALFLIFE_S) if self.last_call is not None else 1.0
            s.busy_sum = s.busy_sum * decay + max(0.0, record.busy_core_s - s.busy_core_s)
            s.bytes_sum = s.bytes_sum * decay + max(0, record.bytes_processed - s.bytes_processed)
            s.busy_core_s, s.bytes_processed = record.busy_core_s, record.bytes_processed
            late_rows, done_rows = record.miss_rows + record.shed_rows, record.rows_processed + record.shed_rows
            recent_late, recent_done = max(0, late_rows - s.late_rows), max(0, done_rows - s.done_rows)
            s.late_rows, s.done_rows = late_rows, done_rows
            buffered = view.buffered
            in_flight = controller.batch(view.in_flight).batch.bytes if view.in_flight is not None else 0
            profile = view.engine_profile  # what the engine measured, until the query measured its own
            reports = controller.reports(query_id)[-FIXED_BATCHES:]
            partitions = usable_partitions(view.spec.partitions, reports)
            fixed = fixed_part(reports, partitions, profile.wall_s if profile is not None
                               else float(view.service_time.get("fixed_ms", 0.0)) / 1000.0)
            _measure_reload(s, reports, partitions, fixed)
            out.append(QueryLoad(
                query_id=query_id, deadline_s=view.spec.effective_deadline, fixed_s=fixed,
                reload_s=s.reload_s or 0.0,
                core_s_per_byte=s.busy_sum / s.bytes_sum if s.bytes_sum > 0
                else profile.core_s_per_byte if profile is not None else 0.0,
                partitions=partitions, rate_bytes_s=_rate(recent if len(recent) >= 2 else list(s.arrived)),
                trend_bytes_s2=_trend(list(s.arrived)),
                backlog_bytes=sum(d.bytes for d in buffered) + in_flight,
                backlog_age_s=max(0.0, now - buffered[0].arrival) if buffered else 0.0,
                miss_rows=record.miss_rows, rows_in=record.rows_in,
                recent_miss_rows=recent_late, recent_rows=recent_done,
            ))
        return tuple(out)

    def context(self) -> StrategyContext:
        """The :class:`StrategyContext` the scaling strategy sees (runtime-wide: no query)."""
        return StrategyContext(decision="scaling", chosen=self.info.name, query=None, params=self.params,
                               state=self.state, history=self._history, selected={"scaling": self.info.name},
                               states={self.info.name: self.state})

    # ------------------------------------------------------------------ deciding

    def decide(self, controller: Any, *, running: int, pending: int = 0, removing: int = 0, startup_s: float = 0.0,
               peak_tasks: int = 0, now: float) -> int:
        """Ask the strategy at ``now``; returns the executors to hold (clamped to the bounds), recording a change; with
        ``recommend_only``, the executors held as they are, recording the recommendation.

        :param running: executors running now; ``pending`` starting; ``removing`` leaving.
        :param startup_s: seconds an executor takes to start (observed, else the runtime's estimate).
        :param peak_tasks: the most tasks running or waiting at once since the previous call.
        :raises ScalingError: the strategy raised or answered nothing, and fallback is off.
        """
        held = running + pending - removing
        if self.wanted is None:
            self.wanted = held
        loads = self.loads(controller, now)
        cluster = ClusterView(
            executors=running, pending=pending, removing=removing, cores_per_executor=self.cores_per_executor,
            min_executors=self.min_executors, max_executors=self.max_executors,
            since_change_s=now - self.changed_at if self.changed_at is not None else math.inf,
            startup_s=startup_s, peak_tasks=peak_tasks,
            interval_s=now - self.last_call if self.last_call is not None else 0.0)
        self.last_call = now
        try:
            decision: ScaleDecision | None = self.pm.hook.pacer_scale(ctx=self.context(), queries=loads,
                                                                      cluster=cluster, now=now)
            if decision is None:
                raise ScalingError(f"no installed plugin answered for scaling strategy {self.info.name!r}")
        except Exception as exc:
            if not self.fallback:
                raise ScalingError(f"scaling strategy {self.info.name!r} failed: {type(exc).__name__}: {exc}; "
                                   "fix it or pick another (`pacer strategies --decision scaling`)") from exc
            self.fallbacks += 1
            log.warning("pacer: scaling strategy %r failed (%s: %s); the executors stay as they are",
                        self.info.name, type(exc).__name__, exc)
            return held if self.recommend_only else self.wanted
        wanted = min(self.max_executors, max(self.min_executors, decision.executors))
        if self.recommend_only:
            if wanted != (held if self.recommended is None else self.recommended):
                self.recommendations.append({"at": round(now, 6), "from": held, "to": wanted,
                                             "reason": decision.reason})
            self.recommended = wanted
            return held
        self.recommended = wanted
        self.record(now, wanted, decision.reason)
        return wanted

    def record(self, now: float, wanted: int, reason: str) -> None:
        """The executors wanted at ``now``, decided by the strategy or, where Spark's dynamic allocation decides,
        seen; kept as a change with ``reason`` when it differs from the last."""
        if self.wanted is None:
            self.wanted = wanted
        elif wanted != self.wanted:
            self.changes.append({"at": round(now, 6), "from": self.wanted, "to": wanted, "reason": reason})
            self.wanted, self.changed_at = wanted, now

    # ------------------------------------------------------------------ the record

    def observe(self, now: float, *, running: int, held: int) -> None:
        """The runtime's executors at ``now``: ``running`` (taking tasks) and ``held`` (allocated, starting ones
        included); kept when either changed."""
        if not self.timeline or self.timeline[-1][1:] != (running, held):
            self.timeline.append((now, running, held))

    def held_core_s(self, start: float, end: float) -> float:
        """Core-seconds of executors held from ``start`` to ``end`` (what a cluster bills): :meth:`observe`'s record."""
        total = 0.0
        points = [p for p in self.timeline if p[0] < end]
        for i, (t, _, held) in enumerate(points):
            upto = points[i + 1][0] if i + 1 < len(points) else end
            a, b = max(t, start), min(upto, end)
            if b > a:
                total += held * self.cores_per_executor * (b - a)
        return total

    def _priced(self, end: float) -> list[dict[str, Any]]:
        """Each change with ``core_s_saved``: the cores it let go (negative: took on) times the seconds until the
        next change or ``end``, what it saved against keeping the executors as they were."""
        out = []
        for i, change in enumerate(self.changes):
            until = self.changes[i + 1]["at"] if i + 1 < len(self.changes) else end
            held_for = max(0.0, until - change["at"])
            saved = (change["from"] - change["to"]) * self.cores_per_executor * held_for
            out.append({**change, "core_s_saved": round(saved, 3)})
        return out

    def report(self, start: float, end: float) -> dict[str, Any]:
        """The report's ``scaling`` section."""
        return {
            "strategy": self.info.name, "params": dict(self.params), "every_s": self.every_s,
            "min_executors": self.min_executors, "max_executors": self.max_executors, "initial_executors": self.initial,
            "cores_per_executor": self.cores_per_executor,
            "executors": [[round(t, 6), running, held] for t, running, held in self.timeline],
            "changes": self._priced(end), "reconfigurations": len(self.changes), "fallbacks": self.fallbacks,
            "allocated_core_s": round(self.held_core_s(start, end), 6),
            "wanted": self.wanted, "recommended": self.recommended, "recommend_only": self.recommend_only,
            "recommendations": list(self.recommendations),
        }


def fixed_part(reports: Sequence[BatchReport], partitions: int, otherwise: float) -> float:
    """The part of a query's batches more cores do not shorten: the median over ``reports`` of each batch's trigger
    time less its tasks' core-seconds spread over the cores it could use (``min(cores, partitions)``).

    Not the service-time model's fixed part: that one is fitted across batch sizes at whatever cores each batch had,
    and where the scaler grows the cores with the rate, larger batches run on more cores, so the fit puts the
    per-byte part into the fixed one (measured: 2.69 s fitted where the simulator's is 0.3 s). ``otherwise`` where
    no batch measured its core-seconds and cores.
    """
    parts = sorted(part for r in reports if (part := _overhead(r, partitions)) is not None)
    if not parts:
        return otherwise
    return parts[len(parts) // 2]


def usable_partitions(partitions: int, reports: Sequence[BatchReport]) -> int:
    """The most cores a query's batches can use: its spec's partitions (Spark's shuffle partitions), or the most task
    attempts a recent batch ran where more (a ``format("pacer")`` Kafka scan runs a task per topic partition, which
    the spec does not know: 6 where the session's shuffle partitions said 2)."""
    return max([partitions, *(r.tasks for r in reports if r.tasks)])


def _overhead(report: BatchReport, partitions: int) -> float | None:
    """A batch's time beyond its tasks' core-seconds spread over the cores it could use (None: not measured)."""
    if report.busy_core_s is None or not report.cores_used:
        return None
    return max(0.0, report.trigger_s - report.busy_core_s / max(1e-9, min(report.cores_used, float(partitions))))


def _measure_reload(sampled: _Sampled, reports: Sequence[BatchReport], partitions: int, fixed_s: float) -> None:
    """Each first batch that ran on fewer cores than the one before (an executor left): what it took beyond the
    query's usual fixed part is the state it reloaded (Spark: read back from the checkpoint, after a locality wait);
    ``sampled.reload_s`` averages them, the newest weighing half."""
    for before, after in itertools.pairwise(reports):
        if after.seq <= sampled.seen_seq:
            continue
        sampled.seen_seq = after.seq
        if before.cores_used and after.cores_used and after.cores_used < before.cores_used - 1e-9:
            overhead = _overhead(after, partitions)
            if overhead is not None:
                sample = max(0.0, overhead - fixed_s)
                sampled.reload_s = sample if sampled.reload_s is None else (sampled.reload_s + sample) / 2.0


def _rate(samples: Sequence[tuple[float, int]]) -> float:
    """Bytes per second between the oldest and the newest sample (0 with fewer than two)."""
    if len(samples) < 2 or samples[-1][0] <= samples[0][0]:
        return 0.0
    return (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])


def _trend(samples: Sequence[tuple[float, int]]) -> float:
    """The rate's change per second: the later half's rate less the earlier half's, over the time between them."""
    if len(samples) < 3:
        return 0.0
    mid = len(samples) // 2
    first, second = samples[: mid + 1], samples[mid:]
    t_first = (first[0][0] + first[-1][0]) / 2
    t_second = (second[0][0] + second[-1][0]) / 2
    if t_second <= t_first:
        return 0.0
    return (_rate(second) - _rate(first)) / (t_second - t_first)
