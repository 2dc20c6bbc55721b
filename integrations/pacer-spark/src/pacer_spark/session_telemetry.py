"""A session's telemetry: its queries' errors, pacer's overhead and the report's ``spark`` part.

Spark's listener events go to the driver (:meth:`pacer_spark.driver.loop.Driver.on_progress`), not here: this
module only reads what the session measured.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from pacer import BatchReport
from pacer.summary import StreamingSummary
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.protocol.readers import AdmissionService
from pacer_spark.errors import root_cause
from pacer_spark.manifest import FILES_FORMAT

if TYPE_CHECKING:
    from pacer_spark.driver.protocol.paced import PacedQueries
    from pacer_spark.plan.enact import Enactment

log = logging.getLogger("pacer_spark")


#: Batches whose enactment the report's ``spark.placement_enactment.recent`` lists.
ENACTMENT_RECENT = 200


@dataclass(eq=False)
class SessionTelemetry:
    """Reads what a session measured: errors, overhead, the report's ``spark`` part.

    :param spark: the session's SparkSession.
    :param driver: the session's driver (its Controller under its lock, notified on termination; batch completion).
    :param admission: the ``pacer-gen``/``pacer-files`` sources.
    :param fair: whether the session runs ``spark.scheduler.mode=FAIR``.
    :param rapids: whether the RAPIDS Accelerator is loaded.
    :param paced: the session's ``format("pacer")`` queries (None: not paced).
    :param enactment: applies placements to RAPIDS and checks them (None: none).
    """

    spark: SparkSession
    driver: Driver
    admission: AdmissionService
    fair: bool
    rapids: bool
    paced: PacedQueries | None = None
    enactment: Enactment | None = None

    # ------------------------------------------------------------------ reading

    def error_traces(self) -> dict[str, str]:
        """Queries that terminated with an error, and Spark's full error text."""
        failed = {q: s.error for q, s in self.admission.sources.items() if s.error}
        if self.paced is not None:
            failed.update({q: p.error for q, p in self.paced.queries.items() if p.error})
        return failed

    def errors(self) -> dict[str, str]:
        """Queries that terminated with an error, and its root cause in one line."""
        return {query_id: root_cause(trace) for query_id, trace in self.error_traces().items()}

    def overhead(self) -> dict[str, Any]:
        """pacer's own cost on Spark: RPC handling, round trips and operator-metric collection."""
        def us(values: StreamingSummary, q: float) -> float | None:
            return 1e6 * values.percentile(q) if values.count else None

        metrics, waits = StreamingSummary(), StreamingSummary()
        for source in self.admission.sources.values():
            metrics.merge(source.metrics_s)
            waits.merge(source.gate_wait_s)
        rpc_s, rpc_rtt_s = self.admission.rpc_s, self.admission.rpc_rtt_s
        return {
            "rpc_handle_us_p50": us(rpc_s, 50), "rpc_handle_us_p99": us(rpc_s, 99),
            "rpc_round_trip_us_p50": us(rpc_rtt_s, 50), "rpc_round_trip_us_p99": us(rpc_rtt_s, 99),
            "rpc_requests": rpc_s.count,
            "operator_metrics_ms_avg": 1e3 * metrics.mean if metrics.count else None,
            "gate_wait_ms_avg": 1e3 * waits.mean if waits.count else None,
            "gate_wait_ms_max": 1e3 * waits.max if waits.count else None,
        }

    def spark_section(self, completed: list[BatchReport]) -> dict[str, Any]:
        """The report's ``spark`` part: Spark's side of the run, pacer's overhead, enactment, errors (the driver's lock
        held: ``completed`` are the reports of the batches completed so far)."""
        import pyspark

        reports = [r for r in completed if r.placement is not None]
        placements = [r.placement for r in reports if r.placement is not None]
        sources = self.admission.sources
        enactment = self.enactment
        return {
            "spark_version": pyspark.__version__,
            "master": self.spark.sparkContext.master,
            "scheduler_mode": "FAIR" if self.fair else "FIFO",
            "rapids_loaded": self.rapids,
            "pacer_spark_overhead": self.overhead(),
            "placement_enactment": {
                "batches": len(placements),
                "enacted": sum(1 for p in placements if p.enacted),
                "notes": sorted({p.note for p in placements if p.note}),
                # per batch (the most recent ENACTMENT_RECENT): enacted or not, and why (its note)
                "recent": [{"query": r.query_id, "batch": r.batch_id, "enacted": r.placement.enacted,
                            "note": r.placement.note} for r in reports[-ENACTMENT_RECENT:] if r.placement is not None],
            },
            # explainOnly mode: per query, RAPIDS' plan of each batch against pacer's placement, operator by operator
            "rapids_explain": enactment.summary() if enactment is not None else {},
            "spark_batches": {q: s.spark_batches for q, s in sources.items()},
            # whether each query started with Spark's no-data batches on (the session's conf when it started)
            "no_data_batches_enabled": {q: s.no_data_batches for q, s in sources.items()},
            "spark_duration_ms_avg": {q: s.durations.averages() for q, s in sources.items()},
            # how batches completed, and each batch's task cost read by its Spark batch id
            # (pacer_spark.driver.completion, pacer_spark.driver.batch_costs)
            **self.driver.summary(),
            "errors": self.errors(),
            "quarantined_rows": {q: s.quarantined() for q, s in sources.items() if s.fmt == FILES_FORMAT},
            # files listed but gone before their batch read them (skipped under malformed=quarantine)
            "missing_files": {q: s.missing_files() for q, s in sources.items() if s.fmt == FILES_FORMAT},
            # batches Spark ran without the driver's answer (replays, a reader admitting on its own), and admitted
            # batches Spark never ran
            "reader_unanswered": {q: s.unanswered for q, s in sources.items()},
            "reader_retracted": {q: s.retracted for q, s in sources.items()},
            "paced": self.paced.summary() if self.paced is not None else {},
        }


__all__ = ["SessionTelemetry"]
