"""LMStream's online inflection-point optimisation (Eq. 10), off the critical path.

InflectionPoint = β0 + β1 × Throughput + β2 × Latency                  (Eq. 10)

Training rows are the recent micro-batches: (throughput of the batch, its MaxLat)
-> the inflection point that batch was placed with. The fitted model is evaluated at
the *targets*: the highest throughput seen in the window and the target latency
(SlideTime for a sliding window, the mean MaxLat of the window for a tumbling one).
The result is the inflection point for the following micro-batches.

The fit runs on a background worker (one thread shared by every query). Placement
reads the latest *finished* result and never waits; :meth:`InflectionRegressor.flush`
waits for the outstanding fits (tests, shutdown). With ``asynchronous=False`` the fit
runs inline in the feedback call, which keeps a simulated run deterministic.
"""

from __future__ import annotations

import atexit
import math
import threading
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The single background worker shared by every LMStream query (created on first use)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pacer-lmstream-regression")
            atexit.register(_EXECUTOR.shutdown, wait=False, cancel_futures=True)
        return _EXECUTOR


@dataclass(frozen=True, slots=True)
class Sample:
    """One completed micro-batch as a training row of Eq. 10."""

    throughput: float
    latency: float
    inflection: float


#: How far (in standard deviations of the training window) the fit may be evaluated from its data.
EXTRAPOLATION_LIMIT = 3.0


def fit_inflection(
    samples: Sequence[Sample],
    target_latency: float | None,
    *,
    min_bytes: float,
    max_bytes: float,
    ridge: float = 1e-3,
) -> float | None:
    """Fit Eq. 10 by (lightly ridge-regularised) least squares and evaluate it at the targets.

    The features are centred and scaled, so the intercept is the mean inflection point of
    the window and the slopes are solved separately: a window whose inflection points are
    all equal reproduces that value exactly. The ridge term keeps nearly collinear windows
    (throughput and latency both follow the batch's processing time) from amplifying
    rounding errors; the target is clipped to ±:data:`EXTRAPOLATION_LIMIT` standard
    deviations of the window (SlideTime can lie far outside the latencies seen).

    :param samples: the training window, oldest first.
    :param target_latency: SlideTime, or None for a tumbling window (the window's mean MaxLat).
    :param ridge: ridge strength per row on the standardised slopes (0: plain least squares).
    :return: the new inflection point clamped to [min_bytes, max_bytes], or None when there
        are fewer rows than coefficients (3) or the prediction is not finite.
    """
    if len(samples) < 3:
        return None
    x = np.array([[s.throughput, s.latency] for s in samples], dtype=float)
    y = np.array([s.inflection for s in samples], dtype=float)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    varying = scale > 0
    scale[~varying] = 1.0
    z = (x - mean) / scale
    intercept = float(y.mean())
    residual = y - intercept
    slopes = np.zeros(2)
    if np.any(residual != 0.0) and np.any(varying):
        cols = z[:, varying]
        gram = cols.T @ cols + ridge * len(samples) * np.eye(cols.shape[1])
        slopes[varying] = np.linalg.lstsq(gram, cols.T @ residual, rcond=None)[0]
    latency = target_latency if target_latency is not None else float(x[:, 1].mean())
    target = np.clip((np.array([float(x[:, 0].max()), latency]) - mean) / scale, -EXTRAPOLATION_LIMIT, EXTRAPOLATION_LIMIT)
    predicted = intercept + float(slopes @ target)
    if not math.isfinite(predicted):
        return None
    return min(max(predicted, min_bytes), max_bytes)


class InflectionRegressor:
    """Holds InfPT for one query and refits it after every batch, in the background by default.

    :param initial: InfPT_0 in bytes (150 KB in the paper).
    :param window: how many recent batches train the fit (the paper trains on all of
        them and suggests "only the latest N" as the remedy for unbounded growth).
    :param min_bytes: lower clamp of a fitted value.
    :param max_bytes: upper clamp of a fitted value.
    :param asynchronous: fit on the background worker (True) or inline (False).
    :param ridge: see :func:`fit_inflection`.
    """

    def __init__(
        self,
        initial: float,
        *,
        window: int = 32,
        min_bytes: float = 1_000.0,
        max_bytes: float = 256_000_000.0,
        asynchronous: bool = True,
        ridge: float = 1e-3,
    ) -> None:
        if initial <= 0:
            raise ValueError(f"initial inflection point must be > 0 bytes, got {initial}")
        if window < 3:
            raise ValueError(f"regression window must hold >= 3 batches (3 coefficients), got {window}")
        if not 0 < min_bytes <= max_bytes:
            raise ValueError(f"need 0 < min_bytes <= max_bytes, got {min_bytes}, {max_bytes}")
        self.initial = float(initial)
        self.min_bytes = float(min_bytes)
        self.max_bytes = float(max_bytes)
        self.asynchronous = asynchronous
        if ridge < 0:
            raise ValueError(f"ridge must be >= 0, got {ridge}")
        self.ridge = float(ridge)
        self.samples: deque[Sample] = deque(maxlen=window)
        self._current = float(initial)
        self._outstanding: deque[Future[float | None]] = deque()
        self.fits = 0

    def _adopt(self, result: float | None) -> None:
        self.fits += 1
        if result is not None:
            self._current = result

    def _collect(self, wait: bool, timeout: float | None = None) -> None:
        while self._outstanding:
            future = self._outstanding[0]
            if future.cancelled():
                self._outstanding.popleft()
                continue
            if not future.done():
                if not wait:
                    return
                future.result(timeout=timeout)
            self._outstanding.popleft()
            self._adopt(future.result())

    @property
    def inflection(self) -> float:
        """The latest finished InfPT; never waits for a fit in progress."""
        self._collect(wait=False)
        return self._current

    def observe(self, sample: Sample, target_latency: float | None) -> None:
        """Add a completed batch and (re)fit Eq. 10 on the window.

        A fit queued but not yet started is cancelled: the new one supersedes it.
        """
        self.samples.append(sample)
        rows = tuple(self.samples)
        if not self.asynchronous:
            self._adopt(
                fit_inflection(rows, target_latency, min_bytes=self.min_bytes, max_bytes=self.max_bytes, ridge=self.ridge)
            )
            return
        if self._outstanding and self._outstanding[-1].cancel():
            self._outstanding.pop()
        future = _executor().submit(
            fit_inflection, rows, target_latency, min_bytes=self.min_bytes, max_bytes=self.max_bytes, ridge=self.ridge
        )
        self._outstanding.append(future)

    def seed(self, rows: Sequence[Sample], target_latency: float | None) -> float:
        """Start from calibration rows (the paper's "pre-experimental results"): fill the window
        with them and fit Eq. 10 at once, inline, so the first placement already uses the result.

        :return: the inflection point now in force.
        """
        self.samples.extend(rows)
        self._adopt(
            fit_inflection(tuple(self.samples), target_latency, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
                           ridge=self.ridge)
        )
        return self._current

    def flush(self, timeout: float | None = None) -> float:
        """Wait for every outstanding fit and return the resulting InfPT."""
        self._collect(wait=True, timeout=timeout)
        return self._current

    @property
    def pending(self) -> int:
        """Fits submitted and not yet adopted."""
        return len(self._outstanding)
