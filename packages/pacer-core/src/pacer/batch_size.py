"""How many datasets a query's next batch takes: catch-up or the admission strategy, then the caps."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from pacer.ledger import ExactlyOnceLedger
from pacer.model import AdmissionDecision
from pacer.overload import read_cap_count
from pacer.query_state import QueryState
from pacer.shedding import shed

log = logging.getLogger("pacer.batch_size")


def batch_size(q: QueryState, now: float, shedding: bool, ask_strategy: Callable[[], AdmissionDecision],
           ledger: ExactlyOnceLedger) -> tuple[int, bool]:
    """How many of ``q``'s oldest datasets the next batch takes (0: none), and whether it is a catch-up batch.

    Late data (:mod:`pacer.catch_up`) is drained in deadline-sized batches the Controller forms itself;
    otherwise the admission strategy decides (its sheds done here). Either way the read caps hold, and while
    the overload policy sheds, the batch stays within what meets its oldest dataset's deadline; until the query's
    service-time model is fitted, a query registered with ``probe_rows`` admits probes (``probe_rows``, doubling
    with each completed batch), and after that no batch grows past the model's probe limit
    (:attr:`pacer.service_time.ServiceTimeModel.probe_limit_bytes`) unless the strategy stands for a fixed Spark
    trigger (``catch_up=False``: Spark batches whatever arrived). ``ask_strategy`` asks the query's admission
    strategy (the dispatcher).
    """
    # overloaded or near it under keep, or in the hold-over after an overload: serve as the default trigger would
    kept = q.overload.eager(now, q.service) and not shedding
    # ... where the engine cannot keep up on average either, only throughput limits the rows late: every batch as large
    sustained = kept and q.service.ready and not q.overload.keeps_up_on_average(now, q.service)
    catching_up = q.catch_up.wanted(q.buffer, now, q.service, kept)
    if catching_up:
        count = q.catch_up.count(q.buffer, q.service, kept)
        if kept and not sustained and q.service.ready and not q.overload.hopeless(q.buffer, now, q.service):
            # what can still meet its deadline goes first, in a batch of its own: not late behind a burst's data
            count = q.overload.feasible_prefix(q.buffer, count, now, q.service)
    else:
        decision = ask_strategy()
        if decision.shed:
            shed(ledger, q, decision.shed, decision.reason or "overload policy")
        count = decision.count
    asked = count  # what catch-up or the strategy wanted, before the caps
    if q.max_rows or q.max_bytes:
        count = read_cap_count(q.buffer, count, q.max_rows, q.max_bytes)
    if q.probe_rows and not q.service.ready:  # cold start: a probe, doubling with each batch until the model fits
        count = read_cap_count(q.buffer, count, q.probe_rows * 2 ** min(len(q.history), 16), 0)
    if q.catch_up.enabled and math.isfinite(limit := q.service.probe_limit_bytes):
        # beyond what was measured, a probe at most; two datasets where growth allows (else datasets a little over
        # half the largest batch would never grow into two), one where a ceiling binds
        least = 1 if q.service.probe_limit_is_ceiling else 2
        count = min(count, max(least, read_cap_count(q.buffer, count, 0, max(1, int(limit)))))
    if count < asked:
        log.debug("query %r: %d of the %d datasets asked (read cap, probe or probe limit %.0f bytes on %g slots%s)",
                  q.spec.id, count, asked, q.service.probe_limit_bytes, q.service.slots,
                  ", a ceiling" if q.service.probe_limit_is_ceiling else "")
    if shedding and not catching_up:
        count = q.overload.feasible_prefix(q.buffer, count, now, q.service)
    return count, catching_up
