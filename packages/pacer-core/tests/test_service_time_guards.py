"""The guards that keep the service-time model from running away (pacer.service_time's module docstring): the
proportional model until sizes spread, the fallback when the split predicts worse, the probe limit and its ceiling;
and the overload monitor's parts that act on them (the hold-over between recurring bursts, the long-run rate)."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pacer.engine_profile import EngineProfile
from pacer.overload import LONG_RUN_WINDOWS, STRAIN_UTILISATION, OverloadMonitor
from pacer.service_time import MIN_SIZE_SPREAD, PROBE_GROWTH, ServiceTimeModel, _mean_abs_log

MB = 1e6


def test_sizes_that_barely_vary_keep_the_proportional_model_whatever_the_noise_says() -> None:
    """lr1's batches of 1494-1507 rows: the costs' noise alone would split them into a fixed part and a smaller
    per-byte part; the model keeps the average cost per byte, exact at the sizes seen."""
    model = ServiceTimeModel(warmup=0)
    sizes = [1.00, 1.02, 0.99, 1.01, 0.98, 1.02, 1.00, 0.99]
    costs = [0.85, 0.91, 0.83, 0.86, 0.82, 0.84, 0.86, 0.83]  # no line through them means anything
    for size, cost in zip(sizes * 3, costs * 3, strict=True):
        model.observe(size * MB, cost)
    assert model.size_spread < MIN_SIZE_SPREAD
    assert model.proportional and model.fixed_s == 0.0
    assert model.predict_raw(MB) == pytest.approx(sum(costs) / sum(sizes), rel=0.01)
    assert model.describe()["proportional"] is True


def test_sizes_that_spread_split_the_fixed_part_from_the_per_byte_part() -> None:
    model = ServiceTimeModel(warmup=0)
    for size in (0.5, 1.0, 2.0, 4.0) * 4:
        model.observe(size * MB, 0.3 + 0.2 * size)
    assert model.size_spread >= MIN_SIZE_SPREAD and not model.proportional
    assert model.fixed_s == pytest.approx(0.3) and model.per_byte_s * MB == pytest.approx(0.2)


def test_a_split_that_predicts_worse_than_the_proportional_model_hands_back_to_it() -> None:
    """A cost proportional to the bytes with ±30 % noise over sizes that spread (seed 0, pinned): the split follows
    the noise, its predictions of the next batch are further off than the proportional model's, and the
    proportional model is used; its margin is taken from its own errors."""
    rng = random.Random(0)
    model = ServiceTimeModel(warmup=0)
    for _ in range(60):
        size = rng.choice([1.0, 1.3, 1.6])
        model.observe(size * MB, size * (1 + rng.uniform(-0.3, 0.3)))
    assert model.size_spread >= MIN_SIZE_SPREAD
    assert _mean_abs_log(model._errors) > _mean_abs_log(model._proportional_errors)
    assert model.proportional and model.fixed_s == 0.0


def test_a_batch_grows_at_most_twice_the_largest_measured_on_the_slots_there_are_now() -> None:
    model = ServiceTimeModel(warmup=1)
    assert model.probe_limit_bytes == math.inf, "nothing measured: nothing to bound by"
    model.observe(MB, 14.0)  # the warm-up batch counts as measured, not as fitted
    assert not model.ready and model.probe_limit_bytes == pytest.approx(PROBE_GROWTH * MB)
    model.observe(MB, 1.0)
    model.slots = 4.0  # fitted per slot: four slots take four times the bytes
    assert model.probe_limit_bytes == pytest.approx(4 * PROBE_GROWTH * MB)
    assert not model.probe_limit_is_ceiling


def test_a_larger_batch_that_costs_more_per_byte_than_predicted_sets_a_ceiling_below_it() -> None:
    """A cost that grows faster than the bytes (``seconds = MB ** 1.5``) shows past the sizes measured: a batch of
    3 MB costs 5.2 s where the model fitted on 1 MB batches predicts 3 s. The next batches stay at half of it, and
    the ceiling relaxes as the fit forgets (it doubles every halflife)."""
    model = ServiceTimeModel(warmup=0)
    for _ in range(12):
        model.observe(MB, 1.0)
    model.observe(3 * MB, 3.0**1.5)
    assert model.probe_limit_is_ceiling
    assert model.probe_limit_bytes == pytest.approx(3 * MB / PROBE_GROWTH)
    for _ in range(int(model.halflife)):
        model.observe(MB, 1.0)
    assert model._ceiling == pytest.approx(3.0) and not model.probe_limit_is_ceiling  # twice the 1 MB measured binds


def test_a_slow_warm_up_batch_past_a_prior_s_largest_sets_no_ceiling() -> None:
    """A query's first batch pays for Spark's code generation and JIT whatever its size (1.5 s where a calibration
    predicts 0.41 s, on Spark): it shows no cost that grows faster than the bytes, so no ceiling (before: one at
    half its size, which capped the batches after it for a halflife); a later such batch still sets one."""
    model = ServiceTimeModel(warmup=1)
    model.take_prior(EngineProfile(runtime="spark", workload="lr2", partitions=1, slots=1, fixed_s=0.4,
                                   fixed_core_s=0.2, engine_s_per_byte=0.1 / MB, core_s_per_byte=0.1 / MB,
                                   core_s_per_row=1e-5, largest_bytes=int(MB)))
    model.observe(1.5 * MB, 1.5)  # predicted 0.55 s, with the margin squared 1.24 s
    assert not model.probe_limit_is_ceiling
    model.observe(3 * MB, 4 * 3.0)
    assert model.probe_limit_is_ceiling


def test_a_noisy_larger_batch_of_a_fixed_cost_query_sets_no_ceiling() -> None:
    """Above its prediction but cheaper per byte than the batches seen (the fixed part amortised): noise, no
    ceiling; larger batches pay off there."""
    model = ServiceTimeModel(warmup=0)
    for size in (1.0, 1.5) * 8:
        model.observe(size * MB, 1.0 + 0.5 * size)
    model.observe(3 * MB, 1.0 + 0.5 * 3 + 0.6)  # 3.1 s, 0.6 s over, and 1.03 s per MB against 1.33 seen
    assert not model.probe_limit_is_ceiling


def test_the_guards_survive_a_checkpoint() -> None:
    model = ServiceTimeModel(warmup=0)
    for _ in range(12):
        model.observe(MB, 1.0)
    model.observe(3 * MB, 3.0**1.5)
    restored = ServiceTimeModel(warmup=0)
    restored.restore(json.loads(json.dumps(model.state())))
    assert restored.probe_limit_bytes == model.probe_limit_bytes and restored.proportional == model.proportional
    assert restored.margin == model.margin
    fresh = ServiceTimeModel(warmup=0)
    fresh.restore(json.loads(json.dumps(ServiceTimeModel(warmup=0).state())))
    assert fresh.probe_limit_bytes == math.inf


@settings(max_examples=300, deadline=None)
@example(batches=[(1.0, 2.2250738585072014e-308), (2.0, 4.0)])  # a prediction of 1e-308 s made the margin infinite
@example(batches=[(1.0, 1.0)] * 10 + [(2.0, 5e-324)])  # an error that underflows to 0 has no logarithm
@example(batches=[(0.0, 0.1), (0.0, 0.1), (1.0, 1.0)])  # zero-byte batches only, then one: divided by zero bytes
@example(batches=[(0.0, 0.0), (0.0, 0.0), (5e-324, 0.0)])  # a mean size that underflows to 0: divided by it
@example(batches=[(2.2250738585072014e-308, 4.0)])  # 4 s over a subnormal size: an infinite cost per byte
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.01, 1.0]) | st.floats(0.0, 50.0), st.floats(0.0, 30.0)),
                min_size=1, max_size=60))
def test_whatever_it_observes_the_model_predicts_finite_times_and_bounds_growth(
        batches: list[tuple[float, float]]) -> None:
    """Any sizes and costs: predictions are finite and never negative; the probe limit never exceeds twice the
    largest size measured; sizes that spread less than MIN_SIZE_SPREAD use the proportional model."""
    model = ServiceTimeModel(warmup=0)
    for size, cost in batches:
        model.observe(size * MB, cost)
    assert all(math.isfinite(model.predict(size * MB)) and model.predict_raw(size * MB) >= 0 for size, _ in batches)
    largest = max(size for size, _ in batches)
    assert model.probe_limit_bytes <= PROBE_GROWTH * largest * MB * (1 + 1e-9) or (largest == 0 and
                                                                                  model.probe_limit_bytes == math.inf)
    if model.size_spread < MIN_SIZE_SPREAD:  # the proportional model: all per byte, or all fixed without bytes
        assert model.proportional and (model.fixed_s == 0.0 or model.per_byte_s == 0.0)


def test_an_overload_hold_over_lasts_as_long_as_the_quiet_between_recurring_periods() -> None:
    model = ServiceTimeModel(warmup=0)
    model.observe(MB, 1.0)
    monitor = OverloadMonitor(deadline=10.0)
    monitor.periods.append([100.0, 110.0])
    assert monitor.eager(119.0, model) and not monitor.eager(121.0, model), "one period: one deadline's hold-over"
    monitor.periods.append([150.0, 160.0])  # 40 s after the last: bursts recur
    assert monitor.eager(199.0, model) and not monitor.eager(201.0, model)


def test_the_long_run_rate_averages_bursts_and_quiet_and_judges_whether_the_engine_keeps_up() -> None:
    monitor = OverloadMonitor(deadline=10.0)
    tau = LONG_RUN_WINDOWS * monitor.window_s
    for second in range(int(5 * tau)):  # 10 s of 9 MB/s in every 60 s, 1.5 MB/s on average
        monitor.arrived(float(second), int(9 * MB) if second % 60 < 10 else 0)
    rate = monitor.long_run_rate_bytes_per_s(5 * tau)
    assert rate == pytest.approx(1.5 * MB, rel=0.1)
    model = ServiceTimeModel(warmup=0)
    model.observe(MB, 0.5)  # 0.5 s per MB: 0.75 of the engine on average, bursts of 4.5 times it
    assert 0.5 * 1.5 < STRAIN_UTILISATION and monitor.keeps_up_on_average(5 * tau, model)
    model.observe(MB, 0.7)
    model.observe(MB, 0.7)
    assert not monitor.keeps_up_on_average(5 * tau, model)
