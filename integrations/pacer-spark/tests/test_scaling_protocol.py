"""The executor protocol between pacer's scaling and the cluster manager, as a Hypothesis state machine.

The truth about the executors is what the cluster manager lists (here :class:`Manager`: executors, those leaving,
its target, which run a task); the truth about what was asked is the scaling's record of its calls. Calls are made
off the driver's lock (:class:`~pacer_spark.driver.cluster_calls.QueuedCalls`: the machine makes them in any order,
late, and delivers answers twice or from a previous run); batches start only while the driver would admit one
(:meth:`~pacer_spark.driver.scaling.ExecutorScaling.holding`), on a drawn set of executors. Checked at every step:
no removal names an executor running a task, none goes below what the strategy wants, what is counted as held is
what the manager lists, a refused removal's executors count again, an answer of a previous run or a repeated one
changes nothing; at the end, with the calls made and the executors started, the executors are what the strategy
wants. :func:`test_the_machine_reaches_every_decision` reports the share of runs that reach each guarded decision.
The same protocol on a real standalone cluster: test_cluster_standalone.py's scale phase.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from pacer import ClusterView, Controller, QueryLoad, ScaleDecision, StrategyContext, StrategyInfo, hookimpl
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager
from pacer.scaler import Scaler
from pacer_spark.driver.cluster_calls import Call, CallResult, QueuedCalls
from pacer_spark.driver.scaling import REMOVAL_TIMEOUT_S, ExecutorScaling, saved_state
from pacer_spark.jvm.status_store import LiveExecutor
from pacer_workloads import make_query

#: what the runs reached, over every run of the machine in this process (the share test reads it)
REACHED: Counter[str] = Counter()


class Wanted:
    """A scaling strategy that wants what the machine last drew."""

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="drawn", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        return ScaleDecision(self.wanted, "drawn") if ctx.chosen == "drawn" else None


class Manager:
    """The cluster manager and Spark's status store: executors listed (one task each on the busy ones), those removed
    and still listed until a ``gone`` step, its target; it refuses the next call when told to."""

    def __init__(self, running: int) -> None:
        self.next_id = running
        self.live = [str(i) for i in range(running)]
        self.leaving: list[str] = []
        self.wanted = running
        self.busy: set[str] = set()
        self.refuse = False
        self.kills: list[tuple[str, ...]] = []

    def executors(self) -> list[LiveExecutor]:
        return [LiveExecutor(e, 1, 1 if e in self.busy else 0) for e in self.live + self.leaving]

    def request(self, total: int) -> bool:
        if self.refuse:
            self.refuse = False
            raise RuntimeError("RPC timed out (spark.rpc.askTimeout)")
        self.wanted = total
        return True

    def kill(self, ids: list[str]) -> bool:
        if self.refuse:
            self.refuse = False
            return False
        for e in ids:
            assert e not in self.busy, f"executor {e} removed while running a task ({sorted(self.busy)})"
            assert e in self.live, f"executor {e} asked to leave twice (leaving: {self.leaving})"
            self.live.remove(e)
            self.leaving.append(e)
        self.wanted = max(0, self.wanted - len(ids))  # as Spark's killExecutors lowers its target
        self.kills.append(tuple(ids))
        return True

    def start_one(self) -> None:
        if len(self.live) < self.wanted:
            self.live.append(str(self.next_id))
            self.next_id += 1


class ExecutorProtocol(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.controller = Controller(clock=self.clock, cores=2, plugin_manager=get_plugin_manager())
        self.controller.add_query(make_query("lr2", query_id="q", deadline=10.0), admission="asap")
        pm = get_plugin_manager()
        self.strategy = Wanted(3)
        pm.register(self.strategy)
        self.manager = Manager(running=3)
        self.calls = QueuedCalls(self.manager.request, self.manager.kill, clock=lambda: self.clock.now)
        self.scaling = ExecutorScaling(Scaler("drawn", plugin_manager=pm, executors=(1, 5), initial=3, every_s=1.0),
                                       None, clock=lambda: self.clock.now, live=self.manager.executors,
                                       calls=self.calls)
        self.scaling.start()
        self.batch = False
        self.answers: list[CallResult] = []
        self.reached: set[str] = set()

    def teardown(self) -> None:
        REACHED["runs"] += 1
        REACHED.update(self.reached)

    def _turn(self) -> None:
        kills, removed, refused = len(self.manager.kills), len(self.scaling.removed), len(self.scaling.refused)
        queued = {c.seq for c in self.calls.queue}
        self.scaling.follow(self.controller, batches_running=self.batch)
        assert len(self.manager.kills) == kills  # a turn asks; it never makes a call itself
        if len(self.scaling.removed) > removed:
            self.reached.add("removal made")
        if self.scaling.holding():
            self.reached.add("removal due")
        for entry in self.scaling.refused[refused:]:
            self.reached.add("refusal counted")
            # the executors a refused removal named take tasks again: not leaving, counted as running
            assert not set(entry.get("remove", ())) & self.scaling._leaving, (entry, self.scaling._leaving)
        if any(c.kind == "remove" and c.seq not in queued for c in self.calls.queue):
            # a removal asked for leaves at least what the strategy wants running
            assert self.scaling.scaler.timeline[-1][1] >= self.scaling.target, \
                (self.scaling.scaler.timeline[-1], self.scaling.target)
            assert not self.batch, "a removal was asked while a batch ran"

    @rule(wanted=st.integers(1, 5))
    def want(self, wanted: int) -> None:
        self.strategy.wanted = wanted

    @rule(seconds=st.sampled_from([0.5, 1.0, 2.0, REMOVAL_TIMEOUT_S / 3]))
    def tick(self, seconds: float) -> None:
        self.clock.now += seconds
        self._turn()

    @precondition(lambda self: not self.batch)
    @rule(on=st.sets(st.integers(0, 4), max_size=3))
    def batch_starts(self, on: set[int]) -> None:
        if self.scaling.holding():
            self.reached.add("batch held")
            return  # the driver admits none while a removal is due
        self.batch = True
        listed = self.manager.live
        self.manager.busy = {listed[i] for i in on if i < len(listed)}

    @precondition(lambda self: self.batch)
    @rule()
    def batch_completes(self) -> None:
        self.batch = False
        self.manager.busy = set()

    @rule(index=st.integers(0, 3))
    def cluster_manager_answers(self, index: int) -> None:
        """The oldest or a later queued call is made (out of order)."""
        made = self.calls.make(index)
        if made is not None:
            self.answers.append(made)

    @precondition(lambda self: bool(self.answers))
    @rule(index=st.integers(0, 20))
    def an_answer_comes_twice(self, index: int) -> None:
        self._turn()  # the answers come so far are taken
        before = (len(self.scaling.removed), len(self.scaling.refused), self.scaling.ignored)
        self.calls.deliver(self.answers[index % len(self.answers)])
        self._turn()
        assert self.scaling.ignored == before[2] + 1
        assert (len(self.scaling.removed), len(self.scaling.refused)) == before[:2]
        self.reached.add("repeat ignored")

    @rule(ids=st.lists(st.sampled_from("0123456"), min_size=1, max_size=2, unique=True), taken=st.booleans())
    def an_answer_of_a_previous_run(self, ids: list[str], taken: bool) -> None:
        self._turn()
        before = (len(self.scaling.removed), len(self.scaling.refused), self.scaling.ignored)
        self.calls.deliver(CallResult(Call(1, "remove", ids=tuple(ids), run="a previous run"), taken))
        self._turn()
        assert self.scaling.ignored == before[2] + 1 and (len(self.scaling.removed), len(self.scaling.refused)) == \
            before[:2]
        self.reached.add("stale ignored")

    @rule()
    def the_next_call_is_refused(self) -> None:
        self.manager.refuse = True

    @rule()
    def an_executor_starts(self) -> None:
        self.manager.start_one()

    @rule()
    def removed_executors_leave_the_list(self) -> None:
        self.manager.leaving = []

    @invariant()
    def counted_is_listed(self) -> None:
        timeline = self.scaling.scaler.timeline
        if timeline and self.scaling._listed:
            listed = self.scaling._listed
            assert timeline[-1][2] == len(listed), (timeline[-1], listed)

    @invariant()
    def removals_are_reported_once_made(self) -> None:
        assert len(self.scaling.removed) <= len(self.manager.kills)
        if self.scaling.deferrals:
            self.reached.add("removal timed out")

    def converges(self) -> None:
        """With no batch running, every call made and the executors started, the executors are what is wanted."""
        self.batch, self.manager.busy, self.manager.refuse = False, set(), False
        for _ in range(40):
            while self.calls.make() is not None:
                pass
            self.manager.leaving = []
            self.manager.start_one()
            self.clock.now += 1.0
            self.scaling.follow(self.controller, batches_running=False)
        while self.calls.make() is not None:
            pass
        self.scaling.follow(self.controller, batches_running=False)
        assert len(self.manager.live) == self.scaling.target == self.strategy.wanted, \
            (self.manager.live, self.scaling.target, self.strategy.wanted)
        assert self.manager.wanted == self.scaling.target


class ConvergingProtocol(ExecutorProtocol):
    def teardown(self) -> None:
        self.converges()
        super().teardown()


def test_the_executor_protocol_holds_over_every_interleaving() -> None:
    run_state_machine_as_test(ConvergingProtocol, settings=settings(max_examples=100, stateful_step_count=40,
                                                                    deadline=None))


def test_the_machine_reaches_every_decision() -> None:
    """The share of runs that reach each guarded decision (printed; each must be reached)."""
    REACHED.clear()
    run_state_machine_as_test(ExecutorProtocol, settings=settings(max_examples=100, stateful_step_count=100,
                                                                  deadline=None, derandomize=True))
    runs = REACHED.pop("runs")
    shares = {what: count / runs for what, count in sorted(REACHED.items())}
    print("share of runs reaching each decision:", {k: round(v, 2) for k, v in shares.items()})
    for what in ("removal due", "removal made", "refusal counted", "batch held", "removal timed out",
                 "repeat ignored", "stale ignored"):
        assert shares.get(what, 0.0) >= 0.05, (what, shares)


def test_spark_dynamic_is_watched_not_enacted() -> None:
    """``spark-dynamic`` on Spark: Spark's dynamic allocation decides; pacer asks and removes nothing and records the
    executors it holds, each change of them as a change of the strategy's record."""
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    live = [LiveExecutor("0", 1, 0), LiveExecutor("1", 1, 0)]
    scaler = Scaler("spark-dynamic", plugin_manager=get_plugin_manager(), executors=(1, 4), every_s=1.0)
    scaling = ExecutorScaling(scaler, None, clock=lambda: clock.now, live=lambda: list(live), enact=False)
    assert scaling.calls is None  # no cluster-manager call can be made
    scaling.start()
    for running in (2, 3, 3, 1):
        live = [LiveExecutor(str(i), 1, 0) for i in range(running)]
        clock.now += 1.0
        scaling.follow(controller, batches_running=True)
    report = scaling.report()
    assert report["removals"] == []
    assert [(c["from"], c["to"], c["reason"]) for c in report["changes"]] == [
        (2, 3, "Spark's dynamic allocation"), (3, 1, "Spark's dynamic allocation")]
    assert [point[1] for point in report["executors"]] == [2, 3, 1]


def _two_running(*, wanted: int, initial: int | None = None, recommend_only: bool = False,
                 state_path: Path | None = None) -> tuple[ManualClock, Controller, Wanted, Manager, QueuedCalls,
                                                          ExecutorScaling]:
    """A started scaling of 2 running executors (1 to 5 allowed) whose strategy wants ``wanted``, its calls queued."""
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, plugin_manager=get_plugin_manager())
    pm = get_plugin_manager()
    strategy = Wanted(wanted)
    pm.register(strategy)
    manager = Manager(running=2)
    calls = QueuedCalls(manager.request, manager.kill, clock=lambda: clock.now)
    scaler = Scaler("drawn", plugin_manager=pm, executors=(1, 5), initial=initial, every_s=1.0,
                    recommend_only=recommend_only)
    scaling = ExecutorScaling(scaler, None, clock=lambda: clock.now, live=manager.executors, calls=calls,
                              state_path=state_path)
    scaling.start()
    return clock, controller, strategy, manager, calls, scaling


def test_the_scaling_keeps_what_it_wants_for_a_restart(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """What the strategy wants and the start-up learned are kept in the checkpoint root at each change and at the
    end: a restart with a backlog starts from them (pacer_spark.runtime reads them at attach)."""
    path = tmp_path / "root" / "pacer-scaling.json"
    clock, controller, _, manager, calls, scaling = _two_running(wanted=4, initial=2, state_path=path)
    assert saved_state(path) == {}  # nothing changed yet
    clock.now = 1.0
    scaling.follow(controller, batches_running=False)
    assert saved_state(path)["wanted"] == 4
    while calls.make():
        pass
    manager.start_one()
    manager.start_one()
    clock.now = 7.5
    scaling.follow(controller, batches_running=False)
    scaling.close()
    assert saved_state(path) == {"wanted": 4, "startup_s": 6.5, "cores_per_executor": 1, "strategy": "drawn"}
    path.write_text("{not json")
    assert saved_state(path) == {} and "cannot be read" in caplog.text


def test_recommend_only_asks_the_cluster_manager_for_nothing_and_says_what_it_would_hold() -> None:
    clock, controller, strategy, _, calls, scaling = _two_running(wanted=4, recommend_only=True)
    for wanted, now in ((4, 1.0), (1, 2.0)):  # more, then fewer than the 2 running
        strategy.wanted = wanted
        clock.now = now
        scaling.follow(controller, batches_running=False)
        assert not calls.queue and scaling.target == 2 and scaling.metrics()["pacerExecutorsRecommended"] == \
            str(wanted)
    report = scaling.report()
    assert report["recommend_only"] and [(r["from"], r["to"]) for r in report["recommendations"]] == [(2, 4), (2, 1)]
    assert report["changes"] == [] and report["removals"] == []


def test_a_turn_and_the_task_slots_after_it_read_the_status_store_once() -> None:
    """The driver reads the task slots right after each scaling turn: that reads the listing the turn read, with the
    executors the turn asked to leave left out; without a turn before it, it reads the status store itself."""
    clock, controller, _, manager, _, scaling = _two_running(wanted=1)
    reads = 0
    listing = manager.executors

    def counted() -> list[LiveExecutor]:
        nonlocal reads
        reads += 1
        return listing()

    scaling._live = counted
    clock.now = 1.0
    scaling.follow(controller, batches_running=False)  # wants 1 of 2: one removal asked
    assert reads == 1 and scaling._removal is not None
    assert scaling.task_slots() == 1 and reads == 1  # the turn's listing, the executor leaving left out
    assert scaling.task_slots() == 1 and reads == 2  # no turn since: read afresh
