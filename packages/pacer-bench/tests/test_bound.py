"""The engine-time bound: the service fit, the exact fewest batches (against hand-computed cases and brute
force), and arrivals regenerated exactly as the simulator laid them out."""

from __future__ import annotations

import itertools
import random

import pytest

from pacer import QueryRun, RunConfig, get_plugin_manager
from pacer_bench.bound import (
    ServiceFit,
    batch_points,
    engine_bound,
    fit_service,
    min_batches,
    pooled_fit,
    report_bound,
    scheduled_arrivals,
)
from pacer_bench.runner import record_latencies


def test_fit_recovers_a_line_and_keeps_both_parts_non_negative() -> None:
    fit = fit_service([(1_000_000, 1.5), (2_000_000, 2.5), (4_000_000, 4.5)])  # 0.5 s + 1 s per MB
    assert fit is not None and fit.batches == 3
    assert fit.fixed_s == pytest.approx(0.5) and fit.per_byte_s == pytest.approx(1e-6)
    through_origin = fit_service([(1_000_000, 0.5), (2_000_000, 2.5)])  # the line would cross at -1.5 s
    assert through_origin is not None and through_origin.fixed_s == 0.0
    assert through_origin.per_byte_s == pytest.approx((0.5 + 5.0) / 5.0 * 1e-6)
    flat = fit_service([(1_000_000, 2.0), (3_000_000, 1.0)])  # cost falls with bytes: all of it fixed
    assert flat is not None and (flat.fixed_s, flat.per_byte_s) == (1.5, 0.0)
    assert fit_service([(1000, 1.0), (1000, 1.2)]) is None  # one size: fixed and per-byte parts undetermined


def test_bound_of_a_steady_stream() -> None:
    """Ten 1000-byte datasets one a second, 0.5 s + 0.1 s per dataset, deadline 5 s: a batch of datasets
    i..i+k-1 starts at t_(i+k-1) and completes at t_i + (k-1) + 0.5 + 0.1k <= t_i + 5, so k <= 5: two batches,
    0.5 x 2 + 0.1 x 10 = 2.0 s."""
    arrivals = [(float(t), 1000.0) for t in range(1, 11)]
    fit = ServiceFit(0.5, 1e-4)
    bound = engine_bound(arrivals, 5.0, fit)
    assert (bound.batches, bound.datasets, bound.total_bytes) == (2, 10, 10_000.0)
    assert bound.engine_s == pytest.approx(2.0)
    assert min_batches(arrivals, 4.0, fit) == 3  # k <= 4.09: 4 + 4 + 2
    assert min_batches(arrivals, 0.5, fit) is None  # 0.6 s for one dataset alone
    assert min_batches([], 5.0, fit) == 0


def _greedy(arrivals: list[tuple[float, float]], deadline: float, fit: ServiceFit) -> int | None:
    """Each batch the largest that still meets its oldest dataset's deadline once the engine is free."""
    free, i, batches = -1e9, 0, 0
    while i < len(arrivals):
        j = i
        done = None
        while j < len(arrivals):
            end = max(free, arrivals[j][0]) + fit.cost(sum(b for _, b in arrivals[i:j + 1]))
            if end > arrivals[i][0] + deadline + 1e-9:
                break
            done, j = end, j + 1
        if done is None:
            return None
        free, i, batches = done, j, batches + 1
    return batches


def test_greedy_largest_batches_miss_where_three_batches_meet_the_deadline() -> None:
    """1 s + 1 ms per byte, deadline 10 s; A (t 0, 1000 B), B (4.5, 3000), C (6, 4000), E (7, 2000).
    Greedy takes {A, B} (starts 4.5, done 9.5 <= 10), then {C} ({C, E} would end 9.5 + 1 + 6 = 16.5 > 16), then E
    starts at 14.5 and ends 17.5 > 17: a miss. {A} (0 -> 2), {B} (4.5 -> 8.5), {C, E} (8.5 -> 15.5 <= 16) meets
    it, and two batches cannot ({A, B} {C, E} and {A} {B, C, E} miss, {A, B, C} alone ends 15 > 10):
    3 batches, 1 x 3 + 0.001 x 10000 = 13 s."""
    arrivals = [(0.0, 1000.0), (4.5, 3000.0), (6.0, 4000.0), (7.0, 2000.0)]
    fit = ServiceFit(1.0, 1e-3)
    assert _greedy(arrivals, 10.0, fit) is None
    bound = engine_bound(arrivals, 10.0, fit)
    assert bound.batches == 3 and bound.engine_s == pytest.approx(13.0)


def _brute_force(arrivals: list[tuple[float, float]], deadline: float, fit: ServiceFit) -> int | None:
    """Every partition of the arrivals into contiguous batches, each started as soon as it can."""
    n = len(arrivals)
    best = None
    for cuts in itertools.product((False, True), repeat=n - 1):
        bounds = [0, *[k + 1 for k, cut in enumerate(cuts) if cut], n]
        free, ok = -1e9, True
        for a, b in itertools.pairwise(bounds):
            free = max(free, arrivals[b - 1][0]) + fit.cost(sum(x for _, x in arrivals[a:b]))
            if free > arrivals[a][0] + deadline + 1e-9:
                ok = False
                break
        if ok:
            best = len(bounds) - 1 if best is None else min(best, len(bounds) - 1)
    return best


def test_the_fewest_batches_match_brute_force_on_random_arrivals() -> None:
    rng = random.Random(4)
    for _ in range(300):
        n = rng.randint(1, 9)
        t = 0.0
        arrivals = []
        for _ in range(n):
            t += rng.choice((0.0, 0.3, 1.0, 1.0, 2.5))
            arrivals.append((t, float(rng.randint(0, 3000))))
        fit = ServiceFit(rng.uniform(0.1, 1.0), rng.uniform(1e-4, 1e-3))
        deadline = rng.uniform(1.0, 6.0)
        assert min_batches(arrivals, deadline, fit) == _brute_force(arrivals, deadline, fit), (arrivals, deadline, fit)


def test_arrivals_are_regenerated_exactly_as_the_simulator_laid_them_out() -> None:
    run = RunConfig((QueryRun("lr2", traffic="binary", rate=1500.0, traffic_params={"period": 10.0}),
                     QueryRun("cm2", traffic="wave", rate=800.0)), duration=25.0, seed=3)
    result = get_plugin_manager().find_runtime("sim").run(run, plugin_manager=get_plugin_manager())
    record_latencies(result.report, result.controller)
    for query_id in ("lr2", "cm2"):
        actual = [(t, float(b)) for t, _, b in result.controller.recorder.record(query_id).arrivals]
        assert scheduled_arrivals(result.report, query_id) == actual and len(actual) == 25
        points = batch_points(result.report, query_id, skip_first=False)
        assert [b for b, _ in points] == [float(r.bytes) for r in result.controller.reports(query_id)]
    assert pooled_fit([result.report], "lr2") is not None
    assert scheduled_arrivals({"config": {}}, "lr2") is None
    assert scheduled_arrivals({**result.report, "bench": {"source": "kafka"}}, "lr2") is None


def test_solo_batches_leave_out_those_that_shared_the_engine() -> None:
    report = {"queries": {"a": {}, "b": {}}, "bench": {"batches": {
        "a": [[100, 1.0, 0.0, 1.0], [200, 1.0, 2.0, 3.0], [300, 1.0, 5.0, 6.0]],
        "b": [[50, 1.0, 2.5, 4.0], [60, 1.0, 6.0, 7.0]],  # overlaps a's second batch; touches a's third only
    }}}
    assert batch_points(report, "a", skip_first=False, solo=True) == [(100.0, 1.0), (300.0, 1.0)]
    assert batch_points(report, "a") == [(200.0, 1.0), (300.0, 1.0)]


def test_a_fit_reports_its_error_and_a_bound_comes_only_from_a_stable_one() -> None:
    """A noisy split into fixed and per-byte cost bounds nothing: only a stable fit (enough batches over a wide enough
    range of sizes, a per-byte slope known to 25 %) gives a bound."""
    line = [(mb * 1e6, 0.5 + 0.1 * mb + noise) for mb, noise in zip(range(1, 11), [0.01, -0.01] * 5, strict=True)]
    fit = fit_service(line)
    assert fit is not None and fit.stable and fit.rms_s == pytest.approx(0.01, rel=0.2)
    assert fit.span == 10.0 and 0 < fit.slope_error < 0.25
    report = {"queries": {"q": {}}}
    noisy = fit_service([(1e6, 0.6), (2e6, 0.4), (1.5e6, 0.9), (1.2e6, 0.3), (1.9e6, 0.8), (1.1e6, 0.5),
                         (1.6e6, 0.45), (1.3e6, 0.7)])
    assert noisy is not None and not noisy.stable and noisy.as_dict()["stable"] is False
    assert report_bound(report, "q", 5.0, noisy) is None
    few = fit_service(line[:4])
    assert few is not None and not few.stable  # 4 batches: too few to tell
