"""Per-query dStream state: the Monitor (learning in feedback) and the Device Mapper (placement)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pacer.model import BatchReport, CompiledDAG, Device, Devices, MicroBatch, OperatorDAG, Placement, QuerySpec
from pacer_dstream.explore import EXPLORATIONS, EXTRAPOLATED, MEASURED, UNKNOWN, Estimate, ExplorationBudget, plan_cost
from pacer_dstream.mapper import Path, shortest_path
from pacer_dstream.monitor import CostEntry, CostTable, Monitor, input_transfer, transition_cost

NAME = "dstream"
COLD_STARTS = ("scaled", "bound", "zero", "nearest")
GROWTHS = ("pooled", "proportional")
THETA_BASES = ("reported", "summed", "per-partition")
METRIC_TRANSFERS = ("included", "excluded")
#: what a placement's note starts with when its plan uses an entry never measured in the batch's bucket
EXPLORING = "exploring"


class DStreamState:
    """Everything dStream keeps for one query.

    :param spec: the query (its DAG and partitions).
    :param params: the resolved parameters (see :mod:`pacer_dstream.plugin`).
    """

    def __init__(self, spec: QuerySpec | None, params: Mapping[str, Any]) -> None:
        self.spec = spec
        self.beta = float(params["beta"])
        self.t_init = float(params["t_init_s"])
        self.bandwidth = float(params["bandwidth_bytes_per_s"])
        self.cold_start = str(params["cold_start"])
        self.theta_basis = str(params["theta"])
        self.gpu_parallelism = float(params["gpu_parallelism"])
        self.metric_transfer = str(params["metric_transfer"])
        self.exploration = str(params.get("exploration", "budgeted"))
        self.stale_factor = float(params.get("stale_factor", 2.0))
        self.prior_inflection = float(params.get("prior_inflection_bytes", 150_000.0))
        self.growth = float(params.get("explore_growth", 1.25))
        growth = str(params.get("growth", "pooled"))
        if growth not in GROWTHS:
            raise ValueError(f"dstream: growth must be one of {GROWTHS}, got {growth!r}")
        self.pooled_growth = growth == "pooled"
        self._exponent: dict[Device, float] = {}
        self.min_bytes: float | None = None
        self.budget = ExplorationBudget(float(params.get("explore_share", 0.25)), float(params.get("explore_budget", 0.02)))
        if self.exploration not in EXPLORATIONS:
            raise ValueError(f"dstream: exploration must be one of {EXPLORATIONS}, got {self.exploration!r}")
        if self.stale_factor < 1:
            raise ValueError(f"dstream: stale_factor must be >= 1, got {self.stale_factor}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"dstream: beta must be in [0, 1], got {self.beta}")
        if self.t_init < 0 or self.bandwidth <= 0:
            raise ValueError("dstream: t_init_s must be >= 0 and bandwidth_bytes_per_s > 0")
        if self.cold_start not in COLD_STARTS:
            raise ValueError(f"dstream: cold_start must be one of {COLD_STARTS}, got {self.cold_start!r}")
        if self.theta_basis not in THETA_BASES:
            raise ValueError(f"dstream: theta must be one of {THETA_BASES}, got {self.theta_basis!r}")
        if self.metric_transfer not in METRIC_TRANSFERS:
            raise ValueError(
                f"dstream: metric_transfer must be one of {METRIC_TRANSFERS}, got {self.metric_transfer!r} "
                "(included: the runtime's operator times hold the PCIe transfer, as pacer_sim's do; "
                "excluded: they do not, as on Spark with RAPIDS)"
            )
        if self.gpu_parallelism <= 0:
            raise ValueError(f"dstream: gpu_parallelism must be > 0, got {self.gpu_parallelism}")
        self.monitor = Monitor(
            small=float(params["bucket_small_bytes"]),
            threshold=float(params["bucket_threshold_bytes"]),
            large=float(params["bucket_large_bytes"]),
        )
        self._dag: OperatorDAG | None = None
        self._compiled: CompiledDAG | None = None
        self.last_path: Path | None = None

    def compiled(self, dag: OperatorDAG) -> CompiledDAG:
        """The DAG flattened once (recompiled only when another DAG object comes in)."""
        if self._compiled is None or self._dag is not dag:
            self._compiled = dag.compiled
            self._dag = dag
        return self._compiled

    # ------------------------------------------------------------------ Device Mapper

    def _estimate(
        self, table: CostTable | None, index: int, op_id: str, device: Device, size: float
    ) -> tuple[float, bool]:
        """T_exec of ``op_id`` on ``device`` for a batch of ``size`` bytes in bucket ``index``, and whether it was
        measured there."""
        entry: CostEntry | None = table.get(op_id, device) if table is not None else None
        if entry is not None:
            return entry.t_exec, True
        if self.cold_start in ("bound", "scaled"):
            bound = self._known(index, op_id, device, size)
            return (bound if bound is not None else 0.0), False
        if self.cold_start == "nearest":
            entry = self.monitor.nearest_entry(index, op_id, device)
        # Never run here: an optimistic estimate (0 when nothing else is known), so the path tries it.
        return (entry.t_exec if entry is not None else 0.0), False

    def _known(self, index: int, op_id: str, device: Device, size: float) -> float | None:
        """``cold_start`` ``scaled`` or ``bound``: T_exec of an entry not measured in bucket ``index``, from the
        buckets that measured it; ``scaled`` grows a single measurement by the device's pooled exponent."""
        if self.cold_start == "scaled":
            return self.monitor.scaled(index, op_id, device, size, exponent=self._exponent.get(device, 1.0))
        return self.monitor.lower_bound(index, op_id, device, size)

    def _estimate_of(self, table: CostTable | None, index: int, op_id: str, device: Device, size: float) -> Estimate:
        """What ``exploration=budgeted`` knows of ``op_id`` on ``device`` for a batch of ``size`` bytes."""
        entry: CostEntry | None = table.get(op_id, device) if table is not None else None
        if entry is not None:
            return Estimate(entry.t_exec, entry.t_exec, MEASURED)
        below = self.monitor.nearest_table(index, op_id, device, above=False)
        if below is not None:
            point = self._known(index, op_id, device, size)
            bound = below.entries[(op_id, device)].t_exec
            stale = below.mean_bytes * self.stale_factor < size
            return Estimate(point if point is not None else bound, bound, EXTRAPOLATED, stale)
        above = self.monitor.nearest_table(index, op_id, device, above=True)
        if above is not None:  # measured only on larger batches: an upper bound, and its share of the bytes below it
            t_exec = above.entries[(op_id, device)].t_exec
            low = t_exec * min(1.0, size / above.mean_bytes) if above.mean_bytes > 0 else t_exec
            return Estimate(t_exec, low, EXTRAPOLATED, size * self.stale_factor < above.mean_bytes)
        return Estimate(math.inf, 0.0, UNKNOWN)

    def _budgeted(
        self, compiled: CompiledDAG, ests: list[tuple[Estimate, Estimate | None]], edge_trans: list[float],
        sink_trans: list[float], size: float,
    ) -> tuple[Path, str]:
        """The exploiting plan, or the exploring one when its gate lets it run (:mod:`pacer_dstream.explore`)."""
        partitions = max(1, self.spec.partitions) if self.spec is not None else 1
        first_gpu = self.prior_inflection > 0 and size / partitions >= self.prior_inflection
        xc, xg = [], []
        for c, g in ests:
            xc.append(c.point)
            xg.append(g.point if g is not None else math.inf)
            if math.isinf(xc[-1]) and math.isinf(xg[-1]):  # neither device ever ran it
                if g is not None and first_gpu:
                    xg[-1] = 0.0  # a batch the prior puts past the inflection point: the GPU
                else:
                    xc[-1] = 0.0  # the CPU, as the paper's ties
        exploit = shortest_path(compiled, xc, xg, edge_trans, sink_trans)

        def optimistic(e: Estimate | None, point: float, *, basis: str) -> float:
            if e is None:
                return math.inf
            if basis == UNKNOWN:
                return e.optimistic if e.basis == UNKNOWN else point
            return e.optimistic if e.stale else point

        # First, entries never measured anywhere (the paper's 0), gated by the share of the work they could take.
        untried = shortest_path(
            compiled, [optimistic(c, x, basis=UNKNOWN) for (c, _), x in zip(ests, xc, strict=True)],
            [optimistic(g, x, basis=UNKNOWN) for (_, g), x in zip(ests, xg, strict=True)], edge_trans, sink_trans)
        held = ""
        if untried.devices != exploit.devices:
            gain = sum(xc[i] if exploit.devices[i] == "cpu" else xg[i]
                       for i, d in enumerate(untried.devices) if d != exploit.devices[i])
            if not self.budget.gain_share_ok(gain, exploit.cost):
                held = f"exploration held (gain share {gain / exploit.cost:.2f} < {self.budget.share:g})"
            elif self.growth > 0 and self.min_bytes is not None and size > self.growth * self.min_bytes:
                held = f"exploration held (batch {size / self.min_bytes:.2f}x the smallest measured)"
            else:
                return untried, "trying untried entries"
        # Then one stale estimate of a device the plan does not use, re-measured at its optimistic bound within the
        # budget: the one whose optimistic gain is largest for its risk (both priced on the estimates).
        best: tuple[float, float, Path] | None = None
        for i in range(len(ests)):
            other = "gpu" if exploit.devices[i] == "cpu" else "cpu"
            e = ests[i][other == "gpu"]
            if e is None or e.basis != EXTRAPOLATED or not e.stale:
                continue
            oc, og = list(xc), list(xg)
            (og if other == "gpu" else oc)[i] = e.optimistic
            plan = shortest_path(compiled, oc, og, edge_trans, sink_trans)
            if plan.devices == exploit.devices:
                continue
            risk = plan_cost(compiled, plan.devices, xc, xg, edge_trans, sink_trans) - exploit.cost
            gain = exploit.cost - plan.cost
            if self.budget.risk_ok(risk, exploit.cost) and (best is None or gain / max(risk, 1e-9) > best[0]):
                best = (gain / max(risk, 1e-9), risk, plan)
        if best is not None:
            self.budget.spend(best[1])
            return best[2], ", ".join(filter(None, (held, f"re-measuring a stale estimate (risk {best[1]:.3f}s)")))
        return exploit, held

    def place(self, batch: MicroBatch, dag: OperatorDAG, devices: Devices) -> Placement:
        """Build G_d's costs from the batch's bucket and take the shortest path."""
        compiled = self.compiled(dag)
        if self.pooled_growth and self.cold_start == "scaled":
            self._exponent = {d: e for d in ("cpu", "gpu") if (e := self.monitor.growth_exponent(d)) is not None}
        index = self.monitor.index(batch.bytes)
        table = self.monitor.tables.get(index)
        sizes = table.sizes if table is not None else {}
        gpu_ok = devices.has_gpu
        cpu: list[float] = []
        gpu: list[float] = []
        measured: list[tuple[bool, bool]] = []
        edge_trans: list[float] = []
        sink_trans: list[float] = []
        for i, op_id in enumerate(compiled.ids):
            on_cpu, cpu_known = self._estimate(table, index, op_id, "cpu", batch.bytes)
            cpu.append(on_cpu)
            on_gpu, gpu_known = math.inf, True
            if gpu_ok and not compiled.cpu_only[i]:
                on_gpu, gpu_known = self._estimate(table, index, op_id, "gpu", batch.bytes)
            gpu.append(on_gpu)
            measured.append((cpu_known, gpu_known))
            size = sizes.get(op_id, float(batch.bytes))
            inputs = max(1, len(compiled.parents[i]))
            edge_trans.append(self.t_init + size / inputs / self.bandwidth)
            sink_trans.append(self.t_init + size / self.bandwidth)
        held = ""
        if self.exploration == "budgeted" and self.cold_start in ("scaled", "bound"):
            ests = [
                (self._estimate_of(table, index, op_id, "cpu", batch.bytes),
                 self._estimate_of(table, index, op_id, "gpu", batch.bytes) if not math.isinf(gpu[i]) else None)
                for i, op_id in enumerate(compiled.ids)
            ]
            path, held = self._budgeted(compiled, ests, edge_trans, sink_trans, float(batch.bytes))
        else:
            path = shortest_path(compiled, cpu, gpu, edge_trans, sink_trans)
        self.last_path = path
        untried = sum(1 for d, known in zip(path.devices, measured, strict=True) if not known[d == "gpu"])
        parts = [f"{EXPLORING} {untried} unmeasured" if untried else "exploiting", f"bucket {index}"]
        if table is None or not table.batches:
            parts.append("new bucket")
        parts.append(f"estimated {path.cost:.6f}s")
        if held:
            parts.append(held)
        if not gpu_ok:
            parts.append("no GPU on offer")
        return Placement(devices=dict(zip(compiled.ids, path.devices, strict=True)), strategy=NAME, note=", ".join(parts))

    # ------------------------------------------------------------------ Monitor

    def _parallelism(self, device: Device, report: BatchReport, partitions: int) -> float:
        """What a metric's time is divided by to give θ (see the README, "θ")."""
        if self.theta_basis == "reported":
            return 1.0
        if self.theta_basis == "per-partition":
            return float(partitions)
        if device == "gpu":
            return self.gpu_parallelism
        cores = report.cores_used if report.cores_used and report.cores_used > 0 else partitions
        return float(max(1.0, min(partitions, cores)))

    def transfer_in(self, compiled: CompiledDAG, op_id: str, device: Device, size: float, upstream: list[Device]) -> float:
        """The transfer the mapper charges ``op_id`` on ``device`` with inputs from ``upstream``: Eq. 3 on every
        crossing input edge (a source is fed from the host) and, for a GPU-placed sink, its result back to the host."""
        seconds = input_transfer(size, upstream, device, t_init=self.t_init, bandwidth=self.bandwidth)
        if device == "gpu" and compiled.is_sink[compiled.position[op_id]]:
            seconds += transition_cost(size, t_init=self.t_init, bandwidth=self.bandwidth)
        return seconds

    def completed(self, report: BatchReport, dag: OperatorDAG, partitions: int) -> int:
        """Fold the batch's operator metrics into its bucket's cost table; return how many were used.

        Several metrics for one operator instance are summed (pieces of its work).
        """
        self.budget.completed(report.cost_s)
        if report.bytes > 0:
            self.min_bytes = float(report.bytes) if self.min_bytes is None else min(self.min_bytes, report.bytes)
        if not report.operator_metrics:
            return 0
        compiled = self.compiled(dag)
        merged: dict[str, tuple[Device, float, float]] = {}
        for m in report.operator_metrics:
            if m.operator_id not in compiled.position:
                continue
            prev = merged.get(m.operator_id)
            if prev is None:
                merged[m.operator_id] = (m.device, m.time_s, float(m.bytes_in))
            else:
                merged[m.operator_id] = (m.device, prev[1] + m.time_s, prev[2] + m.bytes_in)
        if not merged:
            return 0
        placed = report.placement.devices if report.placement is not None else {}
        table = self.monitor.table(self.monitor.index(report.bytes))
        table.count_batch(report.bytes)
        for op_id, (device, seconds, size) in merged.items():
            upstream: list[Device] = []
            for p in compiled.parents[compiled.position[op_id]]:
                parent_id = compiled.ids[p]
                parent = merged.get(parent_id)
                upstream.append(parent[0] if parent is not None else placed.get(parent_id, "cpu"))
            theta = seconds / self._parallelism(device, report, partitions)
            if self.metric_transfer == "included":
                # The runtime's time holds the transfer into this operator (and a GPU sink's result back to the
                # host); the mapper adds Eq. 3 on crossing edges, so θ keeps only the execution: counted once.
                theta -= self.transfer_in(compiled, op_id, device, size, upstream)
            theta = max(0.0, theta)
            table.update(
                op_id, device, theta, size, upstream, beta=self.beta, t_init=self.t_init, bandwidth=self.bandwidth
            )
        return len(merged)


def build_state(spec: QuerySpec | None, params: Mapping[str, Any]) -> DStreamState:
    """The ``StrategyInfo.state`` factory."""
    return DStreamState(spec, params)
