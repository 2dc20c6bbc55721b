"""Shedding: the overload policy the Controller applies to a query at each poll, and the one way any dataset is
dropped.

:func:`shed_if_overloaded` is the ``shed`` overload policy, applied before admission: it re-judges the query's
overload (:class:`pacer.overload.OverloadMonitor`) and drops the buffered datasets that can no longer meet the
deadline even alone in a batch. :func:`shed` drops datasets, whether for that policy or for an admission
strategy's ``AdmissionDecision.shed``: counted in the ledger, on the query and in its record (as missed), logged.
"""

from __future__ import annotations

import logging

from pacer.ledger import ExactlyOnceLedger
from pacer.query_state import QueryState

log = logging.getLogger("pacer.controller")  # the Controller's logger: sheds are its doing

_OVERLOAD_REASON = ("overload: the offered load exceeds what any batch size serves within the deadline; shedding "
                    "what cannot meet it (further sheds of this episode are logged at DEBUG)")


def shed(ledger: ExactlyOnceLedger, q: QueryState, count: int, reason: str, quiet: bool = False) -> None:
    """Drop the ``count`` oldest buffered datasets of ``q``: counted in the ledger, on the query and in its
    record (as missed), logged."""
    dropped = q.buffer.take(count)
    ledger.shed(q.spec.id, (d.id for d in dropped))
    q.shed += len(dropped)
    q.record.shed(dropped)
    log.log(logging.DEBUG if quiet else logging.WARNING, "query %r: shed %d datasets (%s)",
            q.spec.id, len(dropped), reason)


def shed_if_overloaded(ledger: ExactlyOnceLedger, q: QueryState, now: float) -> bool:
    """Re-judge ``q``'s overload at ``now``; under its ``shed`` policy, shed the buffered datasets that cannot
    meet the deadline even alone in a batch (the first shed of an episode is a warning, later ones DEBUG).

    :return: True while the query is overloaded under the ``shed`` policy: its batch must then stay within
        what meets the oldest dataset's deadline (:meth:`pacer.overload.OverloadMonitor.feasible_prefix`).
    """
    shedding = q.overload.check(now, q.service) and q.overload_policy == "shed"
    if shedding:
        late = q.overload.hopeless(q.buffer, now, q.service)
        if late:
            first = q.overload.shed_episode != q.overload.episodes
            q.overload.shed_episode = q.overload.episodes
            shed(ledger, q, late, _OVERLOAD_REASON, quiet=not first)
    return shedding
