"""The deadline scaler's rule: the cores a query needs to meet its deadline at its rate, and when to change.

A query batched so that its oldest row waits ``I`` seconds before its batch starts and the batch takes
``T = f + k·r·I / c`` (fixed part ``f``, ``k`` core-seconds per byte, rate ``r`` bytes/s, ``c`` cores) meets its
deadline ``D`` while ``I + T <= D``, and keeps up while ``T <= I``. The largest batch that does both exists exactly
when the utilization ``u = k·r / c`` is at most ``1 - 2f/D``; so the fewest cores are
``c = k·r / (1 - 2f/D)``. This is DS2's rule (true processing rate over a target utilization) with the target
set by the deadline instead of by hand. On top: ``headroom`` for noise, the rate projected over an executor's
start-up (capacity asked for now arrives then), and DS2's catch-up term, ``k·B / catch_up_s`` for the backlog ``B``
beyond what the deadline lets wait.

Queries sharing the executors run their batches one at a time (each batch has partitions for every core: FIFO or
EDF at pacer's gate), so a query's batch may wait behind one batch of every other query. With each query batching
every ``I_j = x·D_j`` (the same share ``x`` of its deadline), the batches ``T_j = f_j + w_j·x·D_j / c`` (work rate
``w_j = k_j·r_j``) meet every deadline when ``Σ T_j <= (1 - x)·D_min`` and keep up when ``Σ T_j / I_j <= 1``; the
rule takes the ``x`` that needs the fewest cores (:func:`shared_cores`). One query gives ``x = 1/2`` and the
formula above.

The cores become executors through Spark's task waves: a batch of ``P`` tasks on ``c`` cores runs
``ceil(P / c)`` waves, as fast as ``P / ceil(P / c)`` cores (:func:`effective_cores`); queries sharing the cores run
their batches back to back, a wave's idle slots taking the next batch's tasks (Spark's FIFO), so their ``ΣP`` tasks
run in ``ceil(ΣP / c)`` waves (:func:`speed`). The rule holds the fewest executors that run as fast as the cores
needed (:func:`executors_for`). Misses the model did not foresee teach it a correction factor, and changes are paced
(:class:`DeadlineScaler`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pacer import ClusterView, QueryLoad, QuerySpec, ScaleDecision

#: The lowest utilization the rule plans for: where the fixed part is half the deadline or more, no number of
#: cores meets it, and the rule asks for the cores at this utilization (and says so).
MIN_UTILIZATION = 0.05


def utilization_limit(fixed_s: float, deadline_s: float) -> float:
    """``1 - 2f/D``: the highest share of its cores a query may keep busy and still meet its deadline."""
    return 1.0 - 2.0 * fixed_s / deadline_s if deadline_s > 0 else 0.0


def effective_cores(partitions: int, cores: float) -> float:
    """``P / ceil(P / c)``: the cores a batch of ``partitions`` tasks runs as fast as on ``cores``, its tasks run in
    waves of ``cores`` (64 tasks on 33 to 63 cores take two waves, as on 32). ``partitions < 1``: unknown, ``cores``."""
    if cores <= 0:
        return 0.0
    if partitions < 1:
        return float(cores)
    if cores >= partitions:
        return float(partitions)
    return partitions / math.ceil(partitions / cores)


def speed(loads: Sequence[QueryLoad], cores: float) -> float:
    """The cores ``loads``' batches run as fast as on ``cores``: one query's :func:`effective_cores`; several queries'
    batches back to back, a wave's idle slots taking the next batch's tasks, so all their tasks in waves."""
    if any(q.partitions < 1 for q in loads):
        return float(cores)
    return effective_cores(sum(q.partitions for q in loads), cores)


def executors_for(cores: float, loads: Sequence[QueryLoad], cluster: ClusterView) -> int:
    """The fewest executors within the bounds whose cores run ``loads``' batches as fast as ``cores`` (as all their
    partitions, where more: no batch runs faster), so no executor is paid for whose cores a wave leaves idle. Where
    none does, the fewest that run them as fast as the most allowed do (6 tasks on 3, 4 or 5 executors: 3)."""
    wanted = min(cores, _most(loads), speed(loads, cluster.max_executors * cluster.cores_per_executor))
    for n in range(cluster.min_executors, cluster.max_executors + 1):
        if speed(loads, n * cluster.cores_per_executor) >= wanted - 1e-9:
            return n
    return cluster.max_executors


def _usable(load: QueryLoad) -> float:
    """The most cores one of the query's batches uses (unknown partitions: no bound)."""
    return float(load.partitions) if load.partitions >= 1 else math.inf


def _most(loads: Sequence[QueryLoad]) -> float:
    """The most cores ``loads``' batches use at once: all their tasks (a wave's idle slots take the next batch's, as
    :func:`speed` counts them); more run none faster."""
    return sum(_usable(q) for q in loads)


def cores_for(load: QueryLoad, *, headroom: float, catch_up_s: float, horizon_s: float,
              trend_cap: float = 0.1, running_cores: float | None = None) -> tuple[float, str]:
    """The cores ``load``'s query needs (module docstring), and a note where the deadline is out of reach.

    :param headroom: extra share for noise (0.15: 15 %).
    :param catch_up_s: seconds to drain the backlog beyond one deadline's arrivals.
    :param horizon_s: seconds until capacity asked now runs (an executor's start-up): the rate is projected along
        its trend (rising only) over it, and the backlog grows over it by the arrivals ``running_cores`` do not serve.
    :param trend_cap: the most the projection adds, as a share of the rate now: a step's trend is brief, and
        projected over a start-up it overshoots (measured: 57 executors asked where 29 held the step).
    :param running_cores: cores running now (None: the backlog is taken as it is).
    """
    return shared_cores([load], headroom=headroom, catch_up_s=catch_up_s, horizon_s=horizon_s, trend_cap=trend_cap,
                        running_cores=running_cores)


def shared_cores(loads: Sequence[QueryLoad], *, headroom: float, catch_up_s: float, horizon_s: float,
                 trend_cap: float = 0.1, running_cores: float | None = None) -> tuple[float, str]:
    """The cores at which every query of ``loads`` meets its deadline with their batches one at a time on the same
    cores (module docstring), plus each one's backlog catch-up; and notes where a deadline is out of reach: a query
    whose fixed part fills its deadline, or whose partitions are fewer than the cores needed (no executor count meets
    it; the cores are capped at all the queries' partitions, beyond which no batch runs faster).

    Parameters as :func:`cores_for`, which this is for one query.
    """
    rates = [_projected_rate(q, horizon_s, trend_cap) for q in loads]
    grown = _start_up_growth(loads, rates, horizon_s, running_cores)
    drain = sum(_catch_up_cores(q, catch_up_s, g) for q, g in zip(loads, grown, strict=True))
    notes = [_room_note(q) for q in loads if utilization_limit(q.fixed_s, q.deadline_s) < MIN_UTILIZATION]
    work = [q.core_s_per_byte * r * (1.0 + headroom) for q, r in zip(loads, rates, strict=True)]
    if len(loads) == 1:
        cores = work[0] / max(MIN_UTILIZATION, utilization_limit(loads[0].fixed_s, loads[0].deadline_s)) + drain
    else:
        cores = _batches_one_at_a_time(loads, work)
        if math.isfinite(cores):
            cores += drain
        else:  # the fixed parts alone fill the shortest deadline: each query's own cores, summed
            fixed, d_min = sum(q.fixed_s for q in loads), min(q.deadline_s for q in loads)
            notes.insert(0, f"the queries' fixed parts ({fixed:.2f} s) leave no batch room within the shortest "
                            f"deadline ({d_min:g} s) with their batches one at a time")
            cores = sum(cores_for(q, headroom=headroom, catch_up_s=catch_up_s, horizon_s=horizon_s,
                                  trend_cap=trend_cap, running_cores=running_cores)[0] for q in loads)
    notes += [f"{q.query_id}: needs {cores:.1f} cores, its batches use at most {q.partitions}: no executor count "
              "meets its deadline" for q in loads if cores > _usable(q)]
    return min(cores, _most(loads)), "; ".join(dict.fromkeys(notes))


def _batches_one_at_a_time(loads: Sequence[QueryLoad], work: Sequence[float]) -> float:
    """The fewest cores for some share ``x`` of each deadline as interval (module docstring); inf where none."""
    d_min = min(q.deadline_s for q in loads)
    fixed = sum(q.fixed_s for q in loads)
    spread = sum(w * q.deadline_s for w, q in zip(work, loads, strict=True))

    def waiting(x: float) -> float:  # cores for Σ T_j <= (1 - x)·D_min; rises with x
        room = (1.0 - x) * d_min - fixed
        return x * spread / room if room > 0 else math.inf

    def keeping_up(x: float) -> float:  # cores for Σ T_j / I_j <= 1; falls with x
        room = 1.0 - sum(q.fixed_s / (x * q.deadline_s) for q in loads)
        return sum(work) / room if room > 0 else math.inf

    low, high = 0.0, 1.0  # the x where the two meet needs the fewest cores
    for _ in range(60):
        mid = (low + high) / 2
        if waiting(mid) < keeping_up(mid):
            low = mid
        else:
            high = mid
    return max(waiting(low), keeping_up(high))


def _room_note(load: QueryLoad) -> str:
    return f"{load.query_id}: its fixed part ({load.fixed_s:.2f} s) leaves no batch room within its deadline"


def _start_up_growth(loads: Sequence[QueryLoad], rates: Sequence[float], horizon_s: float,
                     running_cores: float | None) -> list[float]:
    """Bytes each query's backlog grows by before capacity asked now runs: over ``horizon_s``, the share of its
    arrivals the running cores (as fast as the batches use them, :func:`speed`) do not serve, at the queries' work
    together."""
    total = sum(q.core_s_per_byte * r for q, r in zip(loads, rates, strict=True))
    if running_cores is None or horizon_s <= 0 or total <= 0:
        return [0.0] * len(loads)
    short = max(0.0, 1.0 - speed(loads, running_cores) / total)
    return [r * horizon_s * short for r in rates]


def _catch_up_cores(load: QueryLoad, catch_up_s: float, grown: float = 0.0) -> float:
    """DS2's catch-up: the cores that drain, in ``catch_up_s``, the backlog (and what it grows by until capacity asked
    now runs) beyond one deadline's arrivals."""
    excess = load.backlog_bytes + grown - load.rate_bytes_s * load.deadline_s
    return load.core_s_per_byte * max(0.0, excess) / catch_up_s


def _projected_rate(load: QueryLoad, horizon_s: float, trend_cap: float) -> float:
    return load.rate_bytes_s + min(max(0.0, load.trend_bytes_s2) * horizon_s, trend_cap * load.rate_bytes_s)


#: The parameters :func:`build_state` checks, each with its range: ``(low, high, low included, high included)``.
RANGES: dict[str, tuple[float, float, bool, bool]] = {
    "headroom": (0.0, math.inf, True, False),
    "catch_up_s": (0.0, math.inf, False, False),
    "down_hold_s": (0.0, math.inf, False, False),
    "down_band": (0.0, 1.0, True, False),
    "trend_cap": (0.0, math.inf, True, False),
    "miss_share": (0.0, 1.0, True, False),
    "miss_step": (0.0, math.inf, False, False),
    "correction_halflife_s": (0.0, math.inf, False, False),
    "min_change_interval_s": (0.0, math.inf, True, False),
    "down_step": (0.0, 1.0, False, True),
}


@dataclass
class DeadlineScaler:
    """The ``deadline`` strategy's state and decision (one per run).

    :ivar wanted: ``(time, cores the rule wanted without catch-up)`` over the last ``down_hold_s``.
    :ivar since: when the record began (a scale-down needs ``down_hold_s`` of it).
    :ivar correction: what the rule's cores are multiplied by: grown where deadlines were missed at executors the
        rule said were enough, decaying back to 1 with half-life ``correction_halflife_s`` while none are.
    :ivar late: ``(time, {query: (rows late, rows done)})`` of each decision over the last ``down_hold_s``.
    :ivar settle_until: misses before this are of data batched before the last change took effect: not learned from.
    :ivar last_call: the previous decision's time.
    """

    wanted: deque[tuple[float, float]] = field(default_factory=deque)
    since: float | None = None
    correction: float = 1.0
    late: deque[tuple[float, dict[str, tuple[int, int]]]] = field(default_factory=deque)
    settle_until: float = -math.inf
    last_call: float | None = None

    def decide(self, queries: Sequence[QueryLoad], cluster: ClusterView, now: float,
               params: Mapping[str, Any]) -> ScaleDecision:
        """Up at once to what the rule needs (at most once per ``min_change_interval_s``, unless deadlines are being
        missed); down only to the most cores it needed without backlog catch-up over the last ``down_hold_s`` (with
        half the band again as room; a catch-up drains and ends), once the executors have not changed for as long,
        only when that saves at least ``down_band`` of them, by at most ``down_step`` of their speed, while no query
        is late, and where the saving outweighs the state reload a removal costs."""
        interval = now - self.last_call if self.last_call is not None else 0.0
        self.last_call = now
        target = cluster.target
        if not queries or any(q.core_s_per_byte <= 0 for q in queries):
            return ScaleDecision(target, "measuring: a query has no measured batch yet")
        p = {key: float(params[key]) for key in RANGES}
        rule = {"headroom": p["headroom"], "catch_up_s": p["catch_up_s"], "horizon_s": cluster.startup_s,
                "trend_cap": p["trend_cap"]}
        raw, notes = shared_cores(queries, **rule, running_cores=float(cluster.cores))
        # what the executors must hold for the coming period: the catch-up drains its backlog and ends
        steady_raw = shared_cores([replace(q, backlog_bytes=0) for q in queries], **rule)[0]
        hold = p["down_hold_s"]
        self._remember(queries, now, hold)
        missing = _missing(queries, p["miss_share"])
        learned, step_up = self._learn(raw, missing, queries, cluster, now, interval, p)
        cores, steady = raw * self.correction, steady_raw * self.correction
        need = executors_for(cores, queries, cluster)
        if step_up:  # at least the next count that runs the batches faster than the executors held
            need = max(need, executors_for(speed(queries, target * cluster.cores_per_executor) * (1.0 + 1e-6),
                                           queries, cluster))
        if self.since is None:
            self.since = now
        self.wanted.append((now, steady))
        while self.wanted and now - self.wanted[0][0] > hold:
            self.wanted.popleft()
        why = f"deadlines need {raw:.2f} cores"
        if self.correction > 1.0 + 1e-9:
            why += f" x {self.correction:.2f} learned from misses"
        why += "".join(f"; {n}" for n in (notes, learned) if n)
        if need > target:
            if not missing and cluster.since_change_s < p["min_change_interval_s"] - 1e-9:
                # the deadline is at stake where the executors held fall short of the need without headroom
                bare = shared_cores(queries, **{**rule, "headroom": 0.0}, running_cores=float(cluster.cores))[0]
                if executors_for(bare * self.correction, queries, cluster) <= target:
                    return ScaleDecision(target, f"{why}; {need} executors wait: the last change was "
                                                 f"{cluster.since_change_s:.0f} s ago (min_change_interval_s)")
                self._changed(now, target, need, queries, cluster)
                return ScaleDecision(need, f"{why}; at stake: the executors held fall short of the need without "
                                           "headroom")
            self._changed(now, target, need, queries, cluster)
            return ScaleDecision(need, why + (f"; late: {missing}" if missing else ""))
        return self._maybe_down(queries, cluster, now, cores, why, p)

    def _maybe_down(self, queries: Sequence[QueryLoad], cluster: ClusterView, now: float, cores: float, why: str,
                    p: Mapping[str, float]) -> ScaleDecision:
        """The scale-down, if one is due (:meth:`decide`), else the executors as they are."""
        target, per, hold, band = cluster.target, cluster.cores_per_executor, p["down_hold_s"], p["down_band"]
        most = max(c for _, c in self.wanted)
        down = executors_for(max(most * (1.0 + band / 2), cores), queries, cluster)  # room for the next need's noise
        held = speed(queries, target * per)  # what the held cores run as
        down = max(down, executors_for((1.0 - p["down_step"]) * held, queries, cluster))  # a bounded step
        held_long = now - (now if self.since is None else self.since) >= hold - 1e-9 and \
            cluster.since_change_s >= max(hold, p["min_change_interval_s"]) - 1e-9
        if not (down <= target * (1.0 - band) + 1e-9 and held_long):
            return ScaleDecision(target, why)
        late = self._late_over_hold(p["miss_share"])
        if late:
            return ScaleDecision(target, f"{why}; no scale-down while late: {late}")
        saved = (target - down) * per * hold
        reload = sum(q.reload_s * min(down * per, _usable(q)) for q in queries)
        if reload > saved:
            return ScaleDecision(target, f"{why}; {target} -> {down} executors would save {saved:.0f} core-s over "
                                         f"{hold:g} s, less than the state reload costs ({reload:.0f})")
        self._changed(now, target, down, queries, cluster)
        return ScaleDecision(down, f"{why}, at most {most:.2f} cores without catch-up over the last {hold:g} s")

    def _learn(self, raw: float, missing: str, queries: Sequence[QueryLoad], cluster: ClusterView, now: float,
               interval: float, p: Mapping[str, float]) -> tuple[str, bool]:
        """Where deadlines are missed at executors the corrected rule says are enough (past the settling after the
        last change, none starting), grow :attr:`correction` by ``miss_step`` and step up (the second value). While
        none is late, decay it back to 1. The first value: a note where more executors cannot help."""
        if not missing:
            self.correction = 1.0 + (self.correction - 1.0) * 0.5 ** (interval / p["correction_halflife_s"])
            return "", False
        target = cluster.target
        if now < self.settle_until - 1e-9 or cluster.pending > 0 or \
                executors_for(raw * self.correction, queries, cluster) > target:
            return "", False
        if speed(queries, target * cluster.cores_per_executor) >= _most(queries) - 1e-9:
            return "late, and more executors run no batch faster (every batch on all its partitions)", False
        if target >= cluster.max_executors:
            return "late, at the most executors allowed", False
        self.correction *= 1.0 + p["miss_step"]
        return "", True

    def _changed(self, now: float, before: int, after: int, queries: Sequence[QueryLoad],
                 cluster: ClusterView) -> None:
        """A change made at ``now``: misses are not learned from until the data batched before its capacity runs (a
        scale-up: the start-up) has met or missed its deadline (the longest deadline). After a scale-down that is
        also the batch that reloads the state the removed executors held: a transient the rule does not learn."""
        self.since = now
        self.settle_until = now + (cluster.startup_s if after > before else 0.0) + max(q.deadline_s for q in queries)

    def _remember(self, queries: Sequence[QueryLoad], now: float, hold: float) -> None:
        self.late.append((now, {q.query_id: (q.recent_miss_rows, q.recent_rows) for q in queries}))
        while self.late and now - self.late[0][0] > hold:
            self.late.popleft()

    def _late_over_hold(self, share: float) -> str:
        """The queries whose rows over the last ``down_hold_s`` were late by more than ``share``, said."""
        late: dict[str, list[int]] = {}
        for _, seen in self.late:
            for query_id, (missed, rows) in seen.items():
                total = late.setdefault(query_id, [0, 0])
                total[0] += missed
                total[1] += rows
        return ", ".join(f"{q} {m / r:.1%} of rows" for q, (m, r) in late.items() if r > 0 and m / r > share)


def _missing(queries: Sequence[QueryLoad], share: float) -> str:
    """The queries missing their deadline now, said: more than ``share`` of the rows done since the previous decision
    late, or their oldest buffered data older than the deadline less the fixed part (it will be late)."""
    out = []
    for q in queries:
        if q.recent_rows > 0 and q.recent_miss_rows / q.recent_rows > share:
            out.append(f"{q.query_id} {q.recent_miss_rows / q.recent_rows:.1%} of recent rows")
        elif utilization_limit(q.fixed_s, q.deadline_s) >= MIN_UTILIZATION and \
                q.backlog_age_s > q.deadline_s - q.fixed_s:
            out.append(f"{q.query_id}'s oldest data waits {q.backlog_age_s:.1f} s")
    return ", ".join(out)


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> DeadlineScaler:
    """The runtime-wide state of ``deadline`` (a scaling strategy has no per-query state).

    :raises ValueError: naming a parameter out of its range (:data:`RANGES`).
    """
    for key, (low, high, low_in, high_in) in RANGES.items():
        value = float(params[key])
        if not ((value >= low if low_in else value > low) and (value <= high if high_in else value < high)):
            span = f"{'[' if low_in else '('}{low:g}, {high:g}{']' if high_in else ')'}"
            raise ValueError(f"deadline scaler: {key} must be in {span}, got {value}")
    return DeadlineScaler()
