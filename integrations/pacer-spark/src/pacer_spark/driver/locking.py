"""The one lock of a pacer session on Spark, with holding it written in the types.

Every Controller call, and every method of the driver and its front ends that reads or changes what the
Controller guards, runs under one lock: RPC threads (pacer-gen/pacer-files readers), stream threads (the
``format("pacer")`` source's ``latestOffset``, ``foreachBatch``) and the listener's thread all take it.

A method that expects its caller to hold the lock takes a :class:`Held` as its first argument; only
:meth:`Guard.held` makes one (the ``with`` block that holds the lock hands it out). Calling such a method
without the lock therefore does not type-check, and a method that takes the lock itself takes no ``Held``:
the contract is in the signature, where mypy reads it, not in a docstring. :meth:`Held.check` verifies it at
run time where a method is the entry of a locked protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import final


@final
class Held:
    """Proof that the caller holds its :class:`Guard`'s lock: made only by :meth:`Guard.held`.

    Pass it on to the methods that need the lock (their first parameter, ``held``); never keep it past the
    ``with`` block that made it.
    """

    __slots__ = ("_guard",)

    def __init__(self, guard: Guard) -> None:
        self._guard = guard

    def check(self) -> None:
        """Raise RuntimeError when the calling thread does not hold the lock (a ``Held`` kept too long)."""
        if not self._guard.owned():
            raise RuntimeError("a method that needs the driver's lock was called without it (a Held kept past "
                               "its `with guard.held()` block)")

    def notify_all(self) -> None:
        """Wake every thread waiting on the guard's condition (an admission, a completion, a termination)."""
        self._guard.cond.notify_all()


class Guard:
    """The lock around a session's Controller and the condition the gate and drains wait on.

    :ivar lock: the re-entrant lock; :ivar cond: its condition.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self._held = Held(self)

    @contextmanager
    def held(self) -> Iterator[Held]:
        """Hold the lock for the ``with`` block and hand out the proof of it."""
        with self.cond:
            yield self._held

    def owned(self) -> bool:
        """Whether the calling thread holds the lock."""
        is_owned = getattr(self.lock, "_is_owned", None)  # CPython's RLock (C and Python) both have it
        if is_owned is None:  # pragma: no cover - another Python: assume the types were honoured
            return True
        return bool(is_owned())


__all__ = ["Guard", "Held"]
