"""The scaling suite: every scaling strategy through pacer-core's own :class:`~pacer.scaler.Scaler`, on a real
Controller driven by the harness.

The Scaler is what every runtime runs (the simulator and Spark), so a strategy that passes here is asked the same
way there. The harness enacts each answer at once (the Controller plans for the executors' cores), with no
start-up: what is judged is the strategy's answer, not a runtime's enactment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from pacer import Controller, Dataset, Devices, get_plugin_manager
from pacer.clock import ManualClock
from pacer.scaler import Scaler
from pacer_conformance.harness import drive, steady_arrivals
from pacer_workloads import make_query

#: The bounds every run scales between, and the executors it starts with.
EXECUTORS = (1, 8)
INITIAL = 2
#: Seconds between two scaling decisions.
EVERY_S = 5.0


@dataclass
class ScalingRun:
    """A scaling run: each decision's ``(time, executors wanted)``, and the Scaler's record."""

    scaler: Scaler
    decisions: list[tuple[float, int]] = field(default_factory=list)

    def changes_after(self, start: float) -> int:
        """Changes of the executors wanted after ``start`` seconds."""
        return sum(1 for c in self.scaler.changes if c["at"] > start)


def scaling_run(strategy: str, arrivals: dict[str, list[Dataset]], *, until: float,
                queries: tuple[str, ...] = ("q",)) -> ScalingRun:
    """Run ``arrivals`` with ``strategy`` deciding every :data:`EVERY_S` s; fallback off, so a strategy that
    raises or answers nothing fails the run (:class:`pacer.scaler.ScalingError`)."""
    clock = ManualClock()
    pm = get_plugin_manager()
    controller = Controller(clock=clock, cores=INITIAL, devices=Devices(cpu_cores=INITIAL), plugin_manager=pm,
                            timer=None)
    for query_id in queries:
        controller.add_query(make_query("lr2", query_id=query_id, deadline=10.0), admission="asap")
    scaler = Scaler(strategy, plugin_manager=pm, executors=EXECUTORS, initial=INITIAL, every_s=EVERY_S,
                    fallback=False)
    run = ScalingRun(scaler)
    held = {"executors": INITIAL}

    def tick(now: float) -> None:
        wanted = scaler.decide(controller, running=held["executors"], now=now)
        run.decisions.append((now, wanted))
        held["executors"] = wanted
        controller.resize(wanted * scaler.cores_per_executor)
        scaler.observe(now, running=wanted, held=wanted)

    drive(controller, clock, arrivals, until=until, tick=tick, tick_every_s=EVERY_S)
    return run


class ScalingConformance:
    """Every scaling strategy: answers at every turn on any load, the same way each time, and keeps still on steady
    traffic."""

    decision = "scaling"
    strategies: ClassVar[tuple[str, ...] | None] = None

    def test_answers_on_any_load(self, strategy: str) -> None:
        """Before any batch measured, idle, steady, and with a backlog many times what the cores drain: an answer
        at every turn (one that raises or answers nothing fails the run; the Scaler clamps to the bounds)."""
        loads: dict[str, dict[str, list[Dataset]]] = {
            "idle": {"q": []},
            "steady": {"q": steady_arrivals("q", start=0, end=60)},
            "backlog": {"q": steady_arrivals("q", start=0, end=60, nbytes=2_000_000, rows=30_000)},
        }
        for name, arrivals in loads.items():
            run = scaling_run(strategy, arrivals, until=90)
            assert [t for t, _ in run.decisions] == [EVERY_S * i for i in range(19)], name

    def test_several_queries_and_none(self, strategy: str) -> None:
        """Three queries at once, and a runtime with none registered yet."""
        three = {q: steady_arrivals(q, start=0, end=40) for q in ("a", "b", "c")}
        assert scaling_run(strategy, three, until=60, queries=("a", "b", "c")).decisions
        assert scaling_run(strategy, {}, until=20, queries=()).decisions

    def test_deterministic(self, strategy: str) -> None:
        arrivals = {"q": steady_arrivals("q", start=0, end=60, nbytes=400_000, rows=6000)}
        first = scaling_run(strategy, arrivals, until=90)
        second = scaling_run(strategy, arrivals, until=90)
        assert first.decisions == second.decisions

    def test_keeps_still_on_steady_traffic(self, strategy: str) -> None:
        """After its first minute, at most one change per minute on traffic that does not change."""
        arrivals = {"q": steady_arrivals("q", start=0, end=300, nbytes=400_000, rows=6000)}
        run = scaling_run(strategy, arrivals, until=300)
        assert run.changes_after(60.0) <= 4, run.scaler.changes


__all__ = ["EXECUTORS", "ScalingConformance", "ScalingRun", "scaling_run"]
