"""The simulator counts as Spark does: a batch's fixed part runs tasks, tasks run in waves on whole slots, a query
with a watermark runs no-data batches, a new executor's cores warm up and a removed one's state is reloaded."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from pacer import Dataset, MicroBatch, QuerySpec, hookimpl
from pacer.plugins import get_plugin_manager
from pacer.scaler import Scaler
from pacer.scaling import ClusterView, QueryLoad, ScaleDecision
from pacer.strategy import StrategyContext, StrategyInfo
from pacer_sim import CostModel, Simulation, batch_work
from pacer_sim.costs import no_data_work
from pacer_sim.running import RunningBatch
from pacer_sim.stateful import Watermark, keeps_state, reload_tasks, runs_no_data_batches
from pacer_sim.waves import SlotPool, allocate_slots, slot_capacity, waves
from pacer_workloads import bytes_per_row, make_query

QUIET = CostModel(noise=0.0)


def _batch(spec: QuerySpec, rows: int, seq: int = 1) -> MicroBatch:
    nbytes = int(rows * bytes_per_row("linear_road"))
    return MicroBatch(f"{spec.id}#{seq}", spec.id, seq, (Dataset("d", 0.0, nbytes, rows),), 0.0)


# ------------------------------------------------------------------ 1. the fixed part's tasks are task time


def test_the_fixed_part_runs_a_task_per_partition_counted_as_busy_core_seconds() -> None:
    """Spark's busy core-seconds are task run time, and a batch's fixed part launches tasks too: each of its
    partitions' tasks spends ``fixed_task_share x batch_overhead`` on an executor core; the rest is the driver's."""
    spec = make_query("lr2", partitions=2)
    work = batch_work(QUIET, spec, _batch(spec, 100), gpus=0, seed=1)
    ops = sum(op.cpu_core_s for op in work.operators)
    assert QUIET.fixed_task_share == 0.125  # 37.5 ms per task of a 0.3 s batch: Spark local[2] shows 20-50 ms
    assert work.task_fixed_s == pytest.approx(0.125 * 0.3)
    assert work.cpu_core_s == pytest.approx(ops + 2 * 0.125 * 0.3)
    assert work.fixed_s == pytest.approx(0.3 * (1 - 0.125))
    assert work.alone_s(2) == pytest.approx(0.3 + ops / 2)  # one wave: the batch takes as long as it did

    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=None)
    sim.add_query("lr2", rate=100, admission="static", admission_params={"interval": 5.0}, duration=30)
    sim.run(30)
    for r in sim.controller.reports("lr2"):
        assert r.busy_core_s == pytest.approx(2 * (r.processing_s - work.fixed_s))  # from the first task to the end
        assert r.busy_core_s > 2 * 0.125 * 0.3


def test_fixed_task_share_is_a_cost_parameter_a_profile_can_set() -> None:
    model = CostModel().with_overrides({"fixed_task_share": "0.3", "executor_warmup_s": 2, "state_reload_s": 0.2})
    assert (model.fixed_task_share, model.executor_warmup_s, model.state_reload_s) == (0.3, 2.0, 0.2)
    config = model.as_config()
    assert (config["fixed_task_share"], config["executor_warmup_s"], config["state_reload_s"]) == (0.3, 2.0, 0.2)
    with pytest.raises(ValueError, match="fixed_task_share"):
        CostModel(fixed_task_share=1.5)
    with pytest.raises(ValueError, match="executor_warmup_s"):
        CostModel(executor_warmup_s=-1)
    spec = make_query("lr2", partitions=4)
    none = batch_work(CostModel(noise=0.0, fixed_task_share=0.0), spec, _batch(spec, 100), gpus=0, seed=1)
    all_ = batch_work(CostModel(noise=0.0, fixed_task_share=1.0), spec, _batch(spec, 100), gpus=0, seed=1)
    assert all_.cpu_core_s - none.cpu_core_s == pytest.approx(4 * 0.3)
    assert none.fixed_s - all_.fixed_s == pytest.approx(0.3)


# ------------------------------------------------------------------ 2. tasks run in waves on whole slots


def test_waves_and_slots() -> None:
    assert [waves(p, 2) for p in (0, 1, 2, 3, 4, 5)] == [0, 1, 1, 2, 2, 3]
    assert slot_capacity(4.0) == (4, 1.0)
    assert slot_capacity(1.5) == (2, 0.75)  # a quarter of 2 cores taken: 2 slots, each at 3/4 of a core
    assert slot_capacity(0.0) == (0, 1.0)


def test_a_batch_runs_ceil_partitions_over_slots_waves_of_one_task_each() -> None:
    """3 tasks on 2 slots take two task times (the second wave leaves a slot idle), not 1.5."""
    spec = make_query("lr2", partitions=3)
    work = batch_work(QUIET, spec, _batch(spec, 20_000), gpus=0, seed=1)
    assert work.alone_s(2) == pytest.approx(work.fixed_s + 2 * work.cpu_core_s / 3)
    assert work.alone_s(3) == pytest.approx(work.fixed_s + work.cpu_core_s / 3)
    assert work.alone_s(2) > work.fixed_s + work.cpu_core_s / 2 + 0.01  # what the fluid model gave

    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=None)
    sim.add_query("lr2", rate=20_000, admission="static", admission_params={"interval": 5.0}, partitions=3,
                  duration=20)
    sim.run(20)
    for r in sim.controller.reports("lr2"):
        batch = MicroBatch(r.batch_id, "lr2", r.seq, (Dataset("d", 0.0, r.bytes, r.rows),), 0.0)
        w = batch_work(QUIET, spec, batch, gpus=0, seed=sim.seed)
        assert r.processing_s == pytest.approx(w.alone_s(2))
        assert r.busy_core_s == pytest.approx(w.cpu_core_s)  # the idle slot of the second wave runs no task


def test_slots_are_whole_fifo_in_order_and_shares_by_weight_with_the_largest_remainders() -> None:
    demand = {"a": 2, "b": 2, "c": 2}
    assert allocate_slots(["a", "b", "c"], demand, {}, 3) == {"a": 2, "b": 1, "c": 0}
    assert allocate_slots(["a", "b", "c"], demand, {"a": 1.0, "b": 1.0, "c": 1.0}, 2) == {"a": 1, "b": 1, "c": 0}
    assert allocate_slots(["a", "b"], demand, {"a": 3.0, "b": 1.0}, 3) == {"a": 2, "b": 1}
    assert allocate_slots(["a", "b"], {"a": 1, "b": 4}, {"a": 3.0, "b": 1.0}, 4) == {"a": 1, "b": 3}  # excess on
    assert allocate_slots(["a", "b"], demand, {"a": 1.0}, 4) == {"a": 2, "b": 0}  # no weight, no slot


def test_a_running_task_keeps_its_slot_and_a_cold_slot_warms_up_once() -> None:
    spec = make_query("lr2", partitions=2)
    work = batch_work(QUIET, spec, _batch(spec, 1000), gpus=0, seed=1)
    run = RunningBatch(_batch(spec, 1000), work, warmup_s=1.5)
    run.slots, run.cold = 2, 1
    run.advance(work.fixed_s)
    run.fill()  # what the engine does at the event ending the driver part
    assert run.in_task_phase and sorted(run.running) == pytest.approx([work.task_s, work.task_s + 1.5])
    assert run.cold == 0 and run.pinned == 2  # running tasks: neither slot can be taken now
    run.advance(work.fixed_s + work.task_s)
    assert run.pinned == 1 and run.demand == 1  # the warm one ended; the cold one's task runs 1.5 s longer
    assert run.next_event(run.last) == pytest.approx(work.fixed_s + work.task_s + 1.5)
    run.advance(work.fixed_s + work.task_s + 1.5)
    assert run.finished and run.task_core_s == pytest.approx(work.cpu_core_s + 1.5)
    pool = SlotPool()
    pool.resize(4)
    pool.added(2)
    assert pool.take(3, held=0) == 1  # two warm slots first, then one cold
    pool.give_back(1)
    pool.removed(2)
    assert pool.cold == 0  # an idle (cold) executor leaves first


# ------------------------------------------------------------------ 3. no-data batches after a watermark moves


def test_a_watermarked_aggregation_runs_a_no_data_batch_after_each_batch_that_moved_its_watermark() -> None:
    """ASAP, a dataset a second, batches shorter than a second: the source has nothing at the trigger after each
    data batch, and every data batch moves the watermark (the first too: Spark's starts at the epoch, below every
    event time), so each is followed by a no-data batch, whose fixed part and tasks count in the query's busy
    core-seconds and apart as ``cost.no_data``."""
    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=10.0)
    sim.add_query("lr2", rate=100, admission="asap", duration=30)
    report = sim.run(30)
    cost = report["queries"]["lr2"]["cost"]
    batches = sim.controller.reports("lr2")
    moved = len(batches)  # one dataset a batch, each later than the last
    # the last data batch's no-data batch comes after the run's end (a Spark run stops its queries once drained)
    assert report["queries"]["lr2"]["batches"] == 30 and cost["no_data"]["batches"] == moved - 1 == 29
    one = no_data_work(QUIET, make_query("lr2"), 1, seed=sim.seed)
    ran = cost["no_data"]["batches"]
    assert cost["no_data"]["trigger_s"] == pytest.approx(ran * one.alone_s(2))
    assert cost["no_data"]["busy_core_s"] == pytest.approx(ran * one.cpu_core_s)
    assert cost["busy_core_s"] == pytest.approx(sum(r.busy_core_s or 0.0 for r in batches) + ran * one.cpu_core_s,
                                                rel=1e-5)
    assert report["config"]["watermark_s"] == 10.0


def test_no_no_data_batch_without_a_watermark_or_an_aggregation() -> None:
    for workload, watermark in (("lr2", None), ("lr1", 10.0)):
        sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=watermark)
        sim.add_query(workload, rate=100, admission="asap", duration=30)
        assert sim.run(30)["queries"][workload]["cost"]["no_data"]["batches"] == 0
    assert runs_no_data_batches(make_query("cm2")) and not runs_no_data_batches(make_query("lr1"))
    assert keeps_state(make_query("lr1")) and keeps_state(make_query("lr3"))


def test_a_no_data_batch_holds_the_stream_and_none_runs_when_the_source_has_data_at_the_trigger() -> None:
    """A 0.8 s fixed part: a data batch ends ~0.84 s after its dataset and its no-data batch ~0.83 s later, so the
    next dataset (a second after the last) waits for it: no admission while Spark's batch holds the stream. That data
    batch then ends after the following dataset arrived: the trigger after it finds data, a data batch runs (it evicts
    by the new watermark itself) and no no-data batch."""
    model = CostModel(noise=0.0, batch_overhead=0.8)
    sim = Simulation(cores=2, seed=1, cost_model=model, watermark_s=5.0)
    sim.add_query("lr2", rate=100, admission="asap", duration=40)
    report = sim.run(40)
    no_data_s = no_data_work(model, make_query("lr2"), 1, seed=1).alone_s(2)
    batches = sim.controller.reports("lr2")
    waited: dict[str, int] = {"nothing": 0, "its query's batch": 0, "a no-data batch": 0}
    for before, r in itertools.pairwise(batches):
        if r.admitted_at == pytest.approx(r.earliest_arrival):
            waited["nothing"] += 1
        elif r.admitted_at == pytest.approx(before.completed_at):
            waited["its query's batch"] += 1
        else:
            assert r.admitted_at == pytest.approx(before.completed_at + no_data_s)
            waited["a no-data batch"] += 1
    assert waited["its query's batch"] and waited["a no-data batch"], waited
    assert waited["nothing"] == 0  # every batch moved the watermark, the first too: something always ran after it
    cost = report["queries"]["lr2"]["cost"]["no_data"]
    # the last data batch's no-data batch comes after the run's end (a Spark run stops its queries once drained)
    assert cost["batches"] == waited["a no-data batch"]
    assert cost["trigger_s"] == pytest.approx(cost["batches"] * no_data_s)


def test_the_first_event_moves_the_watermark_and_it_only_moves_forward() -> None:
    """Spark's watermark starts at 0 ms since the epoch and pacer-gen's event times are epoch times: the first batch
    with data moves it, whatever the delay (on Spark, LR2 under zStream for 60 s with its 60 s watermark ran a
    no-data batch after 9 of its 10 batches, bench-results/demo-2026-11-29)."""
    mark = Watermark(10.0)
    assert mark.advance([Dataset("a", 5.0, 10, 1)]) and mark.at == -5.0
    assert mark.advance([Dataset("b", 12.0, 10, 1)]) and mark.at == 2.0
    assert not mark.advance([Dataset("c", 11.0, 10, 1)])  # an older event: the watermark stays
    assert not mark.advance([Dataset("d", 30.0, 0, 0)])  # no row, no event time
    with pytest.raises(ValueError):
        Watermark(-1.0)


def test_same_seed_same_report_with_no_data_batches() -> None:
    import json

    def run() -> str:
        sim = Simulation(cores=2, seed=3)
        for w in ("lr2", "cm1"):
            sim.add_query(w, traffic="wave", rate=2000, admission="zstream", deadline=5.0, duration=120)
        return json.dumps(sim.run(120), sort_keys=True)

    assert run() == run()


# ------------------------------------------------------------------ 4. executors warm up; a removal reloads state


class _Steps:
    """A scaling strategy for the test: two executors from 10 s to 40 s, one otherwise."""

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="steps", provides=frozenset({"scaling"}), summary="test steps")]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "steps":
            return None
        return ScaleDecision(2 if 10.0 <= now < 40.0 else 1, "steps")


def _stepped(model: CostModel) -> Simulation:
    pm = get_plugin_manager()
    pm.register(_Steps())
    scaler = Scaler("steps", plugin_manager=pm, executors=(1, 2), initial=1, cores_per_executor=2, every_s=5.0)
    sim = Simulation(seed=1, cost_model=model, scaler=scaler, executor_startup_s=0.0, watermark_s=None,
                     plugin_manager=pm)
    sim.add_query("lr2", rate=200, admission="static", admission_params={"interval": 5.0}, partitions=4, duration=60)
    sim.run(60)
    return sim


def test_a_new_executors_first_tasks_warm_up_and_a_removal_makes_the_next_batch_reload_state() -> None:
    """Executor 2 (2 cores), asked for at a source's ask past 10 s, joins: the next batch puts two of its 4 tasks on
    its cold cores, each ``executor_warmup_s`` longer; once it leaves (asked at an ask past 40 s), the next batch's
    tasks of its state partitions (2 of 4) each run ``state_reload_s`` longer. Nothing else changes: same batches,
    same work."""
    base = _stepped(CostModel(noise=0.0, executor_warmup_s=0.0, state_reload_s=0.0))
    both = _stepped(CostModel(noise=0.0, executor_warmup_s=1.5, state_reload_s=0.5))
    first, second = base.controller.reports("lr2"), both.controller.reports("lr2")
    assert [r.batch_id for r in first] == [r.batch_id for r in second]
    extra = {r.batch_id: (s.busy_core_s or 0.0) - (r.busy_core_s or 0.0) for r, s in zip(first, second, strict=True)}
    slower = {r.batch_id: s.processing_s - r.processing_s for r, s in zip(first, second, strict=True)}
    assert both.scaler is not None
    joined = next(t for t, running, _ in both.scaler.timeline if running == 2)
    left = next(t for t, running, _ in both.scaler.timeline if t > joined and running == 1)
    assert 10.0 <= joined < 15.0 and 40.0 <= left < 45.0  # decided at the first ask its 5 s interval allowed
    warmed = next(r.batch_id for r in second if r.started_at >= joined)
    reloaded = next(r.batch_id for r in second if r.started_at >= left)
    assert extra[warmed] == pytest.approx(2 * 1.5) and slower[warmed] == pytest.approx(1.5)
    assert extra[reloaded] == pytest.approx(2 * 0.5) and slower[reloaded] == pytest.approx(0.5)
    assert all(math.isclose(v, 0.0, abs_tol=1e-9) for k, v in extra.items() if k not in (warmed, reloaded))
    assert reload_tasks(4, 1, 2) == 2 and reload_tasks(3, 1, 3) == 1 and reload_tasks(4, 0, 2) == 0


class _Asked(_Steps):
    """``steps``, keeping when it was asked."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        self.asked.append(now)
        return super().pacer_scale(ctx, queries, cluster, now)


def test_the_scaler_is_asked_only_at_a_source_s_ask_as_on_spark() -> None:
    """On Spark the driver asks the scaler at a source's ask, when its interval has passed, never on a timer of its
    own: traffic that stops at 20 s of a 60 s run gets no decision after its last batch."""
    pm = get_plugin_manager()
    steps = _Asked()
    pm.register(steps)
    scaler = Scaler("steps", plugin_manager=pm, executors=(1, 2), initial=1, cores_per_executor=2, every_s=5.0)
    sim = Simulation(seed=1, cost_model=QUIET, scaler=scaler, executor_startup_s=0.0, watermark_s=None,
                     plugin_manager=pm)
    sim.add_query("lr2", rate=200, admission="static", admission_params={"interval": 5.0}, partitions=4, duration=20)
    sim.run(60)
    last_batch = max(r.started_at for r in sim.controller.reports("lr2"))
    assert len(steps.asked) >= 3 and max(steps.asked) <= last_batch + 1e-9, (steps.asked, last_batch)
    assert all(b - a >= 5.0 - 1e-9 for a, b in itertools.pairwise(steps.asked))


def test_the_watermark_is_a_runtime_option_and_none_turns_no_data_batches_off(tmp_path: Path) -> None:
    import json

    from pacer.cli import main

    args = ["sim", "--workload", "lr2", "--duration", "40", "--seed", "1"]
    for flag, expected in ((["--watermark", "none"], None), (["--watermark", "10"], 10.0), ([], 60.0)):
        assert main([*args, *flag, "--report", str(tmp_path / "r.json")]) == 0
        report = json.loads((tmp_path / "r.json").read_text())
        assert report["config"]["watermark_s"] == expected
        no_data = report["queries"]["lr2"]["cost"]["no_data"]["batches"]
        assert (no_data > 0) == (expected is not None), (flag, no_data)  # any watermark moves from the first batch
    assert main([*args, "--watermark", "soon"]) == 2


def test_under_sparks_own_trigger_the_next_tick_finds_data_and_runs_no_no_data_batch() -> None:
    """A static trigger is Spark's ``processingTime``: after a batch moved the watermark the stream waits for its next
    tick, where data that arrived meanwhile forms a batch (on Spark, LR2 under a 10 s trigger for 60 s: 7 batches, no
    no-data batch, bench-results/demo-2026-11-29); the tick after the traffic ended, with nothing new, would run one,
    after the run's end (a Spark run stops its queries once drained): none within the run, as on Spark."""
    sim = Simulation(cores=2, seed=1, cost_model=QUIET, watermark_s=10.0)
    sim.add_query("lr2", rate=100, admission="static", admission_params={"interval": 5.0}, duration=30)
    report = sim.run(30)
    assert report["queries"]["lr2"]["batches"] >= 6
    assert report["queries"]["lr2"]["cost"]["no_data"]["batches"] == 0
    for r in sim.controller.reports("lr2")[1:]:
        assert r.admitted_at == pytest.approx(5.0 * round(r.admitted_at / 5.0))  # every batch at a tick
