"""How close to the limit: the least engine time any batching could have spent on a run's arrivals and still
met a deadline.

**Service model.** A batch of ``bytes`` costs the engine ``fixed_s + per_byte_s × bytes``: pacer's own model
(:mod:`pacer.service_time`), fitted here by ordinary least squares (coefficients kept ≥ 0) to the batches the
bench run's configurations of the same query and traffic processed, bytes → what the batch cost the engine
(``BatchReport.cost_s``: Spark's trigger execution, the simulator's service time), each run's first batch left
out (on Spark it pays one-time costs), and only batches during which no other query's batch ran where there are
enough of them (several queries sharing the cores stretch each other's batches; the bound takes the engine as
the query's own). Pooling every configuration gives the fit small and large batches alike: a single run's
batches are often all of one size, which leaves the per-byte part undetermined.

**A calibrated fit.** Where the runs started from an engine profile (``pacer calibrate``, :func:`calibrated_fit`), it
is the service model: measured on tiny and large batches chosen to separate the parts, it is stable where its line
fits the large batches (:data:`STABLE_RELATIVE_RMS`).

**A bound only from a stable fit.** Each fit reports its error (the residuals' root mean square, and the per-byte
slope's standard error); a bound is computed only where the fit is *stable* (:attr:`ServiceFit.stable`): at least
:data:`STABLE_BATCHES` batches whose sizes span at least :data:`STABLE_SPAN` × from the smallest to the largest,
and a per-byte slope whose standard error is at most :data:`STABLE_SLOPE_ERROR` of the slope. Elsewhere the split
into fixed and per-byte cost is noise (two runs of the same Spark query fitted per-byte costs 50× apart), and a
"bound" from it bounds nothing.

**The bound.** A micro-batch is a range of source offsets, so a batching is a partition of the arrivals, in
arrival order, into contiguous batches, processed one after another by one engine (a query's micro-batches
never overlap): a batch starts once its newest dataset has arrived and the previous batch has completed, and
meets the deadline when it completes by its oldest dataset's arrival + the deadline. Every dataset is
processed, so the engine time of a batching is ``fixed_s × batches + per_byte_s × total bytes``; the second
term is the same for every batching, and the least engine time is the least number of batches.

Greedy batching (each batch the largest that still meets its oldest dataset's deadline, "as late as the
deadline allows") is not optimal: a larger batch keeps the engine idle until its newest dataset arrives and
busy later, which can make the next batches miss (``tests/test_bound.py`` has a four-dataset case where greedy
misses and three batches meet the deadline). :func:`min_batches` computes the exact minimum by dynamic
programming over dataset indices: for every prefix of the arrivals, the Pareto set of (batches used, earliest
time the engine is free) over the batchings of that prefix that meet the deadline. A batching with no more
batches and an engine free no later dominates (a batch completes no later when it can start no later), so
the Pareto set is all that later batches need. A batch holds only datasets within the deadline of its oldest
(it cannot start before its newest arrived), which bounds the inner loop to one deadline's datasets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pacer.engine_profile import EngineProfile

#: Bytes are fitted in megabytes to keep the normal equations well conditioned.
_MB = 1e6
#: Slack on every deadline comparison (seconds), for floating-point sums.
_EPS = 1e-9
#: A stable fit (module docstring): batches, the span of their sizes, the slope's standard error over the slope.
STABLE_BATCHES = 8
STABLE_SPAN = 2.0
STABLE_SLOPE_ERROR = 0.25
#: A calibrated fit (an engine profile) is stable where its residuals on the large batches are at most this share of
#: their engine time (:attr:`pacer.engine_profile.EngineProfile.relative_rms`).
STABLE_RELATIVE_RMS = 0.25


@dataclass(frozen=True)
class ServiceFit:
    """A fitted service model: a batch of ``bytes`` costs ``fixed_s + per_byte_s × bytes`` seconds of engine time.

    :param batches: how many batches it was fitted to; ``rms_s``: the root mean square of its residuals (seconds);
        ``slope_error``: the per-byte slope's standard error over the slope (inf for a zero slope); ``span``: the
        largest batch's bytes over the smallest's.
    """

    fixed_s: float
    per_byte_s: float
    batches: int = 0
    rms_s: float = 0.0
    slope_error: float = 0.0
    span: float = math.inf
    #: The engine profile it comes from (:func:`calibrated_fit`), None for one fitted to the runs' own batches.
    profile: EngineProfile | None = None

    @property
    def stable(self) -> bool:
        """Whether its split into fixed and per-byte cost is determined (module docstring: the criterion): a
        calibrated one measured tiny batches for the one and large ones for the other, and is stable where the
        line fits the large ones (:data:`STABLE_RELATIVE_RMS`)."""
        if self.profile is not None:
            return self.profile.relative_rms <= STABLE_RELATIVE_RMS
        return self.batches >= STABLE_BATCHES and self.span >= STABLE_SPAN and self.slope_error <= STABLE_SLOPE_ERROR

    def cost(self, nbytes: float) -> float:
        """The engine time of one batch of ``nbytes``."""
        return self.fixed_s + self.per_byte_s * nbytes

    def as_dict(self) -> dict[str, Any]:
        """Plain values for a report: fixed ms, ms per MB and the batches fitted (or calibrated on)."""
        return {"fixed_ms": round(1000.0 * self.fixed_s, 3), "ms_per_mb": round(1000.0 * self.per_byte_s * _MB, 3),
                "batches": self.batches, "rms_ms": round(1000.0 * self.rms_s, 3),
                "slope_error": round(self.slope_error, 4) if math.isfinite(self.slope_error) else None,
                "stable": self.stable, "calibrated": self.profile is not None}


def calibrated_fit(profile: EngineProfile) -> ServiceFit:
    """The service model an engine profile measured (``pacer calibrate``): its fixed part from tiny batches, its
    per-byte part from large ones, on the slots it was measured on."""
    return ServiceFit(profile.fixed_s, profile.engine_s_per_byte, len(profile.points), rms_s=profile.rms_s,
                      profile=profile)


def report_profile(report: Mapping[str, Any], query_id: str) -> EngineProfile | None:
    """The engine profile ``report``'s run started ``query_id`` from (its Spark options' ``engine_profile``), where it
    was measured on the query's workload; None without one."""
    from pacer.engine_profile import load

    config = report.get("config") or {}
    path = (((config.get("run") or {}).get("options") or {}).get(str(report.get("runtime"))) or {}).get(
        "engine_profile")
    query: Mapping[str, Any] = next((q for q in config.get("queries") or () if q.get("query_id") == query_id), {})
    if not path:
        return None
    profile = load(str(path))
    return profile if profile.applies_to(query.get("workload")) else None


def fit_service(points: Iterable[tuple[float, float]]) -> ServiceFit | None:
    """Least-squares ``engine_s ≈ fixed_s + per_byte_s × bytes`` over ``(bytes, engine_s)`` points, both
    coefficients ≥ 0 (a negative one is set to 0 and the other refitted alone).

    :return: None with fewer than two distinct batch sizes (the split into fixed and per-byte is then undetermined).
    """
    pts = [(float(b) / _MB, float(s)) for b, s in points]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    slope = sxy / sxx
    fixed = my - slope * mx
    if slope < 0:  # cost does not grow with bytes here: all of it fixed
        fixed, slope = max(my, 0.0), 0.0
    elif fixed < 0:  # through the origin
        slope = sum(x * y for x, y in pts) / sum(x * x for x, _ in pts)
        fixed = 0.0
    residuals = [y - fixed - slope * x for x, y in pts]
    rss = sum(r * r for r in residuals)
    slope_se = math.sqrt(rss / (n - 2) / sxx) if n > 2 else math.inf
    smallest = min(x for x, _ in pts)
    return ServiceFit(fixed, slope / _MB, n, rms_s=math.sqrt(rss / n),
                      slope_error=slope_se / slope if slope > 0 else math.inf,
                      span=max(x for x, _ in pts) / smallest if smallest > 0 else math.inf)


def min_batches(arrivals: Sequence[tuple[float, float]], deadline_s: float, fit: ServiceFit) -> int | None:
    """The least number of contiguous batches, processed one after another, in which every dataset of
    ``arrivals`` (``(arrival time, bytes)``, in arrival order) completes within ``deadline_s`` of its arrival,
    each batch costing ``fit.cost(bytes)``; None when no batching does (a dataset alone cannot make it).

    Exact, by dynamic programming over dataset indices (module docstring); 0 for no arrivals.
    """
    n = len(arrivals)
    times = [float(t) for t, _ in arrivals]
    prefix = [0.0]
    for _, b in arrivals:
        prefix.append(prefix[-1] + float(b))
    # fronts[j]: Pareto set of (batches, engine free at) over the feasible batchings of datasets 0..j-1,
    # batches increasing and free time strictly decreasing.
    fronts: list[list[tuple[int, float]]] = [[(0, -math.inf)]]
    for j in range(1, n + 1):
        newest = times[j - 1]
        candidates: list[tuple[int, float]] = []
        for i in range(j, 0, -1):  # the batch is datasets i-1..j-1
            due = times[i - 1] + deadline_s + _EPS
            work = fit.cost(prefix[j] - prefix[i - 1])
            if newest + work > due:  # even on an idle engine; older first datasets only make it worse
                break
            for batches, free in fronts[i - 1]:
                done = max(free, newest) + work
                if done <= due:
                    candidates.append((batches + 1, done))
        fronts.append(_pareto(candidates))
    return fronts[n][0][0] if fronts[n] else None


def _pareto(candidates: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The (batches, free time) pairs no other pair beats on both."""
    out: list[tuple[int, float]] = []
    for batches, free in sorted(candidates):  # by batches, then free time: a count's first is its earliest
        if not out or free < out[-1][1]:
            out.append((batches, free))
    return out


@dataclass(frozen=True)
class EngineBound:
    """The least engine time a batching of a run's arrivals could have spent and met the deadline.

    :param batches: the least number of batches (:func:`min_batches`); None when no batching meets it.
    :param engine_s: ``fit.fixed_s × batches + fit.per_byte_s × total bytes``; None when no batching meets it.
    """

    deadline_s: float
    fit: ServiceFit
    datasets: int
    total_bytes: float
    batches: int | None
    engine_s: float | None


@lru_cache(maxsize=4096)
def _bound(arrivals: tuple[tuple[float, float], ...], deadline_s: float, fit: ServiceFit) -> EngineBound:
    k = min_batches(arrivals, deadline_s, fit)
    total = sum(b for _, b in arrivals)
    engine = None if k is None else fit.fixed_s * k + fit.per_byte_s * total
    return EngineBound(deadline_s, fit, len(arrivals), total, k, engine)


def engine_bound(arrivals: Sequence[tuple[float, float]], deadline_s: float, fit: ServiceFit) -> EngineBound:
    """:class:`EngineBound` of ``arrivals`` (``(time, bytes)``) under ``deadline_s`` and ``fit`` (cached)."""
    return _bound(tuple((float(t), float(b)) for t, b in arrivals), float(deadline_s), fit)


# ---------------------------------------------------------------------- reading a bench run's reports


def scheduled_arrivals(report: Mapping[str, Any], query_id: str) -> list[tuple[float, float]] | None:
    """The ``(arrival time, bytes)`` of every dataset ``query_id`` of ``report`` received, regenerated from the run's
    configuration (``config.run``) exactly as the runtimes lay them out (``pacer_workloads.schedule_arrivals``
    over ``make_traffic``, the query's seed, bytes by :func:`pacer.arrival_dataset`); None where the report
    cannot say (no ``config.run``, a Kafka run, whose traffic a producer wrote on the wall clock)."""
    run_dict = (report.get("config") or {}).get("run")
    if not isinstance(run_dict, Mapping) or (report.get("bench") or {}).get("source") == "kafka":
        return None
    from pacer import RunConfig, arrival_dataset
    from pacer_workloads import WORKLOADS, bytes_per_row, make_traffic, schedule_arrivals

    run = RunConfig.from_dict(run_dict)
    ids = run.query_ids()
    if query_id not in ids:
        return None
    index = ids.index(query_id)
    q = run.queries[index]
    period = float(run.options_for(str(report.get("runtime", "sim"))).get("period", 1.0))
    pattern = make_traffic(q.traffic, rate=q.rate, duration=run.duration, **dict(q.traffic_params))
    per_row = bytes_per_row(WORKLOADS[q.workload].stream)
    return [(a.time, float(arrival_dataset(query_id, a, per_row).bytes))
            for a in schedule_arrivals(pattern, duration=run.duration, seed=run.query_seed(index), period=period)]


def batch_points(report: Mapping[str, Any], query_id: str, *, skip_first: bool = True,
                 solo: bool = False) -> list[tuple[float, float]]:
    """``(bytes, engine_s)`` of every batch of ``query_id`` the bench recorded at run time (``bench.batches``:
    ``[bytes, engine_s, started_at, completed_at]``, :func:`pacer_bench.tables.record_latencies`), the first left
    out when ``skip_first``; with ``solo`` only those during which no other query's batch ran (the engine's own
    cost, not stretched by sharing the cores)."""
    every = (report.get("bench") or {}).get("batches") or {}
    rows = (every.get(query_id) or [])[1 if skip_first else 0:]
    if solo:
        others = sorted((float(b[2]), float(b[3])) for q, batches in every.items() if q != query_id
                        for b in batches if len(b) >= 4)
        rows = [b for b in rows if len(b) >= 4 and not _overlaps(float(b[2]), float(b[3]), others)]
    return [(float(b[0]), float(b[1])) for b in rows]


def _overlaps(start: float, end: float, spans: Sequence[tuple[float, float]]) -> bool:
    """Whether ``(start, end)`` overlaps any of ``spans`` (sorted by start) by more than an instant."""
    for s, e in spans:
        if s >= end - _EPS:
            return False
        if e > start + _EPS:
            return True
    return False


def pooled_fit(reports: Iterable[Mapping[str, Any]], query_id: str) -> ServiceFit | None:
    """The engine profile the runs started from, where they did (:func:`calibrated_fit`); else :func:`fit_service`
    over the batches of ``query_id`` in ``reports`` that ran alone (each report's first batch left out;
    :func:`batch_points` ``solo``), or over all of them where those alone have fewer than two sizes: the cost of a
    batch with the engine to itself, which is what the bound assumes."""
    group = [r for r in reports if query_id in r.get("queries", {})]
    profile = next((p for r in group if (p := report_profile(r, query_id)) is not None), None)
    if profile is not None:
        return calibrated_fit(profile)
    alone = fit_service(p for r in group for p in batch_points(r, query_id, solo=True))
    return alone if alone is not None else fit_service(p for r in group for p in batch_points(r, query_id))


def report_bound(report: Mapping[str, Any], query_id: str, deadline_s: float,
                 fit: ServiceFit | None) -> EngineBound | None:
    """The bound on ``report``'s own arrivals of ``query_id`` under ``fit``; None without a stable fit
    (:attr:`ServiceFit.stable`) or arrivals."""
    if fit is None or not fit.stable:
        return None
    arrivals = scheduled_arrivals(report, query_id)
    return None if arrivals is None else engine_bound(arrivals, deadline_s, fit)
