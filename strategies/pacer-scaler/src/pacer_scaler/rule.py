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


def cores_for(load: QueryLoad, *, headroom: float, catch_up_s: float, horizon_s: float,
              trend_cap: float = 0.1) -> tuple[float, str]:
    """The cores ``load``'s query needs (module docstring), and a note where the deadline is out of reach.

    :param headroom: extra share for noise (0.15: 15 %).
    :param catch_up_s: seconds to drain the backlog beyond one deadline's worth of arrivals.
    :param horizon_s: seconds ahead the rate is projected along its trend (rising only).
    :param trend_cap: the most the projection adds, as a share of the rate now: a step's trend is brief, and
        projected over a start-up it overshoots (measured: 57 executors asked where 29 held the step).
    """
    rate = _projected_rate(load, horizon_s, trend_cap)
    limit = utilization_limit(load.fixed_s, load.deadline_s)
    note = ""
    if limit < MIN_UTILIZATION:
        note = f"{load.query_id}: its fixed part ({load.fixed_s:.2f} s) leaves no batch room within its deadline"
        limit = MIN_UTILIZATION
    cores = load.core_s_per_byte * rate * (1.0 + headroom) / limit + _catch_up_cores(load, catch_up_s)
    if cores > load.partitions:
        note = note or f"{load.query_id}: needs {cores:.1f} cores, its batches use at most {load.partitions}"
        cores = float(load.partitions)
    return cores, note


def shared_cores(loads: Sequence[QueryLoad], *, headroom: float, catch_up_s: float, horizon_s: float,
                 trend_cap: float = 0.1) -> tuple[float, str]:
    """The cores at which every query of ``loads`` meets its deadline with their batches one at a time on the same
    cores (module docstring), plus each one's backlog catch-up; and notes where a deadline is out of reach.

    Parameters as :func:`cores_for`, which this is for one query.
    """
    if len(loads) == 1:
        return cores_for(loads[0], headroom=headroom, catch_up_s=catch_up_s, horizon_s=horizon_s, trend_cap=trend_cap)
    alone = [cores_for(q, headroom=headroom, catch_up_s=catch_up_s, horizon_s=horizon_s, trend_cap=trend_cap)
             for q in loads]
    work = [q.core_s_per_byte * _projected_rate(q, horizon_s, trend_cap) * (1.0 + headroom) for q in loads]
    drain = sum(_catch_up_cores(q, catch_up_s) for q in loads)
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
    cores = max(waiting(low), keeping_up(high))
    notes = [n for _, n in alone if n]
    if not math.isfinite(cores):  # the fixed parts alone fill the shortest deadline
        notes.insert(0, f"the queries' fixed parts ({fixed:.2f} s) leave no batch room within the shortest deadline "
                        f"({d_min:g} s) with their batches one at a time")
        cores = sum(c for c, _ in alone)  # each with its own catch-up
    else:
        cores += drain
    most = max(q.partitions for q in loads)
    if cores > most:
        notes.append(f"they need {cores:.1f} cores, one batch uses at most {most}")
        cores = float(most)
    return cores, "; ".join(dict.fromkeys(notes))


def _catch_up_cores(load: QueryLoad, catch_up_s: float) -> float:
    """DS2's catch-up: the cores that drain, in ``catch_up_s``, the backlog beyond one deadline's arrivals."""
    return load.core_s_per_byte * max(0.0, load.backlog_bytes - load.rate_bytes_s * load.deadline_s) / catch_up_s


def _projected_rate(load: QueryLoad, horizon_s: float, trend_cap: float) -> float:
    return load.rate_bytes_s + min(max(0.0, load.trend_bytes_s2) * horizon_s, trend_cap * load.rate_bytes_s)


@dataclass
class DeadlineScaler:
    """The ``deadline`` strategy's state and decision (one per run).

    :ivar wanted: ``(time, cores the rule wanted without catch-up)`` over the last ``down_hold_s``.
    :ivar since: when the record began (a scale-down needs ``down_hold_s`` of it).
    """

    wanted: deque[tuple[float, float]] = field(default_factory=deque)
    since: float | None = None

    def decide(self, queries: Sequence[QueryLoad], cluster: ClusterView, now: float,
               params: Mapping[str, Any]) -> ScaleDecision:
        """Up at once to what the rule needs; down only to the most cores it needed without backlog catch-up over
        the last ``down_hold_s`` (with half the band again as room; a catch-up drains and ends), once the executors
        have not changed for as long, and only when that saves at least ``down_band`` of them."""
        target = cluster.target
        if not queries or any(q.core_s_per_byte <= 0 for q in queries):
            return ScaleDecision(target, "measuring: a query has no measured batch yet")
        rule = {"headroom": float(params["headroom"]), "catch_up_s": float(params["catch_up_s"]),
                "horizon_s": cluster.startup_s, "trend_cap": float(params["trend_cap"])}
        cores, notes = shared_cores(queries, **rule)
        # what the executors must hold for the coming period: the catch-up drains its backlog and ends
        steady = shared_cores([replace(q, backlog_bytes=0) for q in queries], **rule)[0]
        per = cluster.cores_per_executor
        need = self._clamp(cores / per, cluster)
        hold = float(params["down_hold_s"])
        if self.since is None:
            self.since = now
        self.wanted.append((now, steady))
        while self.wanted and now - self.wanted[0][0] > hold:
            self.wanted.popleft()
        why = f"deadlines need {cores:.2f} cores" + (f" ({notes})" if notes else "")
        if need > target:
            self.since = now
            return ScaleDecision(need, why)
        band = float(params["down_band"])
        most = max(c for _, c in self.wanted)
        down = self._clamp(max(most * (1.0 + band / 2), cores) / per, cluster)  # room for the noise in the next need
        if down <= target * (1.0 - band) + 1e-9 and now - self.since >= hold - 1e-9 and \
                cluster.since_change_s >= hold - 1e-9:
            self.since = now
            return ScaleDecision(down, f"{why}, at most {most:.2f} cores without catch-up over the last {hold:g} s")
        return ScaleDecision(target, why)

    @staticmethod
    def _clamp(executors: float, cluster: ClusterView) -> int:
        return max(cluster.min_executors, min(cluster.max_executors, math.ceil(executors - 1e-9)))


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> DeadlineScaler:
    """The runtime-wide state of ``deadline`` (a scaling strategy has no per-query state)."""
    for key in ("headroom", "catch_up_s", "down_hold_s", "down_band", "trend_cap"):
        value = float(params[key])
        if not (value >= 0 if key in ("headroom", "down_band", "trend_cap") else value > 0) or \
                (key == "down_band" and value >= 1):
            raise ValueError(f"deadline scaler: {key} must be "
                             f"{'in [0, 1)' if key == 'down_band' else '> 0' if key in ('catch_up_s', 'down_hold_s') else '>= 0'}, got {value}")
    return DeadlineScaler()
