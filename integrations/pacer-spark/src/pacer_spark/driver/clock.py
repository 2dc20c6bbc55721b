"""The Controller's clock on Spark: the wall clock, pinned to a trigger's end while that batch completes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class PinnedClock:
    """The Controller's clock on Spark: the wall clock, except while :meth:`pinned` to a past instant.

    The listener completes a batch a few milliseconds after its trigger ended; pinning the clock to
    the trigger's end for that one ``Controller.complete`` call makes ``completed_at`` the instant
    Spark finished, not the instant the event was delivered. Only use it under the session's lock.
    """

    def __init__(self) -> None:
        self._pinned: float | None = None
        self._owner: int | None = None

    def __call__(self) -> float:
        """Now, or the pinned instant for the thread that pinned it."""
        if self._pinned is not None and self._owner == threading.get_ident():
            return self._pinned
        return time.time()

    @contextmanager
    def pinned(self, at: float) -> Iterator[None]:
        """Read ``at`` from this clock (in this thread) inside the ``with`` block."""
        self._pinned, self._owner = at, threading.get_ident()
        try:
            yield
        finally:
            self._pinned, self._owner = None, None


__all__ = ["PinnedClock"]
