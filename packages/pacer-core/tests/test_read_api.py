"""The Controller's public read API: views of a query and of a pending batch, enactment, completion time."""

from __future__ import annotations

import pytest

from pacer import Controller, Dataset, Devices, OperatorDAG, QuerySpec
from pacer.clock import ManualClock


def _controller(clock: ManualClock, spec: QuerySpec) -> Controller:
    c = Controller(clock=clock, cores=2, devices=Devices(cpu_cores=2, gpus=1), timer=None)
    c.add_query(spec, admission="static", admission_params={"interval": 2.0}, placement="gpu-only", max_rows=50)
    return c


def test_query_view_shows_strategies_buffer_and_in_flight(clock: ManualClock, spec: QuerySpec) -> None:
    c = _controller(clock, spec)
    view = c.query("q1")
    assert (view.id, view.admission, view.placement) == ("q1", "static", "gpu-only")
    assert view.params["static"]["interval"] == 2.0 and view.max_rows == 50
    c.arrive("q1", Dataset("a", 0.0, 100, 10))
    c.arrive("q1", Dataset("b", 0.5, 100, 10))
    assert [d.id for d in view.buffered] == ["a", "b"] and view.buffered_count == 2  # a view reads the Controller now
    clock.now = 2.0
    batch = c.poll("q1")
    assert batch is not None
    assert view.in_flight == batch.id and not view.in_flight_started and view.buffered == ()
    c.start(batch.id)
    assert view.in_flight_started and c.batch(batch.id).started
    clock.now = 2.5
    c.complete(batch.id)
    assert view.in_flight is None and view.admitted == 1 and view.fallbacks == 0 and view.shed == 0
    assert set(view.service_time) == {"fixed_ms", "per_mb_ms", "proportional", "margin", "observations", "prior_batches"}
    assert list(c.queries) == c.query_ids() == ["q1"] and c.queries["q1"].spec is spec


def test_views_cannot_change_the_controller(clock: ManualClock, spec: QuerySpec) -> None:
    c = _controller(clock, spec)
    view = c.query("q1")
    with pytest.raises(TypeError):
        view.params["static"]["interval"] = 9.0  # type: ignore[index]
    with pytest.raises(TypeError):
        view.selected["admission"] = "asap"  # type: ignore[index]
    with pytest.raises(AttributeError):
        view.spec = spec  # type: ignore[misc]
    with pytest.raises(KeyError, match="unknown query 'zz'; registered: \\['q1'\\]"):
        c.query("zz")
    assert c.query("q1").params["static"]["interval"] == 2.0


def test_batch_view_and_record_enactment(clock: ManualClock, spec: QuerySpec) -> None:
    c = _controller(clock, spec)
    c.arrive("q1", Dataset("a", 0.0, 100, 10))
    clock.now = 2.0
    batch = c.poll("q1")
    assert batch is not None
    view = c.batch(batch.id)
    assert (view.id, view.query_id, view.started, view.interval_s) == (batch.id, "q1", False, 2.0)
    assert view.placement is not None and view.placement.strategy == "gpu-only"
    c.record_enactment(batch.id, False, "not enacted: the RAPIDS Accelerator plugin is not loaded")
    placement = c.batch(batch.id).placement
    assert placement is not None and not placement.enacted
    report = c.complete(batch.id)
    assert report.placement is not None and not report.placement.enacted
    assert report.placement.note == "not enacted: the RAPIDS Accelerator plugin is not loaded"
    with pytest.raises(KeyError, match="no pending micro-batch"):
        c.batch(batch.id)
    with pytest.raises(KeyError, match="no pending micro-batch"):
        c.record_enactment(batch.id, False, "too late")


def test_complete_takes_the_time_the_runtime_learnt_later(clock: ManualClock, dag: OperatorDAG) -> None:
    c = Controller(clock=clock, cores=2, timer=None)
    c.add_query(QuerySpec("q", dag))
    c.arrive("q", Dataset("a", 1.0, 100, 10))
    clock.now = 2.0
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 9.0  # the runtime heard at 9 s that the batch finished at 3.5 s
    report = c.complete(batch.id, completed_at=3.5)
    assert report.completed_at == 3.5 and report.dataset_latencies == (("a", 2.5),)


def test_the_report_reads_views_and_the_recorder(clock: ManualClock, spec: QuerySpec) -> None:
    from pacer.report import build_report

    c = _controller(clock, spec)
    for i in range(3):
        c.arrive("q1", Dataset(f"d{i}", float(i), 100, 10))
    clock.now = 2.0
    batch = c.poll("q1")
    assert batch is not None
    c.complete(batch.id)
    assert c.recorder.arrivals("q1") == ((0.0, 10, 100), (1.0, 10, 100), (2.0, 10, 100))
    assert [r.batch_id for r in c.recorder.reports("q1")] == [batch.id] == [r.batch_id for r in c.reports()]
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=4.0)["queries"]["q1"]
    assert (q["admission"], q["placement"], q["rows_in"], q["bytes_in"]) == ("static", "gpu-only", 30, 300)
