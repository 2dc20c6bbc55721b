"""Traffic patterns (rows per second over time) and the arrival schedule of datasets.

A *dataset* is the unit of arrival: one per ``period`` seconds, arriving at the
end of its period, with the rows the pattern offered during that period.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

TRAFFIC_PATTERNS: tuple[str, ...] = (
    "constant", "random", "sinusoidal", "wave", "binary", "spike", "increasing", "decreasing",
)


class TrafficPattern:
    """A data rate in rows per second as a function of time since the stream started.

    :param name: the pattern's name.
    :param params: its effective parameters.
    """

    stochastic = False

    def __init__(self, name: str, params: Mapping[str, float], rate_fn: Callable[[float], float]) -> None:
        self.name = name
        self._params = dict(params)
        self._rate_fn = rate_fn

    def rate(self, t: float) -> float:
        """Rows per second at time ``t`` (never negative)."""
        return max(0.0, self._rate_fn(t))

    def params(self) -> dict[str, float]:
        """The effective parameters, for reports."""
        return dict(self._params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v:g}" for k, v in self._params.items())
        return f"TrafficPattern({self.name}: {args})"


class RandomTraffic(TrafficPattern):
    """One Normal(rate, sd) draw per dataset, clipped at 0 (LMStream, zStream)."""

    stochastic = True


def _defaults(name: str, rate: float, duration: float) -> dict[str, float]:
    low, high = 0.5 * rate, 1.5 * rate
    return {
        "constant": {"rate": rate},
        "random": {"rate": rate, "sd": 0.2 * rate},
        "sinusoidal": {"mid": rate, "amp": 0.5 * rate, "period": 60.0},
        "wave": {"min": low, "max": high, "period": 60.0},
        "binary": {"min": low, "max": high, "period": 20.0},
        # max chosen so the mean is `rate`: min + (max - min) * spike / 2 = rate
        "spike": {"min": low, "max": low + 2 * (rate - low) / 0.2, "period": 60.0, "spike": 0.2},
        "increasing": {"min": low, "max": high, "duration": duration},
        "decreasing": {"min": low, "max": high, "duration": duration},
    }[name]


def _validate(name: str, p: Mapping[str, float]) -> None:
    for key, value in p.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"traffic {name!r}: parameter {key!r} must be a finite number >= 0, got {value}")
    if "min" in p and p["min"] > p["max"]:
        raise ValueError(f"traffic {name!r}: min ({p['min']:g}) must not exceed max ({p['max']:g})")
    for key in ("period", "duration"):
        if key in p and p[key] <= 0:
            raise ValueError(f"traffic {name!r}: {key} must be > 0, got {p[key]}")
    if "spike" in p and not 0 < p["spike"] <= 1:
        raise ValueError(f"traffic {name!r}: spike must be a fraction in (0, 1], got {p['spike']}")


def make_traffic(name: str, *, rate: float, duration: float = 600.0, **overrides: float) -> TrafficPattern:
    """Build a traffic pattern whose mean is about ``rate`` rows/s.

    Every other parameter defaults from ``rate`` and may be overridden by keyword:

    - ``constant``: ``rate``.
    - ``random``: ``rate``, ``sd`` (0.2·rate): Normal per dataset, clipped at 0.
    - ``sinusoidal`` (Das): ``mid`` (rate) + ``amp`` (0.5·rate)·sin(2πt/``period`` (60 s)).
    - ``wave`` (SPBench): amplitude·sin(2πt/period) + offset between ``min`` and ``max``.
    - ``binary`` (SPBench): ``max`` for the first half of each ``period`` (20 s), then ``min``.
    - ``spike`` (SPBench): ``min``, ramping to ``max`` over the last ``spike`` fraction of each period.
    - ``increasing`` / ``decreasing``: linear ramp ``min`` → ``max`` (or back) over ``duration``, then clamped.

    :raises ValueError: for an unknown name, an unknown parameter or an impossible value.
    """
    if name not in TRAFFIC_PATTERNS:
        raise ValueError(f"unknown traffic pattern {name!r}; known patterns: {', '.join(TRAFFIC_PATTERNS)}")
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"traffic rate must be >= 0 rows/s, got {rate}")
    p = _defaults(name, float(rate), float(duration))
    unknown = sorted(set(overrides) - set(p))
    if unknown:
        raise ValueError(f"traffic {name!r} has no parameter {unknown}; its parameters are {sorted(p)}")
    p.update({k: float(v) for k, v in overrides.items()})
    _validate(name, p)

    if name == "constant":
        return TrafficPattern(name, p, lambda t: p["rate"])
    if name == "random":
        return RandomTraffic(name, p, lambda t: p["rate"])
    if name == "sinusoidal":
        return TrafficPattern(name, p, lambda t: p["mid"] + p["amp"] * math.sin(2 * math.pi * t / p["period"]))
    if name == "wave":
        amplitude, offset = (p["max"] - p["min"]) / 2, (p["max"] + p["min"]) / 2
        return TrafficPattern(name, p, lambda t: offset + amplitude * math.sin(2 * math.pi * t / p["period"]))
    if name == "binary":
        return TrafficPattern(name, p, lambda t: p["max"] if (t % p["period"]) < p["period"] / 2 else p["min"])
    if name == "spike":
        def spike(t: float) -> float:
            phase = (t % p["period"]) / p["period"]
            start = 1.0 - p["spike"]
            return p["min"] if phase < start else p["min"] + (p["max"] - p["min"]) * (phase - start) / p["spike"]

        return TrafficPattern(name, p, spike)
    span = p["max"] - p["min"]
    if name == "increasing":
        return TrafficPattern(name, p, lambda t: p["min"] + span * min(1.0, max(0.0, t / p["duration"])))
    return TrafficPattern(name, p, lambda t: p["max"] - span * min(1.0, max(0.0, t / p["duration"])))


_SAMPLES = 16


@dataclass(frozen=True)
class Arrival:
    """One dataset of a stream: its number, arrival time (seconds) and rows."""

    index: int
    time: float
    rows: int


def schedule_arrivals(
    traffic: TrafficPattern, *, duration: float, seed: int, period: float = 1.0, start: float = 0.0
) -> list[Arrival]:
    """One dataset per ``period`` over ``duration`` seconds, arriving at the end of its period.

    Rows = the pattern's rate integrated over the period (midpoint rule, 16 samples), rounded;
    for ``random`` a Normal(rate, sd) draw per dataset, clipped at 0. Zero-row
    datasets are kept: they are real, empty arrivals. Deterministic per ``seed``.
    """
    if period <= 0 or duration < 0:
        raise ValueError("period must be > 0 and duration >= 0")
    count = math.floor(duration / period + 1e-9)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, 0xA11]))
    out = []
    for i in range(count):
        t0, t1 = i * period, (i + 1) * period
        if traffic.stochastic:
            p = traffic.params()
            rows = max(0.0, rng.normal(p["rate"], p["sd"])) * period
        else:
            step = period / _SAMPLES
            rows = sum(traffic.rate(t0 + (k + 0.5) * step) for k in range(_SAMPLES)) * step
        out.append(Arrival(index=i, time=start + t1, rows=round(rows)))
    return out
