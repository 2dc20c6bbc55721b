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


#: Each pattern's parameters, in the order their defaults are derived (later ones may use earlier ones).
PATTERN_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": ("rate",),
    "random": ("rate", "sd"),
    "sinusoidal": ("mid", "amp", "period"),
    "wave": ("min", "max", "period", "amplitude", "offset"),
    "binary": ("min", "max", "period"),
    "spike": ("min", "spike", "max", "period"),
    "increasing": ("min", "max", "duration"),
    "decreasing": ("min", "max", "duration"),
}


def _default(name: str, key: str, rate: float, duration: float, p: Mapping[str, float]) -> float:
    """The default of parameter ``key`` given the mean ``rate`` and the parameters already fixed in ``p``."""
    if key == "rate":
        return rate
    if key == "sd":
        return 0.2 * rate
    if key == "mid":
        return rate
    if key == "amp":
        return 0.5 * rate
    if key == "period":
        return 20.0 if name == "binary" else 60.0
    if key == "duration":
        return duration
    if key == "spike":
        return 0.2
    if key == "min":
        return 0.5 * rate
    if key == "max":
        if name == "spike":
            # chosen so the mean is `rate`: min + (max - min) * spike / 2 = rate
            return p["min"] + 2.0 * max(rate - p["min"], 0.0) / p["spike"] if p["spike"] > 0 else p["min"]
        return 1.5 * rate
    if key == "amplitude":
        return (p["max"] - p["min"]) / 2.0
    if key == "offset":
        return (p["max"] + p["min"]) / 2.0
    raise AssertionError(key)  # pragma: no cover - PATTERN_PARAMETERS lists only the keys above


def _validate(name: str, p: Mapping[str, float]) -> None:
    if "min" in p and p["min"] > p["max"]:
        raise ValueError(f"traffic {name!r}: min ({p['min']:g}) must not exceed max ({p['max']:g})")
    for key, value in p.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"traffic {name!r}: parameter {key!r} must be a finite number >= 0, got {value}")
    for key in ("period", "duration"):
        if key in p and p[key] <= 0:
            raise ValueError(f"traffic {name!r}: {key} must be > 0, got {p[key]}")
    if "spike" in p and not 0 < p["spike"] <= 1:
        raise ValueError(f"traffic {name!r}: spike must be a fraction in (0, 1], got {p['spike']}")


def make_traffic(name: str, *, rate: float, duration: float = 600.0, **overrides: float) -> TrafficPattern:
    """Build a traffic pattern whose mean is about ``rate`` rows/s.

    Every other parameter defaults from ``rate`` (and from the parameters given) and may be
    overridden by keyword:

    - ``constant``: ``rate``.
    - ``random``: ``rate``, ``sd`` (0.2·rate): Normal per dataset, clipped at 0.
    - ``sinusoidal`` (Das): ``mid`` (rate) + ``amp`` (0.5·rate)·sin(2πt/``period`` (60 s)), clipped at 0.
    - ``wave`` (SPBench): ``amplitude``·sin(2πt/``period`` (60 s)) + ``offset``, clamped to
      [``min`` (0.5·rate), ``max`` (1.5·rate)]; amplitude and offset default to the half-range and
      the middle of [min, max].
    - ``binary`` (SPBench): ``max`` (1.5·rate) for the first half of each ``period`` (20 s), then ``min`` (0.5·rate).
    - ``spike`` (SPBench): ``min`` (0.5·rate), ramping linearly to ``max`` over the last ``spike`` (0.2)
      fraction of each ``period`` (60 s); ``max`` defaults so that the mean is ``rate``.
    - ``increasing`` / ``decreasing``: linear ramp ``min`` (0.5·rate) → ``max`` (1.5·rate) (or back)
      over ``duration``, then clamped.

    :param name: one of :data:`TRAFFIC_PATTERNS`.
    :param rate: mean rows per second (>= 0).
    :param duration: the run's length in seconds (the ramp length of ``increasing``/``decreasing``).
    :raises ValueError: for an unknown name, an unknown parameter or an impossible value (negative
        rate, ``min`` > ``max``, ``period`` <= 0, ``spike`` outside (0, 1]).
    """
    if name not in TRAFFIC_PATTERNS:
        raise ValueError(f"unknown traffic pattern {name!r}; known patterns: {', '.join(TRAFFIC_PATTERNS)}")
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"traffic rate must be >= 0 rows/s, got {rate}")
    keys = PATTERN_PARAMETERS[name]
    unknown = sorted(set(overrides) - set(keys))
    if unknown:
        raise ValueError(f"traffic {name!r} has no parameter {unknown}; its parameters are {sorted(keys)}")
    p: dict[str, float] = {}
    for key in keys:
        p[key] = float(overrides[key]) if key in overrides else _default(name, key, float(rate), float(duration), p)
    _validate(name, p)

    if name == "constant":
        return TrafficPattern(name, p, lambda t: p["rate"])
    if name == "random":
        return RandomTraffic(name, p, lambda t: p["rate"])
    if name == "sinusoidal":
        return TrafficPattern(name, p, lambda t: p["mid"] + p["amp"] * math.sin(2 * math.pi * t / p["period"]))
    if name == "wave":
        def wave(t: float) -> float:
            value = p["offset"] + p["amplitude"] * math.sin(2 * math.pi * t / p["period"])
            return min(p["max"], max(p["min"], value))

        return TrafficPattern(name, p, wave)
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
    if not period > 0:
        raise ValueError(f"schedule_arrivals: period must be > 0 seconds, got {period}")
    if not duration >= 0:
        raise ValueError(f"schedule_arrivals: duration must be >= 0 seconds, got {duration}")
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
