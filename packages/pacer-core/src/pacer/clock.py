"""Clocks a Controller can run on."""

from __future__ import annotations


class ManualClock:
    """A clock moved by hand: for tests and for driving a Controller step by step.

    >>> clock = ManualClock(1.0)
    >>> clock.advance(0.5)
    1.5
    """

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self.now += seconds
        return self.now
