"""How many datasets a query's next batch takes: catch-up or the admission strategy, then the caps."""

from __future__ import annotations

from collections.abc import Callable

from pacer.ledger import ExactlyOnceLedger
from pacer.model import AdmissionDecision
from pacer.overload import read_cap_count
from pacer.query_state import QueryState
from pacer.shedding import shed


def batch_size(q: QueryState, now: float, shedding: bool, ask_strategy: Callable[[], AdmissionDecision],
           ledger: ExactlyOnceLedger) -> tuple[int, bool]:
    """How many of ``q``'s oldest datasets the next batch takes (0: none), and whether it is a catch-up batch.

    Late data (:mod:`pacer.catch_up`) is drained in deadline-sized batches the Controller forms itself;
    otherwise the admission strategy decides (its sheds done here). Either way the read caps hold, and while
    the overload policy sheds, the batch stays within what meets its oldest dataset's deadline; until the query's
    service-time model is fitted, a query registered with ``probe_rows`` admits probes (``probe_rows``, doubling
    with each completed batch). ``ask_strategy`` asks the query's admission strategy (the dispatcher).
    """
    # overloaded or near it under keep, or in the hold-over after an overload: serve as the default trigger would
    kept = q.overload.eager(now, q.service) and not shedding
    catching_up = q.catch_up.wanted(q.buffer, now, q.service, kept)
    if catching_up:
        count = q.catch_up.count(q.buffer, q.service, kept)
    else:
        decision = ask_strategy()
        if decision.shed:
            shed(ledger, q, decision.shed, decision.reason or "overload policy")
        count = decision.count
    if q.max_rows or q.max_bytes:
        count = read_cap_count(q.buffer, count, q.max_rows, q.max_bytes)
    if q.probe_rows and not q.service.ready:  # cold start: a probe, doubling with each batch until the model fits
        count = read_cap_count(q.buffer, count, q.probe_rows * 2 ** min(len(q.history), 16), 0)
    if shedding and not catching_up:
        count = q.overload.feasible_prefix(q.buffer, count, now, q.service)
    return count, catching_up
