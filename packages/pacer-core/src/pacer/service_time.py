"""One service-time model for every admission strategy: a fixed part plus a per-byte part, fitted so that it cannot run away.

A micro-batch costs the engine a fixed amount whatever its size (on Spark:
``walCommit`` + ``queryPlanning`` + ``commitOffsets`` + task launch, a large share
of a small batch's time) plus a part that grows with its bytes. zStream's T_anal and
LMStream's Eq. 6 estimate the second part only, as ``bytes / AvgThPut``; that
underestimates small batches and overestimates large ones, so a strategy that
admits "when the predicted completion reaches the deadline" completes after it.

:class:`ServiceTimeModel` learns ``service_s ≈ fixed_s + per_byte_s × bytes``
online from every completed batch of one query — what the batch cost the engine
(:attr:`pacer.model.BatchReport.trigger_s`) — by recency-weighted least squares, and adds a safety margin taken
from its own observed prediction error: the ``quantile`` (default 0.99) of actual ÷ predicted over the recent
batches (at least 1.5 until ten errors were seen).
The per-byte part is fitted per task slot: each batch's bytes are divided by the slots it ran on
(``min(cores, partitions)``), and a prediction divides by the slots there are now, so that when executors
come or go the next batch is sized for them rather than for the last fit's.

Three guards keep the fit from running away (a strategy that trusts a wrong split waits for batches whose cost
it underestimates, and the backlog grows with every one; seen on lr1's superlinear join and on Spark, whose
cost barely depends on size):

* **Stability**: the fixed/per-byte split is used only once the recent sizes spread enough to tell the two
  apart (their recency-weighted coefficient of variation at least :data:`MIN_SIZE_SPREAD`); until then, the
  proportional model (the paper's ``bytes / AvgThPut``, fixed cost folded in), which is exact at the sizes seen
  and overestimates larger batches where a fixed part exists.
* **Fallback**: both models predict every batch before it is learnt from; the split is used only while its
  recent predictions are no worse than the proportional model's (mean ``|log(actual ÷ predicted)|``), so noise
  that splits the cost wrongly hands back to the proportional model.
* **Probing**: a batch may grow at most :data:`PROBE_GROWTH` times the largest size measured recently (per task
  slot, forgotten at the fit's halflife as its observations are; :attr:`ServiceTimeModel.probe_limit_bytes`):
  beyond what was seen the model is extrapolating, and a cost that grows faster than the rows (a join, a sort)
  shows only there. A larger batch that took longer than its prediction with the margin and cost more per byte
  than the batches seen shows such a cost: the next stay :data:`PROBE_GROWTH` times smaller, a ceiling that
  relaxes as the fit forgets. The Controller caps every batch by it.

The Controller feeds it; strategies read it as ``ctx.service``.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING

from pacer.metrics import percentile

if TYPE_CHECKING:
    from pacer.engine_profile import EngineProfile

#: Bytes are fitted in megabytes to keep the normal equations well conditioned.
_MB = 1e6
#: Prediction errors the margin needs before it trusts its own quantile.
MIN_ERRORS = 10
#: The margin until then: a batch may take half again its prediction.
PRIOR_MARGIN = 1.5
#: The recency-weighted coefficient of variation of batch sizes (per task slot) the fixed/per-byte split needs:
#: below it the sizes are one size with noise, and the split follows the noise (lr1's 1 494-1 507-row batches
#: made a fixed part of 0-0.15 s and switched the strained safety net off).
MIN_SIZE_SPREAD = 0.1
#: Predictions below this (a nanosecond) say nothing of a batch: their errors are left out of the margin.
_SHORTEST_S = 1e-9
#: Sizes per task slot below this (a thousandth of a byte, in megabytes) are rounding, not bytes: a per-byte cost
#: from them alone would be a nanosecond's noise over nothing, beyond any float.
_SMALLEST_MB = 1e-9
#: Batches each of a prior's two sizes counts as (:meth:`ServiceTimeModel.take_prior`): a few, so that a query's
#: own batches outweigh the calibration within a halflife.
PRIOR_WEIGHT = 3.0
#: How many times the largest measured size (per task slot) a batch may take: a probe beyond what was seen.
PROBE_GROWTH = 2.0


def _mean_abs_log(errors: deque[float]) -> float:
    """The mean ``|log(actual ÷ predicted)|`` of ``errors`` (0 when empty): how far predictions were off, either way."""
    return sum(abs(math.log(e)) for e in errors) / len(errors) if errors else 0.0


class ServiceTimeModel:
    """Online ``fixed_s + per_byte_s × bytes`` fit of a batch's engine time, guarded, with a margin (module docstring).

    :param halflife: batches after which an observation weighs half as much (recency weighting).
    :param quantile: the margin is this quantile (0-1) of actual ÷ predicted over recent batches;
        0.99 aims at ≤ 1 % of batches finishing later than predicted.
    :param error_window: how many recent prediction errors the margin looks at.
    :param warmup: how many first batches to leave out. A query's first batch on Spark pays one-time
        costs (query planning and code generation, state store creation, the Python source's worker)
        several times its steady cost; fitted, it would make every later batch look expensive.
    """

    __slots__ = (
        "_ceiling",
        "_decay",
        "_errors",
        "_largest",
        "_n",
        "_proportional_errors",
        "_seen",
        "_slope",
        "_sw",
        "_swx",
        "_swxx",
        "_swxy",
        "_swy",
        "error_window",
        "fixed_s",
        "halflife",
        "prior_batches",
        "proportional",
        "quantile",
        "slots",
        "warmup",
    )

    def __init__(
        self, *, halflife: float = 20.0, quantile: float = 0.99, error_window: int = 100, warmup: int = 1
    ) -> None:
        if halflife <= 0:
            raise ValueError(f"service-time halflife must be > 0 batches, got {halflife}")
        if not 0.0 < quantile <= 1.0:
            raise ValueError(f"service-time quantile must be in (0, 1], got {quantile}")
        if error_window < 1:
            raise ValueError(f"service-time error_window must be >= 1, got {error_window}")
        if warmup < 0:
            raise ValueError(f"service-time warmup must be >= 0 batches, got {warmup}")
        self.warmup = warmup
        self._seen = 0
        self.halflife = halflife
        self.quantile = quantile
        self.error_window = error_window
        self._decay = 0.5 ** (1.0 / halflife)
        self._sw = self._swx = self._swy = self._swxx = self._swxy = 0.0
        self._n = 0
        # actual ÷ predicted of the split fit and of the proportional model, for the same batches
        self._errors: deque[float] = deque(maxlen=error_window)
        self._proportional_errors: deque[float] = deque(maxlen=error_window)
        # megabytes per slot: the largest batch measured within its prediction (the warm-up's too), and the smallest
        # that took longer than its prediction with the margin (:attr:`probe_limit_bytes`)
        self._largest = 0.0
        self._ceiling = math.inf
        #: The weight of the prior in batches (0: none; :meth:`take_prior`), as it was taken: it decays as batches come.
        self.prior_batches = 0.0
        #: The fixed part in use, seconds (0 before any batch, and while :attr:`proportional`).
        self.fixed_s = 0.0
        self._slope = 0.0  # seconds per megabyte per slot
        #: Whether the proportional model is in use (sizes too alike to split, or the split predicted worse).
        self.proportional = True
        #: Task slots the next batch runs on (the Controller sets it as executors come and go).
        self.slots = 1.0

    @property
    def per_byte_s(self) -> float:
        """The per-byte part in use on :attr:`slots` slots, seconds per byte (0 before any batch)."""
        return self._slope / (_MB * self.slots)

    @property
    def ready(self) -> bool:
        """True once at least one batch after the warm-up was observed, or a prior was taken (:meth:`take_prior`)."""
        return self._n > 0 or self.prior_batches > 0

    @property
    def warmed_up(self) -> bool:
        """True once the warm-up batches ran (their time is the engine's start, whatever a prior says a batch costs)."""
        return self._seen >= self.warmup

    @property
    def observations(self) -> int:
        """Batches observed so far."""
        return self._n

    @property
    def average_s_per_byte(self) -> float:
        """Seconds per byte over the observed batches, fixed part included (recency-weighted; 0 before any): an
        upper bound of :attr:`per_byte_s` that needs one batch, where the fit needs batches of different sizes."""
        return self._swy / (self._swx * _MB * self.slots) if self._swx > 0 else 0.0

    @property
    def size_spread(self) -> float:
        """The recency-weighted coefficient of variation of the observed sizes per slot (0 before two sizes)."""
        mean_x = self._swx / self._sw if self._sw > 0 else 0.0
        if mean_x <= _SMALLEST_MB:  # no bytes yet, or too few to divide by (a mean that underflows)
            return 0.0
        return math.sqrt(max(0.0, self._swxx / self._sw - mean_x * mean_x)) / mean_x

    @property
    def probe_limit_bytes(self) -> float:
        """The largest batch the next one may be, on the slots there are now: :data:`PROBE_GROWTH` × the largest
        measured within its prediction, and :data:`PROBE_GROWTH` times below a larger one that cost more than its
        prediction with the margin and more per byte than the batches seen (infinite before any batch)."""
        if self._largest <= 0:
            return math.inf
        return min(PROBE_GROWTH * self._largest, self._ceiling) * _MB * self.slots

    @property
    def probe_limit_is_ceiling(self) -> bool:
        """Whether :attr:`probe_limit_bytes` is the ceiling below a size that cost more per byte than predicted (a
        bound to keep under), not the growth allowed past the sizes measured (a batch may end just past it)."""
        return self._ceiling < PROBE_GROWTH * self._largest

    @property
    def margin(self) -> float:
        """The multiplier applied by :meth:`predict` (≥ 1): the ``quantile`` of actual ÷ predicted of the model in
        use.

        Until :data:`MIN_ERRORS` errors were seen that quantile says little (a short run on Spark has
        three or four batches): the margin is then at least :data:`PRIOR_MARGIN`.
        """
        errors = self._proportional_errors if self.proportional else self._errors
        observed = percentile(list(errors), 100.0 * self.quantile) if errors else 1.0
        if len(errors) < MIN_ERRORS:
            return max(PRIOR_MARGIN, observed)
        return max(1.0, observed)

    def predict_raw(self, nbytes: int | float, slots: float | None = None) -> float:
        """The fitted service time of a batch of ``nbytes`` on ``slots`` task slots (default :attr:`slots`; no
        margin); 0 before any batch."""
        return self.fixed_s + self._slope * max(0.0, float(nbytes)) / (_MB * (slots or self.slots))

    def predict(self, nbytes: int | float) -> float:
        """The service time of a batch of ``nbytes`` with the safety margin applied."""
        return self.predict_raw(nbytes) * self.margin

    def observe(self, nbytes: int | float, service_s: float, slots: float | None = None) -> None:
        """Learn from a completed batch: ``nbytes`` cost the engine ``service_s`` seconds on ``slots`` task slots
        (default :attr:`slots`)."""
        if service_s < 0 or math.isnan(service_s) or nbytes < 0:
            raise ValueError(f"service-time observation must be >= 0, got {service_s} s for {nbytes} bytes")
        slots = slots or self.slots
        if not slots > 0:
            raise ValueError(f"a batch runs on > 0 task slots, got {slots}")
        x = float(nbytes) / _MB / slots
        # the sizes measured count as the fit's observations do, and are forgotten as fast; a larger one that cost
        # more than its prediction with the margin, and more per byte than the batches seen, shows a cost that grows
        # faster than the bytes: a ceiling below it, relaxed at the same pace (not a warm-up batch: its time is the
        # engine's start, Spark's code generation and JIT, whatever its size)
        self._ceiling /= self._decay
        if (self._n > 0 or self.prior_batches) and self.warmed_up and x > self._largest \
                and service_s > self.predict_raw(nbytes, slots) * self.margin ** 2 \
                and service_s * self._swx > self._swy * x:  # more per byte (none seen: infinitely much)
            self._ceiling = min(self._ceiling, x / PROBE_GROWTH)
        else:
            self._largest = max(x, self._largest * self._decay)
        self._seen += 1
        if self._seen <= self.warmup:
            return
        if self._n or self.prior_batches:
            split, proportional = self._candidates()
            for errors, (fixed, slope) in ((self._errors, split), (self._proportional_errors, proportional)):
                predicted = fixed + slope * x
                if predicted > _SHORTEST_S and 0.0 < (error := service_s / predicted) < math.inf:
                    errors.append(error)
        d = self._decay
        self._sw = self._sw * d + 1.0
        self._swx = self._swx * d + x
        self._swy = self._swy * d + service_s
        self._swxx = self._swxx * d + x * x
        self._swxy = self._swxy * d + x * service_s
        self._n += 1
        self._fit()

    def take_prior(self, profile: EngineProfile, weight: float = PRIOR_WEIGHT) -> None:
        """Start from ``profile`` (what the engine measured for this query) instead of from nothing: its tiny and
        its largest batch enter the fit as ``weight`` batches each, forgotten at the halflife as batches come; a
        batch may grow to :data:`PROBE_GROWTH` × its largest from the first. Before any batch is fitted only (the
        warm-up's are not: a paced source may learn how it measures a row only after its first batch ran)."""
        if self._n or self.prior_batches:
            raise ValueError("a prior is taken before the model fits any batch")
        if not weight > 0:
            raise ValueError(f"a prior's weight must be > 0 batches, got {weight}")
        slots = float(profile.slots)
        slope = profile.engine_s_per_byte * _MB * slots  # seconds per megabyte per slot
        largest = profile.largest_bytes / _MB / slots
        for x in (0.0, largest):
            y = profile.fixed_s + slope * x
            self._sw += weight
            self._swx += weight * x
            self._swy += weight * y
            self._swxx += weight * x * x
            self._swxy += weight * x * y
        self._largest = max(largest, self._largest)
        self.prior_batches = 2.0 * weight
        self._fit()

    def _candidates(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """The least-squares split ``(fixed_s, slope)`` and the proportional model ``(0, mean_y / mean_x)`` of the
        sums so far (a split that comes out negative is clamped to the nearer one-part model)."""
        mean_x = self._swx / self._sw
        mean_y = self._swy / self._sw
        proportional = (0.0, mean_y / mean_x) if mean_x > _SMALLEST_MB else (mean_y, 0.0)
        var_x = self._swxx / self._sw - mean_x * mean_x
        if var_x <= 1e-12 * max(1.0, mean_x * mean_x):
            return proportional, proportional
        slope = (self._swxy / self._sw - mean_x * mean_y) / var_x
        fixed = mean_y - slope * mean_x
        if slope < 0:
            return (mean_y, 0.0), proportional
        if fixed < 0:
            return (0.0, self._swxy / self._swxx), proportional
        return (fixed, slope), proportional

    def _fit(self) -> None:
        split, proportional = self._candidates()
        self.proportional = self.size_spread < MIN_SIZE_SPREAD or (
            len(self._errors) >= MIN_ERRORS and _mean_abs_log(self._errors) > _mean_abs_log(self._proportional_errors))
        self.fixed_s, self._slope = proportional if self.proportional else split

    #: The version of :meth:`state`'s form.
    STATE_VERSION = 3  # 2: sizes per task slot; 3: the proportional model's errors and the probe's sizes

    def state(self) -> dict[str, object]:
        """The fitted model as plain values (JSON): a runtime keeps it with a query's checkpoint, so a restart
        predicts from the first batch on (:meth:`restore`)."""
        return {"version": self.STATE_VERSION, "halflife": self.halflife, "slots": self.slots, "seen": self._seen,
                "n": self._n, "largest_mb_per_slot": self._largest,
                "ceiling_mb_per_slot": None if math.isinf(self._ceiling) else self._ceiling,
                "sums": [self._sw, self._swx, self._swy, self._swxx, self._swxy], "errors": list(self._errors),
                "proportional_errors": list(self._proportional_errors), "prior_batches": self.prior_batches}

    def restore(self, state: dict[str, object]) -> None:
        """Take over a model saved by :meth:`state` (of this version and halflife). Its :attr:`slots` stay this
        model's (the runtime's now); ``state["slots"]`` says those it was saved with.

        :raises ValueError: naming what does not fit (another version, another halflife, values that are not
            finite numbers): the caller keeps its own (empty) model.
        """
        if state.get("version") != self.STATE_VERSION or state.get("halflife") != self.halflife:
            raise ValueError(f"a service-time model of version {state.get('version')!r} and halflife "
                             f"{state.get('halflife')!r}; this pacer keeps version {self.STATE_VERSION}, halflife "
                             f"{self.halflife}")
        sums = [float(v) for v in state["sums"]]  # type: ignore[attr-defined]
        errors = [float(v) for v in state["errors"]]  # type: ignore[attr-defined]
        proportional_errors = [float(v) for v in state["proportional_errors"]]  # type: ignore[attr-defined]
        largest = float(state["largest_mb_per_slot"])  # type: ignore[arg-type]
        saved_ceiling = state["ceiling_mb_per_slot"]
        ceiling = math.inf if saved_ceiling is None else float(saved_ceiling)  # type: ignore[arg-type]
        seen, n = int(state["seen"]), int(state["n"])  # type: ignore[call-overload]
        prior = float(state.get("prior_batches") or 0.0)  # type: ignore[arg-type]
        if len(sums) != 5 or not all(math.isfinite(v) and v >= 0
                                     for v in [*sums[:2], sums[3], *errors, *proportional_errors, largest]) or \
                not ceiling > 0 or math.isnan(ceiling) or not all(v > 0 for v in [*errors, *proportional_errors]) or \
                not all(math.isfinite(v) for v in sums) or n < 0 or seen < n or not 0 <= prior < math.inf:
            raise ValueError("the saved service-time model holds values that are not finite, or counts out of order")
        self._sw, self._swx, self._swy, self._swxx, self._swxy = sums
        for mine, saved in ((self._errors, errors), (self._proportional_errors, proportional_errors)):
            mine.clear()
            mine.extend(saved[-self.error_window:])
        self._seen, self._n, self._largest, self._ceiling = seen, n, largest, ceiling
        self.prior_batches = prior
        if n or prior:
            self._fit()

    def describe(self) -> dict[str, float | int | bool]:
        """The parts in use, whether they are the proportional model, the margin and observation count, for reports
        and logs."""
        return {
            "fixed_ms": 1000.0 * self.fixed_s,
            "per_mb_ms": 1000.0 * self.per_byte_s * _MB,
            "proportional": self.proportional,
            "margin": self.margin,
            "observations": self._n,
            "prior_batches": self.prior_batches,
        }
