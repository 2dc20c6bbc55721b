"""The driver's one admission loop and its lock, on a real Controller (no SparkSession needed)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from pacer import (
    ClusterView,
    Controller,
    Dataset,
    MicroBatch,
    QueryLoad,
    ScaleDecision,
    StrategyContext,
    StrategyInfo,
    hookimpl,
)
from pacer.plugins import get_plugin_manager
from pacer.scaler import Scaler, ScalingError
from pacer_spark.driver.books import Books
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.cluster_calls import ClusterCalls, QueuedCalls
from pacer_spark.driver.gate import Turn
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.driver.scaling import ExecutorScaling
from pacer_spark.jvm.status_store import LiveExecutor
from pacer_workloads import make_query


def _driver() -> Driver:
    clock = PinnedClock()
    replay = ReplayGuard()
    pm = get_plugin_manager(allowed=[])
    pm.register(replay)
    controller = Controller(clock=clock, cores=2, plugin_manager=pm)
    controller.add_query(make_query("lr2", query_id="q", deadline=10.0), admission="asap")
    return Driver(controller, clock, replay, concurrency=1, gate_timeout=5.0, fair=False, progress_timeout=5.0)


class ListAsk:
    """A front end's ask that hands the Controller ``count`` new datasets (or reports that it has none)."""

    def __init__(self, driver: Driver, count: int, *, gated: bool = True) -> None:
        self.driver, self.count, self.gated = driver, count, gated
        self.query_id, self.drain, self.whole = "q", False, False
        self.steps: list[str] = []
        self.waited: float | None = None

    def report(self, books: Books) -> bool:
        books.check()
        self.steps.append("report")
        return self.count > 0

    def arrive(self, books: Books) -> None:
        self.steps.append("arrive")
        for i in range(self.count):
            books.arrive("q", Dataset(f"d{i}", 0.0, 100, 10, handle=i))

    def admitted(self, books: Books, batch: MicroBatch) -> bool:
        self.steps.append(f"admitted {len(batch.datasets)}")
        return self.gated

    def passed(self, books: Books, turn: Turn) -> None:
        self.steps.append("passed")
        self.waited = turn.waited_s


def test_one_loop_reports_arrives_admits_and_passes_the_gate_in_order() -> None:
    driver = _driver()
    ask = ListAsk(driver, 3)
    admitted = driver.decide(ask)
    assert admitted is not None and admitted.turn is not None
    assert ask.steps == ["report", "arrive", "admitted 3", "passed"]
    with driver.books() as books:
        assert books.batch(admitted.batch.id).started  # the gate let it run


def test_an_ask_with_nothing_new_admits_nothing_and_an_observed_batch_skips_the_gate() -> None:
    driver = _driver()
    empty = ListAsk(driver, 0)
    assert driver.decide(empty) is None and empty.steps == ["report"]
    observed = ListAsk(driver, 2, gated=False)  # Spark's own trigger decides: pacer only observes
    admitted = driver.decide(observed)
    assert admitted is not None and admitted.turn is None and "passed" not in observed.steps


def test_a_held_proof_kept_past_its_block_is_refused() -> None:
    driver = _driver()
    with driver.guard.held() as held:
        assert driver.admit(held, "q") is None  # nothing buffered
    with pytest.raises(RuntimeError, match="without it"):
        driver.admit(held, "q")
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            driver.admit(held, "q")
        except RuntimeError as exc:
            errors.append(exc)

    with driver.guard.held():  # held by this thread: the proof is still no good in another one
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert len(errors) == 1


def test_books_kept_past_their_block_are_refused() -> None:
    """A front end's books are the proof of the driver's lock: used after their ``with`` block, or from another
    thread, they refuse."""
    driver = _driver()
    with driver.books() as books:
        books.check()
        assert books.query_ids() == ["q"]
    with pytest.raises(RuntimeError, match="without it"):
        books.check()
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            books.check()
        except RuntimeError as exc:
            errors.append(exc)

    with driver.books():
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
    assert len(errors) == 1


def test_the_controller_plans_for_the_task_slots_spark_has_now(caplog: pytest.LogCaptureFixture) -> None:
    """An executor lost takes its cores with it: at the next ask (looked at most once a second) the Controller plans
    for the slots left, and for more once the cluster manager replaces it; an unreadable count changes nothing."""
    driver = _driver()
    slots: dict[str, int | None] = {"now": 2}
    driver.cores = lambda: slots["now"]
    seen: list[int] = []
    caplog.set_level("INFO", logger="pacer.spark")
    for now, count in ((100.0, 2), (100.5, 1), (101.2, 1), (102.4, None), (103.6, 3)):
        slots["now"] = count
        with driver.clock.pinned(now):
            driver.decide(ListAsk(driver, 0))
        seen.append(driver.controller.cores)
    assert seen == [2, 2, 1, 1, 3]  # 100.5: within a second of the last look; 102.4: unreadable, kept
    assert driver.controller.devices.cpu_cores == 3 and driver.controller.system_view().cores == 3
    assert "Spark now has 1 task slots (was 2)" in caplog.text and "Spark now has 3 task slots (was 1)" in caplog.text
    with pytest.raises(ValueError, match="cores must be >= 1"):
        driver.controller.resize(0)


def test_the_gate_forgets_the_wait_of_a_batch_taken_back() -> None:
    """A batch taken back never completes: its wait at the gate is not kept for ever (nor given to another)."""
    driver = _driver()
    first = driver.decide(ListAsk(driver, 2))
    assert first is not None
    with driver.books() as books:
        books.take_back("q", first.batch.id)
    class Again(ListAsk):  # nothing new arrives: the two datasets taken back wait again
        def report(self, books: Books) -> bool:
            return True

        def arrive(self, books: Books) -> None:
            pass

    second = driver.decide(Again(driver, 0))
    assert second is not None and second.batch.id != first.batch.id
    with driver.guard.held() as held:
        assert set(driver.gate._waited) == {second.batch.id}  # the first's wait went with it; the second's is kept
        assert driver.gate.take_wait(held, first.batch.id) == 0.0
        assert driver.gate.take_wait(held, second.batch.id) > 0.0 and not driver.gate._waited


class Wants:
    """A scaling strategy that wants ``wanted`` executors (or raises, with ``fail``)."""

    def __init__(self, wanted: int, fail: bool = False) -> None:
        self.wanted, self.fail = wanted, fail

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="wants", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "wants":
            return None
        if self.fail:
            raise RuntimeError("a strategy bug")
        return ScaleDecision(self.wanted)


def _scaled_driver(wanted: int, calls_of: Any, *, running: int = 3,
                   fail: bool = False) -> tuple[Driver, Any, Wants]:
    """A driver of queries ``q`` and ``r`` whose executors (``running``, idle) a strategy scales to ``wanted``."""
    driver = _driver()
    driver.add_query(make_query("lr2", query_id="r", deadline=10.0), admission="asap")
    pm = driver.controller.pm
    strategy = Wants(wanted, fail)
    pm.register(strategy)
    live = [LiveExecutor(str(i), 1, 0) for i in range(running)]
    calls = calls_of(lambda total: True, lambda ids: True)
    scaler = Scaler("wants", plugin_manager=pm, executors=(1, 5), initial=running, every_s=1.0, fallback=not fail)
    driver.scaling = ExecutorScaling(scaler, None, clock=driver.clock, live=lambda: list(live), calls=calls)
    driver.scaling.start()
    return driver, calls, strategy


def test_a_slow_cluster_manager_never_holds_the_driver_s_lock() -> None:
    """The cluster manager's calls are made on their own thread: while one waits (Spark waits up to
    spark.rpc.askTimeout), the driver's lock is free and asks are answered."""
    answered = threading.Event()

    def slow(request: Any, kill: Any) -> ClusterCalls:
        return ClusterCalls(lambda total: answered.wait(30.0), kill)

    driver, calls, _ = _scaled_driver(5, slow)
    try:
        driver.scaling_turn()  # the strategy wants 5 of 3: a request, made on the calls' thread
        assert calls.in_flight() == 1 and driver.scaling.target == 5
        assert driver.lock.acquire(timeout=5.0)  # free while the call waits
        driver.lock.release()
        assert driver.decide(ListAsk(driver, 2)) is not None and calls.in_flight() == 1
    finally:
        answered.set()
        calls.close()


def test_a_due_removal_holds_the_next_batch_but_never_a_drain() -> None:
    """Fewer executors wanted while a batch runs: the next batch waits (at most the removal timeout), a drain
    (processAllAvailable, availableNow) does not; once no batch runs, executors running no task are removed."""
    driver, calls, strategy = _scaled_driver(3, QueuedCalls)
    with driver.clock.pinned(0.0):
        running = driver.decide(ListAsk(driver, 2))  # q's batch runs on the 3 executors wanted
    assert running is not None and not driver.scaling.holding(0.0)
    strategy.wanted = 2
    with driver.clock.pinned(1.0):
        driver.scaling_turn()  # due: 2 wanted while q's batch runs
    assert driver.scaling.holding(1.0) and not any(c.kind == "remove" for c in calls.queue)

    class AskR(ListAsk):
        own: tuple[str, ...] = ()

        def arrive(self, books: Books) -> None:
            books.arrive("r", Dataset(f"r{self.count}", 0.0, 100, 10, handle=0))

    held_ask = AskR(driver, 1)
    held_ask.query_id = "r"
    with driver.clock.pinned(1.5):
        assert driver.decide(held_ask) is None  # held: q's batch still runs
    drain = AskR(driver, 2, gated=False)  # not at the gate: q's batch holds it
    drain.query_id, drain.drain = "r", True
    with driver.clock.pinned(1.6):
        drained = driver.decide(drain)
    assert drained is not None  # a drain never waits
    with driver.books() as books:
        books.complete(running.batch.id)
    with driver.clock.pinned(1.7):
        driver.scaling_turn()
    assert not any(c.kind == "remove" for c in calls.queue)  # r's drained batch still runs
    with driver.books() as books:
        books.complete(drained.batch.id)
    with driver.clock.pinned(1.8):
        driver.scaling_turn()  # no batch runs: the newest idle executor is asked to leave
    assert [c.ids for c in calls.queue if c.kind == "remove"] == [("2",)]
    assert driver.scaling.holding(1.8)  # until the cluster manager answered
    assert driver.decide(AskR(driver, 3)) is None
    calls.make()  # the request for 2 (asked at the decision)
    calls.make()  # the removal
    with driver.clock.pinned(1.9):
        driver.scaling_turn()
    assert not driver.scaling.holding(1.9) and driver.scaling.removed[0]["executors"] == ["2"]
    assert driver.controller.cores == 2  # the slots left out the executor asked to leave (still listed)


def test_a_strategy_that_fails_on_the_scaler_s_clock_fails_the_next_ask() -> None:
    """With fallback off, a scaling strategy that raises on the scaler's own clock is not lost in its thread: the
    next ask raises it, naming the strategy."""
    driver, _, _ = _scaled_driver(2, QueuedCalls, fail=True)
    driver.scaling_turn()
    with pytest.raises(ScalingError, match="scaling strategy 'wants' failed"):
        driver.decide(ListAsk(driver, 1))
