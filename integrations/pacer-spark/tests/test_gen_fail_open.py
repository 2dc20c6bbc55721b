"""A ``pacer-gen`` reader that gives up waiting for the driver's answer (no SparkSession: the reader and the RPC
server are driven directly, on a clock the test moves).

The reader admits on its own what is available when it gives up, and asks no more for the client's back-off: one
late answer in ``test_paced_shapes``'s fail-open test made two admissions of its own when the first took only the
datasets available when it *asked* and the next arrived during the back-off (each its own Spark batch, each
accounted once from Spark's offset log).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pacer_spark.sources import gen as gen_module
from pacer_spark.sources.gen import GenStreamReader
from pacer_spark.sources.rpc import ControllerServer

START = 1_000_000.0  # the traffic's start (epoch s): datasets arrive at START + 1, + 2, ... (period 1 s)


class Clock:
    """The wall clock the reader sees (``time.time`` in :mod:`pacer_spark.sources.gen`): moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    @staticmethod
    def perf_counter() -> float:
        return time.perf_counter()


class LateDriver:
    """A driver whose answers to ``latest`` come ``late_s`` (the test's clock) after the reader asked, and too late
    for the reader's real timeout; every request it received is kept."""

    def __init__(self, clock: Clock, late_s: float) -> None:
        self.clock, self.late_s = clock, late_s
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(dict(request))
            self.clock.now += self.late_s  # the reader waits this long on its clock...
        time.sleep(1.3)  # ...and gives up (its timeout: 1 s) before the driver's answer comes
        return {"end": int(request["start"]) + 2, "shed": []}


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(START)
    monkeypatch.setattr(gen_module, "time", fake)
    return fake


@pytest.fixture
def late(clock: Clock) -> Iterator[tuple[LateDriver, ControllerServer]]:
    driver = LateDriver(clock, late_s=1.5)
    server = ControllerServer(driver)
    yield driver, server
    server.close()


def reader(server: ControllerServer, duration: int) -> GenStreamReader:
    host, port = server.address
    return GenStreamReader({"stream": "linear_road", "rate": "400", "duration": str(duration), "period": "1",
                            "start": repr(START), "pacer.query": "gen", "pacer.address": f"{host}:{port}",
                            "pacer.authkey": server.authkey_hex, "pacer.timeout": "1"})


def test_a_reader_that_gives_up_admits_what_arrived_while_it_waited_in_one_batch(
    clock: Clock, late: tuple[LateDriver, ControllerServer]
) -> None:
    """Asked with 5 of the 6 datasets available, the answer late: the reader gives up 1.5 s later, when all 6 have
    arrived, and admits them all (before: the 5 available when it asked; the 6th, arriving during its back-off, was
    a second admission of its own, a second Spark batch without an answer)."""
    driver, server = late
    gen = reader(server, duration=6)
    try:
        clock.now = START + 5.5
        assert gen.latestOffset({"index": 0}, None) == {"index": 6}
        assert [r["available"] for r in driver.requests] == [5]  # the driver was asked about the 5 available then
        clock.now = START + 9.0  # all traffic in, the reader backing off: nothing more to admit, no batch
        assert gen.latestOffset({"index": 6}, None) == {"index": 6}
    finally:
        gen.stop()
    assert len(driver.requests) == 1


def test_while_it_backs_off_the_reader_admits_each_new_arrival_without_asking(
    clock: Clock, late: tuple[LateDriver, ControllerServer]
) -> None:
    """By design: for the client's back-off after a timeout the reader does not ask; a dataset that arrives in
    it is admitted alone, one more admission of the reader's own (with traffic still coming, one late answer makes
    as many as batches planned in the back-off)."""
    driver, server = late
    gen = reader(server, duration=10)
    try:
        clock.now = START + 5.5
        assert gen.latestOffset({"index": 0}, None) == {"index": 7}  # gave up at START + 7.0
        clock.now = START + 8.2
        assert gen.latestOffset({"index": 7}, None) == {"index": 8}  # backing off: admitted without asking
    finally:
        gen.stop()
    assert len(driver.requests) == 1
