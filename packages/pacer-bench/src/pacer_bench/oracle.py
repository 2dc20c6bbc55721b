"""The perfect-foresight scaler autoscale judges the others against: from the run's own future traffic, a timetable
of the fewest executors that meet the deadlines window by window, played by pacer's ``scheduled`` strategy in the
simulator like any scaler (its cost is what that run held, start-ups billed).

It is computed apart from every scaler it judges: the executors a traffic level needs are found by running the
simulator, not from any rule's formula. Per :data:`GRAIN_S` window, its *level* is the highest rate of any query,
as a share of its mean, over the window and the longest deadline before it (rows that arrived then are still being
served), read from each query's traffic function as its seed draws it, times ``1 + headroom`` (the deadline rule's
headroom, which that rule adds to the rate's work), rounded up to :data:`LEVEL_STEP` steps. The fewest executors
at a level: the fewest on which every query, at a constant rate of level x its mean for :data:`PROBE_S` s,
completes at most :data:`LATE_LIMIT` of the rows after the first :data:`WARM_UP_S` s late (:class:`Capacity`;
levels walked upward, so a count is probed once per level at most; no level needs more than a higher one). Where
the queries' traffics differ in phase (drawn burst onsets), one level covers the highest of them: the oracle is then
above the true optimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pacer import RunConfig

#: Seconds per window of the timetable.
GRAIN_S = 10.0
#: Levels are rounded up to the next power of (1 + this).
LEVEL_STEP = 0.02
#: A probe: seconds of constant traffic, of which the first are not judged (the first batches find no model).
PROBE_S, WARM_UP_S = 180.0, 30.0
#: The share of a probe's judged rows that may be late.
LATE_LIMIT = 0.01


def rounded_level(level: float) -> float:
    """``level`` rounded up to the grid of :data:`LEVEL_STEP` (a few parts in a million of float error ignored)."""
    if level <= 0:
        return 0.0
    step = math.log1p(LEVEL_STEP)
    return round(math.exp(math.ceil(math.log(level) / step - 1e-6) * step), 9)


def rate_functions(config: RunConfig) -> list[tuple[Callable[[float], float], float]]:
    """Each query's rate function as the run's seed draws it, with its mean (its ``rate``)."""
    from pacer_workloads import make_traffic

    out = []
    for i, q in enumerate(config.queries):
        pattern = make_traffic(q.traffic, rate=q.rate, duration=config.duration, **dict(q.traffic_params))
        out.append((pattern.drawn_rate(config.query_seed(i)), q.rate))
    return out


def window_levels(config: RunConfig, *, headroom: float, grain: float = GRAIN_S) -> list[float]:
    """Each window's level (module docstring) times ``1 + headroom``, rounded up, for the run's duration."""
    functions = rate_functions(config)
    back = max((q.deadline or 0.0) for q in config.queries)
    levels = []
    for k in range(math.ceil(config.duration / grain)):
        start = k * grain
        times = [start - back + 0.5 * j for j in range(int((back + grain) / 0.5) + 1)]
        level = max((fn(t) / mean if mean > 0 else 0.0) for fn, mean in functions for t in times if t >= 0)
        levels.append(rounded_level(level * (1.0 + headroom)))
    return levels


def late_after(report: Mapping[str, Any], warm_up: float) -> float:
    """The worst query's share of rows late among those of the series after ``warm_up`` s."""
    worst = 0.0
    for query in report["queries"].values():
        step = float(query.get("series_interval_s") or 1.0)
        rows = [row for row in query["series"] if row["t"] >= warm_up]
        arrived = sum(float(row["input_rows_per_s"]) * step for row in rows)
        late = sum(float(row.get("late_rows", 0)) for row in rows)
        worst = max(worst, late / arrived if arrived > 0 else 0.0)
    return worst


@dataclass
class Capacity:
    """The fewest executors each level needs, by probing (module docstring).

    :param base: the run whose queries are probed (their traffic replaced by constant rates).
    :param run: runs a configuration on the simulator and returns its report.
    """

    base: RunConfig
    run: Callable[[RunConfig], Mapping[str, Any]]
    probes: dict[tuple[int, float], float] = field(default_factory=dict)  # (executors, level) -> late share
    found: dict[tuple[float, int, int], int] = field(default_factory=dict)  # (level, low, high) -> its count

    def late(self, executors: int, level: float) -> float:
        """The worst query's late share of a probe at ``level`` on ``executors`` (cached)."""
        key = (executors, level)
        if key not in self.probes:
            queries = tuple(replace(q, traffic="constant", rate=level * q.rate, traffic_params={})
                            for q in self.base.queries)
            config = replace(self.base, queries=queries, duration=PROBE_S, cores=executors, scale="fixed",
                             scale_params={}, executors=None, initial_executors=None)
            self.probes[key] = late_after(self.run(config), WARM_UP_S)
        return self.probes[key]

    def fits(self, executors: int, level: float) -> bool:
        """Whether ``executors`` keep ``level`` on time."""
        return self.late(executors, level) <= LATE_LIMIT

    def needs(self, levels: Iterable[float], *, low: int, high: int) -> dict[float, int]:
        """The fewest executors in ``[low, high]`` for each level (``high`` where none fits). A level needs at least
        what the levels found below it need: from there, the next counts are tried 1, 2, 4... ahead, then bisected
        (a probe's noise can make a higher level fit where a lower one did not, so no level above bounds it)."""
        for level in sorted(set(levels)):
            if (level, low, high) in self.found:
                continue
            count = max([low, *(n for (lv, lo, hi), n in self.found.items() if lv < level and (lo, hi) == (low, high))])
            if level > 0 and not self.fits(count, level):
                miss, step = count, 1  # a count known not to fit
                while True:
                    count = min(high, miss + step)
                    if count == high or self.fits(count, level):
                        break
                    miss, step = count, step * 2
                while count - miss > 1 and self.fits(count, level):
                    middle = (miss + count) // 2
                    miss, count = (miss, middle) if self.fits(middle, level) else (middle, count)
            self.found[(level, low, high)] = count
        counts = self.counts(low=low, high=high)
        return {level: counts[level] for level in levels}

    def counts(self, *, low: int, high: int) -> dict[float, int]:
        """Every level found within ``[low, high]`` and its count, no more than any higher level's: a count that keeps
        a higher rate on time keeps a lower one (where a probe at the lower level missed, by one late dataset, its
        noise decided)."""
        out: dict[float, int] = {}
        least = high
        for (level, lo, hi), count in sorted(self.found.items(), reverse=True):
            if (lo, hi) == (low, high):
                least = min(least, count)
                out[level] = least
        return out


def timetable(levels: Sequence[float], needs: Mapping[float, int], *, bounds: tuple[int, int],
              grain: float = GRAIN_S) -> str:
    """The ``scheduled`` strategy's timetable: each window's need within ``bounds``, an entry where it changes."""
    low, high = bounds
    entries, last = [], None
    for k, level in enumerate(levels):
        count = min(high, max(low, needs[level]))
        if count != last:
            entries.append(f"{k * grain:g}:{count}")
            last = count
    return ",".join(entries)
