"""Catch-up: a backlog already past its deadline is drained in deadline-sized batches the Controller forms
itself, then the admission strategy decides again; baselines that stand for a fixed trigger keep their rule."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import AdmissionDecision, Controller, Dataset, DatasetBuffer, Operator, OperatorDAG, QuerySpec, hookimpl
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager
from pacer.report import build_report, validate_report
from pacer.strategy import StrategyContext, StrategyInfo

DEADLINE = 10.0
#: Each dataset costs 1 s on the engine (1000 bytes at 1 ms per byte), plus 0.5 s per batch.
FIXED_S, PER_BYTE_S, DATASET_BYTES = 0.5, 0.001, 1000


class Patient:
    """Admits only a full buffer of ``n`` datasets: without catch-up a late backlog would wait for more."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("patient", frozenset({"admission"}), "test")]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext, buffer: DatasetBuffer) -> AdmissionDecision | None:
        if ctx.chosen != "patient":
            return None
        return AdmissionDecision(len(buffer) if len(buffer) >= 100 else 0)


def _controller(admission: str, *, catch_up: bool = True) -> tuple[Controller, ManualClock]:
    clock = ManualClock()
    pm = get_plugin_manager(entry_points=False)
    pm.register(Patient())
    c = Controller(clock=clock, cores=2, timer=None, plugin_manager=pm, catch_up=catch_up)
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("sink#1", "sink"))
    c.add_query(QuerySpec(id="q", dag=dag, deadline=DEADLINE), admission=admission)
    return c, clock


def _teach(c: Controller, clock: ManualClock) -> None:
    """Batches of 1, 4 and 3 datasets under ``asap`` fit the service model exactly (0.5 s + 1 s per dataset; the
    first is its warm-up; 4 datasets measured let a batch grow to 7, :mod:`pacer.service_time`'s probe limit);
    then the query is patient again."""
    spec = c.query("q").spec
    c.reconfigure(spec, admission="asap", placement="cpu-only")
    for size in (1, 4, 3):
        for i in range(size):
            c.arrive("q", Dataset(f"warm-{size}-{i}", clock.now, DATASET_BYTES, 10))
        batch = c.poll("q")
        assert batch is not None
        c.start(batch.id)
        clock.now += FIXED_S + PER_BYTE_S * batch.bytes
        c.complete(batch.id)
    c.reconfigure(spec, admission="patient", placement="cpu-only")


def _backlog(c: Controller, clock: ManualClock, n: int, age: float) -> None:
    for i in range(n):
        c.arrive("q", Dataset(f"old-{i}", clock.now - age + i * 0.01, DATASET_BYTES, 100))


def test_a_late_backlog_is_drained_in_batches_that_each_fit_the_deadline() -> None:
    c, clock = _controller("patient")
    _teach(c, clock)
    service = c.query("q").service_time
    assert service["observations"] >= 2
    _backlog(c, clock, 30, age=40.0)  # 30 s of engine work, all of it 40 s old: far past the 10 s deadline
    sizes = []
    while c.query("q").buffered_count:
        batch = c.poll("q")
        assert batch is not None, "a late backlog must not wait for the strategy's full buffer"
        sizes.append(len(batch.datasets))
        c.start(batch.id)
        clock.now += FIXED_S + PER_BYTE_S * batch.bytes
        c.complete(batch.id)
    # the largest batch predicted (0.5 s + 1 s per dataset, times the 1.5 prior margin) within 10 s: 6 datasets
    assert sizes == [6, 6, 6, 6, 6]
    status = c.query("q").catch_up
    assert status.episodes == 1 and status.rows == 30 * 100 and not status.active
    assert status.seconds > 30.0
    # the strategy decides again: fresh data waits for its full buffer
    c.arrive("q", Dataset("fresh", clock.now, DATASET_BYTES, 100))
    assert c.poll("q") is None
    report = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)
    validate_report(report)
    q = report["queries"]["q"]
    assert q["catch_up_rows"] == 3000 and q["catch_up_episodes"] == 1
    assert q["catch_up_s"] == round(status.seconds, 6)
    assert q["arrival"] == "source-time"


def test_a_catch_up_batch_taken_back_before_it_ran_opens_no_episode() -> None:
    """A runtime that never ran the batch (its source admitted other data) takes it back: no rows, no episode, no
    seconds (before: the episode stayed counted); admitted again, the episode counts once."""
    c, clock = _controller("patient")
    _teach(c, clock)
    _backlog(c, clock, 3, age=40.0)
    batch = c.poll("q")
    assert batch is not None and c.query("q").catch_up.episodes == 1
    c.reconcile.retract(batch.id)
    status = c.query("q").catch_up
    assert (status.episodes, status.rows, status.active, status.seconds) == (0, 0, False, 0.0)
    again = c.poll("q")
    assert again is not None
    c.start(again.id)
    clock.now += FIXED_S + PER_BYTE_S * again.bytes
    c.complete(again.id)
    status = c.query("q").catch_up
    assert (status.episodes, status.rows, status.active) == (1, 300, False)


def test_a_strategys_batch_grows_at_most_twice_the_largest_measured_and_a_fixed_triggers_as_spark_would() -> None:
    """After batches of 4 and 3 datasets, the patient strategy's 100 datasets (on time) go in batches of at most 7:
    twice the largest measured, forgotten at the fit's halflife (4 x 0.966 x 2 = 7.7 datasets of bytes); ``static``,
    which stands for a Spark trigger, takes them whole as Spark would."""
    taken = {}
    for admission in ("patient", "static"):
        c, clock = _controller(admission)
        _teach(c, clock)
        c.reconfigure(c.query("q").spec, admission=admission, placement="cpu-only",
                      admission_params={"interval": 1.0} if admission == "static" else {})
        for i in range(100):
            c.arrive("q", Dataset(f"fresh-{i}", clock.now, DATASET_BYTES, 10))
        clock.now += 1.0
        batch = c.poll("q")
        assert batch is not None
        taken[admission] = len(batch.datasets)
    assert taken == {"patient": 7, "static": 100}


def test_a_fixed_trigger_baseline_never_catches_up() -> None:
    c, clock = _controller("static")
    _teach(c, clock)
    c.reconfigure(c.query("q").spec, admission="static", placement="cpu-only")
    _backlog(c, clock, 30, age=40.0)
    batch = c.poll("q")  # static takes what is there when its interval comes, as a processingTime trigger would
    assert batch is not None and len(batch.datasets) == 30
    assert not c.query("q").catch_up.enabled and c.query("q").catch_up.episodes == 0


def test_catch_up_can_be_switched_off() -> None:
    c, clock = _controller("patient", catch_up=False)
    _backlog(c, clock, 5, age=40.0)
    assert c.poll("q") is None
    assert c.query("q").catch_up.episodes == 0


def test_before_the_model_is_fitted_the_whole_late_backlog_goes_at_once() -> None:
    c, clock = _controller("patient")
    _backlog(c, clock, 7, age=40.0)
    batch = c.poll("q")
    assert batch is not None and len(batch.datasets) == 7  # nothing to size a batch by: as Spark would
    assert c.query("q").catch_up.active


def test_data_that_waited_through_a_catch_up_batch_that_missed_is_served_at_once() -> None:
    """A Spark source is seen only between batches: what arrived during a catch-up batch shows up after it, young
    enough to look comfortably on time. When that batch missed its deadline, the next one is formed at once too,
    until one meets it; data that arrived after it met is the strategy's again."""
    c, clock = _controller("patient")
    _backlog(c, clock, 7, age=40.0)
    first = c.poll("q")
    assert first is not None  # the whole late backlog, as Spark would (no model yet)
    c.start(first.id)
    clock.now += 6.0
    c.complete(first.id)  # nothing buffered when it ends: the episode closes there
    assert not c.query("q").catch_up.active
    c.arrive("q", Dataset("during", clock.now - 2.0, DATASET_BYTES, 10))  # arrived while it ran, seen after
    second = c.poll("q")
    assert second is not None and [d.id for d in second.datasets] == ["during"], "the patient strategy would hold it"
    c.start(second.id)
    clock.now += 1.0
    c.complete(second.id)  # 3 s after its oldest arrival: met
    assert c.query("q").catch_up.episodes == 1  # one episode, seen a piece at a time
    c.arrive("q", Dataset("after", clock.now, DATASET_BYTES, 10))
    clock.now += 1.0
    assert c.poll("q") is None  # on time again: the strategy decides, and the patient one waits


def test_data_within_its_deadline_is_left_to_the_strategy() -> None:
    c, clock = _controller("patient")
    _backlog(c, clock, 5, age=DEADLINE - 1.0)
    assert c.poll("q") is None
    assert c.query("q").catch_up.episodes == 0


def test_the_report_says_how_arrivals_are_dated() -> None:
    c, _ = _controller("patient")
    c.recorder.record("q").dated_by("first-seen")
    report = build_report(runtime="spark", config={}, controller=c, start=0.0, end=1.0)
    assert report["queries"]["q"]["arrival"] == "first-seen"


def test_progress_line_fields_are_all_explained() -> None:
    from pacer.report import PROGRESS_LEGEND, progress_line

    c, clock = _controller("asap")
    c.arrive("q", Dataset("0", clock.now - 5.0, 1000, 10))
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now += DEADLINE  # 15 s after its arrival: missed
    c.complete(batch.id, engine_s=1.0)
    line = progress_line(c, 12.0)
    assert "batches=1" in line and "last=1 datasets/10 rows" in line and "misses=10/10" in line
    assert "overloaded=0s" in line and "shed=0" in line and "catch-up=0s/0 rows" in line
    for key in [part.split("=")[0] for part in line.split() if "=" in part]:
        assert f"{key} = " in PROGRESS_LEGEND, key


def test_for_as_long_as_an_overload_lasted_the_controller_still_admits_what_waits() -> None:
    """Under ``keep``, an overload's end is judged on the recent arrival rate, before its backlog is gone and with
    the next burst of bursty traffic near: for as long as the period lasted (at least one deadline) after it ends,
    the Controller admits everything buffered, as Spark's default trigger does; after that the (patient) strategy
    decides again."""
    c, clock = _controller("patient")
    _teach(c, clock)
    start = clock.now
    while clock.now < start + 25.0:  # 3000 bytes/s: 3 s of engine work per second, no batch size keeps up
        for i in range(3):
            c.arrive("q", Dataset(f"burst-{clock.now:.1f}-{i}", clock.now, DATASET_BYTES, 10))
        batch = c.poll("q")
        if batch is not None:
            c.start(batch.id)  # completed at once, with the engine time the model predicts: the rate is the point
            c.complete(batch.id, engine_s=FIXED_S + PER_BYTE_S * batch.bytes)
        clock.now += 1.0
    assert c.query("q").overload.overloaded and not c.query("q").buffered_count  # overloaded: everything admitted
    clock.now += 9.0  # a quiet spell: the rate over the last 10 s falls under what a batch can serve
    c.arrive("q", Dataset("quiet-0", clock.now, DATASET_BYTES, 10))
    clock.now += 2.0
    batch = c.poll("q")  # the period ends at this poll; what waits goes, though the strategy would hold it
    assert not c.query("q").overload.overloaded and batch is not None and len(batch.datasets) == 1
    c.start(batch.id)
    c.complete(batch.id, engine_s=FIXED_S + PER_BYTE_S * batch.bytes)
    began, ended = c.query("q").overload.periods[-1]
    assert began is not None and ended is not None and ended - began > DEADLINE + 5.0
    clock.now = ended + DEADLINE + 1.0  # more than a deadline after it ended, less than it lasted: still eager
    c.arrive("q", Dataset("quiet-1", clock.now, DATASET_BYTES, 10))
    clock.now += 0.5
    batch = c.poll("q")
    assert batch is not None and len(batch.datasets) == 1
    c.start(batch.id)
    c.complete(batch.id, engine_s=FIXED_S + PER_BYTE_S * batch.bytes)
    clock.now = ended + (ended - began) + 1.0  # longer after it than it lasted: the strategy decides again
    c.arrive("q", Dataset("quiet-2", clock.now, DATASET_BYTES, 10))
    clock.now += 0.5
    assert c.poll("q") is None


def test_a_strained_query_is_served_at_once_and_not_reported_overloaded() -> None:
    """Near overload (the per-byte work alone takes 80 % of the engine or more) batching saves little and a waiting
    strategy would spend the slack the next burst needs: the Controller admits what waits at once, and the report
    does not call it an overload."""
    for rate, strained in ((850.0, True), (300.0, False)):  # bytes/s: per-byte work 85 % and 30 % of the engine
        c, clock = _controller("patient")
        _teach(c, clock)
        clock.now += DEADLINE + 1.0  # the teaching batches' arrivals out of the rate's window
        start, n, admitted = clock.now, 0, 0
        while clock.now < start + 20.0:
            c.arrive("q", Dataset(f"d-{n}", clock.now, DATASET_BYTES // 10, 1))  # small and frequent: a steady rate
            n += 1
            batch = c.poll("q")
            if batch is not None:
                admitted += 1
                c.start(batch.id)
                c.complete(batch.id, engine_s=FIXED_S + PER_BYTE_S * batch.bytes)
            clock.now += DATASET_BYTES / 10 / rate
        monitor = c.query("q").overload
        # strained, not overloaded: 2 T* is 6.7 s of the 10 s deadline (the rate's first second, measured over
        # one second of arrivals, may read higher for a moment)
        assert monitor.strained is strained and not monitor.overloaded and monitor.overloaded_s < 2.0
        if strained:
            assert admitted >= n // 3 and c.query("q").buffered_count <= 2  # nothing held back
        else:
            assert admitted <= 1  # the patient strategy holds; at most one catch-up batch once the oldest is late
