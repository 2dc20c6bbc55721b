"""Every traffic pattern is random under its seed: rows drawn around the shape (``noise``), burst onsets drawn.

Tolerances come from the draws' own variance (no arbitrary slack): a sum of independent Poisson draws with
means λ_i has variance Σλ_i, so it lies within 5 standard deviations of Σλ_i (a 1-in-1.7-million miss for a
Normal, and the seeds are fixed, so a pass is reproducible).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacer_workloads import TRAFFIC_PATTERNS, make_traffic, schedule_arrivals
from pacer_workloads.traffic import draw_rows

SHAPES = tuple(name for name in TRAFFIC_PATTERNS if name != "trace")
#: Today's arrivals before noise existed (commit 18da988), one case per pattern and parameters (see the file).
EXACT = Path(__file__).parent / "data" / "exact_shapes.json"
Z = 5.0  # standard deviations


def _rows(name: str, seed: int, *, duration: float = 120.0, rate: float = 1000.0, **params: Any) -> list[int]:
    traffic = make_traffic(name, rate=rate, duration=duration, **params)
    return [a.rows for a in schedule_arrivals(traffic, duration=duration, seed=seed)]


# ---------------------------------------------------------------------- noise=0 is the first release's traffic


def _exact_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads(EXACT.read_text())
    return cases


@pytest.mark.parametrize("case", _exact_cases(), ids=lambda c: f"{c['name']}-{c['rate']:g}-{c['period']:g}-{c['params']}")
def test_noise_0_gives_exactly_the_arrivals_of_before(case: dict[str, Any]) -> None:
    traffic = make_traffic(case["name"], rate=case["rate"], duration=case["duration"], noise=0, **case["params"])
    arrivals = schedule_arrivals(traffic, duration=case["schedule_duration"], seed=case["seed"],
                                 period=case["period"], start=case["start"])
    assert [a.rows for a in arrivals] == case["rows"]
    assert [a.time for a in arrivals] == case["times"]
    assert [a.index for a in arrivals] == list(range(len(case["rows"])))


def test_the_recorded_cases_cover_every_shape() -> None:
    assert {c["name"] for c in _exact_cases()} == set(SHAPES)


# ---------------------------------------------------------------------- the seed


@pytest.mark.parametrize("name", SHAPES)
def test_the_same_seed_gives_the_same_arrivals_and_another_seed_others(name: str) -> None:
    assert make_traffic(name, rate=1000).stochastic
    assert _rows(name, 3) == _rows(name, 3)
    assert _rows(name, 3) != _rows(name, 4)


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(SHAPES), seeds=st.lists(st.integers(0, 2**32 - 1), min_size=2, max_size=2, unique=True),
       noise=st.sampled_from([0.25, 1.0, 3.0]))
def test_distinct_seeds_give_distinct_arrivals(name: str, seeds: list[int], noise: float) -> None:
    # 30 datasets of >= 500 expected rows: two seeds agree on all only with a probability below 1e-40
    a, b = (_rows(name, seed, duration=30, noise=noise) for seed in seeds)
    assert a != b
    assert a == _rows(name, seeds[0], duration=30, noise=noise)


def test_noise_and_onsets_do_not_disturb_randoms_normal_rates() -> None:
    """random's Normal draws are the first release's stream: the rows scatter around the same rates."""
    exact = _rows("random", 5, duration=2000, noise=0)
    noisy = _rows("random", 5, duration=2000)
    diffs = [n - e for n, e in zip(noisy, exact, strict=True)]
    # Poisson around each rate (rounding aside): the differences sum to 0 within 5 sd of sqrt(Σ rate)
    assert abs(sum(diffs)) <= Z * math.sqrt(sum(exact)) + len(exact) * 0.5


# ---------------------------------------------------------------------- means and variances


@pytest.mark.parametrize("name", SHAPES)
def test_rows_scatter_around_the_expected_rows_with_poisson_variance(name: str) -> None:
    """noise=1 (default): each dataset's rows are Poisson around its expected rows, so their sum is within
    5 sqrt(Σλ) of Σλ, and the expected rows keep the requested mean."""
    duration, seed = 1800.0, 11
    traffic = make_traffic(name, rate=1000, duration=duration)
    expected = traffic.expected_rows(int(duration), 1.0, seed)
    rows = [a.rows for a in schedule_arrivals(traffic, duration=duration, seed=seed)]
    assert abs(sum(rows) - sum(expected)) <= Z * math.sqrt(sum(expected))
    # whole periods of every shape: the drawn shape keeps the exact shape's mean (the onsets move the bursts, one
    # per period; random's Normal rates are the same draws with and without noise)
    exact = make_traffic(name, rate=1000, duration=duration, noise=0).expected_rows(int(duration), 1.0, seed)
    assert abs(sum(expected) - sum(exact)) <= 1e-9 * sum(exact) + _edge_error(name, duration)


def _edge_error(name: str, duration: float) -> float:
    """The midpoint rule's error (16 samples a second) where a drawn burst edge cuts a dataset: at most half a
    sample (1/32 s) times the jump, per edge; 0 for the shapes whose onsets are not drawn."""
    if name == "binary":  # two jumps of max - min = 1000 per 20 s period
        return 2 * (duration / 20) * 1000 / 32
    if name == "spike":  # one drop of max - min = 5000 per 60 s period, and the ramp's kink (smaller)
        return 2 * (duration / 60) * 5000 / 32
    return 0.0


@pytest.mark.parametrize("noise", [0.25, 1.0, 4.0])
def test_noise_is_the_variance_to_mean_ratio(noise: float) -> None:
    """Constant traffic at λ = 1000 rows/s: mean λ, variance noise·λ. The sample mean's sd is sqrt(noise·λ/n); the
    sample variance's is about σ²·sqrt(2/(n-1)) (near-Normal counts); rounding noise·N adds at most 1/4."""
    n, lam = 4000, 1000.0
    rows = np.array(_rows("constant", 2, duration=n, rate=lam, noise=noise), dtype=float)
    variance = noise * lam
    assert abs(rows.mean() - lam) <= Z * math.sqrt(variance / n) + 0.5
    assert abs(rows.var(ddof=1) - variance) <= Z * variance * math.sqrt(2 / (n - 1)) + 0.25


def test_draw_rows_is_exact_at_noise_0_and_never_negative() -> None:
    rng = np.random.default_rng(0)
    assert [draw_rows(x, 0.0, rng) for x in (0.0, 0.4, 0.6, 2.5, 1234.49)] == [0, 0, 1, 2, 1234]
    assert draw_rows(0.0, 1.0, rng) == 0, "an idle period stays empty"
    assert all(draw_rows(3.0, c, rng) >= 0 for c in (0.1, 1.0, 10.0) for _ in range(200))
    clumps = {draw_rows(50.0, 5.0, rng) for _ in range(200)}
    assert all(r % 5 == 0 for r in clumps), "noise 5: records in clumps of 5"


def test_bad_noise_is_refused() -> None:
    with pytest.raises(ValueError, match="'noise' must be a finite number >= 0, got -1"):
        make_traffic("constant", rate=10, noise=-1)
    with pytest.raises(ValueError, match="parameter 'noise' must be a number, got 'lots'"):
        make_traffic("constant", rate=10, noise="lots")
    assert make_traffic("binary", rate=10, period="30").params()["period"] == 30.0, "numeric text is a number"


# ---------------------------------------------------------------------- burst onsets

#: name -> (the room the burst leaves of its period, the exact onset, the burst's jump in rows/s) at rate 1000.
BURSTS = {"binary": (10.0, 0.0, 1000.0), "spike": (48.0, 48.0, 5000.0)}


def _onsets(name: str, seed: int, *, noise: float = 1.0, cycles: int = 300) -> list[float]:
    """The seconds into each period at which its burst starts, read off the drawn shape."""
    traffic = make_traffic(name, rate=1000, noise=noise)
    rate, period = traffic.drawn_rate(seed), float(traffic.params()["period"])
    low, high = float(traffic.params()["min"]), float(traffic.params()["max"])
    room = BURSTS[name][0]
    out = []
    for c in range(cycles):
        t0 = c * period
        if name == "binary":  # max from the onset on, within [0, room]: bisect
            lo, hi = 0.0, room + 1e-9
            while hi - lo > 1e-9:
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if rate(t0 + mid) == high else (mid, hi)
            out.append(hi if rate(t0 + lo) != high else lo)
        else:  # the ramp: the first whole second above min, walked back along the slope (12 s from min to max)
            x = next(float(x) for x in range(int(room) + 2) if rate(t0 + x) > low)
            out.append(x - 12.0 * (rate(t0 + x) - low) / (high - low))
    return out


@pytest.mark.parametrize("name", sorted(BURSTS))
def test_burst_onsets_are_uniform_over_the_room_their_period_leaves(name: str) -> None:
    """binary (period 20 s, burst 10 s): onset Uniform(0, 10) s into its period; spike (period 60 s, ramp 12 s):
    Uniform(0, 48) s. noise=0: every onset exact (binary at the start, spike's ramp over the last fifth). The
    mean of n uniform onsets is within 5 sd (room/sqrt(12 n)) of room/2."""
    room, exact, _ = BURSTS[name]
    onsets = _onsets(name, 3)
    assert min(onsets) >= -1e-6 and max(onsets) <= room + 1e-6
    assert abs(sum(onsets) / len(onsets) - room / 2) <= Z * room / math.sqrt(12 * len(onsets))
    assert min(onsets) < 0.1 * room and max(onsets) > 0.9 * room, "the whole room is used"
    assert _onsets(name, 3) == onsets and _onsets(name, 4) != onsets
    assert _onsets(name, 3, noise=0, cycles=20) == pytest.approx([exact] * 20, abs=1e-6)
    assert _onsets(name, 4, noise=0, cycles=20) == pytest.approx([exact] * 20, abs=1e-6)


@pytest.mark.parametrize("name", sorted(BURSTS))
def test_each_period_keeps_one_whole_burst(name: str) -> None:
    """The onsets move the bursts, never cut or add one: every period offers the exact shape's rows, to the
    midpoint rule's error where a drawn edge cuts a sample (half a sample times the jump, per edge, two edges)."""
    traffic, exact = make_traffic(name, rate=1000), make_traffic(name, rate=1000, noise=0)
    period, step, cycles = float(traffic.params()["period"]), 0.25, 30
    per = round(period / step)
    drawn = traffic.expected_rows(per * cycles, step, 9)
    shape = exact.expected_rows(per * cycles, step, 9)
    bound = 2 * BURSTS[name][2] * (step / 16) / 2
    for c in range(cycles):
        assert abs(sum(drawn[c * per:(c + 1) * per]) - sum(shape[c * per:(c + 1) * per])) <= bound, c
