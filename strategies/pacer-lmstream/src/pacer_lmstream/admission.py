"""LMStream Algorithm 1 (ConstructMicroBatch) with the max-latency estimate of Eq. 6.

EstMaxLat_i = max_j Buff(i,j) + sum_j Part(i,j) / AvgThPut_{i-1}            (Eq. 6)

pacer adds the wait behind the batches the scheduler runs first, and divides the
processing term by the core share under FAIR/RDAS (``t_sched="queue"``, the default;
:func:`pacer.queueing.queue_wait`): Eq. 6 as printed plans as if the query had the
cores to itself (``t_sched="paper"``).

- sliding window (SlideTime > 0): admit once EstMaxLat_i >= SlideTime         (Eq. 2)
- tumbling window (SlideTime = 0): admit once EstMaxLat_i >= mean_k MaxLat_k  (Eq. 3)

Otherwise the temporary micro-batch is cancelled and its datasets keep waiting
(the Controller keeps them buffered and polls again 10 ms later).
"""

from __future__ import annotations

from dataclasses import dataclass

from pacer.model import AdmissionDecision, BatchReport, DatasetBuffer


def estimate_max_latency(
    buffer: DatasetBuffer, now: float, avg_throughput: float | None, *, wait_s: float = 0.0, share: float = 1.0
) -> float:
    """Eq. 6: buffering time of the oldest buffered dataset plus the estimated processing time.

    :param buffer: the datasets that would form the micro-batch (never empty).
    :param now: the clock.
    :param avg_throughput: AvgThPut_{i-1} in bytes per second (Eq. 4); None or 0 before any
        measured batch, in which case the processing estimate is 0.
    :param wait_s: the predicted wait before the batch gets the cores (0: Eq. 6 as printed).
    :param share: the fraction of the cores it runs on; the processing term is divided by it (1: Eq. 6).
    """
    earliest = buffer.earliest_arrival
    buffering = max(0.0, now - earliest) if earliest is not None else 0.0
    processing = buffer.bytes / avg_throughput if avg_throughput else 0.0
    return buffering + wait_s + processing / share


@dataclass
class MaxLatencyAverage:
    """Running mean of MaxLat_k over every completed batch (the right-hand side of Eq. 3)."""

    total: float = 0.0
    count: int = 0

    def add(self, report: BatchReport) -> None:
        """Record MaxLat of a completed batch (Eq. 5: completion - arrival of its oldest dataset)."""
        self.total += report.max_latency_s
        self.count += 1

    @property
    def mean(self) -> float | None:
        """The mean, None before the first batch."""
        return self.total / self.count if self.count else None


def construct_micro_batch(
    buffer: DatasetBuffer,
    now: float,
    *,
    slide_time: float,
    avg_throughput: float | None,
    past_max_latency: float | None,
    processing_s: float | None = None,
    wait_s: float = 0.0,
    share: float = 1.0,
    reserve_s: float = 0.0,
) -> AdmissionDecision:
    """Algorithm 1: admit the whole buffer (``tmpMicroBatch``) or cancel it and keep buffering.

    Cold start: before the first batch has completed there is no past MaxLat (and no
    AvgThPut); the first micro-batch is then admitted at once so that both become known
    (the paper leaves batch 0 undefined: its Eq. 3 average is over no batch). While
    AvgThPut is unknown or 0 (batches that took no measurable time) the processing
    estimate is 0.

    :param slide_time: the query's SlideTime (0 for a tumbling window).
    :param avg_throughput: AvgThPut_{i-1}, bytes per second, None before any batch.
    :param past_max_latency: mean of MaxLat_k over past batches, None before any batch.
    :param processing_s: a processing-time prediction for the whole buffer at full cores that replaces
        Eq. 6's ``bytes / AvgThPut`` (pacer's service-time model: fixed + per-byte, with a margin); None: Eq. 6.
    :param wait_s: the predicted wait behind the batches the scheduler runs first, added to the estimate
        (``t_sched="queue"``); 0: Eq. 6 as printed.
    :param share: the fraction of the cores the batch will run on (FAIR/RDAS); the processing term is
        divided by it. 1: Eq. 6 as printed.
    :param reserve_s: admit this much earlier: room kept for a batch another query may start ahead of this
        one before the next poll (:meth:`pacer.queueing.Peers.reserve`); 0: Algorithm 1 as printed.
    """
    if past_max_latency is None:
        return AdmissionDecision.admit_all(buffer, "lmstream: cold start, first micro-batch")
    if processing_s is None:
        est = estimate_max_latency(buffer, now, avg_throughput, wait_s=wait_s, share=share)
    else:
        earliest = buffer.earliest_arrival
        est = (max(0.0, now - earliest) if earliest is not None else 0.0) + wait_s + processing_s / share
    est += reserve_s
    if slide_time > 0:
        if est >= slide_time:
            return AdmissionDecision.admit_all(buffer, f"lmstream: EstMaxLat {est:.3f}s >= SlideTime {slide_time:g}s")
        return AdmissionDecision.wait(f"lmstream: EstMaxLat {est:.3f}s < SlideTime {slide_time:g}s")
    if est >= past_max_latency:
        return AdmissionDecision.admit_all(buffer, f"lmstream: EstMaxLat {est:.3f}s >= mean MaxLat {past_max_latency:.3f}s")
    return AdmissionDecision.wait(f"lmstream: EstMaxLat {est:.3f}s < mean MaxLat {past_max_latency:.3f}s")
