"""A dependency-free progress bar for long bench runs (redrawn in place on a terminal, a line per step elsewhere)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


class ProgressBar:
    """Counts finished configurations of a bench run and estimates the time left.

    :param total: configurations to run.
    :param stream: where to draw (stderr by default, so the tables on stdout stay clean).
    :param width: characters of the bar.
    """

    def __init__(self, total: int, *, stream: TextIO | None = None, width: int = 24) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream or sys.stderr
        self.width = width
        self.started = time.monotonic()
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def line(self, label: str) -> str:
        """The bar as text: ``[#####-------] 3/12 static 5s  02:10 elapsed, ~04:20 left``."""
        filled = round(self.width * self.done / self.total)
        elapsed = time.monotonic() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else None
        eta = f", ~{_clock(left)} left" if left is not None and self.done < self.total else ""
        return (f"[{'#' * filled}{'-' * (self.width - filled)}] {self.done}/{self.total} {label}  "
                f"{_clock(elapsed)} elapsed{eta}")

    def show(self, label: str) -> None:
        """Draw the bar with ``label`` (the configuration now running, or what just finished)."""
        text = self.line(label)
        if self.tty:
            self.stream.write("\r\x1b[2K" + text)
            if self.done >= self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def advance(self, label: str) -> None:
        """One more configuration finished."""
        self.done += 1
        self.show(label)
