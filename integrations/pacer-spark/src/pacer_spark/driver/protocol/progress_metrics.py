"""pacer's figures in a ``format("pacer")`` query's own progress: ``lastProgress["sources"][i]["metrics"]``.

The driver computes them when it admits a batch (under its lock, from the Controller's books) and sends them with
its answer; the JVM source returns them from ``ReportsSourceMetrics.metrics`` when Spark builds the batch's progress,
so every ``StreamingQueryListener`` and whatever reads progress (the UI's JSON, a user's monitoring) sees them. Names
follow Spark's (camelCase, as the Kafka source's ``avgOffsetsBehindLatest``), prefixed ``pacer``; values are strings,
as Spark's source metrics are. The batch's own lateness and cost are known only once it completed: the progress of
batch N carries them for the query's previous completed batch (``pacerPreviousBatch...``). The JVM source adds its own
(:data:`SOURCE_METRICS`), named the same way (until 0.2 some were dotted: ``pacer.fallbacks``, ``pacer.unanswered``...).
"""

from __future__ import annotations

import time

from pacer import MicroBatch
from pacer.metrics import batch_late
from pacer_spark.driver.books import Books

#: Every metric :func:`decision_metrics` gives, with what it holds (for the docs and the test).
METRICS: dict[str, str] = {
    "pacerDeadlineMs": "the query's deadline",
    "pacerAdmission": "the admission strategy that decided",
    "pacerReason": "why the batch was formed now: deadline (the strategy), catch-up (the oldest data already late), "
                   "read cap (max rows or bytes per batch), fail-open (no answer from the driver: set by the source)",
    "pacerBatchDatasets": "snapshots the batch takes",
    "pacerBatchRows": "rows the batch takes",
    "pacerPredictedBatchMs": "the batch's predicted engine time (the service-time model, no margin)",
    "pacerDatasetsHeld": "snapshots left waiting after the batch",
    "pacerRowsHeld": "rows left waiting after the batch",
    "pacerOldestHeldAgeMs": "age of the oldest row left waiting, by the data's own time (0: none waits)",
    "pacerSourcePart": "how the source's data is in the batch: formed (its ask formed it), joined (asked after another "
                       "source of the query formed it, it joined with everything it held: the trigger drains), part "
                       "(the source that formed it took this one's data in)",
    "pacerPreviousBatchRowsLate": "rows of the query's previous completed batch that finished past the deadline",
    "pacerPreviousBatchBusyCoreSeconds": "core-seconds the previous completed batch's tasks executed",
    "pacerPreviousBatchTriggerMs": "the previous completed batch's engine time, waits at pacer's gate excluded",
}

#: The metrics the JVM source itself adds to every batch's progress (``PacedStream.metrics``/``PacerSource``), whatever
#: the driver answered, with what they hold (for the docs and the test).
SOURCE_METRICS: dict[str, str] = {
    "pacerQuery": "the query pacer paces the source as (its name, or pacer.query)",
    "pacerPendingSnapshots": "snapshots of the source seen and not yet admitted",
    "pacerObservedSnapshots": "snapshots of the source seen so far",
    "pacerFallback": "true once the source admitted without a decision (the decider failed, timed out or named no "
                     "pending snapshot), as plain Spark would",
    "pacerFallbacks": "admissions made without a decision so far",
    "pacerFailedOpen": "failed-open records so far (admissions the driver accounts once it answers again)",
    "pacerUnanswered": "whether this batch was admitted without the driver's answer",
    "pacerSourceTimeMs": "time spent fetching Kafka records' timestamps for arrivals (Kafka only)",
    "pacerSourceTimeFetches": "fetches of Kafka records' timestamps so far (Kafka only)",
}


def decision_metrics(books: Books, batch: MicroBatch, part: str = "formed") -> dict[str, str]:
    """The figures of ``batch``, just admitted, and of its query (module docstring), for the source whose data is in it
    as ``part`` says (``pacerSourcePart``: the batch is counted once, by the source that formed it)."""
    view = books.query(batch.query_id)
    deadline = view.spec.effective_deadline
    held = books.buffered(batch.query_id)
    rows = sum(d.rows for d in batch.datasets)
    capped = (view.max_rows and rows >= view.max_rows) or \
        (view.max_bytes and sum(d.bytes for d in batch.datasets) >= view.max_bytes)
    reason = "catch-up" if view.catch_up.active else "read cap" if capped else "deadline"
    reports = books.reports(batch.query_id)  # the query's own: no merge of every query's on each admission
    previous = reports[-1] if reports else None
    out = {
        "pacerDeadlineMs": f"{1000.0 * deadline:.0f}",
        "pacerAdmission": view.admission,
        "pacerReason": reason,
        "pacerBatchDatasets": str(len(batch.datasets)),
        "pacerBatchRows": str(rows),
        "pacerPredictedBatchMs": f"{1000.0 * (batch.estimated_run_s or 0.0):.0f}",
        "pacerDatasetsHeld": str(len(held)),
        "pacerRowsHeld": str(sum(d.rows for d in held)),
        "pacerOldestHeldAgeMs": f"{1000.0 * max(0.0, time.time() - held[0].arrival):.0f}" if held else "0",
        "pacerSourcePart": part,
    }
    if previous is not None:
        out["pacerPreviousBatchRowsLate"] = str(batch_late(previous, deadline)[1])
        out["pacerPreviousBatchBusyCoreSeconds"] = (f"{previous.busy_core_s:.3f}" if previous.busy_core_s is not None
                                                    else "")
        out["pacerPreviousBatchTriggerMs"] = f"{1000.0 * previous.trigger_s:.0f}"
    return out


__all__ = ["METRICS", "decision_metrics"]
