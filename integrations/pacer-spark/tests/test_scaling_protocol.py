"""The removal protocol between pacer's executor scaling and the batches, over every interleaving (Hypothesis):
executors are removed only while no admitted batch runs, or, after the removal timeout, only those running no task;
never below what the strategy wants; more are asked for at once. The cluster manager here is a record of what was
asked (requests, kills) and of the executors it started; the same protocol on a real standalone cluster:
test_cluster_standalone.py's scale phase."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from pacer import ClusterView, Controller, QueryLoad, ScaleDecision, StrategyContext, StrategyInfo, hookimpl
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager
from pacer.scaler import Scaler
from pacer_spark.driver.scaling import REMOVAL_TIMEOUT_S, ExecutorScaling
from pacer_spark.jvm.status_store import LiveExecutor
from pacer_workloads import make_query


class Scripted:
    """Wants the executors its script says, one entry per call (the last one after)."""

    def __init__(self, script: Sequence[int]) -> None:
        self.script = list(script)

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="scripted", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "scripted":
            return None
        wanted = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return ScaleDecision(wanted)


class Manager:
    """What the cluster manager was asked, and the executors it runs (one task each while a batch runs). A killed
    executor stays listed (``leaving``) until a ``gone`` step: Spark's status store learns of its removal later."""

    def __init__(self, running: int) -> None:
        self.next_id = running
        self.live = [str(i) for i in range(running)]
        self.leaving: list[str] = []
        self.wanted = running
        self.busy: set[str] = set()
        self.kills: list[tuple[list[str], bool, float]] = []

    def executors(self) -> list[LiveExecutor]:
        return [LiveExecutor(e, 1, 1 if e in self.busy else 0) for e in self.live + self.leaving]

    def request(self, total: int) -> bool:
        self.wanted = total
        return True

    def start_one(self) -> None:
        """One executor asked for and not yet running starts (a Worker launched it)."""
        if len(self.live) < self.wanted:
            self.live.append(str(self.next_id))
            self.next_id += 1


@settings(max_examples=400, deadline=None)
@given(script=st.lists(st.integers(1, 5), min_size=1, max_size=12),
       steps=st.lists(st.sampled_from(["tick", "batch", "done", "start", "wait", "gone"]), min_size=1, max_size=60))
def test_removals_wait_for_the_batches_and_never_go_below_the_target(script: list[int], steps: list[str]) -> None:
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    controller.add_query(make_query("lr2", query_id="q", deadline=10.0), admission="asap")
    pm = get_plugin_manager()
    pm.register(Scripted(script))
    manager = Manager(running=3)
    batch = {"running": False}

    def kill(ids: list[str]) -> bool:
        manager.kills.append((list(ids), batch["running"], clock.now))
        for e in ids:
            assert e in manager.live, f"executor {e} asked to leave twice (still listed: {manager.leaving})"
            manager.live.remove(e)
            manager.leaving.append(e)
        manager.wanted = max(0, manager.wanted - len(ids))  # as Spark's killExecutors lowers its target
        return True

    scaler = Scaler("scripted", plugin_manager=pm, executors=(1, 5), initial=3, every_s=1.0)
    scaling = ExecutorScaling(scaler, None, clock=lambda: clock.now, live=manager.executors, request=manager.request,
                              kill=kill)
    scaling.start()
    for step in steps:
        if step == "tick":
            clock.now += 1.0
            before, decided = len(manager.kills), scaling.removal_since
            scaling.follow(controller, batches_running=batch["running"])
            for ids, during_batch, at in manager.kills[before:]:
                if during_batch:  # only once the removal waited out its timeout, and only executors running no task
                    assert decided is not None and at - decided >= REMOVAL_TIMEOUT_S, (ids, at, decided)
                    assert not set(ids) & manager.busy, (ids, manager.busy)
            if len(manager.kills) > before:  # a removal never goes below what the strategy wants
                assert len(manager.live) >= scaling.target, (manager.live, scaling.target)
            assert manager.wanted == scaling.target  # the cluster manager's target is always the strategy's
        elif step == "batch" and not batch["running"]:
            batch["running"] = True
            manager.busy = set(manager.live[:2])
        elif step == "done":
            batch["running"] = False
            manager.busy = set()
        elif step == "start":
            manager.start_one()
        elif step == "gone":
            manager.leaving = []
        else:
            clock.now += REMOVAL_TIMEOUT_S / 3
    # once the batches are over and the executors started, the scaling converges on its target
    batch["running"] = False
    manager.busy = set()
    for _ in range(30):  # past the script's end (12 calls at most), one executor started per tick
        manager.leaving = []
        manager.start_one()
        clock.now += 1.0
        scaling.follow(controller, batches_running=False)
    assert len(manager.live) == scaling.target, (manager.live, scaling.target)
    for ids, _, _ in manager.kills:
        assert ids, "an empty removal was asked"


def test_spark_dynamic_is_watched_not_enacted() -> None:
    """``spark-dynamic`` on Spark: Spark's dynamic allocation decides; pacer asks and removes nothing and records the
    executors it holds, each change of them as a change of the strategy's record."""
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    live = [LiveExecutor("0", 1, 0), LiveExecutor("1", 1, 0)]
    asked: list[object] = []
    scaler = Scaler("spark-dynamic", plugin_manager=get_plugin_manager(), executors=(1, 4), every_s=1.0)
    scaling = ExecutorScaling(scaler, None, clock=lambda: clock.now, live=lambda: list(live), request=asked.append,
                              kill=asked.append, enact=False)
    scaling.start()
    for running in (2, 3, 3, 1):
        live = [LiveExecutor(str(i), 1, 0) for i in range(running)]
        clock.now += 1.0
        scaling.follow(controller, batches_running=True)
    report = scaling.report()
    assert asked == [] and report["removals"] == []
    assert [(c["from"], c["to"], c["reason"]) for c in report["changes"]] == [
        (2, 3, "Spark's dynamic allocation"), (3, 1, "Spark's dynamic allocation")]
    assert [point[1] for point in report["executors"]] == [2, 3, 1]
