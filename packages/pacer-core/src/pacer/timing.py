"""pacer's own time: :func:`timed`, the context manager around each of the Controller's measured steps (a poll,
a scheduling decision, the feedback of a batch), and :class:`Overhead`, the bounded summaries they fill.

With no timer (the simulator runs without one, to stay deterministic) :func:`timed` hands back one shared
no-op context, so an unmeasured step costs a ``with`` and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from pacer.summary import StreamingSummary

Clock = Callable[[], float]


class Timing:
    """What ``with timed(...) as t`` gives: :meth:`cancel` drops the measurement. This base measures nothing."""

    __slots__ = ()

    def __enter__(self) -> Timing:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        return None

    def cancel(self) -> None:
        """Record nothing for this step (it turned out not to be one)."""


class _Timed(Timing):
    __slots__ = ("_args", "_cancelled", "_record", "_started", "_timer")

    def __init__(self, timer: Clock, record: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._timer = timer
        self._record = record
        self._args = args
        self._cancelled = False
        self._started = 0.0

    def __enter__(self) -> Timing:
        self._started = self._timer()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None and not self._cancelled:
            self._record(self._timer() - self._started, *self._args)

    def cancel(self) -> None:
        self._cancelled = True


_UNTIMED = Timing()


def timed(timer: Clock | None, record: Callable[..., None], *args: Any) -> Timing:
    """Time the ``with`` block with ``timer`` and call ``record(seconds, *args)`` when it ends normally (not when it
    raises, nor after :meth:`Timing.cancel`); a no-op when ``timer`` is None."""
    return _UNTIMED if timer is None else _Timed(timer, record, args)


@dataclass
class Overhead:
    """pacer's own time, measured with ``timer``, in bounded summaries (empty when not measured).

    :ivar poll: seconds per admission poll.
    :ivar per_batch: seconds pacer spent on each completed batch (its polls, scheduling and feedback).
    """

    poll: StreamingSummary = field(default_factory=StreamingSummary)
    per_batch: StreamingSummary = field(default_factory=StreamingSummary)

    @property
    def poll_s(self) -> tuple[float, ...]:
        """The most recent poll times (``poll.last``)."""
        return self.poll.last

    @property
    def per_batch_s(self) -> tuple[float, ...]:
        """The most recent per-batch times (``per_batch.last``)."""
        return self.per_batch.last
