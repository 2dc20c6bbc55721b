"""zStream's admission controller (Eqs. 1-4, Algorithm 1).

MaxLat = T_buff + T_sched + T_anal; the buffered datasets become a micro-batch
as soon as MaxLat >= the query's deadline, and the batch takes the datasets that
still meet the deadline (Fig. 5's partial fetch). T_anal comes from core's
service-time model (fixed + per-byte, with a margin) where the paper divides by
the average throughput, and T_sched is the predicted wait behind the batches the
scheduler runs first (:func:`pacer.queueing.queue_wait`) where Eq. 3 sums every
other query's queued batch: see the package README for why and the measured effect.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pacer import AdmissionDecision, DatasetBuffer, QueryHistory, QuerySpec, SystemView
from pacer.metrics import percentile
from pacer.queueing import Peers, QueueWait, capped_prefix, capped_size, queue_wait
from pacer.service_time import ServiceTimeModel
from pacer_zstream.scheduling import rdas_weights

log = logging.getLogger("pacer.zstream")

#: How many recent gaps between waiting polls the admission looks at.
POLL_GAP_WINDOW = 200

#: Schedulers that share cores among queries, for which Eq. 4 scales throughput by the core share.
SHARED_SCHEDULERS = frozenset({"fair", "rdas"})

#: ``t_sched`` values: the predicted wait behind the batches the scheduler runs first, or Eq. 3's letter.
T_SCHED_MODES = ("queue", "paper")

#: RDAS's default ``spread`` (the admission does not see the scheduler's parameters).
RDAS_SPREAD = 2.0


@dataclass(frozen=True)
class Estimate:
    """The terms of Eq. 1 for one prospective micro-batch (seconds)."""

    t_buff: float
    t_sched: float
    t_anal: float

    @property
    def max_latency(self) -> float:
        """Eq. 1."""
        return self.t_buff + self.t_sched + self.t_anal


def t_buff(buffer: DatasetBuffer, now: float) -> float:
    """Eq. 2: now - arrival of the earliest buffered dataset."""
    earliest = buffer.earliest_arrival
    return 0.0 if earliest is None else max(0.0, now - earliest)


def t_sched(system: SystemView, query_id: str) -> float:
    """Eq. 3: the estimated analysis time of every other query's queued micro-batch."""
    return sum(p.estimated_run_s for p in system.others(query_id))


def queued_wait(system: SystemView, query_id: str, deadline_at: float) -> QueueWait:
    """T_sched and the core share of a prospective batch due at ``deadline_at`` (``t_sched="queue"``): the wait
    behind the batches the scheduler runs first (:func:`pacer.queueing.queue_wait`; RDAS's share by its own
    weights with the default spread)."""
    return queue_wait(system, query_id, deadline_at, weights=lambda pending, now: rdas_weights(pending, now, RDAS_SPREAD))


def core_share(system: SystemView, query_id: str) -> float:
    """Eq. 4's allocCores / totalCores: 1 under FIFO/EDF; under FAIR/RDAS what the scheduler last gave the
    query, else ``cores / active queries``."""
    if system.scheduler not in SHARED_SCHEDULERS:
        return 1.0
    active = {p.batch.query_id for p in system.pending} | {query_id}
    alloc = system.allocated_cores.get(query_id, system.cores / len(active))
    return max(alloc, 1e-9) / system.cores


def t_anal(batch_bytes: int, avg_throughput: float, system: SystemView, query_id: str) -> float:
    """Eq. 4: BatchSize / AvgThPut (FIFO/EDF), or / (AvgThPut x allocCores / totalCores) (FAIR/RDAS)."""
    if avg_throughput <= 0:
        return 0.0
    return batch_bytes / (avg_throughput * core_share(system, query_id))


def analysis_time(
    nbytes: int, system: SystemView, query_id: str, service: ServiceTimeModel | None, avg_throughput: float | None,
    share: float | None = None,
) -> float:
    """T_anal of a prospective batch of ``nbytes``.

    With a fitted service-time model (pacer's default, ``service="model"``): its prediction, margin
    included, scaled by the core share under FAIR/RDAS as Eq. 4 scales AvgThPut. Without one (the
    paper's letter, ``service="throughput"``): Eq. 4.

    :param share: the core share to divide by (from :func:`queued_wait`); None: Eq. 4's :func:`core_share`.
    """
    if share is None:
        share = core_share(system, query_id)
    if service is None or not service.ready:
        throughput = avg_throughput or 0.0
        return nbytes / (throughput * share) if throughput > 0 else 0.0
    return service.predict(nbytes) / share


@dataclass
class ZStreamAdmission:
    """Per-query state: the deadline, the admission parameters, and counts of what was decided.

    Algorithm 1 waits while MaxLat = T_buff + T_sched + T_anal of the whole buffer stays below the
    deadline. Once it reaches the deadline less the gap to the next poll (:attr:`poll_gap`, at least
    ``slack``), zStream admits the datasets
    collected so far *that still meet the deadline* (Fig. 5, §6.3: a partial fetch): the largest
    prefix of the buffer, oldest first, whose MaxLat stays within the deadline, at least one
    dataset (``partial=True``; ``False``: the whole buffer, Algorithm 1's letter). It also stops waiting once the
    buffer reaches the service-time model's probe limit (:attr:`ServiceTimeModel.probe_limit_bytes`): beyond the
    sizes measured, T_anal is an extrapolation, and the Controller would not take more in one batch anyway.

    T_sched (``t_sched``): ``"queue"`` (default) is the predicted wait behind the batches the scheduler runs
    before this one, and under FAIR/RDAS the share of the cores it will run on (:func:`queued_wait`);
    ``"paper"`` is Eq. 3's letter, every other query's pending batch in full (:func:`t_sched`), with Eq. 4's
    :func:`core_share`.

    Cold start (the paper is silent): before the first batch completes there is no service time,
    so the first micro-batch is admitted at once to measure it; with an engine profile as the model's prior, the
    warm-up batch still is (its time is the engine's start, which the profile leaves out). When even one dataset is
    predicted to miss (T_buff + T_sched + T_anal(oldest) > deadline), it is admitted at once (never stall)
    and counted in ``predicted_misses``, logged once per query at INFO level.
    """

    deadline: float
    partial: bool = True
    use_model: bool = True
    slack: float = 0.01
    t_sched_mode: str = "queue"
    reserve: bool = True
    cap: bool = True
    peers: Peers = field(default_factory=Peers)
    admitted: int = 0
    predicted_misses: int = 0
    logged: bool = False
    last: Estimate | None = None
    waited_at: float | None = None
    poll_gaps: deque[float] = field(default_factory=lambda: deque(maxlen=POLL_GAP_WINDOW))

    @property
    def poll_gap(self) -> float:
        """How late the next poll may come: the 0.99 quantile of the recent gaps between polls that waited.

        On the simulator that is the 10 ms poll interval. On Spark a poll can come much later: the query's
        stream thread runs a no-data batch (watermark advance) between data batches, and the batch that should
        be admitted meanwhile would miss by that much (README, "A late poll").
        """
        if not self.poll_gaps:
            return self.slack
        return max(self.slack, percentile(list(self.poll_gaps), 99.0))

    def admit(
        self,
        query_id: str,
        buffer: DatasetBuffer,
        now: float,
        system: SystemView,
        history: QueryHistory,
        service: ServiceTimeModel | None = None,
    ) -> AdmissionDecision:
        """Algorithm 1 with the partial fetch."""
        model = service if self.use_model else None
        throughput = history.avg_throughput_bytes_per_s
        if (model is not None and not (model.ready and model.warmed_up)) or (model is None and throughput is None):
            # Cold start: the first batches (the warm-up the model leaves out, then one to fit) run at once; with a
            # prior, the warm-up still does (a deadline-sized first batch would pay Spark's start on top of it).
            self.admitted += 1
            return AdmissionDecision.admit_all(buffer, "cold start: admit to measure the service time")
        buffering, (scheduling, share) = t_buff(buffer, now), self.scheduling(buffer, now, system, query_id)

        def anal(nbytes: int) -> float:
            return analysis_time(nbytes, system, query_id, model, throughput, share)

        estimate = Estimate(buffering, scheduling, anal(buffer.bytes))
        self.last = estimate
        if self.waited_at is not None and now > self.waited_at:
            self.poll_gaps.append(now - self.waited_at)
        reserve, cap = self._sharing(system, query_id)
        probed = model is not None and buffer.bytes >= model.probe_limit_bytes  # the batch may grow no further
        if estimate.max_latency + reserve < self.deadline - self.poll_gap and not probed:
            self.waited_at = now
            return AdmissionDecision.wait(
                f"MaxLat {estimate.max_latency:.2f}s + reserve {reserve:.2f}s < deadline {self.deadline:.2f}s")
        self.waited_at = None
        first = anal(buffer[0].bytes)
        missing = buffering + scheduling + first > self.deadline
        count = len(buffer)
        if self.partial:
            # When even the oldest dataset misses, trimming to it alone would only add per-batch costs:
            # take what the engine processes within one deadline instead (never an unbounded batch).
            count = self._prefix(buffer, 0.0 if missing else buffering + scheduling, anal)
            if cap is not None:
                count = min(count, capped_prefix(buffer, anal if model is None else capped_size(model), cap))
        if missing:
            self.predicted_misses += 1
            if not self.logged:
                self.logged = True
                log.info(
                    "zstream: query %r is predicted to miss its %.2fs deadline (buffering + queued work + processing "
                    "of its oldest dataset %.2fs); admitting at once. A persistent miss means the deadline is too "
                    "tight for the resources.", query_id, self.deadline, buffering + scheduling + first,
                )
        self.admitted += 1
        log.debug("zstream %r: admit %d of %d datasets: T_buff %.2fs T_sched %.2fs T_anal %.2fs (all) reserve %.2fs "
                  "poll gap %.2fs probed %s missing %s", query_id, count, len(buffer), buffering, scheduling,
                  estimate.t_anal, reserve, self.poll_gap, probed, missing)
        return AdmissionDecision(
            count, reason=f"MaxLat {estimate.max_latency:.2f}s >= deadline {self.deadline:.2f}s: {count} of {len(buffer)}"
        )

    def scheduling(self, buffer: DatasetBuffer, now: float, system: SystemView, query_id: str) -> tuple[float, float | None]:
        """T_sched of the buffer's batch and the core share T_anal is divided by (None: Eq. 4's :func:`core_share`).

        The batch's deadline is its oldest dataset's arrival + the query's deadline, whatever prefix is taken.
        """
        if self.t_sched_mode == "paper":
            return t_sched(system, query_id), None
        earliest = buffer.earliest_arrival
        wait = queued_wait(system, query_id, (now if earliest is None else earliest) + self.deadline)
        return wait.wait_s, wait.share

    def _sharing(self, system: SystemView, query_id: str) -> tuple[float, float | None]:
        """The reserve kept while waiting and the cap on a batch's T_anal (None: no cap) under a non-preemptive
        scheduler, learned from the other queries' pending batches (:class:`pacer.queueing.Peers`); none with
        ``t_sched="paper"``."""
        if self.t_sched_mode == "paper":
            return 0.0, None
        self.peers.observe(system, query_id)
        reserve = self.peers.reserve(system) if self.reserve else 0.0
        cap = self.peers.cap(self.deadline) if self.cap and system.scheduler not in SHARED_SCHEDULERS else None
        return reserve, cap

    def _prefix(self, buffer: DatasetBuffer, waited: float, anal: Callable[[int], float]) -> int:
        """The largest prefix whose MaxLat (``waited`` + T_anal of the prefix) meets the deadline, at least 1."""
        nbytes = 0
        for taken, dataset in enumerate(buffer):
            nbytes += dataset.bytes
            if taken and waited + anal(nbytes) > self.deadline:
                return taken
        return len(buffer)


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> ZStreamAdmission:
    """Per-query state; the deadline is the query's (default: its window slide)."""
    if spec is None:
        raise ValueError("zstream admission needs a query")
    service = str(params.get("service", "model"))
    if service not in ("model", "throughput"):
        raise ValueError(f"zstream service must be 'model' or 'throughput', got {service!r}")
    slack = float(params.get("slack", 0.01))
    if slack < 0:
        raise ValueError(f"zstream slack must be >= 0 seconds, got {slack}")
    mode = str(params.get("t_sched", "queue"))
    if mode not in T_SCHED_MODES:
        raise ValueError(f"zstream t_sched must be one of {', '.join(map(repr, T_SCHED_MODES))}, got {mode!r}")
    return ZStreamAdmission(
        deadline=spec.effective_deadline,
        partial=bool(params.get("partial", True)),
        use_model=service == "model",
        slack=slack,
        t_sched_mode=mode,
        reserve=bool(params.get("reserve", True)),
        cap=bool(params.get("cap", True)),
    )
