"""The fourth decision's runner (pacer.scaler) and its baselines (fixed, spark-dynamic), on a real Controller."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from pacer import ClusterView, Controller, Dataset, QueryLoad, ScaleDecision, StrategyContext, StrategyInfo, hookimpl
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager
from pacer.runtime_api import executor_bounds
from pacer.scaler import Scaler, ScalingError, fixed_part
from pacer_workloads import make_query


def _controller() -> tuple[Controller, ManualClock]:
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    c.add_query(make_query("lr2", query_id="q", deadline=10.0, partitions=4), admission="asap")
    return c, clock


def test_executor_bounds_are_checked_in_one_place_as_text_or_pair_with_the_initial_count() -> None:
    """``pacer run --executors``, RunConfig and pacer-spark's executors= / spark.pacer.scale.executors all read
    them through :func:`executor_bounds`: the same answers and the same errors, naming the setting."""
    from pacer import RunConfig
    from pacer.runtime_api import QueryRun

    assert executor_bounds("1:8") == executor_bounds((1, 8)) == executor_bounds(["1", "8"]) == (1, 8)
    assert executor_bounds("3") == (3, 3) and executor_bounds("2:4", 3) == (2, 4)
    for bad in ("0:4", "4:2", "a:b", "", (1, 2, 3), (0, 2), None):
        with pytest.raises(ValueError, match="^spark.pacer.scale.executors"):
            executor_bounds(bad, setting="spark.pacer.scale.executors")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="initial executors 5 outside executors 1:4"):
        executor_bounds((1, 4), 5)
    with pytest.raises(ValueError, match="initial executors 5 outside executors 1:4"):
        RunConfig((QueryRun("lr2"),), executors=(1, 4), initial_executors=5)
    assert RunConfig((QueryRun("lr2"),), executors=["1", "4"]).executors == (1, 4)  # type: ignore[arg-type]


def test_fixed_keeps_the_executors_and_records_no_change() -> None:
    c, clock = _controller()
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8), initial=3)
    for t in (0.0, 5.0, 10.0):
        clock.now = t
        assert scaler.decide(c, running=3, now=t) == 3
    assert scaler.changes == [] and scaler.report(0.0, 10.0)["reconfigurations"] == 0


def test_spark_dynamic_ramps_1_2_4_while_tasks_wait_and_lets_idle_executors_go_after_the_timeout() -> None:
    c, _ = _controller()
    scaler = Scaler("spark-dynamic", {"idle_timeout_s": 60, "backlog_timeout_s": 5},
                    plugin_manager=get_plugin_manager(), executors=(1, 16))
    held = 1
    seen = []
    for t in (0.0, 5.0, 10.0, 15.0):  # 16 tasks wait every time: +1, +2, +4, +8 (capped at what the tasks need), one
        # doubling per backlog timeout (5 s here: one per call)
        held = scaler.decide(c, running=held, peak_tasks=16, now=t)
        seen.append(held)
    assert seen == [2, 4, 8, 16]
    for t in range(20, 76, 5):  # 3 tasks at most from now on: idle executors leave 60 s after the last ramp
        held = scaler.decide(c, running=held, peak_tasks=3, now=float(t))
        assert held == 16, t
    assert scaler.decide(c, running=16, peak_tasks=3, now=80.0) == 3
    assert [ch["to"] for ch in scaler.changes] == [2, 4, 8, 16, 3]
    assert scaler.changes[-1]["reason"] == "executors idle for 60 s"


class _Raising:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="raising", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "raising":
            return None
        raise ZeroDivisionError("planted")


def test_a_raising_strategy_keeps_the_executors_with_fallback_and_names_itself_without() -> None:
    c, _ = _controller()
    pm = get_plugin_manager()
    pm.register(_Raising())
    kept = Scaler("raising", plugin_manager=pm, executors=(1, 8), initial=2)
    assert kept.decide(c, running=2, now=0.0) == 2 and kept.fallbacks == 1
    strict = Scaler("raising", plugin_manager=pm, executors=(1, 8), fallback=False)
    with pytest.raises(ScalingError, match=r"^scaling strategy 'raising' failed: ZeroDivisionError: planted; fix it"):
        strict.decide(c, running=1, now=0.0)


def test_a_query_load_carries_rate_backlog_and_measured_core_seconds_per_byte() -> None:
    c, clock = _controller()
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8))
    for i in range(10):  # 1000 bytes/s for 10 s
        clock.now = float(i)
        c.arrive("q", Dataset(f"d{i}", arrival=float(i), bytes=1000, rows=10))
    clock.now = 10.0
    (load,) = scaler.loads(c, 10.0)
    assert load.backlog_bytes == 10_000 and load.backlog_age_s == 10.0 and load.core_s_per_byte == 0.0
    clock.now = 20.0
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 22.0
    c.complete(batch.id, engine_s=2.0, busy_core_s=5.0, cores_used=2.0)
    (load,) = scaler.loads(c, 20.0)
    assert load.core_s_per_byte == pytest.approx(5.0 / 10_000)
    assert load.backlog_bytes == 0 and load.deadline_s == 10.0 and load.partitions == 4


def test_before_a_query_measured_its_own_costs_the_scaler_reads_its_engine_profile() -> None:
    from pacer.engine_profile import EngineProfile

    profile = EngineProfile(runtime="spark", workload="lr2", partitions=4, slots=2, fixed_s=0.5, fixed_core_s=0.4,
                            engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=2e-4, largest_bytes=10**6)
    clock = ManualClock()
    c = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    c.add_query(make_query("lr2", query_id="q", deadline=10.0, partitions=4), admission="asap", engine_profile=profile)
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8))
    (load,) = scaler.loads(c, 0.0)
    assert load.core_s_per_byte == 2e-6 and load.fixed_s == pytest.approx(0.3)  # 0.5 s less 0.4 core-s on 2 slots
    c.arrive("q", Dataset("d0", arrival=0.0, bytes=1000, rows=10))
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 2.0
    c.complete(batch.id, engine_s=2.0, busy_core_s=5.0, cores_used=2.0)
    (load,) = scaler.loads(c, 2.0)  # its own, once measured
    assert load.core_s_per_byte == pytest.approx(5.0 / 1000) and load.fixed_s == pytest.approx(0.0)


def test_the_fixed_part_is_what_more_cores_do_not_shorten() -> None:
    from pacer.model import BatchReport

    def report(trigger_s: float, busy: float, cores: float) -> BatchReport:
        return BatchReport(batch_id="b", query_id="q", seq=1, admitted_at=0.0, started_at=0.0, completed_at=trigger_s,
                           bytes=1, rows=1, dataset_latencies=(), earliest_arrival=0.0, interval_s=0.0,
                           cores_used=cores, engine_s=trigger_s, busy_core_s=busy)

    # 0.3 s fixed + 8 core-s on 4 cores (2 s) and on 8 cores capped by 4 partitions (still 2 s)
    assert fixed_part([report(2.3, 8.0, 4.0), report(2.3, 8.0, 8.0)], 4, 9.0) == pytest.approx(0.3)
    assert fixed_part([], 4, 9.0) == 9.0  # nothing measured: the service model's


def test_the_reload_after_an_executor_left_is_measured_from_the_first_batch_on_fewer_cores() -> None:
    """Batches on 4 cores take 0.3 s beyond their core-seconds spread over them; the first on 2 cores (an executor
    left) takes 3.3 s beyond: 3 s of reloaded state. The next one on 2 cores is usual again."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=4, plugin_manager=get_plugin_manager())
    c.add_query(make_query("lr2", query_id="q", deadline=10.0, partitions=4), admission="asap")
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8))
    for i, (cores, extra) in enumerate([(4.0, 0.3), (4.0, 0.3), (4.0, 0.3), (2.0, 3.3), (2.0, 0.3)]):
        c.arrive("q", Dataset(f"d{i}", arrival=clock.now, bytes=1000, rows=10))
        batch = c.poll("q")
        assert batch is not None
        c.start(batch.id)
        clock.now += 4.0 / cores + extra
        c.complete(batch.id, engine_s=4.0 / cores + extra, busy_core_s=4.0, cores_used=cores)
        (load,) = scaler.loads(c, clock.now)
        assert load.reload_s == pytest.approx(3.0 if i >= 3 else 0.0), i
    assert load.fixed_s == pytest.approx(0.3)


def test_unknown_scaling_strategy_is_refused_naming_the_installed_ones() -> None:
    with pytest.raises(Exception, match=r"unknown scaling strategy 'nope'.*Installed scaling strategies: .*fixed"):
        Scaler("nope", plugin_manager=get_plugin_manager(), executors=(1, 2))




class _Wants:
    def __init__(self, executors: int) -> None:
        self.executors = executors
        self.seen: list[tuple[tuple[QueryLoad, ...], ClusterView]] = []

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="wants", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "wants":
            return None
        self.seen.append((tuple(queries), cluster))
        return ScaleDecision(self.executors, "planted")


def test_hook_pacer_scale_sees_every_query_and_the_cluster_and_its_answer_is_clamped_to_the_bounds() -> None:
    c, _ = _controller()
    pm = get_plugin_manager()
    wants = _Wants(100)
    pm.register(wants)
    scaler = Scaler("wants", plugin_manager=pm, executors=(2, 6), cores_per_executor=4)
    assert scaler.decide(c, running=2, pending=1, startup_s=12.0, peak_tasks=9, now=3.0) == 6
    (loads, cluster), = wants.seen
    assert [q.query_id for q in loads] == ["q"]
    assert (cluster.executors, cluster.pending, cluster.target, cluster.cores, cluster.startup_s,
            cluster.peak_tasks) == (2, 1, 3, 8, 12.0, 9)
    wants.executors = 0
    assert scaler.decide(c, running=6, now=8.0) == 2
    assert [(ch["from"], ch["to"], ch["reason"]) for ch in scaler.changes] == [(3, 6, "planted"), (6, 2, "planted")]
    priced = scaler.report(0.0, 20.0)["changes"]
    # 3 -> 6 executors of 4 cores for 5 s costs 60 core-s; 6 -> 2 for the last 12 s saves 192
    assert [c["core_s_saved"] for c in priced] == [-60.0, 192.0]


def test_recommend_only_asks_the_strategy_records_its_answer_and_keeps_the_executors_held() -> None:
    c, _ = _controller()
    pm = get_plugin_manager()
    wants = _Wants(6)
    pm.register(wants)
    scaler = Scaler("wants", plugin_manager=pm, executors=(1, 8), initial=2, recommend_only=True)
    assert scaler.decide(c, running=2, now=0.0) == 2 and scaler.recommended == 6
    assert scaler.decide(c, running=2, now=5.0) == 2  # the same recommendation: not recorded again
    wants.executors = 3
    assert scaler.decide(c, running=2, pending=1, now=10.0) == 3  # held: 2 running and 1 starting
    report = scaler.report(0.0, 20.0)
    assert report["recommend_only"] is True and report["recommended"] == 3 and report["wanted"] == 2
    assert report["changes"] == [] and report["reconfigurations"] == 0
    assert report["recommendations"] == [{"at": 0.0, "from": 2, "to": 6, "reason": "planted"},
                                         {"at": 10.0, "from": 3, "to": 3, "reason": "planted"}]
    enacted = Scaler("wants", plugin_manager=pm, executors=(1, 8), initial=2)
    assert enacted.decide(c, running=2, now=0.0) == 3
    assert enacted.report(0.0, 5.0)["recommend_only"] is False and enacted.report(0.0, 5.0)["recommendations"] == []


def test_a_query_load_carries_the_rows_late_and_done_since_the_previous_decision() -> None:
    c, clock = _controller()
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8))
    c.arrive("q", Dataset("d0", arrival=0.0, bytes=1000, rows=10))
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 12.0  # 12 s after its arrival, past the 10 s deadline
    c.complete(batch.id, engine_s=12.0, busy_core_s=5.0, cores_used=2.0)
    (load,) = scaler.loads(c, 12.0)
    assert (load.recent_miss_rows, load.recent_rows, load.miss_rows) == (10, 10, 10)
    (load,) = scaler.loads(c, 17.0)  # nothing since: recent, not cumulative
    assert (load.recent_miss_rows, load.recent_rows, load.miss_rows) == (0, 0, 10)
    assert load.reload_s == 0.0  # not measured by any runtime yet


def test_a_query_whose_batches_run_more_tasks_than_its_partitions_can_use_them() -> None:
    """A format("pacer") Kafka query's spec has the session's shuffle partitions (2); its scan runs a task per topic
    partition (6 measured): the scaler tells the strategy 6."""
    clock = ManualClock()
    c = Controller(clock=clock, cores=4, plugin_manager=get_plugin_manager())
    c.add_query(make_query("lr2", query_id="q", deadline=10.0, partitions=2), admission="asap")
    scaler = Scaler("fixed", plugin_manager=get_plugin_manager(), executors=(1, 8))
    assert scaler.loads(c, 0.0)[0].partitions == 2  # nothing measured: the spec's
    c.arrive("q", Dataset("d0", arrival=0.0, bytes=1000, rows=10))
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    clock.now = 1.0
    c.reconcile.task_costs(batch.id, cpu_core_s=None, failed_core_s=None, tasks=6)  # as pacer-spark's listener does
    c.complete(batch.id, engine_s=1.0, busy_core_s=3.0, cores_used=4.0)
    assert scaler.loads(c, 1.0)[0].partitions == 6
