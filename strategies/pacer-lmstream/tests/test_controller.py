"""LMStream through a real Controller with a manual clock."""

from __future__ import annotations

import pytest

from pacer import Controller, Dataset, Devices, Operator, OperatorDAG, OperatorMetric, QuerySpec, get_plugin_manager
from pacer.clock import ManualClock
from pacer_lmstream import LMStreamState


def _controller(clock: ManualClock) -> Controller:
    pm = get_plugin_manager(allowed=["lmstream"])
    return Controller(clock=clock, cores=2, devices=Devices(cpu_cores=2, gpus=1), plugin_manager=pm, timer=None)


def _spec(slide: float, rng: float = 30.0) -> QuerySpec:
    dag = OperatorDAG.chain(
        Operator("scan", "scan"), Operator("filter", "filter"), Operator("agg", "aggregate"), Operator("sink", "sink")
    )
    return QuerySpec("q", dag, window_range=rng, window_slide=slide, partitions=2)


def _run_one(c: Controller, clock: ManualClock, processing: float) -> None:
    (batch,) = c.pending()
    c.start(batch.id)
    clock.advance(processing)
    c.complete(batch.id, operator_metrics=[OperatorMetric("scan", "cpu", processing, batch.bytes)])


def test_sliding_window_end_to_end() -> None:
    clock = ManualClock()
    c = _controller(clock)
    c.add_query(_spec(slide=5.0), admission="lmstream", placement="lmstream",
                placement_params={"async_regression": False, "inflection_profile": "none"})  # the paper's 150 KB
    c.arrive("q", Dataset("d0", 0.0, 600_000, 1000))
    first = c.poll("q")
    assert first is not None and len(first.datasets) == 1  # cold start
    # Part = 300 KB = 2 × InfPT: everything but the sink on the GPU
    assert first.placement is not None and first.placement.devices == {
        "scan": "gpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"
    }
    _run_one(c, clock, 1.0)  # AvgThPut = 600 KB/s
    for i in range(1, 4):
        c.arrive("q", Dataset(f"d{i}", float(i), 60_000, 100))
    clock.now = 3.0
    # EstMaxLat = (3 - 1) + 180 KB / 600 KB/s = 2.3 < 5
    assert c.poll("q") is None
    clock.now = 4.69
    assert c.poll("q") is None  # 3.69 + 0.3 = 3.99 ... still below
    clock.now = 5.7  # 4.7 + 0.3 = 5.0 >= 5
    batch = c.poll("q")
    assert batch is not None and [d.id for d in batch.datasets] == ["d1", "d2", "d3"]
    # Part = 90 KB < InfPT: CPU everywhere
    assert batch.placement is not None and set(batch.placement.devices.values()) == {"cpu"}
    _run_one(c, clock, 0.5)
    state: LMStreamState = c.queries["q"].states["lmstream"]
    assert state.max_latency.count == 2
    assert state.flush() == pytest.approx(150_000.0)  # fewer than 3 rows: InfPT unchanged


def test_tumbling_window_converges_on_the_mean_max_latency() -> None:
    clock = ManualClock()
    c = _controller(clock)
    # Eq. 6 as printed (bytes / AvgThPut): the service-time model is off
    c.add_query(_spec(slide=30.0, rng=30.0), admission="lmstream", placement="cpu-only",
                admission_params={"service_admission": False})
    c.arrive("q", Dataset("d0", 0.0, 1000, 10))
    assert c.poll("q") is not None
    clock.advance(2.0)
    _run_one(c, clock, 0.0)  # MaxLat = 2 s; no measurable processing time yet
    c.arrive("q", Dataset("d1", 2.5, 1000, 10))
    clock.now = 4.4
    assert c.poll("q") is None  # EstMaxLat 1.9 < 2
    clock.now = 4.5
    assert c.poll("q") is not None


def _small_batches_with_a_fixed_cost(service_admission: bool) -> float:
    """Batches of 10 KB that each take 0.5 s whatever their size (a fixed engine cost, as on Spark);
    returns the clock at which the batch holding d3 (arrived at 8.0 s, SlideTime 5 s) is admitted."""
    clock = ManualClock()
    c = _controller(clock)
    c.add_query(_spec(slide=5.0), admission="lmstream", placement="cpu-only",
                admission_params={"service_admission": service_admission})
    # the first batch is the service-time model's warm-up (left out); the next two teach it a fixed 0.5 s
    for i, (arrival, size) in enumerate(((0.0, 10_000), (1.0, 20_000), (2.0, 15_000))):
        clock.now = arrival + 5.0 if i else arrival
        c.arrive("q", Dataset(f"d{i}", arrival, size, 10))
        assert c.poll("q") is not None
        _run_one(c, clock, 0.5)  # service: 0.5 s for 10 KB and for 20 KB -> fixed 0.5 s, no per-byte part
    c.arrive("q", Dataset("d3", 8.0, 10_000, 10))
    clock.now = 8.0
    while c.poll("q") is None:
        clock.advance(0.01)
    return clock.now


def test_service_time_model_admits_early_enough_for_a_fixed_engine_cost() -> None:
    # Eq. 6 as printed: AvgThPut = 45 KB / 1.5 s = 30 KB/s, so 10 KB is estimated at 0.333 s: admitted at
    # 8 + (5 - 0.333) = 12.667 s and completed 0.5 s later, 0.167 s past SlideTime
    assert _small_batches_with_a_fixed_cost(False) == pytest.approx(12.67, abs=0.011)
    # ctx.service: fixed 0.5 s for any size, times the prior margin 1.5 (fewer than ten errors seen yet):
    # 0.75 s, admitted at 12.25 s and done by 12.75, within SlideTime
    admitted = _small_batches_with_a_fixed_cost(True)
    assert admitted == pytest.approx(13.0 - 0.5 * 1.5, abs=0.011)
    assert admitted + 0.5 <= 13.0


def test_admission_only_does_not_train_the_regression() -> None:
    clock = ManualClock()
    c = _controller(clock)
    c.add_query(_spec(slide=5.0), admission="lmstream", placement="cpu-only")
    for i in range(5):
        c.arrive("q", Dataset(f"d{i}", clock.now, 1000, 10))
        clock.advance(6.0)
        assert c.poll("q") is not None
        _run_one(c, clock, 0.1)
    state: LMStreamState = c.queries["q"].states["lmstream"]
    assert len(state.regressor.samples) == 0 and state.max_latency.count == 5


def test_background_regression_runs_after_each_batch() -> None:
    clock = ManualClock()
    c = _controller(clock)
    c.add_query(_spec(slide=5.0), admission="asap", placement="lmstream",
                placement_params={"regression_window": 4, "inflection_profile": "none"})  # the paper's 150 KB
    for i in range(6):
        c.arrive("q", Dataset(f"d{i}", clock.now, 100_000 * (i + 1), 10))
        assert c.poll("q") is not None
        _run_one(c, clock, 0.2 * (i + 1))
    state: LMStreamState = c.queries["q"].states["lmstream"]
    assert state.flush(timeout=10.0) == pytest.approx(150_000.0)
    assert state.regressor.fits >= 1 and len(state.regressor.samples) == 4
