"""Does a slow cluster manager slow admission? The driver's decision time with every cluster-manager call delayed.

Spark's ``requestTotalExecutors`` and ``killExecutors`` wait up to ``spark.rpc.askTimeout`` for the cluster
manager. pacer-spark makes them off the driver's lock (:mod:`pacer_spark.driver.cluster_calls`); this measures it.
pacer-spark's own driver (:class:`pacer_spark.driver.loop.Driver`, its Controller, lock and gate) runs the executor
scaling on its own clock while one source asks for admission every ``--ask-every`` seconds and completes each
admitted batch at its next ask; a strategy wants 3 and 2 executors by turns, so requests and removals go to the
cluster manager, whose every call takes ``--delay`` seconds (a sleep: the cluster manager is the only part not
real here, and its slowness is what is measured). The figure is the p99 of the time ``Driver.decide`` takes, with
the delay over without, rounds interleaved.

``python -m pacer_bench.scaling_lock --out DIR [--delay 10] [--seconds 30] [--repeat 3]`` writes
``scaling-lock.json`` and ``scaling-lock.md`` to DIR (needs pacer-spark; no Spark session).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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
from pacer.durations import flag_seconds
from pacer.plugins import get_plugin_manager
from pacer.scaler import Scaler
from pacer_spark.driver.books import Books
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.cluster_calls import ClusterCalls
from pacer_spark.driver.gate import Turn
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.replay import ReplayGuard
from pacer_spark.driver.scaling import ExecutorScaling, ScalingClock
from pacer_spark.jvm.status_store import LiveExecutor
from pacer_workloads import make_query


class Alternating:
    """A scaling strategy that wants 3 and 2 executors by turns: every decision asks the cluster manager."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo(name="alternating", provides=frozenset({"scaling"}))]

    @hookimpl
    def pacer_scale(self, ctx: StrategyContext, queries: Sequence[QueryLoad], cluster: ClusterView,
                    now: float) -> ScaleDecision | None:
        if ctx.chosen != "alternating":
            return None
        self.calls += 1
        return ScaleDecision(3 if self.calls % 2 else 2, "alternating")


class SlowManager:
    """A cluster manager whose every call takes ``delay_s``; it starts and removes executors as asked."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.live = ["0", "1"]
        self.next_id = 2
        self.made = 0  # calls answered

    def executors(self) -> list[LiveExecutor]:
        with self.lock:
            return [LiveExecutor(e, 1, 0) for e in self.live]

    def request(self, total: int) -> bool:
        time.sleep(self.delay_s)
        with self.lock:
            self.made += 1
            while len(self.live) < total:
                self.live.append(str(self.next_id))
                self.next_id += 1
        return True

    def kill(self, ids: list[str]) -> bool:
        time.sleep(self.delay_s)
        with self.lock:
            self.made += 1
            self.live = [e for e in self.live if e not in ids]
        return True


class SourceAsk:
    """One source's ask: completes the batch it was last admitted, then brings one new dataset."""

    def __init__(self, seq: int, previous: str | None) -> None:
        self.seq, self.previous = seq, previous
        self.query_id, self.drain, self.whole = "q", False, False
        self.batch_id: str | None = None

    @property
    def stream_id(self) -> str | None:
        return None

    @property
    def own(self) -> Sequence[str]:
        return ()

    def report(self, books: Books) -> bool:
        if self.previous is not None:
            books.start(self.previous)
            books.complete(self.previous)
        return True

    def arrive(self, books: Books) -> None:
        books.arrive("q", Dataset(f"d{self.seq}", time.time(), 1000, 10, handle=self.seq))

    def admitted(self, books: Books, batch: MicroBatch) -> bool:
        self.batch_id = batch.id
        return False

    def passed(self, books: Books, turn: Turn) -> None:  # pragma: no cover - never gated
        pass


def decision_times(delay_s: float, seconds: float, ask_every_s: float, scale_every_s: float = 0.5) -> dict[str, Any]:
    """Run the driver for ``seconds`` with calls delayed ``delay_s``; each ``Driver.decide``'s duration (ms)."""
    replay = ReplayGuard()
    pm = get_plugin_manager(allowed=[])
    pm.register(replay)
    strategy = Alternating()
    pm.register(strategy)
    clock = PinnedClock()
    controller = Controller(clock=clock, cores=2, plugin_manager=pm)
    controller.add_query(make_query("lr2", query_id="q", deadline=10.0), admission="asap")
    manager = SlowManager(delay_s)
    calls = ClusterCalls(manager.request, manager.kill)
    scaling = ExecutorScaling(Scaler("alternating", plugin_manager=pm, executors=(1, 4), initial=2,
                                     every_s=scale_every_s), None, live=manager.executors, calls=calls)
    driver = Driver(controller, clock, replay, concurrency=1, gate_timeout=5.0, fair=False, progress_timeout=5.0,
                    scaling=scaling)
    scaling.start()
    ticker = ScalingClock(driver.scaling_turn, every_s=0.1)
    ticker.start()
    times: list[float] = []
    previous: str | None = None
    end = time.monotonic() + seconds
    seq = 0
    try:
        while time.monotonic() < end:
            ask = SourceAsk(seq, previous)
            began = time.perf_counter()
            admitted = driver.decide(ask)
            times.append(1000.0 * (time.perf_counter() - began))
            previous = admitted.batch.id if admitted is not None else None  # the ask completed the one before
            seq += 1
            time.sleep(ask_every_s)
    finally:
        ticker.stop()
        calls.close(timeout=0.0)
    times.sort()
    return {"delay_s": delay_s, "decisions": len(times), "p50_ms": statistics.median(times),
            "p99_ms": times[min(len(times) - 1, int(0.99 * len(times)))], "max_ms": times[-1],
            "scaling_decisions": strategy.calls, "removals": len(scaling.removed),
            "calls_made": manager.made}


def measure(delay_s: float, seconds: float, repeat: int, ask_every_s: float) -> dict[str, Any]:
    """``repeat`` rounds, each a run without delay and one with (alternating which goes first)."""
    rounds = []
    for i in range(repeat):
        order = (0.0, delay_s) if i % 2 == 0 else (delay_s, 0.0)
        runs = {d: decision_times(d, seconds, ask_every_s) for d in order}
        rounds.append({"no_delay": runs[0.0], "delayed": runs[delay_s],
                       "p99_ratio": runs[delay_s]["p99_ms"] / max(1e-6, runs[0.0]["p99_ms"])})
    ratios = [r["p99_ratio"] for r in rounds]
    return {"delay_s": delay_s, "seconds": seconds, "ask_every_s": ask_every_s, "rounds": rounds,
            "p99_ratio_median": statistics.median(ratios), "p99_ratio_range": [min(ratios), max(ratios)],
            "goal": "p99 decision time with every call delayed within 2x of no delay"}


def table(result: dict[str, Any]) -> str:
    lines = [f"# Admission's decision time, cluster-manager calls delayed {result['delay_s']:g} s",
             "", "| round | p99 no delay (ms) | p99 delayed (ms) | ratio | max no delay / delayed (ms) | decisions | "
                 "scaling decisions | calls made / removals, no delay | delayed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(result["rounds"], 1):
        fast, slow = r["no_delay"], r["delayed"]
        lines.append(f"| {i} | {fast['p99_ms']:.2f} | {slow['p99_ms']:.2f} | {r['p99_ratio']:.2f} | "
                     f"{fast['max_ms']:.2f} / {slow['max_ms']:.2f} | {slow['decisions']} | "
                     f"{slow['scaling_decisions']} | {fast['calls_made']} / {fast['removals']} | "
                     f"{slow['calls_made']} / {slow['removals']} |")
    low, high = result["p99_ratio_range"]
    lines += ["", f"p99 ratio, delayed over no delay: median {result['p99_ratio_median']:.2f} "
                  f"(range {low:.2f}-{high:.2f}); goal: within 2x."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pacer_bench.scaling_lock", description=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--delay", type=float, default=10.0, help="seconds every cluster-manager call takes")
    parser.add_argument("--seconds", type=float, default=30.0, help="seconds each run lasts")
    parser.add_argument("--repeat", type=int, default=3, help="rounds, each a run with and one without the delay")
    parser.add_argument("--ask-every", type=flag_seconds, default=0.01, help="seconds between a source's asks")
    args = parser.parse_args(argv)
    result = measure(args.delay, args.seconds, args.repeat, args.ask_every)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scaling-lock.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "scaling-lock.md").write_text(table(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
