"""Shared fixtures of pacer's pytest-benchmark suite, and the ratios to the baselines.

Every benchmark belongs to a group (``admission``, ``poll``, ``placement-50``, ``simulator``...) in
which one member is the baseline (``asap`` for admission, ``cpu-only`` for placement). At the end of
the run each benchmark's median is divided by its group's baseline median, measured in the same run (the
median, because microsecond calls have a long tail of scheduler noise): the
ratios are printed in a table and written into the JSON (``extra_info.ratio_to_baseline`` per
benchmark, and ``pacer_ratios`` at the top level) — wall-clock figures vary between machines, the
ratios much less.

Run: ``nox -s bench`` or ``python -m pytest packages/pacer-bench/benchmarks --benchmark-only``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pacer import Controller, Dataset, Devices, MicroBatch, QuerySpec
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager


@dataclass
class _Measured:
    group: str
    name: str
    median_s: float
    baseline: bool


_MEASURED: list[_Measured] = []


@pytest.fixture
def ratio_bench(benchmark: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """``ratio_bench(group, baseline=False, per=None)`` returns pytest-benchmark's fixture filed under ``group``.

    After the test its median (divided by ``per()`` when given, e.g. the simulator's event count: time per
    event) is recorded, so that the ratio to the group's baseline can be computed at the end.
    """
    chosen: dict[str, Any] = {}

    def use(group: str, baseline: bool = False, per: Callable[[], float] | None = None) -> Any:
        benchmark.group = group
        benchmark.extra_info["baseline"] = baseline
        chosen.update(group=group, baseline=baseline, per=per)
        return benchmark

    yield use
    stats = getattr(benchmark, "stats", None)
    if chosen and stats is not None:
        divisor = chosen["per"]() if chosen["per"] else 1.0
        _MEASURED.append(_Measured(chosen["group"], request.node.name, stats.stats.median / divisor, chosen["baseline"]))


@pytest.fixture
def warmed() -> Callable[..., tuple[Controller, ManualClock]]:
    """:func:`warmed_controller`."""
    return warmed_controller


def ratios() -> dict[str, dict[str, float]]:
    """Group -> benchmark name -> median ÷ the group's baseline median (groups without a baseline are left out)."""
    out: dict[str, dict[str, float]] = {}
    for group in sorted({m.group for m in _MEASURED}):
        members = [m for m in _MEASURED if m.group == group]
        base = next((m for m in members if m.baseline), None)
        if base is None or base.median_s <= 0:
            continue
        out[group] = {m.name: m.median_s / base.median_s for m in members}
    return out


def pytest_benchmark_update_json(config: Any, benchmarks: Any, output_json: dict[str, Any]) -> None:
    """Add the ratios to pytest-benchmark's JSON."""
    table = ratios()
    output_json["pacer_ratios"] = table
    for bench in output_json.get("benchmarks", []):
        ratio = table.get(bench.get("group") or "", {}).get(bench["name"])
        if ratio is not None:
            bench.setdefault("extra_info", {})["ratio_to_baseline"] = round(ratio, 4)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the ratios after pytest-benchmark's own tables."""
    table = ratios()
    if not table:
        return
    terminalreporter.section("pacer: median time as a ratio to the group's baseline (same run)")
    for group, members in table.items():
        for name, ratio in sorted(members.items(), key=lambda kv: kv[1]):
            terminalreporter.write_line(f"{group:<16} {name:<60} {ratio:8.3f}x")


# ---------------------------------------------------------------------------- shared set-ups


def warmed_controller(spec: QuerySpec, *, admission: str = "asap", placement: str = "cpu-only",
                      batches: int = 30) -> tuple[Controller, ManualClock]:
    """A Controller whose query has ``batches`` completed one-second batches in its history, and one dataset
    waiting: the state a strategy decides in during a steady run."""
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, devices=Devices(cpu_cores=2, gpus=1),
                            plugin_manager=get_plugin_manager(), timer=None)
    controller.add_query(spec, admission=admission, placement=placement)
    for i in range(batches):
        clock.now = float(i)
        controller.arrive(spec.id, Dataset(f"{spec.id}-{i}", clock.now, 65_000, 1000))
        batch = controller.poll(spec.id)
        if batch is not None:
            controller.start(batch.id)
            clock.now += 0.4
            controller.complete(batch.id)
    clock.now = float(batches)
    controller.arrive(spec.id, Dataset(f"{spec.id}-{batches}", clock.now, 65_000, 1000))
    return controller, clock


def admitted_batch(controller: Controller, query_id: str) -> MicroBatch:
    """The batch asap admission forms from the waiting data (placed, queued)."""
    batch = controller.poll(query_id)
    if batch is None:
        raise AssertionError("asap admission admitted nothing")
    return batch
