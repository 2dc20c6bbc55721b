from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from pacer import (
    AdmissionDecision,
    BatchReport,
    Controller,
    Dataset,
    DatasetBuffer,
    Devices,
    LedgerViolation,
    OperatorDAG,
    Placement,
    QuerySpec,
    ScheduleDecision,
    StrategyContext,
    StrategyError,
    StrategyInfo,
    SystemView,
    get_plugin_manager,
    hookimpl,
)
from pacer.cli import Command, main
from pacer.clock import ManualClock
from pacer.plugins import PluginManager
from pacer.report import build_report


class Counter:
    """Per-query state of the test strategy 'every-n'."""

    def __init__(self, spec: QuerySpec | None, params: Mapping[str, Any]) -> None:
        self.n = int(params["n"])
        self.completed: list[str] = []


class EveryN:
    """Admits once n datasets are buffered; places everything on the GPU; records feedback."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        from pacer import Param

        return [
            StrategyInfo(
                "every-n", frozenset({"admission", "placement"}), "test", (Param("n", 2, "batch size"),), Counter
            )
        ]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext, buffer: DatasetBuffer) -> AdmissionDecision | None:
        if ctx.chosen != "every-n":
            return None
        return AdmissionDecision(ctx.state.n if len(buffer) >= ctx.state.n else 0)

    @hookimpl
    def pacer_place(self, ctx: StrategyContext, dag: OperatorDAG) -> Placement | None:
        if ctx.chosen != "every-n":
            return None
        return Placement({op.id: ("cpu" if op.cpu_only else "gpu") for op in dag.operators})

    @hookimpl
    def pacer_batch_completed(self, ctx: StrategyContext, report: BatchReport) -> None:
        state = ctx.state_of("every-n")
        if state is not None:
            state.completed.append(report.batch_id)


class Reverse:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("reverse", frozenset({"scheduling"}))]

    @hookimpl
    def pacer_schedule(
        self, ctx: StrategyContext, pending: Sequence[Any], system: SystemView
    ) -> ScheduleDecision | None:
        if ctx.chosen != "reverse":
            return None
        return ScheduleDecision(tuple(p.batch.id for p in reversed(pending)), {p.batch.id: 1.0 for p in pending})


class Broken:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("broken", frozenset({"admission", "placement"}))]

    @hookimpl
    def pacer_admit(self, ctx: StrategyContext) -> AdmissionDecision | None:
        if ctx.chosen != "broken":
            return None
        raise ZeroDivisionError("boom")

    @hookimpl
    def pacer_place(self, ctx: StrategyContext, dag: OperatorDAG) -> Placement | None:
        if ctx.chosen != "broken":
            return None
        return Placement({"nope": "cpu"})


def _pm(*plugins: object) -> PluginManager:
    pm = get_plugin_manager(entry_points=False)
    for plugin in plugins:
        pm.register(plugin)
    return pm


def _feed(c: Controller, query_id: str, clock: ManualClock, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        c.arrive(query_id, Dataset(f"{query_id}-{i}", clock.now, 100, 10))


def run_batch(c: Controller, clock: ManualClock, batch_id: str, seconds: float) -> BatchReport:
    c.start(batch_id)
    clock.advance(seconds)
    return c.complete(batch_id)


def test_hook_pacer_strategies() -> None:
    pm = _pm(EveryN())
    info = pm.find("every-n", "placement")
    assert info.provides == {"admission", "placement"}
    assert info.resolve_params(None) == {"n": 2}


def test_hook_pacer_admit(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(EveryN()))
    c.add_query(spec, admission="every-n", admission_params={"n": 3})
    _feed(c, "q1", clock, 2)
    assert c.poll("q1") is None
    _feed(c, "q1", clock, 2, start=2)
    batch = c.poll("q1")
    assert batch is not None and [d.id for d in batch.datasets] == ["q1-0", "q1-1", "q1-2"]
    assert c.buffered("q1")[0].id == "q1-3"
    assert c.poll("q1") is None, "one batch in flight per query"


def test_hook_pacer_place(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, devices=Devices(cpu_cores=2, gpus=1), plugin_manager=_pm(EveryN()))
    c.add_query(spec, admission="asap", placement="every-n")
    _feed(c, "q1", clock, 1)
    batch = c.poll("q1")
    assert batch is not None and batch.placement is not None
    assert batch.placement.devices == {
        "scan#0": "gpu",
        "filter#1": "gpu",
        "agg#2": "gpu",
        "sort#3": "cpu",
        "sink#4": "cpu",
    }
    assert batch.placement.strategy == "every-n"


def test_hook_pacer_schedule(clock: ManualClock, dag: OperatorDAG) -> None:
    c = Controller(clock=clock, cores=2, scheduler="reverse", plugin_manager=_pm(Reverse()))
    for qid in ("a", "b"):
        c.add_query(QuerySpec(qid, dag))
        _feed(c, qid, clock, 1)
    c.poll_all()
    decision = c.schedule()
    assert decision.order == ("b#1", "a#1")
    assert c.system_view().allocated_cores == {"a": 1.0, "b": 1.0}


def test_hook_pacer_batch_completed(clock: ManualClock, dag: OperatorDAG) -> None:
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(EveryN()))
    c.add_query(QuerySpec("a", dag), admission="every-n", admission_params={"n": 1})
    c.add_query(QuerySpec("b", dag), admission="every-n", admission_params={"n": 1})
    _feed(c, "a", clock, 1)
    batch = c.poll("a")
    assert batch is not None
    report = run_batch(c, clock, batch.id, 2.0)
    assert report.processing_s == 2.0
    assert c.query("a").states["every-n"].completed == ["a#1"]
    assert c.query("b").states["every-n"].completed == [], "state is isolated per query"


def test_hook_pacer_cli_commands(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    class Hello:
        @hookimpl
        def pacer_cli_commands(self) -> Sequence[Command]:
            def configure(p: argparse.ArgumentParser) -> None:
                p.add_argument("--who", default="world")

            def run(args: argparse.Namespace, pm: PluginManager) -> int:
                print(f"hello {args.who}")
                return 0

            return [Command("hello", "say hello", configure, run)]

    real = get_plugin_manager

    def with_hello(**kwargs: Any) -> PluginManager:
        pm = real(**kwargs)
        pm.register(Hello())
        return pm

    monkeypatch.setattr("pacer.cli.program.get_plugin_manager", with_hello)
    assert main(["hello", "--who", "pacer"]) == 0
    assert capsys.readouterr().out == "hello pacer\n"


def test_static_trigger_follows_spark_processing_time(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec, admission="static", admission_params={"interval": 5})
    clock.now = 0.5
    _feed(c, "q1", clock, 1)
    first = c.poll("q1")
    assert first is not None, "the first batch runs at once, as in Spark"
    run_batch(c, clock, first.id, 1.0)  # done at 1.5
    _feed(c, "q1", clock, 1, start=1)
    clock.now = 4.99
    assert c.poll("q1") is None
    clock.now = 5.0
    second = c.poll("q1")
    assert second is not None and second.admitted_at == 5.0
    run_batch(c, clock, second.id, 7.0)  # overran the 10 s tick: done at 12.0
    _feed(c, "q1", clock, 1, start=2)
    third = c.poll("q1")
    assert third is not None and third.admitted_at == 12.0, "after an overrun the next batch starts at once"


def test_asap_admits_everything_when_idle(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    _feed(c, "q1", clock, 3)
    batch = c.poll("q1")
    assert batch is not None and len(batch.datasets) == 3


def test_asap_read_limit_admits_the_oldest_first_and_keeps_the_rest(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec, admission="asap", admission_params={"max_datasets": "2"})
    _feed(c, "q1", clock, 5)
    first = c.poll("q1")
    assert first is not None and [d.id for d in first.datasets] == ["q1-0", "q1-1"]
    assert len(c.buffered("q1")) == 3
    run_batch(c, clock, first.id, 1.0)
    second = c.poll("q1")
    assert second is not None and [d.id for d in second.datasets] == ["q1-2", "q1-3"]
    with pytest.raises(ValueError, match="max_datasets must be >= 0"):
        c.add_query(QuerySpec("q9", spec.dag), admission="asap", admission_params={"max_datasets": -1})


def test_latency_is_completion_minus_arrival(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    c.arrive("q1", Dataset("x", 1.0, 100, 10))
    c.arrive("q1", Dataset("y", 2.0, 100, 10))
    clock.now = 3.0
    batch = c.poll("q1")
    assert batch is not None
    c.schedule()
    clock.now = 3.5
    report = run_batch(c, clock, batch.id, 2.0)
    assert dict(report.dataset_latencies) == {"x": 4.5, "y": 3.5}
    assert (report.buffering_s, report.queueing_s, report.processing_s, report.max_latency_s) == (2.0, 0.5, 2.0, 4.5)


def test_rows_the_engine_counted_replace_estimated_ones(clock: ManualClock, spec: QuerySpec) -> None:
    """A file snapshot's rows are estimated from its bytes; Spark counts the batch's rows. The report, its misses by
    rows and the rows in then hold the count, shared among the datasets as their estimates were."""
    c = Controller(clock=clock, cores=2)
    c.add_query(replace(spec, deadline=2.0))
    c.arrive("q1", Dataset("old", 0.0, 600, 6))  # estimated 6 and 3 rows: 150 were read
    c.arrive("q1", Dataset("new", 1.5, 300, 3))
    clock.now = 1.5
    batch = c.poll("q1")
    assert batch is not None and batch.rows == 9
    c.start(batch.id)
    clock.now = 3.0  # "old" is 1 s over its 2 s deadline, "new" within it
    report = c.complete(batch.id, rows=150)
    assert report.rows == 150 and report.dataset_rows == (100, 50)
    q = build_report(runtime="sim", config={}, controller=c, start=0.0, end=clock.now)["queries"]["q1"]
    assert (q["rows_in"], q["rows_processed"], q["miss_rows"]) == (150, 150, 100)


def test_ledger_refuses_duplicates_and_double_completion(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    c.arrive("q1", Dataset("x", 0.0, 1, 1))
    with pytest.raises(LedgerViolation, match="'x' of query 'q1' arrived twice"):
        c.arrive("q1", Dataset("x", 0.0, 1, 1))
    batch = c.poll("q1")
    assert batch is not None
    c.complete(batch.id)
    with pytest.raises(KeyError, match="no pending micro-batch"):
        c.complete(batch.id)
    c.ledger.check_complete()


def test_ledger_reports_unprocessed_datasets(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    c.arrive("q1", Dataset("x", 0.0, 1, 1))
    with pytest.raises(LedgerViolation, match="1 datasets arrived but were never processed: q1/x"):
        c.ledger.check_complete()


def test_withdraw_takes_back_the_waiting_datasets_of_a_restarted_source(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    c.arrive("q1", Dataset("a", 0.0, 10, 1))
    batch = c.poll("q1")
    assert batch is not None
    c.arrive("q1", Dataset("b", 0.5, 20, 2))
    c.arrive("q1", Dataset("c", 0.6, 30, 3))
    assert c.withdraw("q1") == 2  # the restarted source offers b and c again, under new ids
    c.arrive("q1", Dataset("b+c", 1.0, 50, 5))
    c.complete(batch.id)
    again = c.poll("q1")
    assert again is not None and [d.id for d in again.datasets] == ["b+c"]
    c.complete(again.id)
    c.ledger.check_complete()
    assert c.ledger.counts["q1"]["arrived"] == 2 and c.recorder.record("q1").rows_in == 6


def test_raising_strategy_is_reported_by_name(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(Broken()))
    c.add_query(spec, admission="broken")
    _feed(c, "q1", clock, 1)
    with pytest.raises(
        StrategyError, match="admission strategy 'broken' failed for query 'q1': ZeroDivisionError: boom"
    ):
        c.poll("q1")
    assert len(c.buffered("q1")) == 1, "nothing is lost when a strategy raises"


def test_ill_formed_placement_is_reported_by_name(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(Broken()))
    c.add_query(spec, placement="broken")
    _feed(c, "q1", clock, 1)
    with pytest.raises(StrategyError, match="placement strategy 'broken'.*unplaced"):
        c.poll("q1")


def test_fallback_uses_the_baseline_and_counts_it(
    clock: ManualClock, spec: QuerySpec, caplog: pytest.LogCaptureFixture
) -> None:
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(Broken()), fallback=True)
    c.add_query(spec, admission="broken", placement="broken")
    _feed(c, "q1", clock, 2)
    batch = c.poll("q1")
    assert batch is not None and len(batch.datasets) == 2
    assert batch.placement is not None and batch.placement.strategy == "cpu-only"
    assert c.query("q1").fallbacks == 2
    assert "strategy 'broken' failed" in caplog.text and "falling back to 'asap'" in caplog.text


def test_shedding_is_counted_not_silent(clock: ManualClock, spec: QuerySpec) -> None:
    class Shedder:
        @hookimpl
        def pacer_strategies(self) -> Sequence[StrategyInfo]:
            return [StrategyInfo("shed-one", frozenset({"admission"}))]

        @hookimpl
        def pacer_admit(self, ctx: StrategyContext, buffer: DatasetBuffer) -> AdmissionDecision | None:
            return AdmissionDecision(len(buffer) - 1, shed=1, reason="cap") if ctx.chosen == "shed-one" else None

    c = Controller(clock=clock, cores=2, plugin_manager=_pm(Shedder()))
    c.add_query(spec, admission="shed-one")
    _feed(c, "q1", clock, 3)
    batch = c.poll("q1")
    assert batch is not None and [d.id for d in batch.datasets] == ["q1-1", "q1-2"]
    c.complete(batch.id)
    assert c.ledger.counts["q1"]["shed"] == 1
    c.ledger.check_complete()


def test_mixing_strategies_from_different_plugins(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2, devices=Devices(cpu_cores=2, gpus=1), scheduler="reverse", plugin_manager=_pm(EveryN(), Reverse()))
    c.add_query(spec, admission="static", placement="every-n")
    _feed(c, "q1", clock, 1)
    batch = c.poll("q1")
    assert batch is not None and batch.placement is not None and batch.placement.gpu_ratio == pytest.approx(0.6)


def test_estimates_follow_average_throughput(clock: ManualClock, spec: QuerySpec) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec)
    c.arrive("q1", Dataset("a", 0.0, 1000, 1))
    batch = c.poll("q1")
    assert batch is not None and batch.estimated_run_s == 0.0
    run_batch(c, clock, batch.id, 2.0)
    assert c.estimate_run_s("q1", 500) == pytest.approx(1.0)


def test_bad_arguments_are_rejected(clock: ManualClock, spec: QuerySpec) -> None:
    with pytest.raises(ValueError, match="cores must be >= 1"):
        Controller(clock=clock, cores=0)
    c = Controller(clock=clock, cores=1)
    c.add_query(spec)
    with pytest.raises(ValueError, match="already registered"):
        c.add_query(spec)
    with pytest.raises(KeyError, match="unknown query 'zz'"):
        c.poll("zz")
    with pytest.raises(ValueError, match="static trigger interval must be > 0"):
        c.add_query(QuerySpec("q2", spec.dag), admission="static", admission_params={"interval": 0})


def test_reconfigure_gives_a_restarted_query_new_strategies_and_deadline_and_keeps_its_data(
    clock: ManualClock, spec: QuerySpec
) -> None:
    c = Controller(clock=clock, cores=2)
    c.add_query(spec, admission="min-rows", admission_params={"min_rows": 1000, "max_delay": 600})
    _feed(c, "q1", clock, 3)
    assert c.poll("q1") is None  # min-rows holds 30 rows for its 1000
    c.reconfigure(replace(spec, deadline=2.0), admission="asap", placement="cpu-only")
    assert c.query("q1").admission == "asap" and c.query("q1").spec.deadline == 2.0
    batch = c.poll("q1")  # the buffered datasets stayed, the new strategy admits them
    assert batch is not None and [d.id for d in batch.datasets] == ["q1-0", "q1-1", "q1-2"]
    clock.advance(3.0)
    report = run_batch(c, clock, batch.id, 0.5)
    assert report.rows == 30 and c.recorder.record("q1").misses == 3  # judged by the new 2 s deadline
    with pytest.raises(KeyError):
        c.reconfigure(replace(spec, id="nope"), admission="asap", placement="cpu-only")


def test_retract_puts_a_batch_that_never_ran_back_in_front_and_admit_exactly_takes_what_the_runtime_read(
    clock: ManualClock, spec: QuerySpec
) -> None:
    """A source that admitted other data than decided: the decided batch is taken back (its datasets wait again, in
    order, the query idle, the ledger balanced) and exactly the datasets the runtime read form the batch, wherever
    they wait and whatever the strategy or a read cap would say."""
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(EveryN()))
    c.add_query(spec, admission="every-n", admission_params={"n": 2}, max_rows=10)
    _feed(c, "q1", clock, 4)
    batch = c.poll("q1")
    assert batch is not None and [d.id for d in batch.datasets] == ["q1-0"]  # the read cap: 10 rows
    with pytest.raises(RuntimeError, match="in flight"):
        c.reconcile.admit_exactly("q1", ["q1-1"])
    assert c.reconcile.retract(batch.id) == batch
    assert not c.busy("q1") and [d.id for d in c.buffered("q1")] == ["q1-0", "q1-1", "q1-2", "q1-3"]
    c.ledger.check_balance("q1")
    read = c.reconcile.admit_exactly("q1", ["q1-2", "q1-0", "q1-1"])
    assert [d.id for d in read.datasets] == ["q1-0", "q1-1", "q1-2"] and c.busy("q1")
    assert [d.id for d in c.buffered("q1")] == ["q1-3"] and c.buffered("q1")[0].rows == 10
    with pytest.raises(KeyError, match="not buffered"):
        c.reconcile.retract(read.id) and c.reconcile.admit_exactly("q1", ["q1-9"])
    assert [d.id for d in c.buffered("q1")] == ["q1-0", "q1-1", "q1-2", "q1-3"]
    done = run_batch(c, clock, c.reconcile.admit_exactly("q1", ["q1-0", "q1-1", "q1-2", "q1-3"]).id, 1.0)
    assert done.rows == 40
    with pytest.raises(LedgerViolation, match="retracted but is not admitted"):
        c.ledger.retracted("q1", ["q1-0"])
    c.ledger.check_balance("q1")
    assert c.ledger.finished("q1", "q1-3") and not c.ledger.finished("q1", "q1-4")


def test_a_cold_query_admits_a_probe_that_doubles_until_its_service_model_is_fitted(
    clock: ManualClock, spec: QuerySpec
) -> None:
    """A restart with a backlog and no fitted model: without a probe the first batch is the whole backlog (the
    batch that runs out of memory); with ``probe_rows`` it is at most that many rows, then twice as many, until
    the model is fitted, and never less than one dataset; nor, fitted or not, more than twice the largest batch
    measured (:attr:`pacer.service_time.ServiceTimeModel.probe_limit_bytes`)."""
    late = replace(spec, deadline=1.0)
    plain = Controller(clock=clock, cores=2, plugin_manager=_pm(EveryN()))
    plain.add_query(late, admission="every-n", admission_params={"n": 1})
    _feed(plain, "q1", clock, 40)  # 40 x 10 rows, all waiting past the deadline: catch-up
    clock.advance(5.0)
    first = plain.poll("q1")
    assert first is not None and first.rows == 400
    c = Controller(clock=clock, cores=2, plugin_manager=_pm(EveryN()))
    c.add_query(late, admission="every-n", admission_params={"n": 1}, probe_rows=25)
    _feed(c, "q1", clock, 40)
    clock.advance(5.0)
    sizes = []
    while c.has_buffered("q1") and len(sizes) < 10:
        batch = c.poll("q1")
        assert batch is not None
        sizes.append(batch.rows)
        run_batch(c, clock, batch.id, 0.5)
    # 25 rows (two datasets), then 50, capped at twice the 20 measured; the model fits after two and batches keep
    # at most doubling until the backlog is drained
    assert sizes == [20, 40, 50, 100, 190], sizes
    with pytest.raises(ValueError, match="probe_rows must be >= 0"):
        c.add_query(replace(spec, id="q2"), probe_rows=-1)
