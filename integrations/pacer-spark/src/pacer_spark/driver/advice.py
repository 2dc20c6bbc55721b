"""Observe mode's live advice: what pacing would do for an observed query, asked of the simulator while it runs.

``pacer advise RECORDING`` (:mod:`pacer_sim.advise`) answers from a recording after the fact; an observed query
(``pacer.observe``) gets the same answer while it runs, in pacer's report (the query's ``advice``) and in Spark's
metrics system and progress (the ``pacerAdvice...`` figures, :data:`METRICS`). Every ``pacer.observe.adviseEvery``
(default 5 minutes; ``0``: never) the driver starts one worker thread, which reads the recording's lines written
so far (:func:`pacer.observed.read` leaves out one still being written) and replays them on the simulator, off the
driver's thread and lock; a replay still running is never started twice, and its figures replace the last ones when
it ends. Pacing is never affected: the advice needs pacer-sim and the query's deadline (``pacer.deadline``, else
``attach``'s), and where either is missing, or the replay fails, ``error`` says so and what to do.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pacer.observed import ObservedError, read

log = logging.getLogger(__name__)

#: Seconds between two pieces of advice unless ``pacer.observe.adviseEvery`` says.
DEFAULT_EVERY_S = 300.0
#: The figures the advice adds to an observed query's progress and to its metrics-system source, with what they hold.
METRICS: dict[str, str] = {
    "pacerAdvicePacedRowsLatePct": "rows the chosen admission and deadline would leave late (%), replayed on the "
                                   "simulator from the recording",
    "pacerAdvicePacedBatchesRatio": "batches pacing would run, as a share of the replay as observed",
    "pacerAdvicePacedBusyRatio": "busy core-seconds pacing would use, as a share of the replay as observed",
    "pacerAdviceReplayBusyRatio": "the replay as observed over Spark's measured busy core-seconds: how well the "
                                  "simulator reproduced this query (within 0.8-1.2: trust the rest)",
    "pacerAdviceFewestExecutors": "the fewest executors (1 core each) on which pacing keeps rows late within 1 %",
}


class Advisor:
    """One observed query's live advice (module docstring).

    :param path: the query's recording.
    :param deadline_s: the latency target to advise for (None: no advice, ``error`` says to set ``pacer.deadline``).
    :param admission: the admission strategy to pace with.
    :param every_s: seconds between two pieces of advice (> 0).
    :param clock: monotonic seconds (tests step it).
    """

    def __init__(self, path: str | Path, *, deadline_s: float | None, admission: str, every_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.deadline_s, self.admission, self.every_s = deadline_s, admission, every_s
        self._clock = clock
        self._next = clock() + every_s
        self._worker: threading.Thread | None = None
        self.latest: dict[str, Any] | None = None
        self.advised_at: float | None = None
        self.error: str | None = None if deadline_s is not None else (
            "no advice: the query has no deadline; set pacer.deadline (or attach's deadline) to the latency target "
            "pacing should meet")

    def poll(self) -> bool:
        """Start a replay if one is due, none is running and advice is possible; whether one started. Called on the
        driver's thread, under its lock (after the recording was appended to): it only starts the worker."""
        if self.deadline_s is None or self._clock() < self._next or self.running:
            return False
        self._next = self._clock() + self.every_s
        self._worker = threading.Thread(target=self._advise, name="pacer-observe-advice", daemon=True)
        self._worker.start()
        return True

    @property
    def running(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the replay running now, if any (tests; a driver stopping)."""
        if self._worker is not None:
            self._worker.join(timeout_s)

    def _advise(self) -> None:
        assert self.deadline_s is not None
        try:
            observation = read(self.path)  # the lines written whole so far: one being written is left out
        except ObservedError as exc:
            self.error = f"no advice yet: {exc}"
            return
        try:
            from pacer_sim.advise import AdviseConfig, advise
        except ImportError:
            self.error = ("no advice: pacer-sim is not installed on the driver (from the checkout: pip install "
                          "./packages/pacer-sim); the "
                          f"recording is kept: pacer advise {self.path} answers on any machine that has it")
            return
        try:
            advice = advise(observation, AdviseConfig(deadline_s=self.deadline_s, admission=self.admission))
        except ValueError as exc:  # too few batches yet to tell fixed from per-byte cost
            self.error = f"no advice yet: {exc}"
            return
        except LookupError as exc:  # an admission strategy no installed package provides
            self.error = f"no advice: {exc}; set pacer.admission to the strategy to advise for"
            return
        except Exception as exc:  # the advice is a side line: a replay that fails never touches pacing
            log.warning("observe mode: the advice from %s failed; the query is still observed", self.path,
                        exc_info=True)
            self.error = f"the advice failed ({type(exc).__name__}: {exc}); pacer advise {self.path} shows it"
            return
        self.latest, self.advised_at, self.error = advice, time.time(), None

    def metrics(self) -> dict[str, str]:
        """The latest advice's :data:`METRICS` (none before the first)."""
        advice = self.latest
        if advice is None:
            return {}
        paced, replay = advice["paced"], advice["replay"]
        fewest = advice["fewest_executors"]
        return {"pacerAdvicePacedRowsLatePct": _text(paced["late_pct"]),
                "pacerAdvicePacedBatchesRatio": _text(paced["batches_ratio"]),
                "pacerAdvicePacedBusyRatio": _text(paced["busy_ratio"]),
                "pacerAdviceReplayBusyRatio": _text(replay["busy_ratio"]),
                "pacerAdviceFewestExecutors": "" if fewest is None else str(fewest)}

    def summary(self) -> dict[str, Any]:
        """The report's ``advice`` of the query: the latest advice (None before the first), when, and any error."""
        advice = self.latest
        return {"every_s": self.every_s, "deadline_s": self.deadline_s, "admission": self.admission,
                "advised_at": self.advised_at, "error": self.error,
                "latest": None if advice is None else {k: advice[k] for k in (
                    "observed", "replay", "paced", "fewest_executors", "cores_per_executor", "runtime")}}


def _text(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else ""


__all__ = ["DEFAULT_EVERY_S", "METRICS", "Advisor"]
