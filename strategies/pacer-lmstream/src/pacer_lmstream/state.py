"""Per-query LMStream state, shared by its admission and its placement."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pacer.model import (
    AdmissionDecision,
    BatchReport,
    CompiledDAG,
    DatasetBuffer,
    Devices,
    MicroBatch,
    OperatorDAG,
    Placement,
    QueryHistory,
    QuerySpec,
    SystemView,
)
from pacer.queueing import SHARE_SCHEDULERS, Peers, QueueWait, capped_prefix, capped_size, queue_wait
from pacer_lmstream.admission import MaxLatencyAverage, construct_micro_batch
from pacer_lmstream.calibration import load_rows
from pacer_lmstream.placement import PREFERENCES, OperatorCost, map_device
from pacer_lmstream.profile import initial_inflection
from pacer_lmstream.regression import InflectionRegressor, Sample

if TYPE_CHECKING:
    from pacer.service_time import ServiceTimeModel

NAME = "lmstream"

#: ``t_sched`` values: the predicted wait behind the batches the scheduler runs first, or Eq. 6's letter (none).
T_SCHED_MODES = ("queue", "paper")


class LMStreamState:
    """Everything LMStream keeps for one query.

    :param spec: the query (its SlideTime and partitions); None outside a query.
    :param params: the resolved strategy parameters (see :mod:`pacer_lmstream.plugin`).
    :raises ValueError: for a bad parameter; :class:`~pacer_lmstream.calibration.CalibrationError`
        (a ValueError) for a missing or malformed ``initial_rows`` file, naming it.
    """

    def __init__(self, spec: QuerySpec | None, params: Mapping[str, Any]) -> None:
        self.spec = spec
        self.slide_time = spec.slide_time if spec is not None else 0.0
        self.base_trans_cost = float(params["base_trans_cost"])
        if self.base_trans_cost < 0:
            raise ValueError(f"lmstream: base_trans_cost must be >= 0, got {self.base_trans_cost}")
        self.max_latency = MaxLatencyAverage()
        #: InfPT_0 and the cost profile it is the query's crossover under ("": a number, the paper's 150 KB by default)
        initial, self.inflection_profile = initial_inflection(spec, params)
        self.regressor = InflectionRegressor(
            initial,
            window=int(params["regression_window"]),
            min_bytes=float(params["inflection_min_bytes"]),
            max_bytes=float(params["inflection_max_bytes"]),
            asynchronous=bool(params["async_regression"]),
            ridge=float(params["regression_ridge"]),
        )
        self.preference = str(params.get("preference", "table-ii"))
        if self.preference not in PREFERENCES:
            raise ValueError(f"lmstream: preference must be one of {', '.join(PREFERENCES)}, got {self.preference!r}")
        self.service_admission = bool(params.get("service_admission", True))
        self.t_sched = str(params.get("t_sched", "queue"))
        if self.t_sched not in T_SCHED_MODES:
            raise ValueError(f"lmstream: t_sched must be one of {', '.join(map(repr, T_SCHED_MODES))}, got {self.t_sched!r}")
        self.reserve = bool(params.get("reserve", True))
        self.cap = bool(params.get("cap", True))
        self.peers = Peers()
        self.initial_rows: tuple[Sample, ...] = ()
        rows_file = str(params.get("initial_rows", "") or "")
        if rows_file:
            self.initial_rows = tuple(load_rows(rows_file))
            # Never extrapolate past the measured sweep: with a target latency (SlideTime) far from the
            # latencies the sweep saw, Eq. 10 otherwise runs to a clamp.
            swept = [row.inflection for row in self.initial_rows]
            self.regressor.min_bytes = max(self.regressor.min_bytes, min(swept))
            self.regressor.max_bytes = max(self.regressor.min_bytes, min(self.regressor.max_bytes, max(swept)))
            self.regressor.seed(self.initial_rows, self._target_latency)
        self._dag: OperatorDAG | None = None
        self._compiled: CompiledDAG | None = None
        self._inflection_of: dict[str, float] = {}
        self.last_costs: dict[str, OperatorCost] = {}
        self.last_wait = QueueWait(0.0)

    # ------------------------------------------------------------------ admission

    @property
    def _target_latency(self) -> float | None:
        """Eq. 10's target latency: SlideTime (sliding window), None for the window's mean (tumbling)."""
        return self.slide_time if self.slide_time > 0 else None

    def admit(
        self,
        buffer: DatasetBuffer,
        now: float,
        history: QueryHistory,
        service: ServiceTimeModel | None = None,
        system: SystemView | None = None,
    ) -> AdmissionDecision:
        """Algorithm 1 for this query.

        :param service: the query's service-time model (``ctx.service``). Once it is ready (and
            ``service_admission`` is on) its prediction with margin replaces Eq. 6's
            ``bytes / AvgThPut``; before that, or without it, Eq. 6 as printed.
        :param system: the view of the runtime; with ``t_sched="queue"`` (and a query) the estimate adds the
            wait behind the batches the scheduler runs first and divides processing by the core share
            (:func:`pacer.queueing.queue_wait`, the batch due at its oldest dataset's arrival + the query's
            deadline), and under FIFO/EDF keeps the ``reserve`` and takes at most the ``cap``
            (:class:`pacer.queueing.Peers`); None or ``t_sched="paper"``: Eq. 6 and Algorithm 1 as printed.
        """
        predicted = None
        if self.service_admission and service is not None and service.ready:
            predicted = service.predict(buffer.bytes)
        wait, reserve, cap = QueueWait(0.0), 0.0, None
        if self.t_sched == "queue" and system is not None and self.spec is not None and len(buffer):
            earliest = buffer.earliest_arrival
            due = (now if earliest is None else earliest) + self.spec.effective_deadline
            wait = queue_wait(system, self.spec.id, due)
            self.peers.observe(system, self.spec.id)
            reserve = self.peers.reserve(system) if self.reserve else 0.0
            if self.cap and system.scheduler not in SHARE_SCHEDULERS:
                cap = self.peers.cap(self.spec.effective_deadline)
        self.last_wait = wait
        decision = construct_micro_batch(
            buffer,
            now,
            slide_time=self.slide_time,
            avg_throughput=history.avg_throughput_bytes_per_s,
            past_max_latency=self.max_latency.mean,
            processing_s=predicted,
            wait_s=wait.wait_s,
            share=wait.share,
            reserve_s=reserve,
        )
        if cap is None or not decision.admits or self.max_latency.mean is None:
            return decision
        throughput = history.avg_throughput_bytes_per_s or 0.0
        size = capped_size(service) if service is not None and service.ready else (
            lambda nbytes: nbytes / throughput if throughput > 0 else 0.0)
        count = min(decision.count, capped_prefix(buffer, size, cap))
        if count == decision.count:
            return decision
        return AdmissionDecision(count, reason=f"{decision.reason}; {count} of {len(buffer)} within the cap {cap:.2f}s")

    # ------------------------------------------------------------------ placement

    def compiled(self, dag: OperatorDAG) -> CompiledDAG:
        """The query's DAG flattened once (recompiled only if a different DAG object comes in)."""
        if self._compiled is None or self._dag is not dag:
            self._compiled = dag.compiled
            self._dag = dag
        return self._compiled

    def place(self, batch: MicroBatch, dag: OperatorDAG, devices: Devices, partitions: int) -> Placement:
        """Algorithm 2 for this batch with the latest finished inflection point."""
        inflection = self.regressor.inflection
        part = batch.bytes / max(1, partitions)
        chosen, costs = map_device(
            self.compiled(dag),
            part,
            inflection,
            base_trans_cost=self.base_trans_cost,
            gpu_available=devices.has_gpu,
            preference=self.preference,
        )
        self.last_costs = costs
        self._inflection_of[batch.id] = inflection
        note = f"Part={part:.0f}B InfPT={inflection:.0f}B"
        if self.inflection_profile:
            note += f" (InfPT_0 from {self.inflection_profile})"
        if not devices.has_gpu:
            note += " (no GPU on offer)"
        return Placement(devices=chosen, strategy=NAME, note=note)

    @property
    def inflection(self) -> float:
        """InfPT the next placement would use."""
        return self.regressor.inflection

    # ------------------------------------------------------------------ feedback

    def completed(self, report: BatchReport) -> None:
        """Update the MaxLat average (Eq. 3) and, when this query is placed by LMStream, refit Eq. 10."""
        self.max_latency.add(report)
        inflection = self._inflection_of.pop(report.batch_id, None)
        if inflection is None:
            return
        sample = Sample(report.throughput_bytes_per_s, report.max_latency_s, inflection)
        self.regressor.observe(sample, self._target_latency)

    def flush(self, timeout: float | None = None) -> float:
        """Wait for the background regression to finish; return the inflection point now in force."""
        return self.regressor.flush(timeout)


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> LMStreamState:
    """The ``StrategyInfo.state`` factory."""
    return LMStreamState(spec, params)
