"""The shared-engine bound in busy core-seconds: never above the least busy core-seconds of any batching and
non-preemptive schedule of the queries on the engine's cores (brute force over every batching and every order and
start), equal to it where it claims exactness, exact for one query; hand-computed cases; the simulator's own model."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from pacer import QueryRun, RunConfig, get_plugin_manager
from pacer_bench.bound import ServiceFit, min_batches
from pacer_bench.shared_bound import (
    CoreModel,
    SharedQuery,
    fewest_batches,
    fitted_model,
    known_model,
    overload,
    report_shared_bound,
    shared_bound,
    why_no_model,
    witness,
)

EPS = 1e-9

# ---------------------------------------------------------------------- brute force


def _batchings(n: int) -> Iterator[tuple[int, ...]]:
    """Every cut of ``n`` datasets, in order, into contiguous batches (datasets per batch)."""
    for cuts in itertools.product((False, True), repeat=max(0, n - 1)):
        sizes, size = [], 1
        for cut in cuts:
            if cut:
                sizes.append(size)
                size = 0
            size += 1
        yield tuple([*sizes, size]) if n else ()


def _chains(queries: Sequence[SharedQuery], sizes: Sequence[Sequence[int]]) -> list[list[tuple[float, float, float]]]:
    """Per query, its batches in order as (newest arrival, due, work)."""
    out = []
    for q, cuts in zip(queries, sizes, strict=True):
        chain, first = [], 0
        for size in cuts:
            batch = q.arrivals[first:first + size]
            chain.append((batch[-1][0], batch[0][0] + q.deadline_s, q.model.work(sum(b for _, b in batch))))
            first += size
        out.append(chain)
    return out


def _fit(placed: list[tuple[float, float, int]], ready: float, length: float, width: int, cores: int) -> float:
    """The earliest start ≥ ready where ``width`` cores stay free for ``length`` beside ``placed``."""
    if length <= 0:
        return ready
    for start in sorted({ready, *(e for _, e, _ in placed if e > ready)}):
        checks = [start, *(s for s, _, _ in placed if start < s < start + length)]
        if all(sum(w for s, e, w in placed if s <= p + EPS and e > p + EPS) + width <= cores for p in checks):
            return start
    raise AssertionError("unreachable: after the last end every core is free")


def _feasible(queries: Sequence[SharedQuery], sizes: Sequence[Sequence[int]], cores: int) -> bool:
    """Whether some non-preemptive schedule of these batchings meets every deadline: every order of the batches (a
    query's own in sequence) and every width, each batch's tasks at the earliest start its order leaves (the serial
    schedule generation scheme: every active schedule is one of these, and a schedule meeting the deadlines shifts
    left into an active one that still does)."""
    chains = _chains(queries, sizes)

    def search(nxt: tuple[int, ...], done: tuple[float, ...], placed: list[tuple[float, float, int]]) -> bool:
        if all(n == len(c) for n, c in zip(nxt, chains, strict=True)):
            return True
        for qi, chain in enumerate(chains):
            if nxt[qi] == len(chain):
                continue
            newest, due, work = chain[nxt[qi]]
            ready = max(newest, done[qi]) + queries[qi].model.wall_s
            for width in range(1, queries[qi].model.cores(cores) + 1):
                start = _fit(placed, ready, work / width, width, cores)
                end = start + work / width
                if end > due + EPS:
                    continue
                more = [(start, end, width)] if work > 0 else []
                if search((*nxt[:qi], nxt[qi] + 1, *nxt[qi + 1:]), (*done[:qi], end, *done[qi + 1:]),
                          placed + more):
                    return True
        return False

    return search((0,) * len(queries), (-1e9,) * len(queries), [])


def _feasible_at_every_start(queries: Sequence[SharedQuery], sizes: Sequence[Sequence[int]], cores: int) -> bool:
    """The same question on integer data by trying every integer start and width of every batch (a left-shifted
    schedule starts its batches at integer times when arrivals, no-core parts and durations are integers)."""
    jobs = [(qi, *job) for qi, chain in enumerate(_chains(queries, sizes)) for job in chain]
    use: dict[int, int] = {}

    def search(k: int, done: tuple[float, ...]) -> bool:
        if k == len(jobs):
            return True
        qi, newest, due, work = jobs[k]
        ready = int(max(newest, done[qi]) + queries[qi].model.wall_s)
        for width in range(1, queries[qi].model.cores(cores) + 1):
            length = work / width
            assert length == int(length)
            for start in range(ready, int(due - length) + 1):
                slots = range(start, start + int(length))
                if any(use.get(t, 0) + width > cores for t in slots):
                    continue
                for t in slots:
                    use[t] = use.get(t, 0) + width
                found = search(k + 1, (*done[:qi], start + length, *done[qi + 1:]))
                for t in slots:
                    use[t] -= width
                if found:
                    return True
        return False

    return search(0, (-1e9,) * len(queries))


def _optimum(queries: Sequence[SharedQuery], cores: int) -> float | None:
    """The least busy core-seconds over every batching of every query that some schedule meets every deadline with."""
    combos = sorted(itertools.product(*(_batchings(len(q.arrivals)) for q in queries)),
                    key=lambda combo: sum(q.model.core_s * len(c) for q, c in zip(queries, combo, strict=True)))
    for combo in combos:
        if _feasible(queries, combo, cores):
            return sum(q.model.work(0) * len(c) + q.model.core_per_byte * sum(b for _, b in q.arrivals)
                       for q, c in zip(queries, combo, strict=True))
    return None


def _random_query(rng: random.Random, name: str, n: int) -> SharedQuery:
    t, arrivals = 0.0, []
    for _ in range(n):
        t += rng.choice((0.0, 0.5, 1.0, 1.0, 2.0))
        arrivals.append((t, float(rng.randint(0, 3))))
    model = CoreModel(rng.choice((0.0, 0.25, 0.5)), rng.choice((0.25, 0.5, 1.0)), rng.choice((0.25, 0.5)),
                      rng.choice((1, 2)))
    return SharedQuery(name, tuple(arrivals), rng.choice((2.0, 3.0, 4.0, 6.0)), model)


# ---------------------------------------------------------------------- the bound against brute force


def test_alone_the_bound_is_the_least_busy_core_seconds() -> None:
    """One query: the programme is exact, a schedule attains it, and its batches are pacer_bench.bound's fewest under
    the engine time wall_s + work / m."""
    rng = random.Random(11)
    for _ in range(150):
        q = _random_query(rng, "q", rng.randint(1, 6))
        cores = rng.choice((1, 2))
        bound = shared_bound([q], cores)
        m = q.model.cores(cores)
        fit = ServiceFit(q.model.wall_s + q.model.core_s / m, q.model.core_per_byte / m)
        assert bound.queries[0].batches == min_batches(list(q.arrivals), q.deadline_s, fit)
        best = _optimum([q], cores)
        if best is None:
            assert bound.core_s is None and bound.reason
        else:
            assert bound.exact and bound.core_s == pytest.approx(best, abs=1e-9) == bound.attained_core_s


def test_the_bound_never_exceeds_any_schedule_and_equals_the_least_where_exact() -> None:
    """2 queries of up to 5 datasets, 3 of up to 3 and 3 of up to 4, on 1-2 cores: bound ≤ the least busy
    core-seconds over every batching and every non-preemptive schedule meeting every deadline; equal where it claims
    exactness; no bound only where no schedule meets every deadline; the schedules it finds meet every deadline (the
    least is no more than theirs)."""
    seen = {"exact": 0, "not shown exact": 0, "tighter than alone": 0, "no bound": 0, "no schedule": 0,
            "attained above the bound": 0}
    for seed, queries, most, cases in ((1, 2, 5, 200), (2, 3, 3, 200), (3, 3, 4, 12)):
        rng = random.Random(seed)
        for _ in range(cases):
            qs = [_random_query(rng, f"q{i}", rng.randint(1, most)) for i in range(queries)]
            cores = rng.choice((1, 2))
            bound = shared_bound(qs, cores)
            best = _optimum(qs, cores)
            context = (qs, cores, bound, best)
            if best is None:
                seen["no schedule"] += 1
            else:
                assert bound.core_s is not None and bound.core_s <= best + 1e-9, context
            if bound.core_s is None:
                seen["no bound"] += 1
                assert best is None, context
                continue
            assert bound.alone_core_s is not None and bound.alone_core_s <= bound.core_s + 1e-9
            seen["tighter than alone"] += bound.core_s > bound.alone_core_s + 1e-9
            if bound.attained_core_s is not None:  # a schedule meeting every deadline: the least is no more
                assert best is not None and best <= bound.attained_core_s + 1e-9, context
                seen["attained above the bound"] += bound.attained_core_s > bound.core_s + 1e-9
            if bound.exact:
                seen["exact"] += 1
                assert bound.core_s == pytest.approx(best, abs=1e-9), context
            else:
                seen["not shown exact"] += 1
    assert all(seen.values()), seen  # every kind of case came up


def test_the_brute_force_finds_what_every_integer_start_finds() -> None:
    """The serial schedule generation the brute force uses against every integer start and width (integer data)."""
    rng = random.Random(5)
    agree = {True: 0, False: 0}
    for _ in range(150):
        cores = rng.choice((1, 2))
        qs = []
        for i in range(rng.choice((2, 3))):
            t, arrivals = 0, []
            for _ in range(rng.randint(1, 3)):
                t += rng.choice((0, 1, 2))
                arrivals.append((float(t), float(rng.choice((0, 2, 4)))))
            model = CoreModel(float(rng.choice((0, 1))), float(rng.choice((0, 2))), 1.0, rng.choice((1, 2)))
            qs.append(SharedQuery(f"q{i}", tuple(arrivals), float(rng.randint(2, 7)), model))
        for combo in itertools.product(*(_batchings(len(q.arrivals)) for q in qs)):
            found = _feasible(qs, combo, cores)
            assert found == _feasible_at_every_start(qs, combo, cores), (qs, combo, cores)
            agree[found] += 1
    assert agree[True] and agree[False]


# ---------------------------------------------------------------------- hand-computed cases


def test_another_querys_work_takes_the_core_a_cheaper_batching_needs() -> None:
    """1 core. A: datasets at 0 and 2 s, 1 core-s per batch, deadline 3 s: alone one batch (2 -> 3 s). B: one dataset
    at 2 s of 1 core-s, deadline 1 s, so it runs 2 -> 3 s. A's one batch would need the core then too: A needs two,
    {0} (0 -> 1) and {2} (3 -> 4 <= 5). Bound 2 + 1 = 3 core-s, 1 more than each query alone, and attained."""
    a = SharedQuery("a", ((0.0, 0.0), (2.0, 0.0)), 3.0, CoreModel(0.0, 1.0, 1.0, 1))
    b = SharedQuery("b", ((2.0, 1.0),), 1.0, CoreModel(0.0, 0.0, 1.0, 1))
    assert fewest_batches(a, 1) == (1, (2,))
    assert fewest_batches(a, 1, [b]) == (2, (1, 1))
    bound = shared_bound([a, b], 1)
    assert (bound.core_s, bound.alone_core_s, bound.exact) == (3.0, 2.0, True)
    assert [s.batches for s in bound.queries] == [2, 1] and [s.alone for s in bound.queries] == [1, 1]
    assert _optimum([a, b], 1) == 3.0
    # on 2 cores B runs beside A's one batch
    two = shared_bound([a, b], 2)
    assert (two.core_s, two.exact) == (2.0, True) and _optimum([a, b], 2) == 2.0


def test_no_core_parts_overlap_for_free() -> None:
    """The fixed part holds no cores: two queries whose batches spend 2 s each without cores and 1 core-s of tasks
    both meet a 4 s deadline on one core, their no-core parts side by side and their tasks one after the other
    (2 -> 3 and 3 -> 4 s; an engine-time sum over the queries would count 6 s)."""
    q = [SharedQuery(n, ((0.0, 1.0),), 4.0, CoreModel(2.0, 0.0, 1.0, 1)) for n in ("a", "b")]
    bound = shared_bound(q, 1)
    assert (bound.core_s, bound.exact) == (2.0, True)
    assert witness(q, [(1,), (1,)], 1)


def test_overload_is_no_bound() -> None:
    """Two queries whose datasets at 0 s need 1 core-s each within 1.5 s on one core: 2 > 1.5, no schedule."""
    q = [SharedQuery(n, ((0.0, 1.0),), 1.5, CoreModel(0.0, 0.0, 1.0, 1)) for n in ("a", "b")]
    assert overload(q, 1) is not None and overload(q, 2) is None
    bound = shared_bound(q, 1)
    assert bound.core_s is None and "core-s of datasets" in (bound.reason or "")
    assert _optimum(q, 1) is None
    assert shared_bound(q, 2).core_s == 2.0


# ---------------------------------------------------------------------- the models a bench run gives


def test_the_simulators_own_model_is_its_cpu_work_without_noise() -> None:
    from pacer import Dataset, MicroBatch, Placement
    from pacer_sim import CostModel, batch_work
    from pacer_workloads import make_query

    run = RunConfig((QueryRun("lr2", traffic="binary", rate=1500.0, admission="static",
                              admission_params={"interval": 3.0}, deadline=5.0),
                     QueryRun("cm2", traffic="wave", rate=800.0, deadline=10.0)), duration=20.0, seed=3)
    report = get_plugin_manager().find_runtime("sim").run(run, plugin_manager=get_plugin_manager()).report
    model = known_model(report, "lr2")
    assert model is not None and model.source == "known" and model.parallelism == 2
    spec = make_query("lr2", partitions=2)
    for nbytes in (0, 50_000, 400_000):
        batch = MicroBatch("b", "lr2", 0, (Dataset("d", 0.0, nbytes, 1),), 0.0, placement=Placement({}))
        work = batch_work(CostModel(noise=0.0), spec, batch, gpus=0, seed=0)
        assert model.work(nbytes) == pytest.approx(work.cpu_core_s, rel=1e-9)
        assert model.wall_s == pytest.approx(work.fixed_s)
    assert known_model({**report, "runtime": "spark"}, "lr2") is None
    fitted = fitted_model(ServiceFit(0.4, 1e-6, batches=20, slope_error=0.1, span=4.0), cores=2, parallelism=4)
    assert fitted == CoreModel(0.4, 0.0, 2e-6, 2, "fitted") and fitted_model(None, 2, 2) is None
    assert fitted_model(ServiceFit(0.4, 1e-6, batches=20, slope_error=0.6, span=4.0), 2, 4) is None  # not stable
    bound = report_shared_bound(report, {"lr2": 5.0, "cm2": 10.0}, {})
    assert bound is not None and bound.core_s is not None and bound.cores == 2
    assert [s.query_id for s in bound.queries] == ["cm2", "lr2"]
    # every run spends at least its CPU work: the simulator's busy core-seconds are above the bound
    busy = sum(q["cost"]["busy_core_s"] for q in report["queries"].values())
    assert bound.core_s < busy
    # another runtime: each query under its stable engine-time fit, no core part per batch; none without one
    stable = {"batches": 40, "slope_error": 0.05, "span": 5.0}
    fits = {"lr2": ServiceFit(0.33, 1.2e-6, **stable), "cm2": ServiceFit(0.3, 0.9e-6, **stable)}  # type: ignore[arg-type]
    other = report_shared_bound({**report, "runtime": "spark"}, {"lr2": 5.0, "cm2": 10.0}, fits)
    assert other is not None and [s.model.source for s in other.queries] == ["fitted", "fitted"]
    assert other.core_s == pytest.approx(sum(2 * fits[s.query_id].per_byte_s * s.total_bytes for s in other.queries))
    assert report_shared_bound({**report, "runtime": "spark"}, {"lr2": 5.0, "cm2": 10.0}, {"lr2": fits["lr2"]}) is None
    # and each query's reason, as the multi-query table prints it (it once said "no arrivals (a Kafka run)" of a
    # Spark run on generated traffic whose fits were unstable)
    spark = {**report, "runtime": "spark"}
    assert why_no_model(report, "lr2", None) is None and why_no_model(spark, "lr2", fits["lr2"]) is None
    assert why_no_model(spark, "lr2", None) is not None and "too few or of one size" in why_no_model(spark, "lr2", None)
    noisy = ServiceFit(0.5, 2e-8, batches=40, rms_s=0.35, slope_error=1.3, span=2.5)
    assert why_no_model(spark, "lr2", noisy) == ("no stable fit of its engine time over 40 batches (sizes span 2.50×, "
                                                 "slope error 1.30 of the slope, residuals 350 ms RMS)")
    kafka = {**spark, "bench": {"source": "kafka"}}
    assert "cannot be regenerated" in str(why_no_model(kafka, "lr2", fits["lr2"]))


def test_a_run_started_from_an_engine_profile_is_bounded_by_the_costs_it_measured(tmp_path: Path) -> None:
    from dataclasses import replace

    from pacer.engine_profile import CostPoint, fit_profile
    from pacer_bench.bound import calibrated_fit, pooled_fit

    points = [CostPoint("tiny", 20, 1000, 0.5, 0.4), *(CostPoint("large", 10_000 * k, k * 10**6, 0.5 + k, 0.4 + 2 * k)
                                                        for k in (1, 2))]
    profile = fit_profile(points, runtime="spark", workload="lr2", partitions=2, slots=2)
    assert profile.engine_s_per_byte == pytest.approx(1e-6, rel=1e-3) and profile.relative_rms < 1e-3
    path = profile.write(tmp_path / "lr2.json")
    run = RunConfig((QueryRun("lr2", traffic="wave", rate=1500.0, deadline=10.0),), duration=20.0, seed=3)
    report = get_plugin_manager().find_runtime("sim").run(run, plugin_manager=get_plugin_manager()).report
    spark = {**report, "runtime": "spark"}
    spark["config"] = {**report["config"], "run": {**report["config"]["run"],
                                                   "options": {"spark": {"engine_profile": str(path)}}}}
    fit = pooled_fit([spark], "lr2")
    assert fit == calibrated_fit(profile) and fit is not None and fit.stable and fit.as_dict()["calibrated"]
    assert pooled_fit([{**spark, "runtime": "sim"}], "lr2") != fit  # a simulated run's profile is not Spark's
    bound = report_shared_bound(spark, {"lr2": 10.0}, {"lr2": fit})
    assert bound is not None and bound.core_s is not None
    (query,) = bound.queries
    assert query.model == CoreModel(pytest.approx(0.3), 0.4, pytest.approx(2e-6, rel=1e-3), 2, "calibrated")
    assert query.batches is not None and 1 <= query.batches <= query.datasets
    # every batch's tasks: 0.4 core-s, and 2 µs per byte
    assert bound.core_s == pytest.approx(0.4 * query.batches + 2e-6 * query.total_bytes, rel=1e-3)
    # a profile whose line misses its large batches (a join whose cost follows its state) bounds nothing
    state_bound = calibrated_fit(replace(profile, rms_s=1.0))  # half the large batches' 2 s on average
    assert not state_bound.stable and report_shared_bound(spark, {"lr2": 10.0}, {"lr2": state_bound}) is None
    assert "misses the large batches it measured by 50% of their time" in str(why_no_model(spark, "lr2",
                                                                                               state_bound))


def test_the_known_model_reads_every_scalar_the_run_recorded_its_no_data_batch_and_a_calibrated_query() -> None:
    """A run's own ``fixed_task_share`` (not the default), the no-data batch a watermarked aggregation runs after
    its last batch, and a query whose costs came from Spark's engine profile (``--calibrated``): the profile's."""
    from pacer import Dataset, MicroBatch, Placement
    from pacer.engine_profile import EngineProfile
    from pacer_sim import CostModel, Simulation, batch_work
    from pacer_sim.costs import no_data_work
    from pacer_workloads import make_query

    pm = get_plugin_manager()
    share = RunConfig((QueryRun("lr2", rate=1000.0, admission="static", admission_params={"interval": 5.0}),),
                      duration=20.0, options={"sim": {"cost_param": ["fixed_task_share=0.5"]}})
    model = known_model(pm.find_runtime("sim").run(share, plugin_manager=pm).report, "lr2")
    quiet = CostModel(noise=0.0, fixed_task_share=0.5)
    spec = make_query("lr2", partitions=2)
    work = batch_work(quiet, spec, MicroBatch("b", "lr2", 0, (Dataset("d", 0.0, 0, 1),), 0.0,
                                              placement=Placement({})), gpus=0, seed=0)
    assert model is not None and model.wall_s == pytest.approx(work.fixed_s) == pytest.approx(0.15)
    assert model.core_s == pytest.approx(work.cpu_core_s)
    assert model.no_data_core_s > 0 and model.no_data_core_s == pytest.approx(no_data_work(quiet, spec, 1, seed=0).cpu_core_s)
    assert model.spent(3, 1e6) == pytest.approx(3 * model.core_s + model.core_per_byte * 1e6 + model.no_data_core_s)

    profile = EngineProfile(runtime="spark", workload="lr2", partitions=2, slots=2, fixed_s=0.4, fixed_core_s=0.2,
                            engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=1e-4, largest_bytes=10**6,
                            no_data_s=0.3, no_data_core_s=0.1)
    sim = Simulation(cores=2, engine_profiles=[profile], plugin_manager=pm)
    sim.add_query("lr2", rate=1000.0, admission="static", admission_params={"interval": 5.0}, duration=20.0)
    from_profile = known_model(sim.run(20.0), "lr2")
    assert from_profile == CoreModel(0.4 * 0.75, 0.2, pytest.approx(2e-6), 2, "known", 0.1)  # type: ignore[arg-type]
