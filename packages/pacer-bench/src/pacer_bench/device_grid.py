"""``pacer bench device-sweep --grid``: placement judged on a grid of workloads, traffic, rates, GPUs, seeds and
overload policies, per row processed (simulated).

Every cell is one workload × traffic pattern × rate × number of modelled GPUs × seed × overload policy. In a cell
every placement of :data:`PLACEMENTS` runs the same query under the same admission (``asap``: Spark's default
trigger, every batch takes what arrived while the previous one ran), the same traffic and the same deadline (the
workload's window slide). A placement strategy is judged against the **better single device** of the cell, the one
of ``cpu-only`` and ``gpu-only`` with the lower engine time per row processed:

- ``x_best``: its engine seconds per row processed ÷ the better single device's (the bound is :data:`BOUND`);
- ``miss_points``: its rows-weighted deadline-miss ratio minus the better single device's, in percentage points
  (shed rows count as missed; the bound is :data:`MISS_POINTS`).

Per row, because under ``asap`` each placement forms batches of its own sizes (and under ``shed`` processes its own
share of the data), so per batch or in total the placements process different things.

Rates are multiples of the **CPU's capacity** of the workload (:func:`cpu_capacity`): the constant rate at which one
second of data, run all on the CPU on the simulator's cores, takes one second (the largest rate that batches of one
second keep up with on the CPU). The simulator's cost model is ``pacer sim``'s default (the ``--gpu-profile`` a
``pacer run --runtime sim`` without flags runs on, :func:`default_gpu_profile`; pacer-sim's built-in curves where
NVIDIA's tools jar cannot be had, which the grid's notes then say). pacer-sim is reached through its public names
only: its runtime (:data:`pacer_sim.SIM_RUNTIME`, the :class:`pacer.Runtime` protocol and the
:class:`pacer_sim.Simulation` it builds) and :func:`pacer_sim.batch_work`.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pacer import Device

#: The grid's axes (the issue's): workloads, traffic patterns, rates as multiples of the CPU's capacity, GPUs,
#: overload policies.
WORKLOADS = ("lr1", "lr3", "cm1", "cm2")
TRAFFICS = ("constant", "wave", "random", "binary")
RATE_FACTORS = (0.1, 0.3, 1.0, 2.0, 3.0)
GPUS = (1, 2)
OVERLOADS = ("keep", "shed")
#: The single devices a cell's better one is taken from, and the strategies judged against it.
SINGLE_DEVICES = ("cpu-only", "gpu-only")
STRATEGIES = ("dstream", "lmstream")
PLACEMENTS = SINGLE_DEVICES + STRATEGIES
#: Placements seeded from the cells' own cost profile (the machine the paper's "pre-experimental results" would come
#: from): LMStream's InfPT_0 is the query's crossover under it (``inflection_profile``, ``pacer_lmstream.profile``).
PROFILED = ("lmstream",)
#: The admission every placement runs under.
ADMISSION = "asap"
#: Seconds of traffic per cell (``--quick``: :data:`QUICK_DURATION`); every cell then drains its backlog.
DURATION = 120.0
QUICK_DURATION = 60.0
#: The bounds: engine time per row ≤ BOUND × the better single device's; misses ≤ its + MISS_POINTS points.
BOUND = 1.05
MISS_POINTS = 1.0
#: Cores of every cell (the simulator's default, the machine pacer is developed on).
CORES = 2


@dataclass(frozen=True)
class Cell:
    """One point of the grid; ``rate`` in rows/s (``factor`` × the workload's CPU capacity).

    ``seeds``: the repetitions a condition (:func:`conditions`) sums over; empty for one run of ``seed``.
    """

    workload: str
    traffic: str
    factor: float
    rate: float
    gpus: int
    seed: int
    overload: str
    seeds: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        """``cm2 binary 3x-cpu gpus=1 seed=7 shed`` (a condition: ``seeds=7,8,9``)."""
        runs = "seeds=" + ",".join(map(str, self.seeds)) if self.seeds else f"seed={self.seed}"
        return f"{self.workload} {self.traffic} {self.factor:g}x-cpu gpus={self.gpus} {runs} {self.overload}"


@dataclass(frozen=True)
class Outcome:
    """What one placement did in one cell."""

    placement: str
    engine_s: float
    rows_processed: int
    rows_in: int
    miss_ratio: float
    batches: int
    datasets_shed: int
    gpu_share: float
    drained: bool

    @property
    def per_row_us(self) -> float:
        """Engine microseconds per row processed (inf when nothing was processed)."""
        return 1e6 * self.engine_s / self.rows_processed if self.rows_processed else float("inf")


@dataclass(frozen=True)
class Judged:
    """One strategy in one cell, against the cell's better single device."""

    cell: Cell
    strategy: str
    best: str
    x_best: float
    miss_points: float
    outcomes: dict[str, Outcome]

    @property
    def holds(self) -> bool:
        """Within :data:`BOUND` per row and :data:`MISS_POINTS` of the better single device's misses."""
        return self.x_best <= BOUND and self.miss_points <= MISS_POINTS

    @property
    def severity(self) -> float:
        """How far past the bounds, for ranking cells: the larger of the ratio's excess over :data:`BOUND` and the
        misses' excess over :data:`MISS_POINTS` (points / 100); <= 0 within both."""
        return max(self.x_best / BOUND - 1.0, (self.miss_points - MISS_POINTS) / 100.0)


def default_gpu_profile() -> str:
    """The GPU profile ``pacer run --runtime sim`` runs on without flags (:data:`pacer_sim.DEFAULT_GPU_PROFILE`)."""
    from pacer_sim import DEFAULT_GPU_PROFILE

    return DEFAULT_GPU_PROFILE


@functools.cache
def cost_model(gpus: int) -> tuple[Any, str | None]:
    """``pacer sim``'s default cost model for ``gpus`` GPUs, and the warning when its GPU profile was not had (built
    once per process: every cell asks which profile it runs on). Read from the :class:`pacer_sim.Simulation` the
    simulator builds for a run on :func:`default_gpu_profile`."""
    from pacer import QueryRun, RunConfig
    from pacer_sim import SIM_RUNTIME

    config = RunConfig((QueryRun("lr1"),), duration=1.0, cores=CORES, gpus=gpus).with_options(
        SIM_RUNTIME.name, gpu_profile=default_gpu_profile())
    sim = SIM_RUNTIME.build(config)
    return sim.cost_model, sim.extra_config["gpu_profile"]["warning"] or None


def cpu_capacity(workload: str, model: Any, cores: int = CORES) -> float:
    """Rows/s the CPU keeps up with in batches of one second: the rate at which a batch of one second of data, run
    all on the CPU alone on ``cores`` cores (no noise), takes one second. Found by bisection on the cost model."""
    from pacer_sim import alone_seconds
    from pacer_workloads import WORKLOADS as KNOWN
    from pacer_workloads import bytes_per_row, make_query

    spec = make_query(workload, query_id=workload, partitions=cores)
    per_row = bytes_per_row(KNOWN[workload].stream)
    quiet = replace(model, noise=0.0)
    on_cpu: dict[str, Device] = {op.id: "cpu" for op in spec.dag.operators}

    def seconds(rows: float) -> float:
        return alone_seconds(quiet, spec, on_cpu, int(rows * per_row), cores=cores, gpus=0)

    low, high = 1.0, 1e8
    for _ in range(80):
        mid = (low * high) ** 0.5
        low, high = (mid, high) if seconds(mid) <= 1.0 else (low, mid)
    return low


def cells(*, seeds: Sequence[int], gpus: Sequence[int] = GPUS, workloads: Sequence[str] = WORKLOADS,
          traffics: Sequence[str] = TRAFFICS, factors: Sequence[float] = RATE_FACTORS,
          overloads: Sequence[str] = OVERLOADS) -> list[Cell]:
    """Every cell of the grid, rates from each workload's CPU capacity (:func:`cpu_capacity`)."""
    model, _ = cost_model(max(gpus))
    capacity = {w: cpu_capacity(w, model) for w in workloads}
    return [Cell(w, t, f, round(f * capacity[w], 1), g, s, o)
            for w in workloads for t in traffics for f in factors for g in gpus for s in seeds for o in overloads]


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The Controller's overload warnings and the runtime's notes are per run; a grid of runs would drown in them."""
    logger = logging.getLogger("pacer.controller")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            yield
    finally:
        logger.setLevel(level)


def run_cell(cell: Cell, duration: float) -> dict[str, Outcome]:
    """Every placement of :data:`PLACEMENTS` in ``cell`` (simulated, in this process)."""
    from pacer import QueryRun, RunConfig
    from pacer.plugins import get_plugin_manager
    from pacer_sim import BUILTIN_PROFILE, SIM_RUNTIME

    pm = get_plugin_manager()
    out: dict[str, Outcome] = {}
    # the profile the cells really run on: the built-in curves where the GPU profile's jar could not be had
    profile = default_gpu_profile() if cost_model(cell.gpus)[1] is None else BUILTIN_PROFILE
    for placement in PLACEMENTS:
        query = QueryRun(cell.workload, traffic=cell.traffic, rate=cell.rate, admission=ADMISSION, placement=placement,
                         placement_params={"inflection_profile": profile} if placement in PROFILED else {})
        config = RunConfig((query,), duration=duration, seed=cell.seed, cores=CORES, gpus=cell.gpus,
                           overload=cell.overload).with_options(SIM_RUNTIME.name, gpu_profile=default_gpu_profile())
        with quiet():
            report = SIM_RUNTIME.run(config, plugin_manager=pm).report
        q = next(iter(report["queries"].values()))
        out[placement] = Outcome(
            placement, float(q["cost"]["engine_s"]), int(q["rows_processed"]), int(q["rows_in"]),
            float(q["deadline_miss_ratio"]), int(q["batches"]), int(q["datasets_shed"]),
            float(q["gpu_operator_ratio"]), bool(report.get("drained", True)),
        )
    return out


def judge(cell: Cell, outcomes: dict[str, Outcome]) -> list[Judged]:
    """Each strategy of :data:`STRATEGIES` in ``cell`` against the better single device (lower engine time per row)."""
    best = min(SINGLE_DEVICES, key=lambda p: outcomes[p].per_row_us)
    base = outcomes[best]
    return [Judged(cell, s, best, outcomes[s].per_row_us / base.per_row_us,
                   100.0 * (outcomes[s].miss_ratio - base.miss_ratio), outcomes) for s in STRATEGIES]


def _summed(outcomes: Sequence[Outcome]) -> Outcome:
    """One placement's runs of a condition as one: engine time, rows, batches and shed datasets summed, misses
    weighted by each run's rows in, the GPU share averaged, drained only if every run drained."""
    rows_in = sum(o.rows_in for o in outcomes)
    misses = (sum(o.miss_ratio * o.rows_in for o in outcomes) / rows_in if rows_in
              else sum(o.miss_ratio for o in outcomes) / len(outcomes))
    return Outcome(outcomes[0].placement, sum(o.engine_s for o in outcomes), sum(o.rows_processed for o in outcomes),
                   rows_in, misses, sum(o.batches for o in outcomes), sum(o.datasets_shed for o in outcomes),
                   sum(o.gpu_share for o in outcomes) / len(outcomes), all(o.drained for o in outcomes))


def conditions(judged: Sequence[Judged]) -> list[Judged]:
    """The grid judged per **condition** (a cell without its seed) over its repetitions: every placement's runs of
    the condition summed (:func:`_summed`), then judged as one cell (:func:`judge`).

    Per seed, a placement's engine time per row under overload depends on where the batch boundaries fall, so the
    single devices can swap places from seed to seed while costing nearly the same per row (``tests/test_device_grid.py``
    has such a condition). Within :data:`BOUND` of
    the better one on every seed would take foreseeing the boundaries, not placing well; summed over the
    repetitions, that noise averages out and what the devices cost remains."""
    runs: dict[tuple[str, str, float, int, str], tuple[Cell, dict[int, dict[str, Outcome]]]] = {}
    for j in judged:
        c = j.cell
        runs.setdefault((c.workload, c.traffic, c.factor, c.gpus, c.overload), (c, {}))[1][c.seed] = j.outcomes
    out: list[Judged] = []
    for first, by_seed in runs.values():
        seeds = tuple(sorted(by_seed))
        summed = {p: _summed([by_seed[s][p] for s in seeds]) for p in by_seed[seeds[0]]}
        out += judge(replace(first, seed=seeds[0], seeds=seeds), summed)
    return out


def _run_one(args: tuple[Cell, float]) -> tuple[Cell, dict[str, Outcome]]:
    return args[0], run_cell(*args)


def run_grid(grid: Sequence[Cell], *, duration: float, jobs: int = 1,
             progress: Any = None) -> list[Judged]:
    """Run every cell (``jobs`` processes; 1: in this process) and judge it; ``progress(done, total)`` after each."""
    judged: list[Judged] = []
    work = [(c, duration) for c in grid]
    if jobs <= 1:
        results: Iterator[tuple[Cell, dict[str, Outcome]]] = map(_run_one, work)
        for done, (cell, outcomes) in enumerate(results, 1):
            judged += judge(cell, outcomes)
            if progress is not None:
                progress(done, len(work))
        return judged
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for done, (cell, outcomes) in enumerate(pool.map(_run_one, work, chunksize=4), 1):
            judged += judge(cell, outcomes)
            if progress is not None:
                progress(done, len(work))
    return judged


def default_jobs() -> int:
    """Processes for the grid: the machine's cores, at most 4."""
    return max(1, min(4, os.cpu_count() or 1))


def worst(judged: Sequence[Judged], strategy: str) -> tuple[Judged, Judged]:
    """The strategy's worst cell per row (highest ``x_best``) and its worst cell in misses (most points above)."""
    mine = [j for j in judged if j.strategy == strategy]
    return max(mine, key=lambda j: (j.x_best, j.miss_points)), max(mine, key=lambda j: (j.miss_points, j.x_best))
