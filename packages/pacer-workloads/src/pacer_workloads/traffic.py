"""Traffic patterns (rows per second over time) and the arrival schedule of datasets.

A *dataset* is the unit of arrival: one per ``period`` seconds, arriving at the
end of its period, with the rows the pattern offered during that period.

Every pattern is random under its seed (``noise``, :func:`schedule_arrivals`): the pattern gives each
dataset's *expected* rows, and the rows that arrive are drawn around them. ``noise=0`` gives the exact
shapes, the same for every seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from pacer_workloads.trace import TRACE_FORMATS, Trace, read_trace

TRAFFIC_PATTERNS: tuple[str, ...] = (
    "constant", "random", "sinusoidal", "wave", "binary", "spike", "increasing", "decreasing", "trace",
)

#: The parameter every pattern has: the dispersion of a dataset's rows around the pattern (:func:`schedule_arrivals`).
NOISE = "noise"
#: ``noise`` when not given: Poisson rows (1), except ``trace``, which replays its file exactly (0).
DEFAULT_NOISE: dict[str, float] = {"trace": 0.0}
#: Parameters whose values are text, not numbers.
TEXT_PARAMETERS: frozenset[str] = frozenset({"file", "format"})

# Independent random streams of one seed (numpy SeedSequence spawn keys), so that turning one draw on or off
# changes no other: random's Normal rates (the stream of the first release), the rows' noise, burst onsets.
_RANDOM_STREAM, _NOISE_STREAM, _ONSET_STREAM = 0xA11, 0xA12, 0xA13


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, stream]))


class TrafficPattern:
    """A data rate in rows per second as a function of time since the stream started.

    :param name: the pattern's name.
    :param params: its effective parameters (``noise`` among them; 0 when left out).
    :param rate_fn: the exact shape: rows/s at ``t``.
    """

    def __init__(self, name: str, params: Mapping[str, float | str], rate_fn: Callable[[float], float]) -> None:
        self.name = name
        self._params = dict(params)
        self._rate_fn = rate_fn
        #: The variance-to-mean ratio of a dataset's rows (:func:`draw_rows`); 0: the exact shape.
        self.noise = float(self._params.get(NOISE, 0.0))

    @property
    def stochastic(self) -> bool:
        """Whether the arrivals depend on the seed (``noise`` > 0, or ``random``'s Normal rates)."""
        return self.noise > 0

    def rate(self, t: float) -> float:
        """Rows per second at time ``t`` (never negative): the exact shape (``noise=0``'s burst onsets)."""
        return max(0.0, self._rate_fn(t))

    def params(self) -> dict[str, float | str]:
        """The effective parameters, for reports."""
        return dict(self._params)

    def expected_rows(self, count: int, period: float, seed: int) -> list[float]:
        """The expected rows of datasets ``0 .. count-1`` of ``period`` seconds each, under ``seed``.

        The rate integrated over each period (midpoint rule, 16 samples) of the shape as ``seed`` draws it
        (the burst onsets of ``binary`` and ``spike`` when ``noise`` > 0). ``noise=0`` arrivals are these,
        rounded.
        """
        rate = self.drawn_rate(seed)
        step = period / _SAMPLES
        out = []
        for i in range(count):
            t0 = i * period
            out.append(sum(rate(t0 + (k + 0.5) * step) for k in range(_SAMPLES)) * step)
        return out

    def drawn_rate(self, seed: int) -> Callable[[float], float]:
        """Rows/s over time of the shape as ``seed`` draws it: :meth:`rate` but with the burst onsets of
        ``binary`` and ``spike`` drawn when ``noise`` > 0 (:class:`BurstTraffic`); the rows around it are drawn
        by :func:`schedule_arrivals`."""
        return self.rate

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v:g}" if not isinstance(v, str) else f"{k}={v}" for k, v in self._params.items())
        return f"TrafficPattern({self.name}: {args})"


class RandomTraffic(TrafficPattern):
    """One Normal(rate, sd) draw per dataset, clipped at 0 (LMStream, zStream)."""

    @property
    def stochastic(self) -> bool:
        """Always: the Normal rates come from the seed."""
        return True

    def expected_rows(self, count: int, period: float, seed: int) -> list[float]:
        """A Normal(rate, sd) rows/s draw per dataset from ``seed``, clipped at 0, times ``period``."""
        rng = _rng(seed, _RANDOM_STREAM)
        mean, sd = float(self._params["rate"]), float(self._params["sd"])
        return [max(0.0, rng.normal(mean, sd)) * period for _ in range(count)]


class _Onsets:
    """Burst ``k``'s offset into its cycle, Uniform(0, ``room``) per cycle, drawn in order from ``seed``."""

    _BLOCK = 64

    def __init__(self, seed: int, room: float) -> None:
        self._rng = _rng(seed, _ONSET_STREAM)
        self._room = room
        self._drawn: list[float] = []

    def __call__(self, cycle: int) -> float:
        cycle = max(cycle, 0)
        while len(self._drawn) <= cycle:
            self._drawn.extend((self._rng.random(self._BLOCK) * self._room).tolist())
        return self._drawn[cycle]


class BurstTraffic(TrafficPattern):
    """``binary`` and ``spike``: one burst per ``period``; with ``noise`` > 0 its onset is drawn per cycle.

    The burst of cycle ``k`` (``[k·period, (k+1)·period)``) starts Uniform(0, ``room``) seconds into its cycle,
    where ``room`` is what the burst leaves of the cycle (``period/2`` for binary, ``(1 − spike)·period`` for
    spike), independently per cycle. Each cycle keeps one whole burst, so the bursts' number, length and the
    mean rate stay those of the exact shape, while the gap between two bursts varies from 0 to ``2·room``.
    ``noise=0``: every burst at its exact onset (binary's at the cycle's start, spike's at its end).
    """

    def __init__(self, name: str, params: Mapping[str, float | str], rate_fn: Callable[[float], float],
                 burst: Callable[[float, float], float], room: float) -> None:
        super().__init__(name, params, rate_fn)
        self._burst = burst
        self._room = room

    def drawn_rate(self, seed: int) -> Callable[[float], float]:
        """The shape with burst ``k`` starting :class:`_Onsets` ``(k)`` seconds into its period (the exact
        shape when ``noise=0``)."""
        if self.noise == 0:
            return self.rate
        onset, period, burst = _Onsets(seed, self._room), float(self._params["period"]), self._burst

        def rate(t: float) -> float:
            cycle = math.floor(t / period)
            return max(0.0, burst(t - cycle * period - onset(cycle), period))

        return rate


class TraceTraffic(TrafficPattern):
    """``trace``: a user's traffic read from a file (:mod:`pacer_workloads.trace`), times ``scale``."""

    def __init__(self, params: Mapping[str, float | str], trace: Trace) -> None:
        scale = float(params["scale"])
        super().__init__("trace", params, lambda t: scale * trace.rate(t))
        self.trace = trace
        self._scale = scale

    def expected_rows(self, count: int, period: float, seed: int) -> list[float]:
        """The file's rows in each period, exactly (records stamped in it, or the rates integrated), times scale."""
        return [self._scale * self.trace.rows(i * period, (i + 1) * period) for i in range(count)]


#: Each pattern's parameters, in the order their defaults are derived (later ones may use earlier ones);
#: every pattern also has ``noise``.
PATTERN_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": ("rate",),
    "random": ("rate", "sd"),
    "sinusoidal": ("mid", "amp", "period"),
    "wave": ("min", "max", "period", "amplitude", "offset"),
    "binary": ("min", "max", "period"),
    "spike": ("min", "spike", "max", "period"),
    "increasing": ("min", "max", "duration"),
    "decreasing": ("min", "max", "duration"),
    "trace": ("file", "format", "scale"),
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
    if key == "scale":
        return 1.0
    if key == NOISE:
        return DEFAULT_NOISE.get(name, 1.0)
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


def _as_number(name: str, key: str, value: float | str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"traffic {name!r}: parameter {key!r} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"traffic {name!r}: parameter {key!r} must be a number, got {value!r}") from None


def _as_text(value: float | str) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def make_traffic(name: str, *, rate: float, duration: float = 600.0, **overrides: float | str) -> TrafficPattern:
    """Build a traffic pattern whose mean is about ``rate`` rows/s.

    Every other parameter defaults from ``rate`` (and from the parameters given) and may be
    overridden by keyword:

    - ``constant``: ``rate``.
    - ``random``: ``rate``, ``sd`` (0.2·rate): Normal per dataset, clipped at 0.
    - ``sinusoidal`` (Das): ``mid`` (rate) + ``amp`` (0.5·rate)·sin(2πt/``period`` (60 s)), clipped at 0.
    - ``wave`` (SPBench): ``amplitude``·sin(2πt/``period`` (60 s)) + ``offset``, clamped to
      [``min`` (0.5·rate), ``max`` (1.5·rate)]; amplitude and offset default to the half-range and
      the middle of [min, max].
    - ``binary`` (SPBench): ``max`` (1.5·rate) for half of each ``period`` (20 s), ``min`` (0.5·rate) the
      other half; exactly (``noise=0``) the first half.
    - ``spike`` (SPBench): ``min`` (0.5·rate), ramping linearly to ``max`` over a ``spike`` (0.2) fraction of
      each ``period`` (60 s), exactly (``noise=0``) the last; ``max`` defaults so that the mean is ``rate``.
    - ``increasing`` / ``decreasing``: linear ramp ``min`` (0.5·rate) → ``max`` (1.5·rate) (or back)
      over ``duration``, then clamped.
    - ``trace``: ``file`` (a path, required), ``format`` (``auto``, ``rates`` or ``timestamps``),
      ``scale`` (1): the file's traffic times ``scale`` (:mod:`pacer_workloads.trace`); ``rate`` is not used.

    And every pattern: ``noise`` (1; ``trace``: 0), the variance-to-mean ratio of a dataset's rows around the
    pattern (:func:`schedule_arrivals`); with ``noise`` > 0 the burst onsets of ``binary`` and ``spike`` are
    drawn too (:class:`BurstTraffic`). ``noise=0`` is the exact shape.

    :param name: one of :data:`TRAFFIC_PATTERNS`.
    :param rate: mean rows per second (>= 0).
    :param duration: the run's length in seconds (the ramp length of ``increasing``/``decreasing``).
    :raises ValueError: for an unknown name, an unknown parameter or an impossible value (negative
        rate, ``min`` > ``max``, ``period`` <= 0, ``spike`` outside (0, 1], text where a number is
        needed); a :class:`~pacer_workloads.trace.TraceError` for a trace file that cannot be read.
    """
    if name not in TRAFFIC_PATTERNS:
        raise ValueError(f"unknown traffic pattern {name!r}; known patterns: {', '.join(TRAFFIC_PATTERNS)}")
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"traffic rate must be >= 0 rows/s, got {rate}")
    keys = (*PATTERN_PARAMETERS[name], NOISE)
    unknown = sorted(set(overrides) - set(keys))
    if unknown:
        raise ValueError(f"traffic {name!r} has no parameter {unknown}; its parameters are {sorted(keys)}")
    p: dict[str, float] = {}
    text: dict[str, str] = {}
    for key in keys:
        if key in TEXT_PARAMETERS:
            if key in overrides:
                text[key] = _as_text(overrides[key])
            elif key == "format":
                text[key] = "auto"
        elif key in overrides:
            p[key] = _as_number(name, key, overrides[key])
        else:
            p[key] = _default(name, key, float(rate), float(duration), p)
    _validate(name, p)
    params: dict[str, float | str] = {**p}
    params.update(text)
    params = {key: params[key] for key in keys if key in params}  # in the pattern's order

    if name == "trace":
        if not text.get("file"):
            raise ValueError("traffic 'trace' needs file=PATH: a CSV of per-second rates (RATE or SECOND,RATE per "
                             "line) or one timestamp per record (epoch seconds or ISO-8601)")
        if text["format"] not in TRACE_FORMATS:
            raise ValueError(f"traffic 'trace': format must be one of {', '.join(TRACE_FORMATS)}, "
                             f"got {text['format']!r}")
        trace = read_trace(text["file"], text["format"])
        params["format"] = trace.format
        return TraceTraffic(params, trace)
    if name == "constant":
        return TrafficPattern(name, params, lambda t: p["rate"])
    if name == "random":
        return RandomTraffic(name, params, lambda t: p["rate"])
    if name == "sinusoidal":
        return TrafficPattern(name, params, lambda t: p["mid"] + p["amp"] * math.sin(2 * math.pi * t / p["period"]))
    if name == "wave":
        def wave(t: float) -> float:
            value = p["offset"] + p["amplitude"] * math.sin(2 * math.pi * t / p["period"])
            return min(p["max"], max(p["min"], value))

        return TrafficPattern(name, params, wave)
    if name == "binary":
        def high(x: float, period: float) -> float:  # x: seconds since the burst's onset
            return p["max"] if 0 <= x < period / 2 else p["min"]

        return BurstTraffic(name, params, lambda t: p["max"] if (t % p["period"]) < p["period"] / 2 else p["min"],
                            high, p["period"] / 2)
    if name == "spike":
        def spike(t: float) -> float:
            phase = (t % p["period"]) / p["period"]
            start = 1.0 - p["spike"]
            return p["min"] if phase < start else p["min"] + (p["max"] - p["min"]) * (phase - start) / p["spike"]

        def ramp(x: float, period: float) -> float:  # x: seconds since the ramp's onset
            length = p["spike"] * period
            return p["min"] + (p["max"] - p["min"]) * x / length if 0 <= x < length else p["min"]

        return BurstTraffic(name, params, spike, ramp, (1.0 - p["spike"]) * p["period"])
    span = p["max"] - p["min"]
    if name == "increasing":
        return TrafficPattern(name, params, lambda t: p["min"] + span * min(1.0, max(0.0, t / p["duration"])))
    return TrafficPattern(name, params, lambda t: p["max"] - span * min(1.0, max(0.0, t / p["duration"])))


_SAMPLES = 16


@dataclass(frozen=True)
class Arrival:
    """One dataset of a stream: its number, arrival time (seconds) and rows."""

    index: int
    time: float
    rows: int


def draw_rows(expected: float, noise: float, rng: np.random.Generator) -> int:
    """A dataset's rows around its ``expected`` rows: ``noise`` is their variance-to-mean ratio.

    ``noise=0``: ``round(expected)``, exactly. ``noise`` = c > 0: ``round(c·N)`` with N ~ Poisson(expected / c),
    so the mean is ``expected`` and the variance c·``expected``: c = 1 is Poisson (independent records), c > 1
    records arriving in clumps of c (over-dispersed), c < 1 steadier than Poisson.
    """
    if noise == 0 or expected <= 0:
        return round(expected)
    return round(noise * int(rng.poisson(expected / noise)))


def schedule_arrivals(
    traffic: TrafficPattern, *, duration: float, seed: int, period: float = 1.0, start: float = 0.0
) -> list[Arrival]:
    """One dataset per ``period`` over ``duration`` seconds, arriving at the end of its period.

    Each dataset's expected rows are the pattern's rate integrated over its period
    (:meth:`TrafficPattern.expected_rows`: midpoint rule, 16 samples; ``random``: a Normal(rate, sd)
    draw per dataset, clipped at 0; ``trace``: the file's rows in the period), and its rows are drawn
    around them with the pattern's ``noise`` (:func:`draw_rows`: Poisson by default, exactly rounded
    with ``noise=0``). Zero-row datasets are kept: they are real, empty arrivals. The same ``seed``
    gives the same arrivals; the seed's draws are independent streams (random's rates, the rows,
    the burst onsets), so ``noise=0`` keeps the first release's arrivals exactly.
    """
    if not period > 0:
        raise ValueError(f"schedule_arrivals: period must be > 0 seconds, got {period}")
    if not duration >= 0:
        raise ValueError(f"schedule_arrivals: duration must be >= 0 seconds, got {duration}")
    count = math.floor(duration / period + 1e-9)
    expected = traffic.expected_rows(count, period, seed)
    rng = _rng(seed, _NOISE_STREAM)
    return [Arrival(index=i, time=start + (i + 1) * period, rows=draw_rows(rows, traffic.noise, rng))
            for i, rows in enumerate(expected)]
