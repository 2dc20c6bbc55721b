from __future__ import annotations

import math

import pytest

from pacer_workloads import TRAFFIC_PATTERNS, Arrival, TrafficPattern, make_traffic, schedule_arrivals

#: The patterns with a shape of their own (``trace`` replays a file: test_trace.py).
SHAPES = tuple(name for name in TRAFFIC_PATTERNS if name != "trace")


def test_pattern_names() -> None:
    assert TRAFFIC_PATTERNS == ("constant", "random", "sinusoidal", "wave", "binary", "spike", "increasing", "decreasing",
                                "trace")


@pytest.mark.parametrize("name", SHAPES)
def test_every_pattern_has_about_the_requested_mean(name: str) -> None:
    traffic = make_traffic(name, rate=1000, duration=600)
    assert isinstance(traffic, TrafficPattern) and traffic.name == name
    arrivals = schedule_arrivals(traffic, duration=600, seed=1)
    assert len(arrivals) == 600 and arrivals[0] == Arrival(0, 1.0, arrivals[0].rows) and arrivals[-1].time == 600.0
    assert [a.index for a in arrivals] == list(range(600))
    mean = sum(a.rows for a in arrivals) / len(arrivals)
    assert mean == pytest.approx(1000, rel=0.02), name
    assert all(traffic.rate(t) >= 0 for t in range(0, 600, 7))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("constant", {"rate": 1000, "noise": 1}),
        ("random", {"rate": 1000, "sd": 200, "noise": 1}),
        ("sinusoidal", {"mid": 1000, "amp": 500, "period": 60, "noise": 1}),
        ("wave", {"min": 500, "max": 1500, "period": 60, "amplitude": 500, "offset": 1000, "noise": 1}),
        ("binary", {"min": 500, "max": 1500, "period": 20, "noise": 1}),
        ("spike", {"min": 500, "spike": 0.2, "max": 5500, "period": 60, "noise": 1}),
        ("increasing", {"min": 500, "max": 1500, "duration": 300, "noise": 1}),
        ("decreasing", {"min": 500, "max": 1500, "duration": 300, "noise": 1}),
    ],
)
def test_default_parameters(name: str, expected: dict[str, float]) -> None:
    assert make_traffic(name, rate=1000, duration=300).params() == pytest.approx(expected)


def test_shapes() -> None:
    sine = make_traffic("sinusoidal", rate=1000, amp=400, period=60)
    assert sine.rate(15) == pytest.approx(1400) and sine.rate(45) == pytest.approx(600) and sine.rate(30) == pytest.approx(1000)
    binary = make_traffic("binary", rate=1000, min=0, max=2000, period=10)
    assert [binary.rate(t) for t in (0, 4.9, 5, 9.9, 10)] == [2000, 2000, 0, 0, 2000]
    wave = make_traffic("wave", rate=1000, min=200, max=1800, period=40)
    assert wave.rate(10) == pytest.approx(1800) and wave.rate(30) == pytest.approx(200)
    spike = make_traffic("spike", rate=1000, min=100, max=900, period=10, spike=0.2)
    assert spike.rate(5) == 100 and spike.rate(9) == pytest.approx(500)
    assert spike.rate(9.999) == pytest.approx(900, rel=1e-3) and spike.rate(10) == 100
    up = make_traffic("increasing", rate=1000, duration=100)
    assert [up.rate(t) for t in (0, 50, 100, 200)] == [500, 1000, 1500, 1500]
    down = make_traffic("decreasing", rate=1000, duration=100)
    assert [down.rate(t) for t in (0, 50, 100, 200)] == [1500, 1000, 500, 500]


def test_wave_is_clamped_to_min_and_max() -> None:
    # SPBench: amplitude * sin(2πt/period) + offset, held between min and max.
    wave = make_traffic("wave", rate=1000, min=600, max=1400, amplitude=1000, offset=1000, period=40)
    assert wave.rate(10) == 1400 and wave.rate(30) == 600 and wave.rate(0) == pytest.approx(1000)
    assert max(wave.rate(t / 10) for t in range(400)) == 1400 and min(wave.rate(t / 10) for t in range(400)) == 600
    # amplitude and offset follow overridden bounds
    assert make_traffic("wave", rate=10, min=0, max=40).params()["amplitude"] == 20


def test_derived_defaults_follow_the_overrides() -> None:
    spike = make_traffic("spike", rate=1000, spike=0.5)
    assert spike.params()["max"] == pytest.approx(500 + 2 * 500 / 0.5)
    rows = [a.rows for a in schedule_arrivals(spike, duration=600, seed=0)]
    assert sum(rows) / len(rows) == pytest.approx(1000, rel=0.01)
    assert make_traffic("spike", rate=1000, min=0).params()["max"] == pytest.approx(10_000)


def test_random_is_deterministic_per_seed_and_never_negative() -> None:
    traffic = make_traffic("random", rate=100, sd=200)
    a = schedule_arrivals(traffic, duration=100, seed=5)
    assert a == schedule_arrivals(traffic, duration=100, seed=5)
    assert a != schedule_arrivals(traffic, duration=100, seed=6)
    assert min(x.rows for x in a) == 0 and all(x.rows >= 0 for x in a)
    # the Normal rates alone (noise=0: no Poisson rows around them, whose variance would add to sd²)
    wide = [x.rows for x in schedule_arrivals(make_traffic("random", rate=1000, sd=100, noise=0), duration=2000, seed=1)]
    mean = sum(wide) / len(wide)
    sd = math.sqrt(sum((r - mean) ** 2 for r in wide) / len(wide))
    assert mean == pytest.approx(1000, rel=0.01) and sd == pytest.approx(100, rel=0.1)


@pytest.mark.parametrize("name", [n for n in SHAPES if n != "random"])
def test_noise_0_shapes_ignore_the_seed(name: str) -> None:
    traffic = make_traffic(name, rate=100, noise=0)
    assert not traffic.stochastic
    assert schedule_arrivals(traffic, duration=60, seed=1) == schedule_arrivals(traffic, duration=60, seed=2)


def test_idle_periods_give_zero_row_datasets() -> None:
    exact = make_traffic("binary", rate=500, min=0, max=1000, period=4, noise=0)  # the exact shape, exact rows
    arrivals = schedule_arrivals(exact, duration=8, seed=1)
    assert [a.rows for a in arrivals] == [1000, 1000, 0, 0, 1000, 1000, 0, 0]


def test_period_and_start_shift_the_arrivals() -> None:
    traffic = make_traffic("increasing", rate=100, min=0, max=100, duration=10, noise=0)  # exact rows
    arrivals = schedule_arrivals(traffic, duration=10, seed=1, period=2.5, start=1000.0)
    assert [a.time for a in arrivals] == [1002.5, 1005.0, 1007.5, 1010.0]
    # rows = integral of the ramp over each period: 10 t over [0, 2.5], [2.5, 5], ...
    assert [a.rows for a in arrivals] == [31, 94, 156, 219]
    assert len(schedule_arrivals(traffic, duration=9.9, seed=1, period=2.5)) == 3, "only whole periods arrive"
    assert schedule_arrivals(traffic, duration=0, seed=1) == []


def test_bad_traffic_is_rejected_with_what_is_allowed() -> None:
    with pytest.raises(ValueError, match="unknown traffic pattern 'square'; known patterns: constant"):
        make_traffic("square", rate=1)
    with pytest.raises(ValueError, match="rate must be >= 0"):
        make_traffic("constant", rate=-5)
    with pytest.raises(ValueError, match=r"min \(20\) must not exceed max \(10\)"):
        make_traffic("wave", rate=10, min=20, max=10)
    with pytest.raises(ValueError, match="period must be > 0"):
        make_traffic("binary", rate=10, period=0)
    with pytest.raises(ValueError, match="'sd' must be a finite number >= 0"):
        make_traffic("random", rate=10, sd=-1)
    with pytest.raises(ValueError, match=r"spike must be a fraction in \(0, 1\]"):
        make_traffic("spike", rate=10, spike=1.5)
    with pytest.raises(ValueError, match=r"has no parameter \['periode'\]; its parameters are \['max', 'min', 'noise', 'period'\]"):
        make_traffic("binary", rate=10, periode=3)
    with pytest.raises(ValueError, match="period must be > 0"):
        schedule_arrivals(make_traffic("constant", rate=1), duration=10, seed=1, period=0)
    with pytest.raises(ValueError, match="duration must be >= 0"):
        schedule_arrivals(make_traffic("constant", rate=1), duration=-1, seed=1)
