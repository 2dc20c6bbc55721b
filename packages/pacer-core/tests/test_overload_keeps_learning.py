"""Shedding under overload never takes the newest dataset, so the service-time model keeps learning (issue 20).

A model fitted on batches that cost more than the ones to come (e.g. under a placement that has since changed)
can predict every dataset hopeless even alone; shedding all of them would leave the query without a batch, and so
without the observation that corrects the model, for good.
"""

from __future__ import annotations

from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.model import DatasetBuffer
from pacer.overload import OverloadMonitor
from pacer.service_time import ServiceTimeModel


def _spec() -> QuerySpec:
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("agg#1", "aggregate"), Operator("sink#2", "sink"))
    return QuerySpec(id="q", dag=dag, deadline=10.0)


def test_hopeless_never_counts_the_newest_dataset() -> None:
    model = ServiceTimeModel(warmup=0)
    model.observe(1e6, 30.0)  # 30 s per MB: any dataset alone misses a 10 s deadline
    buffer = DatasetBuffer(Dataset(f"d{i}", float(i), 1_000_000, 10) for i in range(3))
    monitor = OverloadMonitor(deadline=10.0)
    assert monitor.hopeless(buffer, 3.0, model) == 2  # d0 and d1; d2 stays to be processed
    one = DatasetBuffer([Dataset("d9", 0.0, 1_000_000, 10)])
    assert monitor.hopeless(one, 50.0, model) == 0


def test_a_model_fitted_on_costlier_batches_is_corrected_under_shed() -> None:
    """One 1 MB dataset a second, one dataset per batch; the first five batches cost 12 s each, every later one
    0.3 s. After the costly ones the model predicts 12 s for any dataset, more than the 10 s deadline: with every
    dataset shed as hopeless the query would form no batch again. It goes on forming batches, the model learns
    the cheap cost, and shedding stops."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None, overload="shed")
    c.add_query(_spec(), admission="asap", admission_params={"max_datasets": 1})
    costly, n, batches = 5, 0, 0
    while clock.now < 400:
        c.arrive("q", Dataset(f"d{n}", clock.now, 1_000_000, 100))
        n += 1
        batch = c.poll("q")
        if batch is not None:
            c.start(batch.id)
            done = clock.now + (12.0 if batches < costly else 0.3)
            while clock.now + 1.0 <= done:
                clock.now += 1.0
                c.arrive("q", Dataset(f"d{n}", clock.now, 1_000_000, 100))
                n += 1
            clock.now = done
            c.complete(batch.id)
            batches += 1
        clock.now = float(int(clock.now) + 1)
    reports = c.reports("q")
    assert len(reports) > 200  # it kept forming batches (one a second once cheap)
    assert c.buffered("q") == () or len(c.buffered("q")) <= 1
    late = [r for r in reports if r.admitted_at > 300]
    assert late and max(r.max_latency_s for r in late) <= 10.0  # on time again once the model learned
