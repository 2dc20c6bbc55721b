"""Decision-level suites: each strategy alone, through a real Controller.

Test classes hold only tests; the ``strategy`` argument is parametrised by the
pytest plugin over the installed strategies of the class's ``decision``.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from pacer import Controller, Dataset, Devices, MicroBatch, OperatorDAG, QuerySpec, StrategyError
from pacer.clock import ManualClock
from pacer_conformance.harness import HarnessRun, drive, steady_arrivals
from pacer_workloads import WORKLOADS, make_query


def _controller(clock: ManualClock, *, scheduler: str = "fifo", gpus: int = 1, cores: int = 2) -> Controller:
    # The suite judges each strategy's own decisions: the Controller's catch-up (pacer.catch_up) would cover
    # for a strategy that holds late data back, so it is off here.
    return Controller(clock=clock, cores=cores, devices=Devices(cpu_cores=cores, gpus=gpus), scheduler=scheduler,
                      timer=None, catch_up=False)


def _admission_run(strategy: str, arrivals: list[Dataset], until: float, spec: QuerySpec | None = None) -> HarnessRun:
    clock = ManualClock()
    c = _controller(clock)
    spec = spec or make_query("lr2", query_id="q")
    c.add_query(spec, admission=strategy)
    return drive(c, clock, {spec.id: arrivals}, until=until)


class AdmissionConformance:
    """Every admission strategy: live, lossless, order-preserving, deterministic, robust."""

    decision = "admission"
    strategies: ClassVar[tuple[str, ...] | None] = None

    def test_admits_every_dataset_exactly_once(self, strategy: str) -> None:
        run = _admission_run(strategy, steady_arrivals("q", start=0, end=60), until=400)
        run.controller.ledger.check_complete()
        processed = [dataset_id for r in run.reports for dataset_id, _ in r.dataset_latencies]
        assert len(processed) == len(set(processed)) == 60

    def test_batches_keep_arrival_order(self, strategy: str) -> None:
        run = _admission_run(strategy, steady_arrivals("q", start=0, end=40), until=300)
        order = [d.id for b in run.admitted for d in b.datasets]
        assert order == [f"q-{i}" for i in range(40)]

    def test_zero_byte_datasets(self, strategy: str) -> None:
        run = _admission_run(strategy, steady_arrivals("q", start=0, end=30, nbytes=0, rows=0), until=300)
        run.controller.ledger.check_complete()

    def test_idle_period_then_more_data(self, strategy: str) -> None:
        arrivals = steady_arrivals("q", start=0, end=10) + steady_arrivals("q", start=60, end=70)
        run = _admission_run(strategy, arrivals, until=400)
        run.controller.ledger.check_complete()
        first_phase = [b for b in run.admitted if any(int(d.id.split("-")[1]) < 10 for d in b.datasets)]
        assert all(b.admitted_at < 60.0 for b in first_phase), "data is not held through an idle period"

    def test_deterministic(self, strategy: str) -> None:
        first = _admission_run(strategy, steady_arrivals("q", start=0, end=30), until=300)
        second = _admission_run(strategy, steady_arrivals("q", start=0, end=30), until=300)
        assert [(b.id, b.admitted_at, len(b.datasets)) for b in first.admitted] == [
            (b.id, b.admitted_at, len(b.datasets)) for b in second.admitted
        ]

    def test_tumbling_and_sliding_queries(self, strategy: str) -> None:
        for workload in ("lr1t", "cm2"):
            spec = make_query(workload, query_id="q")
            run = _admission_run(strategy, steady_arrivals("q", start=0, end=40), until=400, spec=spec)
            run.controller.ledger.check_complete()


def _three_queries(clock: ManualClock, strategy: str, cores: int) -> Controller:
    c = _controller(clock, scheduler=strategy, cores=cores)
    for qid, deadline in (("a", 4.0), ("b", 8.0), ("c", 16.0)):
        c.add_query(make_query("lr2", query_id=qid, deadline=deadline))
    return c


class SchedulingConformance:
    """Every scheduler: a permutation of the pending batches, shares within the cores, deterministic."""

    decision = "scheduling"
    strategies: ClassVar[tuple[str, ...] | None] = None

    @pytest.mark.parametrize("cores", [1, 2, 6])
    def test_orders_are_permutations_within_the_cores(self, strategy: str, cores: int) -> None:
        clock = ManualClock()
        c = _three_queries(clock, strategy, cores)
        arrivals = {q: steady_arrivals(q, start=0, end=30) for q in c.query_ids()}
        run = drive(c, clock, arrivals, until=300)  # the Controller validates every decision
        c.ledger.check_complete()
        assert run.schedules, "the scheduler was consulted"
        assert any(len(order) > 1 for order in run.schedules), "several batches competed"

    def test_deterministic(self, strategy: str) -> None:
        def once() -> list[tuple[str, ...]]:
            clock = ManualClock()
            c = _three_queries(clock, strategy, 2)
            return drive(c, clock, {q: steady_arrivals(q, start=0, end=20) for q in c.query_ids()}, until=200).schedules

        assert once() == once()

    def test_single_pending_batch(self, strategy: str) -> None:
        clock = ManualClock()
        c = _controller(clock, scheduler=strategy)
        c.add_query(make_query("lr3", query_id="solo"))
        c.arrive("solo", Dataset("solo-0", 0.0, 10, 1))
        batch = c.poll("solo")
        assert batch is not None
        assert c.schedule().order == (batch.id,)


def _place_once(strategy: str, dag_spec: QuerySpec, nbytes: int, gpus: int) -> MicroBatch:
    clock = ManualClock()
    c = _controller(clock, gpus=gpus)
    c.add_query(dag_spec, placement=strategy)
    c.arrive(dag_spec.id, Dataset("d", 0.0, nbytes, max(1, nbytes // 65)))
    batch = c.poll(dag_spec.id)
    assert batch is not None
    return batch


def _check(batch: MicroBatch, dag: OperatorDAG) -> None:
    assert batch.placement is not None
    assert set(batch.placement.devices) == {op.id for op in dag.operators}
    for op in dag.operators:
        if op.cpu_only:
            assert batch.placement.devices[op.id] == "cpu", f"CPU-only {op.id} placed on the GPU"


class PlacementConformance:
    """Every placement strategy: covers every operator, CPU-only operators on the CPU, learns safely."""

    decision = "placement"
    strategies: ClassVar[tuple[str, ...] | None] = None

    @pytest.mark.parametrize("workload", sorted(WORKLOADS))
    @pytest.mark.parametrize("nbytes", [0, 1_000, 150_000, 16_000_000, 256_000_000])
    def test_covers_every_operator(self, strategy: str, workload: str, nbytes: int) -> None:
        spec = make_query(workload, query_id="q")
        _check(_place_once(strategy, spec, nbytes, gpus=1), spec.dag)

    def test_without_a_gpu(self, strategy: str) -> None:
        """Without a GPU a strategy places everything on the CPU, or is refused with its name and the reason
        (a GPU placement onto a runtime without a GPU is ill-formed); never a GPU operator that cannot run."""
        spec = make_query("lr1", query_id="q")
        try:
            batch = _place_once(strategy, spec, 1_000_000, gpus=0)
        except StrategyError as exc:
            assert exc.strategy == strategy and "GPU" in str(exc) and "runtime has none" in str(exc)
            return
        _check(batch, spec.dag)
        assert batch.placement is not None and batch.placement.gpu_ratio == 0.0, "a GPU operator with no GPU"

    def test_stays_well_formed_while_learning(self, strategy: str) -> None:
        clock = ManualClock()
        c = _controller(clock)
        spec = make_query("lr1", query_id="q")
        c.add_query(spec, placement=strategy)
        arrivals = [Dataset(f"q-{i}", i + 1.0, 2_000 * 2**i if i < 14 else 16_000_000, 1000) for i in range(40)]
        run = drive(c, clock, {"q": arrivals}, until=2_000)
        c.ledger.check_complete()
        for batch in run.admitted:
            _check(batch, spec.dag)

    def test_deterministic(self, strategy: str) -> None:
        def once() -> list[dict[str, str]]:
            clock = ManualClock()
            c = _controller(clock)
            spec = make_query("cm1", query_id="q")
            c.add_query(spec, placement=strategy)
            arrivals = [Dataset(f"q-{i}", i + 1.0, 50_000 * (1 + i % 7), 1000) for i in range(30)]
            run = drive(c, clock, {"q": arrivals}, until=1_000)
            return [dict(b.placement.devices) for b in run.admitted if b.placement]

        assert once() == once()
