"""The driver's one admission loop and its lock, on a real Controller (no SparkSession needed)."""

from __future__ import annotations

import threading

import pytest

from pacer import Controller, Dataset, MicroBatch
from pacer.plugins import get_plugin_manager
from pacer_spark.driver.books import Books
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.gate import Turn
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.replay import ReplayGuard
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
