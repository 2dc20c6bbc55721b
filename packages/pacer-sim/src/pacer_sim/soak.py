"""Soak runs: does pacer's driver-side state stay flat over a long run? ``python -m pacer_sim.soak``.

Two drivers, both measuring, at checkpoints over the run, the Python heap (``tracemalloc``: what the
process allocated and still holds) or the resident set size, and the p99 of pacer's decision time (the
wall time of ``Controller.poll``, over the checkpoint's segment):

- :func:`soak_simulation`: a :class:`pacer_sim.Simulation` of one paced query (the simulator's clock,
  traffic and cost model; one dataset per simulated second);
- :func:`soak_controller`: the Controller alone under a synthetic stream of many datasets per second
  (``--rate``), each batch finishing after a fixed + per-byte time, so millions of datasets fit in minutes.

The command prints memory and p99 decision time at the first and the last checkpoint, and their slope per
hour of simulated time (least squares over the checkpoints after the first quarter, once bounded windows
are full).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pacer import Controller, Dataset, MicroBatch, Operator, OperatorDAG, QuerySpec
from pacer.clock import ManualClock
from pacer.durations import flag_seconds
from pacer.metrics import percentile


@dataclass(frozen=True)
class Checkpoint:
    """The run at simulated time ``t``: datasets so far, memory (bytes) and the p99 poll time of the segment."""

    t: float
    datasets: int
    memory_bytes: int
    poll_p99_us: float
    polls: int


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    except OSError:  # pragma: no cover - not Linux
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def memory_now(mode: str) -> int:
    """Bytes held now: the traced Python heap after a collection (``heap``) or the resident set (``rss``)."""
    gc.collect()
    return tracemalloc.get_traced_memory()[0] if mode == "heap" else _rss_bytes()


class _Probe:
    """Times every poll of a Controller (in CPU time of the polling thread: a machine busy with other processes
    stretches wall time, not the work a poll does) and takes a checkpoint whenever the clock passes the next mark."""

    def __init__(self, controller: Controller, clock: Callable[[], float], marks: Sequence[float], mode: str,
                 datasets: Callable[[], int]) -> None:
        self.marks = list(marks)
        self.mode = mode
        self.clock = clock
        self.datasets = datasets
        self.segment: list[float] = []  # this segment's poll times (cleared at each checkpoint: bounded)
        self.checkpoints: list[Checkpoint] = []
        self._poll = controller.poll
        controller.poll = self.poll  # type: ignore[method-assign]

    def poll(self, query_id: str) -> MicroBatch | None:
        t0 = time.thread_time()  # this thread's CPU time: what the poll computed, not how long others held the cores
        batch = self._poll(query_id)
        self.segment.append(time.thread_time() - t0)
        if self.marks and self.clock() >= self.marks[0]:
            self.checkpoint(self.marks.pop(0))
        return batch

    def checkpoint(self, t: float) -> None:
        self.checkpoints.append(Checkpoint(t, self.datasets(), memory_now(self.mode),
                                           1e6 * percentile(self.segment, 99), len(self.segment)))
        self.segment.clear()


def soak_simulation(hours: float = 4.0, *, admission: str = "static", admission_params: dict[str, Any] | None = None,
                    checkpoints: int = 8, mode: str = "heap", poll_interval: float = 0.1,
                    rate: float = 1000.0) -> list[Checkpoint]:
    """Simulate one ``lr2`` query under a paced ``admission`` for ``hours`` of traffic; checkpoints evenly spaced.

    :param mode: ``heap`` (tracemalloc, started here if it is not) or ``rss``.
    :param poll_interval: the simulator's poll interval (coarser than its default to run faster).
    """
    from pacer_sim.engine import Simulation

    duration = 3600.0 * hours
    sim = Simulation(poll_interval=poll_interval)
    qid = sim.add_query("lr2", rate=rate, admission=admission,
                        admission_params=admission_params if admission_params is not None else {"interval": 1.0},
                        duration=duration)
    marks = [duration * (i + 1) / checkpoints - 2.0 for i in range(checkpoints)]
    started = _start(mode)
    try:
        probe = _Probe(sim.controller, sim.clock, marks, mode,
                       lambda: sim.controller.ledger.counts.get(qid, {}).get("arrived", 0))
        sim.run(duration, drain=60.0)
    finally:
        _stop(started)
    return probe.checkpoints


def soak_controller(datasets: int = 2_000_000, *, rate: float = 200.0, admission: str = "static",
                    admission_params: dict[str, Any] | None = None, checkpoints: int = 10, mode: str = "heap",
                    fixed_s: float = 0.2, per_mb_s: float = 0.1, dataset_bytes: int = 10_000) -> list[Checkpoint]:
    """Feed one query ``datasets`` datasets at ``rate`` per simulated second, polling at every arrival.

    A batch takes ``fixed_s + per_mb_s x MB`` simulated seconds (defaults: 0.2 s + 0.1 s/MB, 2 MB/s offered: a
    fifth of what the query can serve). Nothing is kept per dataset outside the Controller.
    """
    clock = ManualClock()
    controller = Controller(clock=clock, cores=2, timer=None)
    dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("agg#1", "aggregate"), Operator("sink#2", "sink"))
    controller.add_query(QuerySpec(id="q", dag=dag, deadline=10.0), admission=admission,
                         admission_params=admission_params if admission_params is not None else {"interval": 1.0})
    duration = datasets / rate
    marks = [duration * (i + 1) / checkpoints - 2.0 / rate for i in range(checkpoints)]
    started = _start(mode)
    try:
        probe = _Probe(controller, lambda: clock.now, marks, mode, lambda: controller.ledger.counts["q"]["arrived"])
        running: tuple[str, float] | None = None
        for n in range(datasets):
            clock.now = (n + 1) / rate
            if running is not None and running[1] <= clock.now:
                controller.complete(running[0], completed_at=running[1])
                running = None
            controller.arrive("q", Dataset(f"q-{n}", clock.now, dataset_bytes, 10))
            if running is None:
                batch = controller.poll("q")
                if batch is not None:
                    controller.start(batch.id)
                    running = (batch.id, clock.now + fixed_s + per_mb_s * batch.bytes / 1e6)
        if probe.marks:
            probe.checkpoint(probe.marks.pop())
    finally:
        _stop(started)
    return probe.checkpoints


def _start(mode: str) -> bool:
    if mode == "heap" and not tracemalloc.is_tracing():
        tracemalloc.start()
        return True
    return False


def _stop(started: bool) -> None:
    if started:
        tracemalloc.stop()


def slope_per_hour(points: Sequence[Checkpoint], value: Callable[[Checkpoint], float]) -> float:
    """Least-squares slope of ``value`` per hour of simulated time over the checkpoints after the first quarter."""
    tail = [p for p in points if p.t >= points[-1].t / 4] if len(points) > 2 else list(points)
    if len(tail) < 2:
        return 0.0
    xs = [p.t / 3600.0 for p in tail]
    ys = [value(p) for p in tail]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0


def summary(points: Sequence[Checkpoint], wall_s: float) -> dict[str, Any]:
    """Start and end figures, slopes per hour of simulated time, and every checkpoint."""
    first, last = points[0], points[-1]
    return {
        "wall_s": wall_s, "simulated_h": last.t / 3600.0, "datasets": last.datasets,
        "memory_mb_start": first.memory_bytes / 1e6, "memory_mb_end": last.memory_bytes / 1e6,
        "memory_mb_per_hour": slope_per_hour(points, lambda p: p.memory_bytes / 1e6),
        "poll_p99_us_start": first.poll_p99_us, "poll_p99_us_end": last.poll_p99_us,
        "poll_p99_us_per_hour": slope_per_hour(points, lambda p: p.poll_p99_us),
        "checkpoints": [asdict(p) for p in points],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pacer_sim.soak [--driver controller|sim] ...``: run a soak and print its figures."""
    p = argparse.ArgumentParser(prog="python -m pacer_sim.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--driver", choices=("controller", "sim"), default="controller",
                   help="controller: a synthetic stream of --rate datasets/s (millions in minutes; default); "
                        "sim: the simulator, one dataset per second, for --hours")
    p.add_argument("--datasets", type=int, default=2_000_000, help="datasets fed (controller driver; default 2000000)")
    p.add_argument("--rate", type=float, default=200.0, help="datasets per simulated second (controller; default 200)")
    p.add_argument("--hours", type=float, default=4.0, help="hours of simulated traffic (sim driver; default 4)")
    p.add_argument("--admission", default="static", help="a paced admission strategy (default static)")
    p.add_argument("--interval", type=flag_seconds, default=1.0, help="its batch interval, seconds (default 1)")
    p.add_argument("--checkpoints", type=int, default=10, help="checkpoints over the run (default 10)")
    p.add_argument("--memory", choices=("heap", "rss"), default="rss",
                   help="rss (default: cheap) or heap (tracemalloc: exact Python allocations, about 2x slower)")
    p.add_argument("--json", metavar="FILE", help="also write the figures here")
    args = p.parse_args(argv)
    params = {"interval": args.interval} if args.admission in ("static", "pid") else {}
    t0 = time.perf_counter()
    if args.driver == "controller":
        points = soak_controller(args.datasets, rate=args.rate, admission=args.admission, admission_params=params,
                                 checkpoints=args.checkpoints, mode=args.memory)
    else:
        points = soak_simulation(args.hours, admission=args.admission, admission_params=params,
                                 checkpoints=args.checkpoints, mode=args.memory)
    out = summary(points, time.perf_counter() - t0)
    for c in points:
        print(f"t={c.t / 3600:7.2f} h  datasets={c.datasets:>9}  memory={c.memory_bytes / 1e6:8.2f} MB  "
              f"poll p99={c.poll_p99_us:8.1f} us ({c.polls} polls)")
    print(f"memory ({args.memory}): {out['memory_mb_start']:.2f} MB at start, {out['memory_mb_end']:.2f} MB at end, "
          f"{out['memory_mb_per_hour']:+.3f} MB per simulated hour")
    print(f"poll p99: {out['poll_p99_us_start']:.1f} us at start, {out['poll_p99_us_end']:.1f} us at end, "
          f"{out['poll_p99_us_per_hour']:+.2f} us per simulated hour")
    print(f"{out['datasets']} datasets, {out['simulated_h']:.2f} simulated hours in {out['wall_s']:.1f} s wall")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
