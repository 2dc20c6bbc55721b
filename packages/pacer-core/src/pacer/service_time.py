"""One service-time model for every admission strategy: a fixed part plus a per-byte part.

A micro-batch costs the engine a fixed amount whatever its size (on Spark:
``walCommit`` + ``queryPlanning`` + ``commitOffsets`` + task launch, a large share
of a small batch's time) plus a part that grows with its bytes. zStream's T_anal and
LMStream's Eq. 6 estimate the second part only, as ``bytes / AvgThPut``; that
underestimates small batches and overestimates large ones, so a strategy that
admits "when the predicted completion reaches the deadline" completes after it.

:class:`ServiceTimeModel` learns ``service_s ≈ fixed_s + per_byte_s × bytes``
online from every completed batch of one query — what the batch cost the engine
(:attr:`pacer.model.BatchReport.cost_s`: on Spark its whole trigger execution,
``walCommit`` + ``queryPlanning`` + the sink + ``commitOffsets``, gate wait
included; on the simulator its service time) — by recency-weighted least
squares, and adds a safety margin taken from its own observed prediction error:
the ``quantile`` (default 0.99) of actual ÷ predicted over the recent batches
(at least 1.5 until ten errors were seen).
The per-byte part is fitted per task slot: each batch's bytes are divided by the slots it ran on
(``min(cores, partitions)``), and a prediction divides by the slots there are now, so that when executors
come or go the next batch is sized for them rather than for the last fit's.
The Controller feeds it; strategies read it as ``ctx.service``.
"""

from __future__ import annotations

import math
from collections import deque

from pacer.metrics import percentile

#: Bytes are fitted in megabytes to keep the normal equations well conditioned.
_MB = 1e6
#: Prediction errors the margin needs before it trusts its own quantile.
MIN_ERRORS = 10
#: The margin until then: a batch may take half again its prediction.
PRIOR_MARGIN = 1.5


class ServiceTimeModel:
    """Online ``fixed_s + per_byte_s × bytes`` fit of admission → completion time, with a margin.

    :param halflife: batches after which an observation weighs half as much (recency weighting).
    :param quantile: the margin is this quantile (0-1) of actual ÷ predicted over recent batches;
        0.99 aims at ≤ 1 % of batches finishing later than predicted.
    :param error_window: how many recent prediction errors the margin looks at.
    :param warmup: how many first batches to leave out. A query's first batch on Spark pays one-time
        costs (query planning and code generation, state store creation, the Python source's worker)
        several times its steady cost; fitted, it would make every later batch look expensive.
    """

    __slots__ = (
        "_decay",
        "_errors",
        "_n",
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
        self._errors: deque[float] = deque(maxlen=error_window)
        #: The fitted fixed part, seconds (0 before any batch).
        self.fixed_s = 0.0
        self._slope = 0.0  # seconds per megabyte per slot
        #: Task slots the next batch runs on (the Controller sets it as executors come and go).
        self.slots = 1.0

    @property
    def per_byte_s(self) -> float:
        """The fitted per-byte part on :attr:`slots` slots, seconds per byte (0 before any batch)."""
        return self._slope / (_MB * self.slots)

    @property
    def ready(self) -> bool:
        """True once at least one batch after the warm-up was observed."""
        return self._n > 0

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
    def margin(self) -> float:
        """The multiplier applied by :meth:`predict` (≥ 1): the ``quantile`` of actual ÷ predicted.

        Until :data:`MIN_ERRORS` errors were seen that quantile says little (a short run on Spark has
        three or four batches): the margin is then at least :data:`PRIOR_MARGIN`.
        """
        observed = percentile(list(self._errors), 100.0 * self.quantile) if self._errors else 1.0
        if len(self._errors) < MIN_ERRORS:
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
        self._seen += 1
        if self._seen <= self.warmup:
            return
        if self._n:
            predicted = self.predict_raw(nbytes, slots)
            if predicted > 0:
                self._errors.append(service_s / predicted)
        x = float(nbytes) / _MB / slots
        d = self._decay
        self._sw = self._sw * d + 1.0
        self._swx = self._swx * d + x
        self._swy = self._swy * d + service_s
        self._swxx = self._swxx * d + x * x
        self._swxy = self._swxy * d + x * service_s
        self._n += 1
        self._fit()

    def _fit(self) -> None:
        mean_x = self._swx / self._sw
        mean_y = self._swy / self._sw
        var_x = self._swxx / self._sw - mean_x * mean_x
        if var_x <= 1e-12 * max(1.0, mean_x * mean_x):
            # One size seen so far: the paper's proportional model (AvgThPut) until sizes differ.
            fixed, slope = 0.0, (mean_y / mean_x if mean_x > 0 else 0.0)
            if mean_x <= 0:
                fixed = mean_y
        else:
            slope = (self._swxy / self._sw - mean_x * mean_y) / var_x
            fixed = mean_y - slope * mean_x
            if slope < 0:
                fixed, slope = mean_y, 0.0
            elif fixed < 0:
                fixed, slope = 0.0, self._swxy / self._swxx
        self.fixed_s = fixed
        self._slope = slope

    #: The version of :meth:`state`'s form.
    STATE_VERSION = 2  # 2: sizes per task slot

    def state(self) -> dict[str, object]:
        """The fitted model as plain values (JSON): a runtime keeps it with a query's checkpoint, so a restart
        predicts from the first batch on (:meth:`restore`)."""
        return {"version": self.STATE_VERSION, "halflife": self.halflife, "slots": self.slots, "seen": self._seen,
                "n": self._n,
                "sums": [self._sw, self._swx, self._swy, self._swxx, self._swxy], "errors": list(self._errors)}

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
        seen, n = int(state["seen"]), int(state["n"])  # type: ignore[call-overload]
        if len(sums) != 5 or not all(math.isfinite(v) and v >= 0 for v in [*sums[:2], sums[3], *errors]) or \
                not all(math.isfinite(v) for v in sums) or n < 0 or seen < n:
            raise ValueError("the saved service-time model holds values that are not finite, or counts out of order")
        self._sw, self._swx, self._swy, self._swxx, self._swxy = sums
        self._errors.clear()
        self._errors.extend(errors[-self.error_window:])
        self._seen, self._n = seen, n
        if n:
            self._fit()

    def describe(self) -> dict[str, float | int]:
        """The fitted parts, margin and observation count, for reports and logs."""
        return {
            "fixed_ms": 1000.0 * self.fixed_s,
            "per_mb_ms": 1000.0 * self.per_byte_s * _MB,
            "margin": self.margin,
            "observations": self._n,
        }
