"""How close to the limit when queries share the cores: the least busy core-seconds any batching and schedule of
several queries' arrivals on one engine could have spent with every dataset within its query's deadline.
(:mod:`pacer_bench.bound` is the single-query bound, in engine seconds.)

**The cost** is busy core-seconds (a report's ``cost.busy_core_s``): the core-seconds the queries' tasks executed.
Under a query's :class:`CoreModel` a batch of ``B`` bytes first spends ``wall_s`` seconds holding no cores (Spark's
planning, write-ahead log and offset commits on the driver; the simulator's ``batch_overhead``), then its tasks
execute ``work(B) = core_s + core_per_byte × B`` core-seconds on at most ``m = min(cores, parallelism)`` cores, so
for at least ``work / m`` seconds. Its busy core-seconds are its work; the no-core part counts none.

**The schedules it bounds.** The engine has ``cores`` cores (the run's, constant). Each query's arrivals are cut, in
arrival order, into contiguous batches; a query runs its batches one after another (Spark never overlaps two
micro-batches of one query); a batch starts once its newest dataset has arrived and its query's previous batch has
completed, spends its no-core part, then runs its tasks non-preemptively on ``w ≤ m`` cores for ``work / w`` seconds
(it may wait for cores first); the tasks running at any time hold at most ``cores`` cores; every dataset completes
by its arrival + its query's deadline. Such a schedule spends ``Σ_q core_s_q × batches_q + core_per_byte_q ×
bytes_q`` busy core-seconds: every byte is processed, so only the batch counts vary; a watermarked aggregation adds
the engine's no-data batches (Spark's, after a batch moved the watermark and the next trigger found no data), of
which every schedule runs at least the one after its last batch (``no_data_core_s``, counted once).

**The bound** is that sum with each query's batch count replaced by a lower bound of it (:func:`fewest_batches`):
dynamic programming over the query's datasets as :func:`pacer_bench.bound.min_batches` does (per prefix, the Pareto
set of batches used and the earliest the query's last batch can have completed), with one more test per batch, the
shared engine. Each dataset ``i`` of another query ``r`` stands for ``core_per_byte_r × bytes_i`` core-seconds that
its batch, whichever it is, executes inside ``[t_i + wall_s_r, t_i + deadline_r]`` on at most ``m_r`` cores, hence
at least ``max(0, work − m_r × (that window's time outside [s, e]))`` of it inside any ``[s, e]`` (its mandatory
part; a batch's datasets' parts add up to no more than the batch's work inside ``[s, e]``). A batch of the query
whose tasks can start at ``s`` completes at the earliest ``E ≥ s + work / m`` at which its work and the others'
mandatory parts inside ``[s, E]`` fit in ``cores × (E − s)``, and by its oldest dataset's deadline. In a schedule
that meets every deadline, each batch's tasks lie inside ``[s, E]`` for every ``s`` no later than they start, so the
schedule's batchings pass these tests and each query's fewest batches under them is at most its own: the bound is at
most the busy core-seconds of any schedule meeting every deadline (``tests/test_shared_bound.py`` checks it against
every batching and every order and start of the batches, on 2-3 queries of up to 5 datasets on 1-2 cores). What is
relaxed: the other queries' batching, per-batch work and order (only each dataset's per-byte work and window stay),
and the test looks at one batch's interval at a time. For one query the test adds nothing, and the programme is exact.

:func:`overload` first checks every query's datasets together (Horn's condition: the work of the datasets whose
windows lie inside ``[s, e]`` fits in ``cores × (e − s)``, for every ``s`` a window opens and ``e`` one closes).
Where it fails, or a query has no batching that passes its tests, no schedule meets every deadline: no bound (None,
and the reason). **Exact where shown**: :func:`witness` schedules the batchings the programme found (batches by
deadline, each non-preemptively on the cores, up to ``m``, that complete it earliest); where every dataset makes its
deadline there, a schedule spends exactly the bound, which is then the least (``SharedBound.exact``). Elsewhere
:func:`attained` looks for batchings of smaller batches that leave the other queries room: the least busy
core-seconds of the schedules it finds (``SharedBound.attained_core_s``) is at least the least of all, which then
lies between the two.

**The model.** On the simulator (:func:`known_model`): its own cost model from the report's ``config.cost_model``
(every scalar the run recorded, ``fixed_task_share`` included) without noise, for the query's operators all on the
CPU: ``wall_s`` = the driver's part of ``batch_overhead``, ``core_s`` = the tasks' work for an empty batch (their
fixed part and each operator's fixed CPU time per partition × partitions), ``core_per_byte`` = its growth per byte over
the first kilobyte (exact for the built-in linear curves; for the join's superlinear term, below the curve beyond a
kilobyte), ``no_data_core_s`` = its no-data batch's tasks where the run had a watermark and the query aggregates; a
query whose costs came from an engine profile (``config.calibrated``, ``--calibrated``) gets the profile's figures;
runs with measured curves or GPU operators get the fitted one. Elsewhere (:func:`fitted_model`): from the engine-time fit of
:mod:`pacer_bench.bound` (``fixed_s + per_byte_s × bytes`` on the engine alone): ``wall_s`` = ``fixed_s``, ``core_s``
= 0 (which part of the fixed time holds cores is not known: none is assumed, which keeps the bound low),
``core_per_byte`` = ``m × per_byte_s`` (the per-byte part on all ``m`` cores). The simulator's noise (a factor per
batch, σ 3 %) is left out, so a run can come a little below the bound.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from pacer_bench.bound import ServiceFit, scheduled_arrivals

#: Slack on every time and capacity comparison (seconds, core-seconds), for floating-point sums.
_EPS = 1e-9


@dataclass(frozen=True)
class CoreModel:
    """What a batch of a query costs: ``wall_s`` seconds holding no cores, then ``core_s + core_per_byte × bytes``
    core-seconds of tasks on at most ``parallelism`` cores.

    :param source: ``known`` (the simulator's own cost model, or the engine profile a simulated query's costs came
        from), ``fitted`` (from the engine-time fit) or ``calibrated`` (from the engine profile a Spark run started
        from).
    :param no_data_core_s: the busy core-seconds of the engine's no-data batch (Spark's, after a batch moved a
        watermarked aggregation's watermark; 0 for a query that runs none): every schedule runs at least the one
        after its last batch, so the bound counts one (:meth:`spent`).
    """

    wall_s: float
    core_s: float
    core_per_byte: float
    parallelism: int
    source: str = "known"
    no_data_core_s: float = 0.0

    def work(self, nbytes: float) -> float:
        """The busy core-seconds of one batch of ``nbytes``."""
        return self.core_s + self.core_per_byte * nbytes

    def spent(self, batches: int, total_bytes: float) -> float:
        """The busy core-seconds of ``batches`` batches of ``total_bytes`` in all, and the no-data batch after the
        last (which follows whatever the batching: no data comes after it)."""
        return self.core_s * batches + self.core_per_byte * total_bytes + self.no_data_core_s

    def cores(self, engine_cores: int) -> int:
        """The most cores one batch can hold on an engine of ``engine_cores``."""
        return max(1, min(engine_cores, self.parallelism))

    def as_dict(self) -> dict[str, Any]:
        """Plain values for a report: no-core ms, core ms per batch, core-s per MB, parallelism, source."""
        return {"wall_ms": round(1000.0 * self.wall_s, 3), "core_ms": round(1000.0 * self.core_s, 3),
                "core_s_per_mb": round(self.core_per_byte * 1e6, 4), "parallelism": self.parallelism,
                "source": self.source, "no_data_core_ms": round(1000.0 * self.no_data_core_s, 3)}


@dataclass(frozen=True)
class SharedQuery:
    """One query of a shared engine: its datasets ``(arrival time, bytes)`` in arrival order, deadline and model."""

    query_id: str
    arrivals: tuple[tuple[float, float], ...]
    deadline_s: float
    model: CoreModel


@dataclass(frozen=True)
class QueryShare:
    """One query's part of a :class:`SharedBound`.

    :param alone: the fewest batches with the engine to itself; None where no batching meets the deadline.
    :param batches: the fewest batches beside the other queries' work (:func:`fewest_batches`); None where none.
    :param sizes: the datasets per batch of a batching with ``batches`` batches.
    :param core_s: ``core_s × batches + core_per_byte × total_bytes`` and one no-data batch
        (:meth:`CoreModel.spent`); None where no batching meets the deadline.
    """

    query_id: str
    deadline_s: float
    model: CoreModel
    datasets: int
    total_bytes: float
    alone: int | None
    batches: int | None
    sizes: tuple[int, ...]
    core_s: float | None


@dataclass(frozen=True)
class SharedBound:
    """The least busy core-seconds of the queries on an engine of ``cores`` cores with every deadline met.

    :param core_s: the bound (the queries' ``core_s`` summed); None where no schedule meets every deadline.
    :param alone_core_s: the same with each query's batches as if it had the engine to itself (≤ ``core_s``).
    :param exact: a schedule meeting every deadline spends exactly ``core_s`` (:func:`witness`): it is the least.
    :param attained_core_s: the least busy core-seconds of the schedules meeting every deadline found
        (:func:`attained`): the least of all lies between ``core_s`` and it; None where none was found.
    :param reason: why there is no bound, where there is none.
    """

    cores: int
    queries: tuple[QueryShare, ...]
    core_s: float | None
    alone_core_s: float | None
    exact: bool
    attained_core_s: float | None = None
    reason: str | None = None


# ---------------------------------------------------------------------- the others' mandatory work


@dataclass(frozen=True)
class _Window:
    """A dataset of another query: ``work`` core-seconds inside ``[start, end]`` on at most ``rate`` cores; its
    mandatory part inside an interval is positive once the interval covers more than ``slack`` of the window."""

    start: float
    end: float
    work: float
    rate: int
    slack: float

    def mandatory(self, s: float, e: float) -> float:
        """Core-seconds of it that must run inside ``[s, e]``."""
        inside = max(0.0, min(self.end, e) - max(self.start, s))
        return max(0.0, self.work - self.rate * (self.end - self.start - inside))


def _windows(query: SharedQuery, cores: int) -> list[_Window]:
    """Each dataset of ``query`` as a :class:`_Window`: its per-byte work inside ``[t + wall_s, t + deadline]``."""
    model, m = query.model, query.model.cores(cores)
    out = []
    for t, b in query.arrivals:
        start, end, work = t + model.wall_s, t + query.deadline_s, model.core_per_byte * b
        out.append(_Window(start, end, work, m, end - start - work / m))
    return out


class _Background:
    """The other queries' datasets, sorted by where their windows open."""

    def __init__(self, windows: Sequence[_Window]) -> None:
        self.windows = sorted((w for w in windows if w.work > 0), key=lambda w: w.start)
        self.starts = [w.start for w in self.windows]
        self.longest = max((w.end - w.start for w in self.windows), default=0.0)

    def within(self, s: float, due: float) -> list[_Window]:
        """The windows that can have a positive mandatory part inside some ``[s, E]``, ``E ≤ due``."""
        lo = bisect.bisect_left(self.starts, s - self.longest - _EPS)
        hi = bisect.bisect_left(self.starts, due)
        return [w for w in self.windows[lo:hi] if min(w.end, due) - max(w.start, s) > w.slack + _EPS]


def _earliest(s: float, work: float, m: int, cores: int, due: float, background: _Background | None) -> float | None:
    """The earliest completion ``E ≤ due`` of a batch whose tasks (``work`` core-seconds on at most ``m`` cores) start
    no earlier than ``s``, such that its work and the background's mandatory parts inside ``[s, E]`` fit in
    ``cores × (E − s)``; None where no ``E ≤ due`` passes."""
    first = s + work / m
    if first > due + _EPS:
        return None
    windows = background.within(s, due) if background is not None else []
    if not windows:
        return first

    def spare(e: float) -> float:  # piecewise linear in e, breaking where a window's mandatory part starts or stops
        return cores * (e - s) - work - sum(w.mandatory(s, e) for w in windows)

    low, at_low = first, spare(first)
    if at_low >= -_EPS:
        return first
    breaks = {due}
    for w in windows:
        opens = max(w.start, s)
        breaks.update(p for p in (opens, opens + w.slack, w.end) if first < p < due)
    for p in sorted(breaks):
        at_p = spare(p)
        if at_p >= -_EPS:
            return min(p, low + (p - low) * -at_low / (at_p - at_low))
        low, at_low = p, at_p
    return None


# ---------------------------------------------------------------------- each query's fewest batches


def fewest_batches(query: SharedQuery, cores: int,
                   others: Sequence[SharedQuery] = ()) -> tuple[int, tuple[int, ...]] | None:
    """The fewest contiguous batches of ``query``'s arrivals that pass the shared engine's tests beside ``others``'
    datasets (module docstring), and the datasets per batch of one such batching; None where no batching does.
    With no ``others``, exactly the fewest batches with the engine to itself (``cores`` of it)."""
    model, m = query.model, query.model.cores(cores)
    background = _Background([w for o in others for w in _windows(o, cores)]) if others else None
    times = [t for t, _ in query.arrivals]
    prefix = [0.0]
    for _, b in query.arrivals:
        prefix.append(prefix[-1] + b)
    # fronts[j]: (batches, completed at, first dataset of the last batch, index of the state before it in fronts[i])
    # over the batchings of datasets 0..j-1 that pass, batches increasing and completion strictly decreasing.
    fronts: list[list[tuple[int, float, int, int]]] = [[(0, -math.inf, -1, -1)]]
    for j in range(1, len(times) + 1):
        newest = times[j - 1]
        candidates: list[tuple[int, float, int, int]] = []
        for i in range(j, 0, -1):  # the batch is datasets i-1..j-1
            due = times[i - 1] + query.deadline_s + _EPS
            work = model.work(prefix[j] - prefix[i - 1])
            if newest + model.wall_s + work / m > due:  # even on an idle engine; older first datasets only worse
                break
            for k, (batches, free, _, _) in enumerate(fronts[i - 1]):
                done = _earliest(max(free, newest) + model.wall_s, work, m, cores, due, background)
                if done is not None:
                    candidates.append((batches + 1, done, i - 1, k))
        front: list[tuple[int, float, int, int]] = []
        for cand in sorted(candidates):  # by batches, then completion: a count's first is its earliest
            if not front or cand[1] < front[-1][1]:
                front.append(cand)
        fronts.append(front)
    if not fronts[-1]:
        return None
    sizes: list[int] = []
    j, k = len(times), 0
    while j > 0:
        _, _, i, k = fronts[j][k]
        sizes.append(j - i)
        j = i
    return fronts[-1][0][0], tuple(reversed(sizes))


def overload(queries: Sequence[SharedQuery], cores: int) -> str | None:
    """Why no schedule can meet every deadline by Horn's condition over every query's datasets together (the work of
    the datasets whose windows lie inside ``[s, e]`` exceeds ``cores × (e − s)``), or None where it holds."""
    windows = sorted((w for q in queries for w in _windows(q, cores)), key=lambda w: w.end)
    for s in sorted({w.start for w in windows}):
        total = 0.0
        for w in windows:
            if w.start >= s - _EPS:
                total += w.work
                if total > cores * (w.end - s) + _EPS:
                    return (f"{total:.3f} core-s of datasets must run within [{s:.3f}, {w.end:.3f}] s: more than "
                            f"{cores} cores × {w.end - s:.3f} s")
    return None


# ---------------------------------------------------------------------- a schedule that attains it


def witness(queries: Sequence[SharedQuery], sizes: Sequence[Sequence[int]], cores: int) -> bool:
    """Whether scheduling the batchings ``sizes`` (datasets per batch, per query) meets every deadline: batches taken
    by deadline (a query's in order), each non-preemptively on the cores (up to ``m``) that complete it earliest, at
    the earliest time they are free after its no-core part. True shows a schedule spending exactly those batchings'
    busy core-seconds."""
    jobs: list[tuple[float, int, int, float, float, float]] = []  # (due, query, batch, newest, work, wall)
    for qi, (query, cuts) in enumerate(zip(queries, sizes, strict=True)):
        first = 0
        for bi, size in enumerate(cuts):
            batch = query.arrivals[first:first + size]
            jobs.append((batch[0][0] + query.deadline_s, qi, bi, batch[-1][0],
                         query.model.work(sum(b for _, b in batch)), query.model.wall_s))
            first += size
    done = [-math.inf] * len(queries)
    placed: list[tuple[float, float, int]] = []  # (start, end, cores) of every batch's tasks
    for due, qi, _, newest, work, wall in sorted(jobs):
        ready = max(newest, done[qi]) + wall
        end, width = math.inf, 0
        for w in range(queries[qi].model.cores(cores), 0, -1):  # the most cores first: a tie keeps them
            finish = _first_fit(placed, ready, work / w, w, cores) + work / w
            if finish < end - _EPS:
                end, width = finish, w
        if end > due + _EPS:
            return False
        if work > 0:
            placed.append((end - work / width, end, width))
        done[qi] = end
    return True


#: Deadline fractions :func:`attained` plans the queries' batchings for (each alone), to leave room for the others.
_SHRINK = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1)


def attained(queries: Sequence[SharedQuery], cores: int) -> float | None:
    """The least busy core-seconds of the schedules found that meet every deadline (so the least of all lies between
    the bound and it), or None where none was found. Each query's candidate batchings are its fewest batches alone
    under its deadline × each of :data:`_SHRINK` (smaller batches leave the others room): first the largest fraction,
    the same for every query, that :func:`witness` schedules, then each query in turn the largest that still does."""
    options = []
    for q in queries:
        found = []
        for f in _SHRINK:
            fewest = fewest_batches(SharedQuery(q.query_id, q.arrivals, q.deadline_s * f, q.model), cores)
            if fewest is None:
                break
            found.append(fewest)
        if not found:
            return None
        options.append(found)

    def schedules(pick: Sequence[int]) -> bool:
        return witness(queries, [options[n][i][1] for n, i in enumerate(pick)], cores)

    pick = next(([min(i, len(o) - 1) for o in options] for i in range(len(_SHRINK))
                 if schedules([min(i, len(o) - 1) for o in options])), None)
    if pick is None:
        return None
    for n in range(len(queries)):
        for i in range(pick[n]):  # the largest fraction first
            if schedules([*pick[:n], i, *pick[n + 1:]]):
                pick[n] = i
                break
    return sum(q.model.spent(options[n][i][0], sum(b for _, b in q.arrivals))
               for n, (q, i) in enumerate(zip(queries, pick, strict=True)))


def _first_fit(placed: Sequence[tuple[float, float, int]], ready: float, length: float, m: int, cores: int) -> float:
    """The earliest start ≥ ``ready`` at which ``m`` cores are free for ``length`` seconds beside ``placed``."""
    if length <= 0:  # no work: holds no cores
        return ready
    live = [p for p in placed if p[1] > ready + _EPS]
    for start in sorted({ready, *(end for _, end, _ in live if end > ready)}):
        end = start + length
        points = [start, *(s for s, _, _ in live if start < s < end)]
        if all(sum(c for s, e, c in live if s <= p + _EPS and e > p + _EPS) + m <= cores for p in points):
            return start
    return max([ready, *(e for _, e, _ in live)])  # after everything: always free


# ---------------------------------------------------------------------- the bound


def shared_bound(queries: Sequence[SharedQuery], cores: int) -> SharedBound:
    """:class:`SharedBound` of ``queries`` on an engine of ``cores`` cores (cached)."""
    return _shared_bound(tuple(queries), int(cores))


@lru_cache(maxsize=256)
def _shared_bound(queries: tuple[SharedQuery, ...], cores: int) -> SharedBound:
    shares = []
    for n, q in enumerate(queries):
        alone = fewest_batches(q, cores)
        others = queries[:n] + queries[n + 1:]
        shared = fewest_batches(q, cores, others) if alone is not None else None
        total = sum(b for _, b in q.arrivals)
        k = shared[0] if shared is not None else None
        shares.append(QueryShare(q.query_id, q.deadline_s, q.model, len(q.arrivals), total,
                                 alone[0] if alone is not None else None, k, shared[1] if shared is not None else (),
                                 None if k is None else q.model.spent(k, total)))
    alone_total = (None if any(s.alone is None for s in shares) else
                   sum(s.model.spent(s.alone, s.total_bytes) for s in shares if s.alone is not None))
    reason = overload(queries, cores)
    missing = [s.query_id for s in shares if s.core_s is None]
    if reason is None and missing:
        reason = f"no batching of {', '.join(missing)} meets its deadline beside the other queries' work"
    if reason is not None:
        return SharedBound(cores, tuple(shares), None, alone_total, False, None, reason)
    total = sum(s.core_s for s in shares if s.core_s is not None)
    if witness(queries, [s.sizes for s in shares], cores):
        return SharedBound(cores, tuple(shares), total, alone_total, True, total)
    found = attained(queries, cores)
    return SharedBound(cores, tuple(shares), total, alone_total, found is not None and found <= total + _EPS, found)


# ---------------------------------------------------------------------- reading a bench run's reports


def known_model(report: Mapping[str, Any], query_id: str) -> CoreModel | None:
    """The simulator's own cost model of ``query_id`` in ``report`` (module docstring), or None where the report is
    not the simulator's, has measured curves, or the query's operators can run on a GPU."""
    config = report.get("config") or {}
    cost = config.get("cost_model")
    if report.get("runtime") != "sim" or not isinstance(cost, Mapping):
        return None
    query = next((q for q in config.get("queries") or () if q.get("query_id") == query_id), None)
    if query is None:
        return None
    partitions = int(query.get("partitions") or 1)
    calibrated = (config.get("calibrated") or {}).get(query_id)
    if calibrated is not None:  # its costs came from Spark's engine profile, not from the curves
        share = float(calibrated["scalars"]["fixed_task_share"].get("value") or 0.0)
        no_data = calibrated.get("no_data_core_s") if config.get("watermark_s") is not None else None
        return CoreModel(float(calibrated["fixed_s"]) * (1.0 - share), float(calibrated["fixed_core_s"]),
                         float(calibrated["core_s_per_mb"]) / 1e6, partitions, "known", float(no_data or 0.0))
    if cost.get("measured") or (int(config.get("gpus") or 0) > 0 and query.get("placement") != "cpu-only"):
        return None
    from pacer import Dataset, MicroBatch, Placement
    from pacer_sim import CostModel, OperatorCost, batch_work
    from pacer_sim.costs import no_data_work
    from pacer_sim.stateful import runs_no_data_batches
    from pacer_workloads import make_query

    model = replace(CostModel(), operators={k: OperatorCost(**v) for k, v in cost["operators"].items()},
                    cpu_only_operators=frozenset(cost.get("cpu_only_operators") or ()))
    scalars = {k: v for k, v in cost.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    model = replace(model.with_overrides(scalars), noise=0.0)  # every scalar the run recorded
    spec = make_query(str(query["workload"]), query_id=query_id, partitions=partitions)

    def tasks(nbytes: int) -> tuple[float, float]:
        batch = MicroBatch("bound", query_id, 0, (Dataset("bound", 0.0, nbytes, 1),), 0.0, placement=Placement({}))
        work = batch_work(model, spec, batch, gpus=0, seed=0)
        return work.fixed_s + work.gpu_s, work.cpu_core_s

    wall, empty = tasks(0)
    _, one = tasks(1000)
    watermarked = config.get("watermark_s") is not None and runs_no_data_batches(spec)
    no_data = no_data_work(model, spec, 1, seed=0).cpu_core_s if watermarked else 0.0
    return CoreModel(wall, empty, max(0.0, one - empty) / 1000.0, partitions, "known", no_data)


def fitted_model(fit: ServiceFit | None, cores: int, parallelism: int) -> CoreModel | None:
    """A :class:`CoreModel` from an engine-time fit on ``cores`` cores (module docstring); None without a stable fit
    (:attr:`pacer_bench.bound.ServiceFit.stable`). A calibrated fit's engine profile measured which part of a batch
    holds cores: ``wall_s`` its no-core part, ``core_s`` a tiny batch's core-seconds, ``core_per_byte`` its
    tasks' core-seconds per byte, ``no_data_core_s`` its no-data batch's where it measured one (source
    ``calibrated``)."""
    if fit is None or not fit.stable:
        return None
    if fit.profile is not None:
        p = fit.profile
        return CoreModel(p.wall_s, p.fixed_core_s, p.core_s_per_byte, max(1, min(cores, parallelism)), "calibrated",
                         p.no_data_core_s or 0.0)
    m = max(1, min(cores, parallelism))
    return CoreModel(fit.fixed_s, 0.0, m * fit.per_byte_s, m, "fitted")


def why_no_model(report: Mapping[str, Any], query_id: str, fit: ServiceFit | None) -> str | None:
    """Why ``query_id`` of ``report`` has no part in a shared bound (None: it has arrivals and a model), in words a
    table can print: arrivals that cannot be regenerated come first, then a missing or unstable fit."""
    if scheduled_arrivals(report, query_id) is None:
        return "its arrivals cannot be regenerated (a Kafka run: the producer wrote them on the wall clock)"
    if known_model(report, query_id) is not None:
        return None
    if fit is None:
        return "no model: not the simulator's, and its batches are too few or of one size to fit"
    if not fit.stable and fit.profile is not None:
        return (f"its engine profile's line misses the large batches it measured by {fit.profile.relative_rms:.0%} of "
                f"their time (residuals {1000.0 * fit.rms_s:.0f} ms RMS): its cost does not grow with the batch alone")
    if not fit.stable:
        return (f"no stable fit of its engine time over {fit.batches} batches (sizes span {fit.span:.2f}×, slope "
                f"error {fit.slope_error:.2f} of the slope, residuals {1000.0 * fit.rms_s:.0f} ms RMS)")
    return None


def report_shared_bound(report: Mapping[str, Any], deadlines: Mapping[str, float],
                        fits: Mapping[str, ServiceFit | None]) -> SharedBound | None:
    """The shared-engine bound of every query of ``report`` on its own arrivals and cores, each under its
    :func:`known_model` or else its :func:`fitted_model`; None where a query has neither, or no arrivals can be
    regenerated (a Kafka run)."""
    cores = int(report.get("cores") or (report.get("config") or {}).get("cores") or 1)
    run = (report.get("config") or {}).get("run") or {}
    queries = []
    for query_id in sorted(report.get("queries") or {}):
        arrivals = scheduled_arrivals(report, query_id)
        model = known_model(report, query_id) or fitted_model(fits.get(query_id), cores,
                                                              int(run.get("partitions") or 1))
        if arrivals is None or model is None:
            return None
        queries.append(SharedQuery(query_id, tuple(arrivals), float(deadlines[query_id]), model))
    return shared_bound(queries, cores)
