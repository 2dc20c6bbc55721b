"""The latency-target machinery in core: service-time model, overload, read caps, device checks, cost, Spark's baselines."""

from __future__ import annotations

import pytest

from pacer import Controller, Dataset, Devices, Operator, OperatorDAG, Placement, QuerySpec
from pacer.baselines.pid import PidRateEstimator
from pacer.clock import ManualClock
from pacer.controller import StrategyError
from pacer.model import DatasetBuffer
from pacer.overload import OverloadMonitor, read_cap_count
from pacer.report import build_report, validate_report
from pacer.service_time import ServiceTimeModel


def _spec(deadline: float = 10.0) -> QuerySpec:
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("agg#1", "aggregate"), Operator("sink#2", "sink"))
    return QuerySpec(id="q", dag=dag, deadline=deadline)


def _run(c: Controller, clock: ManualClock, batch_id: str, seconds: float, **kwargs: float) -> None:
    c.start(batch_id)
    clock.now += seconds
    c.complete(batch_id, **kwargs)


# ---------------------------------------------------------------- service-time model


def test_service_model_separates_the_fixed_part_from_the_per_byte_part() -> None:
    model = ServiceTimeModel()
    for nbytes in (1e5, 5e5, 1e6, 2e6, 4e6):
        model.observe(nbytes, 0.3 + 2e-7 * nbytes)  # 300 ms fixed + 200 ms per MB
    assert model.fixed_s == pytest.approx(0.3, rel=1e-6)
    assert model.per_byte_s == pytest.approx(2e-7, rel=1e-6)
    # bytes / average throughput underestimates a small batch where the fixed part dominates
    throughput = sum((1e5, 5e5, 1e6, 2e6, 4e6)) / sum(0.3 + 2e-7 * b for b in (1e5, 5e5, 1e6, 2e6, 4e6))
    assert 1e5 / throughput < 0.5 * model.predict_raw(1e5)
    assert model.margin == pytest.approx(1.5), "few errors seen yet: the prior margin"
    for _ in range(10):
        model.observe(1e6, 0.3 + 2e-7 * 1e6)
    assert model.margin == pytest.approx(1.0), "ten exact predictions: no margin needed"


def test_service_model_margin_covers_the_observed_error() -> None:
    model = ServiceTimeModel(quantile=1.0)
    for i in range(40):
        model.observe(1e6, 1.0 if i % 4 else 1.3)
    assert model.predict(1e6) >= 1.3 * 0.999
    assert model.predict_raw(1e6) < 1.3


def test_service_model_with_one_size_is_the_papers_throughput_model() -> None:
    model = ServiceTimeModel(warmup=0)
    model.observe(1000, 2.0)
    assert model.ready and model.fixed_s == 0.0
    assert model.predict_raw(2000) == pytest.approx(4.0)


def test_service_model_leaves_the_warm_up_batch_out() -> None:
    model = ServiceTimeModel()  # warmup=1: Spark's first batch pays planning, codegen and state-store set-up
    model.observe(1e5, 14.0)
    assert not model.ready
    for nbytes in (1e5, 1e6):
        model.observe(nbytes, 0.3 + 2e-7 * nbytes)
    assert model.ready and model.fixed_s == pytest.approx(0.3)


def test_service_model_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="quantile"):
        ServiceTimeModel(quantile=0)
    with pytest.raises(ValueError, match=">= 0"):
        ServiceTimeModel().observe(10, -1.0)


def test_controller_teaches_every_query_its_service_time() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    for i, size in enumerate((1000, 4000, 2000)):
        c.arrive("q", Dataset(f"d{i}", clock.now, size, 10))
        batch = c.poll("q")
        assert batch is not None
        _run(c, clock, batch.id, 0.2 + size / 10_000)
    ctx = c.context("q", "admission")
    assert ctx.service.observations == 2, "the first batch is the warm-up, left out"
    assert ctx.service.fixed_s == pytest.approx(0.2, abs=1e-6)
    assert c.estimate_run_s("q", 10_000) == pytest.approx(1.2, rel=1e-6)


# ---------------------------------------------------------------- read cap


def test_read_cap_takes_the_largest_prefix_within_rows_and_bytes_at_least_one() -> None:
    buffer = DatasetBuffer(Dataset(f"d{i}", i, 100, 10) for i in range(5))
    assert read_cap_count(buffer, 5, 0, 0) == 5
    assert read_cap_count(buffer, 5, 25, 0) == 2
    assert read_cap_count(buffer, 5, 0, 300) == 3
    assert read_cap_count(buffer, 5, 5, 0) == 1, "a batch keeps at least one dataset"
    assert read_cap_count(buffer, 2, 1000, 0) == 2


def test_every_admission_honours_the_read_cap() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec(), admission="asap", max_rows=25)
    for i in range(5):
        c.arrive("q", Dataset(f"d{i}", 0.0, 100, 10))
    batch = c.poll("q")
    assert batch is not None and [d.id for d in batch.datasets] == ["d0", "d1"]
    assert [d.id for d in c.buffered("q")] == ["d2", "d3", "d4"]
    with pytest.raises(ValueError, match="max_rows"):
        c.add_query(QuerySpec(id="q2", dag=_spec().dag), max_rows=-1)


# ---------------------------------------------------------------- overload


def _overloaded_controller(policy: str) -> tuple[Controller, ManualClock]:
    """1 dataset of 1 MB per second, each MB costs 2 s: no batch size keeps up."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None, overload=policy)
    c.add_query(_spec(deadline=10.0))
    n = 0
    while clock.now < 300:
        c.arrive("q", Dataset(f"d{n}", clock.now, 1_000_000, 100))
        n += 1
        batch = c.poll("q")
        if batch is not None:
            c.start(batch.id)
            service = 0.1 + 2.0 * batch.bytes / 1e6
            # the batch runs while data keeps arriving
            done = clock.now + service
            while clock.now + 1.0 <= done:
                clock.now += 1.0
                c.arrive("q", Dataset(f"d{n}", clock.now, 1_000_000, 100))
                n += 1
            clock.now = done
            c.complete(batch.id)
        clock.now = float(int(clock.now) + 1)
    return c, clock


def test_overload_is_detected_and_shed_datasets_are_counted_with_bounded_latency() -> None:
    c, clock = _overloaded_controller("shed")
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)
    validate_report(report)
    q = report["queries"]["q"]
    assert q["overload"]["episodes"] >= 1 and q["overload"]["overloaded_s"] > 150
    assert q["datasets_shed"] > 0 and q["overload"]["shed"] == q["datasets_shed"]
    assert q["datasets_in"] == q["datasets_processed"] + q["datasets_shed"] + q["datasets_pending"]
    late = [r.max_latency_s for r in c.reports("q")][-10:]
    assert max(late) <= 10.0 + 2.1, "latency of what is admitted stays bounded (deadline + one dataset's service)"
    assert q["deadline_miss_ratio_datasets"] >= q["datasets_shed"] / (q["datasets_processed"] + q["datasets_shed"])
    record = c.recorder.record("q")
    assert record.shed_datasets == q["datasets_shed"] and record.shed_rows > 0  # shed rows count as missed
    assert q["miss_datasets"] == record.miss_datasets + q["datasets_shed"]
    assert q["miss_rows"] == record.miss_rows + record.shed_rows
    assert q["deadline_miss_ratio"] == q["deadline_miss_ratio_rows"] == round(
        q["miss_rows"] / (q["rows_processed"] + record.shed_rows), 6)
    assert q["deadline_miss_ratio_rows"] >= record.shed_rows / (q["rows_processed"] + record.shed_rows)


def test_overload_keep_drops_nothing_and_reports_it() -> None:
    c, clock = _overloaded_controller("keep")
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)
    q = report["queries"]["q"]
    assert q["datasets_shed"] == 0 and q["overload"]["overloaded_s"] > 150
    assert max(r.max_latency_s for r in c.reports("q")) > 30, "kept data: latency runs away, and the report says why"


def test_a_feasible_load_is_not_overloaded() -> None:
    monitor = OverloadMonitor(deadline=10.0)
    model = ServiceTimeModel(warmup=0)
    for nbytes in (1e5, 2e5, 4e5, 8e5, 1.6e6):
        model.observe(nbytes, 0.3 + 1e-6 * nbytes)  # 1 s per MB
    for t in range(20):
        monitor.arrived(float(t), 500_000)  # 0.5 MB/s: utilisation 0.5, T* = 0.6 s
    assert not monitor.check(20.0, model)
    for t in range(20, 40):
        monitor.arrived(float(t), 1_500_000)  # 1.5 MB/s: no batch size keeps up
    assert monitor.check(40.0, model) and monitor.episodes == 1


def test_unknown_overload_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="overload policy"):
        Controller(clock=ManualClock(), cores=1, overload="drop-everything")


# ---------------------------------------------------------------- placement vs devices, cost


def test_a_gpu_placement_without_a_gpu_is_ill_formed_and_falls_back_when_asked() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec(), placement="gpu-only")
    c.arrive("q", Dataset("d0", 0.0, 10, 1))
    with pytest.raises(StrategyError, match="runtime has none.*--gpus"):
        c.poll("q")
    c2 = Controller(clock=clock, cores=2, timer=None, fallback=True)
    c2.add_query(_spec(), placement="gpu-only")
    c2.arrive("q", Dataset("d0", 0.0, 10, 1))
    batch = c2.poll("q")
    assert batch is not None and batch.placement is not None and batch.placement.gpu_ratio == 0.0


def test_gpu_ratio_counts_what_ran_not_what_was_placed() -> None:
    placed = Placement({"scan#0": "gpu", "agg#1": "gpu", "sink#2": "cpu"}, strategy="x", enacted=False)
    assert placed.gpu_ratio == pytest.approx(2 / 3) and placed.ran_gpu_ratio == 0.0
    placed.validate(_spec().dag, Devices(cpu_cores=2, gpus=1))


def test_report_cost_is_engine_time_share_and_batch_rate() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    for i in range(3):
        c.arrive("q", Dataset(f"d{i}", clock.now, 100, 1))
        batch = c.poll("q")
        assert batch is not None
        _run(c, clock, batch.id, 1.0, engine_s=1.5 if i == 0 else None)
        clock.now += 1.0
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=6.0)
    cost = report["queries"]["q"]["cost"]
    assert cost == {"busy_core_s": None, "busy_batches": 0, "cpu_core_s": None, "failed_core_s": None,
                    "no_data": {"batches": 0, "trigger_s": 0.0, "busy_core_s": None, "cpu_core_s": None},
                    "trigger_s": 3.5, "gate_wait_s": 0.0, "engine_s": 3.5,
                    "engine_share": pytest.approx(3.5 / 6.0), "batches_per_min": 30.0}
    assert report["cost"] == {"allocated_core_s": None, "busy_core_s": None, "cpu_core_s": None,
                              "no_data_busy_core_s": None}


# ---------------------------------------------------------------- Spark's baselines


def test_pid_rate_estimator_follows_spark_streaming() -> None:
    pid = PidRateEstimator(interval=1.0)
    assert pid.compute(1.0, 1000, 0.5, 0.0) is None, "the first batch initialises the rate"
    assert pid.latest_rate == 2000.0
    # processingRate 1500; error 500; historicalError 0.5 * 1500 / 1 = 750; dError 500
    assert pid.compute(2.0, 1500, 1.0, 0.5) == pytest.approx(2000 - 500 - 0.2 * 750)
    assert pid.compute(3.0, 50, 1.0, 0.0) == 100.0, "never below minRate"
    assert pid.compute(3.0, 50, 1.0, 0.0) is None, "stale batch times are ignored"


def test_pid_caps_batches_at_rate_times_interval() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec(), admission="pid", admission_params={"interval": 1.0})
    state = c.context("q", "admission").state
    state.rate_cap = 250.0
    for i in range(6):
        c.arrive("q", Dataset(f"d{i}", 0.0, 100, 100))
    clock.now = 1.0
    batch = c.poll("q")
    assert batch is not None and batch.rows == 200, "250 rows/s x 1 s: two 100-row datasets"


def test_min_rows_waits_for_rows_or_the_trigger_delay() -> None:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec(), admission="min-rows", admission_params={"min_rows": 300, "max_delay": 5})
    c.arrive("q", Dataset("d0", 0.0, 100, 200))
    assert c.poll("q") is None
    c.arrive("q", Dataset("d1", 0.0, 100, 200))
    batch = c.poll("q")
    assert batch is not None and batch.rows == 400
    _run(c, clock, batch.id, 0.5)
    c.arrive("q", Dataset("d2", clock.now, 100, 10))
    clock.now += 4.9
    assert c.poll("q") is None
    clock.now += 0.2
    assert c.poll("q") is not None, "maxTriggerDelay passed"


def test_service_model_fits_per_task_slot_and_predicts_for_the_slots_there_are_now() -> None:
    """Batches measured on 4 slots (300 ms fixed, 200 ms per MB on 4): after a scale-down to 2 slots the per-byte
    part doubles and the fixed part stays; a Controller that resizes tells every query's model."""
    model = ServiceTimeModel()
    model.slots = 4.0
    for nbytes in (1e5, 5e5, 1e6, 2e6, 4e6):
        model.observe(nbytes, 0.3 + 2e-7 * nbytes)
    assert model.predict_raw(1e6) == pytest.approx(0.5)
    model.slots = 2.0
    assert model.fixed_s == pytest.approx(0.3) and model.per_byte_s == pytest.approx(4e-7)
    assert model.predict_raw(1e6) == pytest.approx(0.7) and model.predict_raw(1e6, slots=4.0) == pytest.approx(0.5)
    model.observe(1e6, 0.7)  # a batch on 2 slots as predicted: no error in the margin's record
    assert model.per_byte_s == pytest.approx(4e-7)
    c = Controller(clock=ManualClock(), cores=8, timer=None)
    c.add_query(QuerySpec(id="q", dag=_spec().dag, deadline=10.0, partitions=4), admission="asap")
    service = c._state.query("q").service
    assert service.slots == 4.0  # min(cores, partitions): a batch uses at most its partitions
    c.resize(1)
    assert service.slots == 1.0


def test_a_saved_service_model_restores_the_same_predictions_and_a_foreign_one_is_refused() -> None:
    """What a runtime keeps with a checkpoint (JSON) predicts as the model it came from; another version, another
    halflife or values that are not finite are refused, naming it, and the model stays as it was."""
    import json
    import math

    model = ServiceTimeModel()
    for nbytes, seconds in [(1e6, 0.5), (2e6, 0.7), (4e6, 1.1), (8e6, 1.9), (3e6, 0.95)]:
        model.observe(nbytes, seconds)
    state = json.loads(json.dumps(model.state()))
    restored = ServiceTimeModel()
    restored.restore(state)
    assert restored.describe() == model.describe() and restored.ready
    assert restored.predict(5e6) == model.predict(5e6)
    for bad in ({**state, "version": 99}, {**state, "halflife": 5.0}, {**state, "sums": [math.nan, 1, 1, 1, 1]},
                {**state, "seen": 0}):
        fresh = ServiceTimeModel()
        with pytest.raises(ValueError):
            fresh.restore(bad)
        assert not fresh.ready


def test_busy_core_seconds_and_gate_waits_are_reported_apart_from_the_engine_time() -> None:
    """A batch's trigger on Spark includes its wait for its turn at pacer's gate: the report's ``trigger_s`` and the
    service-time model leave it out, and the core-seconds its tasks executed are summed apart, per query and run."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    for i, (engine, wait, busy) in enumerate(((1.0, 0.0, 1.5), (3.0, 2.0, 1.75), (1.0, 0.0, 0.75))):
        c.arrive("q", Dataset(f"d{i}", clock.now, 1000 * (i + 1), 1))
        batch = c.poll("q")
        assert batch is not None
        _run(c, clock, batch.id, 1.0, engine_s=engine, gate_wait_s=wait, busy_core_s=busy)
    (_, waited, _) = c.reports("q")
    assert (waited.cost_s, waited.trigger_s) == (3.0, 1.0)
    # every batch took 1 s without the second one's 2 s wait: no per-byte part (the first batch is not learnt from)
    fitted = c.query("q").service_time
    assert (fitted["observations"], fitted["fixed_ms"], fitted["per_mb_ms"]) == (2, pytest.approx(1000.0),
                                                                                 pytest.approx(0.0, abs=1e-6))
    c.record_busy("q", 0.5)  # a trigger without data after the last batch ran tasks too
    report = build_report(runtime="spark", config={}, controller=c, start=0.0, end=4.0, allocated_core_s=8.0)
    cost = report["queries"]["q"]["cost"]
    assert (cost["busy_core_s"], cost["busy_batches"], cost["trigger_s"], cost["gate_wait_s"], cost["engine_s"]) == \
        (4.5, 3, 3.0, 2.0, 5.0)
    assert report["cost"] == {"allocated_core_s": 8.0, "busy_core_s": 4.5, "cpu_core_s": None,
                              "no_data_busy_core_s": None}
    with pytest.raises(ValueError, match="gate_wait_s must be >= 0"):
        c.complete("nope", gate_wait_s=-1.0)


def test_cpu_and_failed_task_time_and_no_data_batches_count_in_every_cost_total() -> None:
    """A runtime that measures more of a batch's tasks than their busy time (Spark: CPU time, failed attempts) records
    it before the batch completes and its report carries it; the engine's own no-data batches (Spark's, after a
    watermark moved) and task time outside any batch count in the query's totals, the no-data part said apart."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(_spec())
    for i, (busy, cpu, failed) in enumerate(((2.0, 1.5, 0.0), (1.0, 0.5, 0.25))):
        c.arrive("q", Dataset(f"d{i}", clock.now, 1000, 1))
        batch = c.poll("q")
        assert batch is not None
        c.reconcile.task_costs(batch.id, cpu_core_s=cpu, failed_core_s=failed)
        _run(c, clock, batch.id, 1.0, engine_s=1.0, busy_core_s=busy)
    first, second = c.reports("q")
    assert (first.busy_core_s, first.cpu_core_s, first.failed_core_s) == (2.0, 1.5, 0.0)
    assert (second.busy_core_s, second.cpu_core_s, second.failed_core_s) == (1.0, 0.5, 0.25)
    record = c.recorder.record("q")
    record.no_data_batch(0.5, busy_core_s=0.75, cpu_core_s=0.125, failed_core_s=0.0)
    record.no_data_batch(0.25)  # a runtime that does not measure task time
    record.unbatched(busy_core_s=0.25, cpu_core_s=0.125)
    report = build_report(runtime="spark", config={}, controller=c, start=0.0, end=4.0)
    cost = report["queries"]["q"]["cost"]
    assert cost["no_data"] == {"batches": 2, "trigger_s": 0.75, "busy_core_s": 0.75, "cpu_core_s": 0.125}
    assert (cost["busy_core_s"], cost["cpu_core_s"], cost["failed_core_s"]) == (4.0, 2.25, 0.25)
    assert (cost["trigger_s"], cost["engine_s"], cost["busy_batches"], report["queries"]["q"]["batches"]) == \
        (2.75, 2.75, 2, 2)
    assert report["cost"]["no_data_busy_core_s"] == 0.75 and report["cost"]["cpu_core_s"] == 2.25
    with pytest.raises(ValueError, match="cpu_core_s must be >= 0"):
        c.reconcile.task_costs("nope", cpu_core_s=-1.0, failed_core_s=None)
    with pytest.raises(ValueError, match="trigger_s must be >= 0"):
        record.no_data_batch(float("nan"))
    # a simulator's batch measures neither: its report says None, not 0
    c.arrive("q", Dataset("d9", clock.now, 1000, 1))
    batch = c.poll("q")
    assert batch is not None
    _run(c, clock, batch.id, 1.0)
    assert (c.reports("q")[-1].cpu_core_s, c.reports("q")[-1].failed_core_s) == (None, None)
