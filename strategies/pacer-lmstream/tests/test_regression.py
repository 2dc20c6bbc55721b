"""Eq. 10 and its background worker."""

from __future__ import annotations

import threading
import time

import pytest

import pacer_lmstream.regression as regression
from pacer_lmstream import InflectionRegressor, Sample, fit_inflection

BOUNDS = {"min_bytes": 1.0, "max_bytes": 1e12}


def test_needs_three_rows() -> None:
    rows = [Sample(1.0, 1.0, 5.0), Sample(2.0, 2.0, 6.0)]
    assert fit_inflection(rows, 1.0, **BOUNDS) is None


def test_recovers_an_exact_linear_model_at_the_targets() -> None:
    # InfPT = 10 + 2 × thr + 3 × lat
    rows = [Sample(t, lat, 10 + 2 * t + 3 * lat) for t, lat in ((1, 1), (2, 5), (4, 2), (3, 3), (5, 4))]
    # sliding window: target throughput = max (5), target latency = SlideTime (7, 2.8 sd from the mean)
    assert fit_inflection(rows, 7.0, ridge=0.0, **BOUNDS) == pytest.approx(10 + 2 * 5 + 3 * 7)
    # tumbling: target latency = mean latency of the window (3)
    assert fit_inflection(rows, None, ridge=0.0, **BOUNDS) == pytest.approx(10 + 2 * 5 + 3 * 3)
    # the default ridge shrinks the slopes only slightly
    assert fit_inflection(rows, 7.0, **BOUNDS) == pytest.approx(10 + 2 * 5 + 3 * 7, rel=1e-2)


def test_extrapolation_is_limited_to_three_standard_deviations() -> None:
    rows = [Sample(1.0, lat, 100.0 * lat) for lat in (1.0, 2.0, 3.0)]  # sd of latency = 0.8165
    limit = 2.0 + 3 * 0.816496580927726
    assert fit_inflection(rows, 50.0, ridge=0.0, **BOUNDS) == pytest.approx(100.0 * limit)


def test_nearly_collinear_window_with_constant_inflection_points_stays_put() -> None:
    """A simulated run that once threw InfPT to its clamp: latencies 0.41 ± 0.003 s, SlideTime 10 s."""
    rows = [Sample(64_000 / (0.40 + 0.001 * (i % 7)), 0.41 + 0.001 * (i % 7), 150_000.0) for i in range(32)]
    assert fit_inflection(rows, 10.0, **BOUNDS) == 150_000.0


def test_constant_inflection_points_reproduce_themselves() -> None:
    rows = [Sample(100.0 * i, 0.5 + i, 150_000.0) for i in range(10)]
    assert fit_inflection(rows, 5.0, **BOUNDS) == pytest.approx(150_000.0)


def test_prediction_is_clamped() -> None:
    rows = [Sample(t, 1.0, 1000.0 * t) for t in (1, 2, 3)]
    assert fit_inflection(rows, 1.0, min_bytes=10.0, max_bytes=2500.0) == 2500.0


def test_synchronous_mode_updates_inline() -> None:
    reg = InflectionRegressor(150_000.0, window=3, asynchronous=False, min_bytes=1.0)
    for t, lat in ((1.0, 1.0), (2.0, 3.0), (3.0, 2.0)):
        reg.observe(Sample(t, lat, 100.0 + 10 * t), 1.0)
    assert reg.inflection == pytest.approx(130.0, rel=1e-2)  # max throughput 3 -> 100 + 30
    assert len(reg.samples) == 3 and reg.pending == 0


def test_window_is_bounded() -> None:
    reg = InflectionRegressor(150_000.0, window=4, asynchronous=False)
    for i in range(20):
        reg.observe(Sample(float(i), 1.0, 150_000.0), None)
    assert len(reg.samples) == 4


def test_placement_never_waits_for_a_running_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    gate = threading.Event()
    real = regression.fit_inflection

    def slow(*args: object, **kwargs: object) -> float | None:
        gate.wait(5.0)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(regression, "fit_inflection", slow)
    reg = InflectionRegressor(150_000.0, window=3, min_bytes=1.0)
    for t, lat in ((1.0, 1.0), (2.0, 3.0), (3.0, 2.0)):
        reg.observe(Sample(t, lat, 100.0 * t), 1.0)
    start = time.perf_counter()
    assert reg.inflection == 150_000.0  # the fit is still blocked: the old value, at once
    assert time.perf_counter() - start < 0.5
    assert reg.pending >= 1
    gate.set()
    assert reg.flush(timeout=5.0) == pytest.approx(300.0, rel=1e-2)
    assert reg.pending == 0 and reg.inflection == pytest.approx(300.0, rel=1e-2)


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError):
        InflectionRegressor(0.0)
    with pytest.raises(ValueError):
        InflectionRegressor(1.0, window=2)
    with pytest.raises(ValueError):
        InflectionRegressor(1.0, min_bytes=10.0, max_bytes=1.0)
    with pytest.raises(ValueError):
        InflectionRegressor(1.0, ridge=-1.0)
