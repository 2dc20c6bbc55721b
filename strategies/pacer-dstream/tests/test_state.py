"""dStream state: learning from operator metrics, cold start, and a Controller run with a manual clock."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pacer import (
    BatchReport,
    Controller,
    Dataset,
    Device,
    Devices,
    MicroBatch,
    Operator,
    OperatorDAG,
    OperatorMetric,
    Placement,
    QuerySpec,
    get_plugin_manager,
)
from pacer.clock import ManualClock
from pacer_dstream import DStreamState, Monitor
from pacer_dstream.plugin import PARAMS

DAG = OperatorDAG.chain(
    Operator("scan", "scan"), Operator("filter", "filter"), Operator("agg", "aggregate"), Operator("sink", "sink")
)
SPEC = QuerySpec("q", DAG, window_range=30.0, window_slide=5.0, partitions=2)
GPU = Devices(cpu_cores=2, gpus=1)

#: wall seconds per operator and device at the sizes used below: the GPU wins on filter and agg
#: (``_report`` doubles the CPU ones: task time summed over 2 partitions, as with ``theta="summed"``)
COST: dict[str, dict[str, float]] = {
    "scan": {"cpu": 0.2, "gpu": 0.3},
    "filter": {"cpu": 2.0, "gpu": 0.2},
    "agg": {"cpu": 3.0, "gpu": 0.3},
    "sink": {"cpu": 0.1},
}


def _state(**given: object) -> DStreamState:
    params = {p.name: p.default for p in PARAMS}
    params.update(given)
    return DStreamState(SPEC, params)


def _batch(seq: int, nbytes: int) -> MicroBatch:
    return MicroBatch(f"q#{seq}", "q", seq, (Dataset(f"d{seq}", 0.0, nbytes, 1),), 0.0)


def _report(batch: MicroBatch, devices: Mapping[str, Device], cores: float = 2.0) -> BatchReport:
    metrics = tuple(OperatorMetric(op, d, COST[op][d] * (2 if d == "cpu" else 1), batch.bytes) for op, d in devices.items())
    return BatchReport(
        batch.id, "q", batch.seq, 0.0, 0.0, 1.0, batch.bytes, 1, (), 0.0, 0.0,
        placement=Placement(dict(devices), "dstream"), operator_metrics=metrics, cores_used=cores,
    )


def _step(state: DStreamState, seq: int, nbytes: int) -> dict[str, Device]:
    batch = _batch(seq, nbytes)
    placement = state.place(batch, DAG, GPU)
    state.completed(_report(batch, placement.devices), DAG, SPEC.partitions)
    return dict(placement.devices)


def test_explore_tries_each_device_once_per_bucket_then_exploits() -> None:
    state = _state(theta="summed", metric_transfer="excluded")
    assert _step(state, 1, 150_000) == {"scan": "cpu", "filter": "cpu", "agg": "cpu", "sink": "cpu"}  # nothing known
    assert _step(state, 2, 160_000) == {"scan": "gpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}  # GPU untried
    # both known in bucket 1: scan is cheaper on the CPU (0.2 vs 0.3 + transfer), filter and agg on the GPU
    assert _step(state, 3, 170_000) == {"scan": "cpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}
    # a larger bucket starts from bucket 1's estimates as lower bounds (cold_start=bound, the default)
    assert _step(state, 4, 5_000_000) == {"scan": "cpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}
    # the paper's letter (cold_start=zero): a new bucket is all zeros and ties go to the CPU
    zero = _state(theta="summed", metric_transfer="excluded", cold_start="zero")
    for seq, nbytes in ((1, 150_000), (2, 160_000)):
        _step(zero, seq, nbytes)
    assert set(_step(zero, 3, 5_000_000).values()) == {"cpu"}
    table = state.monitor.tables[1]
    assert table.batches == 3
    # theta=summed: CPU task seconds summed over partitions (2 × 2.0) over the 2 cores used
    assert table.get("filter", "cpu").t_exec == pytest.approx(2.0)  # type: ignore[union-attr]
    assert table.get("filter", "gpu").t_exec == pytest.approx(0.2)  # type: ignore[union-attr]


def test_unmeasured_gpu_is_tried_when_every_batch_lands_in_a_larger_new_bucket() -> None:
    """Issue 13: under load the first all-CPU batch is large, the next larger still, each in a bucket never seen.

    An entry never measured in the batch's bucket is estimated from below (its estimate in the nearest smaller
    bucket, 0 when it never ran anywhere), so the unmeasured GPU is tried before it is trusted to be worse. (The
    paper's exploration, whenever the cold-start estimates make a plan the shortest; ``exploration=budgeted`` is in
    ``tests/test_explore.py``.)
    """
    # growth=proportional: COST does not grow with the size, and once the sink has two sizes the pooled growth
    # (0 on the CPU) would say so and keep the scan on the CPU at 9 MB; this test is about estimates from below
    state = _state(exploration="paper", growth="proportional")
    all_gpu = {"scan": "gpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}
    assert set(_step(state, 1, 1_500_000).values()) == {"cpu"}  # nothing known anywhere: ties go to the CPU
    notes = []
    for seq, nbytes in ((2, 5_000_000), (3, 9_000_000), (4, 9_000_000)):
        placement = state.place(_batch(seq, nbytes), DAG, GPU)
        assert dict(placement.devices) == all_gpu
        notes.append(placement.note)
        state.completed(_report(_batch(seq, nbytes), placement.devices), DAG, SPEC.partitions)
    # bucket 14: the GPU never ran anywhere (0) and the CPU is bounded by bucket 10's 0.4 / 4.0 / 6.0 s
    assert notes[0].startswith("exploring 4 unmeasured, bucket 14, new bucket")
    # bucket 18: nothing measured there, bounded by buckets 10 (CPU) and 14 (GPU); the sink's CPU entry is new too
    assert notes[1].startswith("exploring 4 unmeasured, bucket 18, new bucket")
    # the CPU's bounds in bucket 18 (from bucket 10) already exceed what the GPU measured there: not tried
    assert notes[2].startswith("exploiting, bucket 18")
    # the paper's letter (cold_start=zero): every new bucket is all zeros, ties go to the CPU, the GPU is never tried
    zero = _state(cold_start="zero")
    assert [set(_step(zero, i, n).values()) for i, n in enumerate((1_500_000, 5_000_000, 9_000_000))] == [{"cpu"}] * 3


def test_lower_bound_comes_from_the_nearest_smaller_bucket() -> None:
    state = _state()
    kw = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}
    state.monitor.table(2).update("filter", "gpu", 2.0, 1.0, [], **kw)
    state.monitor.table(7).update("filter", "gpu", 7.0, 1.0, [], **kw)
    assert state.monitor.lower_bound_entry(5, "filter", "gpu").t_exec == 2.0  # type: ignore[union-attr]
    assert state.monitor.lower_bound_entry(9, "filter", "gpu").t_exec == 7.0  # type: ignore[union-attr]
    assert state.monitor.lower_bound_entry(2, "filter", "gpu") is None  # only smaller buckets bound it
    assert state.monitor.lower_bound_entry(9, "filter", "cpu") is None


def test_lower_bound_extends_the_line_through_two_smaller_buckets() -> None:
    """Batches that keep growing (both devices overloaded) land in a new bucket every time; bounding each device by
    its cost at the size it last ran made the stale, smaller measurement look cheaper and the devices alternate.
    A convex cost lies above the line through two smaller measurements, so that line bounds it more tightly."""
    m = Monitor()
    kw = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}
    for index, nbytes, seconds in ((10, 1_000_000, 1.0), (12, 3_000_000, 2.0)):  # 0.5 s per MB above 0.5 s
        table = m.table(index)
        table.count_batch(nbytes)
        table.update("scan", "cpu", seconds, nbytes, [], **kw)
    assert m.lower_bound(20, "scan", "cpu", 11_000_000) == pytest.approx(6.0)  # 0.5 + 0.5 x 11
    assert m.lower_bound(12, "scan", "cpu", 2_500_000) == pytest.approx(1.0)  # one smaller bucket: its estimate
    assert m.lower_bound(20, "scan", "gpu", 11_000_000) is None
    m.table(11).count_batch(2_000_000)
    m.table(11).update("scan", "cpu", 0.9, 2_000_000, [], **kw)  # noise: cheaper than the smaller bucket
    assert m.lower_bound(12, "scan", "cpu", 2_900_000) == pytest.approx(0.9)  # never below the nearest estimate


def test_theta_drops_the_transfer_the_runtimes_time_includes() -> None:
    """Issue 9: pacer_sim's operator time holds the PCIe transfer into the operator; the mapper adds Eq. 3 on the
    crossing edge, so θ must not hold it too. On Spark with RAPIDS (transitions are plan nodes of their own) the
    time holds none: ``metric_transfer="excluded"`` takes it as is."""
    nbytes = 150_000
    trans = 0.01 + nbytes / 2.0e9  # Eq. 3 with the defaults t_init_s=0.01, bandwidth_bytes_per_s=2e9
    devices: dict[str, Device] = {"scan": "gpu", "filter": "cpu", "agg": "gpu", "sink": "cpu"}
    measured = {"scan": 0.3 + trans, "filter": 2.0 + trans, "agg": 0.3 + trans, "sink": 0.1 + trans}
    metrics = tuple(OperatorMetric(op, d, measured[op], nbytes) for op, d in devices.items())
    report = BatchReport("q#1", "q", 1, 0, 0, 1, nbytes, 1, (), 0, 0, placement=Placement(devices, "dstream"),
                         operator_metrics=metrics)
    included, excluded = _state(), _state(metric_transfer="excluded")
    for state in (included, excluded):
        state.completed(report, DAG, SPEC.partitions)
    table = included.monitor.tables[1]
    for op, device in devices.items():  # every operator here sits across a device boundary from its input
        entry = table.get(op, device)
        assert entry is not None
        assert entry.theta == pytest.approx(measured[op] - trans) and entry.t_exec == entry.theta
        assert entry.t_trans == pytest.approx(trans) and entry.total == pytest.approx(measured[op])  # Eq. 1: once
    assert excluded.monitor.tables[1].get("agg", "gpu").t_exec == pytest.approx(0.3 + trans)  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="metric_transfer"):
        _state(metric_transfer="both")


def test_nearest_cold_start_borrows_from_the_closest_bucket() -> None:
    state = _state(cold_start="nearest", theta="summed", metric_transfer="excluded")
    _step(state, 1, 150_000)
    _step(state, 2, 150_000)
    assert _step(state, 3, 420_000) == {"scan": "cpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}


def test_theta_reported_takes_the_metric_as_the_operators_wall_time() -> None:
    """The default: pacer_sim reports each operator's wall time in the batch; dividing it again by the cores
    halved every CPU estimate and sent lr3 at 1 MB/s to all-CPU (1.075x the better single device)."""
    state = _state()
    assert state.theta_basis == "reported"
    _step(state, 1, 150_000)
    assert state.monitor.tables[1].get("filter", "cpu").t_exec == pytest.approx(4.0)  # type: ignore[union-attr]
    _step(state, 2, 150_000)
    assert state.monitor.tables[1].get("filter", "gpu").t_exec == pytest.approx(0.2)  # type: ignore[union-attr]


def test_theta_per_partition_basis() -> None:
    state = _state(theta="per-partition")
    _step(state, 1, 150_000)
    assert state.monitor.tables[1].get("filter", "cpu").t_exec == pytest.approx(2.0)  # type: ignore[union-attr]
    _step(state, 2, 150_000)
    assert state.monitor.tables[1].get("filter", "gpu").t_exec == pytest.approx(0.1)  # type: ignore[union-attr]


def test_ema_across_batches_of_one_bucket() -> None:
    state = _state()
    batch = _batch(1, 150_000)
    devices: dict[str, Device] = {"scan": "cpu", "filter": "cpu", "agg": "cpu", "sink": "cpu"}
    for seconds in (14.3, 20.0):
        metrics = tuple(OperatorMetric(op, "cpu", seconds, 330) for op in devices)
        state.completed(
            BatchReport("q#1", "q", 1, 0, 0, 1, 150_000, 1, (), 0, 0, operator_metrics=metrics, cores_used=1.0),
            DAG, 2,
        )
    assert state.monitor.tables[1].get("agg", "cpu").t_exec == pytest.approx(17.15)  # type: ignore[union-attr]
    assert state.place(batch, DAG, GPU).devices["agg"] == "gpu"  # GPU still unexplored: optimistic 0


def test_no_gpu_on_offer_and_no_metrics() -> None:
    state = _state()
    assert set(state.place(_batch(1, 10**8), DAG, Devices(cpu_cores=2)).devices.values()) == {"cpu"}
    report = BatchReport("q#1", "q", 1, 0, 0, 1, 10, 1, (), 0, 0)
    assert state.completed(report, DAG, 2) == 0


@pytest.mark.parametrize(("key", "value"), [("beta", 1.5), ("cold_start", "explore"), ("theta", "x"), ("bandwidth_bytes_per_s", 0), ("metric_transfer", "")])
def test_rejects_bad_parameters(key: str, value: object) -> None:
    with pytest.raises(ValueError, match="dstream"):
        _state(**{key: value})


def test_places_every_one_of_two_hundred_operators() -> None:
    ops = (*(Operator(f"o{i}", "filter") for i in range(199)), Operator("sink", "sink"))
    dag = OperatorDAG(ops, tuple((ops[i].id, ops[i + 1].id) for i in range(199)))
    spec = QuerySpec("big", dag, partitions=2)
    params = {p.name: p.default for p in PARAMS}
    state = DStreamState(spec, params)
    batch = _batch(1, 150_000)
    metrics = tuple(OperatorMetric(op.id, d, 0.01, 1000) for op in ops for d in ("cpu", "gpu") if not (op.cpu_only and d == "gpu"))
    state.completed(BatchReport("q#1", "big", 1, 0, 0, 1, 150_000, 1, (), 0, 0, operator_metrics=metrics), dag, 2)
    placement = state.place(batch, dag, GPU)
    # its speed is measured in packages/pacer-bench/benchmarks (placement-200), not asserted here
    assert len(placement.devices) == 200 and placement.devices["sink"] == "cpu"


def test_controller_with_manual_clock() -> None:
    clock = ManualClock()
    pm = get_plugin_manager(allowed=["dstream"])
    c = Controller(clock=clock, cores=2, devices=GPU, plugin_manager=pm, timer=None)
    # metrics as Spark SQL reports them: CPU task time summed over the 2 partitions
    c.add_query(
        SPEC, admission="asap", placement="dstream", placement_params={"theta": "summed", "metric_transfer": "excluded"}
    )
    seen = []
    for i in range(4):
        c.arrive("q", Dataset(f"d{i}", clock.now, 150_000, 1000))
        batch = c.poll("q")
        assert batch is not None and batch.placement is not None
        seen.append(dict(batch.placement.devices))
        c.start(batch.id)
        clock.advance(1.0)
        metrics = [
            OperatorMetric(op, d, COST[op][d] * (2 if d == "cpu" else 1), batch.bytes)
            for op, d in batch.placement.devices.items()
        ]
        c.complete(batch.id, operator_metrics=metrics, cores_used=2)
    assert seen[0]["filter"] == "cpu" and seen[1]["filter"] == "gpu"
    assert seen[2] == seen[3] == {"scan": "cpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}
    c.ledger.check_complete()
