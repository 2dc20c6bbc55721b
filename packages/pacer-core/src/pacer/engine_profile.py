"""What a query's batches cost one engine, measured there: the profile ``pacer calibrate --runtime spark`` writes.

A batch costs the engine a fixed time whatever its size (on Spark: planning, the offset log, task launch and
commit) and a part that grows with its bytes; its tasks hold cores for a fixed amount and a per-byte amount.
Measured from batches the calibration sized itself:

* **fixed**: the median engine seconds (``trigger_s``) and busy core-seconds of *tiny* batches (a dataset of a
  few rows), and, apart, the mean of the engine's own *no-data* batches (Spark's, after a watermark moved);
* **per byte and per row**: at *large* batches, the cost beyond the fixed part per byte (least squares through
  the fixed part), in engine seconds on the calibration's task slots and in busy core-seconds;
* **task waves**: a batch's per-byte part runs in ``ceil(partitions / slots)`` waves of tasks, so on other slots
  it takes ``waves(slots) / waves(calibrated slots)`` times the calibrated time (:meth:`EngineProfile.engine_s`);
* **executor start-up**: seconds from asking the cluster manager for an executor to its registering (None where
  the engine has no executors to start, e.g. Spark's local mode);
* **a query's first batch**: what it costs beyond what its size costs later (its plan compiled, its state stores
  opened), the median over the calibration's steps of each new query's first batch (``first_batch_s`` engine
  seconds, ``first_batch_core_s`` busy core-seconds; None where none was measured);
* **what the simulator reads** (pacer-sim's ``--calibrated``): ``fixed_task_share``, the share of a tiny batch's
  engine time each of its tasks runs (``fixed_core_s / (partitions x fixed_s)``: the rest is the driver's and holds
  no core); ``executor_warmup_s`` (how much longer a new executor's first tasks run) and ``state_reload_s`` (how much
  longer a task runs that loads its state again after an executor left), None where not measured, with the reason in
  ``not_measured`` (the simulator then keeps its own default and says so).

Its users: :meth:`pacer.service_time.ServiceTimeModel.take_prior` (a query's service model starts from it instead
of from nothing), the deadline scaler (cost per byte and fixed part before a query measured its own, executor
start-up before one was observed) and pacer-bench's bounds (the engine's cost model where the runs' own batches
cannot separate fixed and per-byte cost). :data:`SCHEMA` is the file's form; :func:`load` refuses others.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

#: The form of a profile file (``{"schema": "pacer.engine-profile/1", ...}``).
SCHEMA = "pacer.engine-profile/1"


class EngineProfileError(ValueError):
    """A profile file that cannot be read, is of another form, or holds values that are not costs."""


@dataclass(frozen=True)
class CostPoint:
    """One measured batch: its ``kind`` (``tiny`` or ``large``; a running query's ``first`` and ``batch``),
    ``rows``, ``bytes``, the engine's seconds on it (``trigger_s``), its tasks' busy core-seconds (None where not
    measured) and, where known, its ``tasks`` and the ``datasets`` it took (a running query's: observe mode)."""

    kind: str
    rows: int
    bytes: int
    trigger_s: float
    busy_core_s: float | None
    tasks: int | None = None
    datasets: int | None = None


@dataclass(frozen=True)
class EngineProfile:
    """One query's measured costs on one engine (module docstring: what each figure is and how it is measured).

    :param runtime: where it was measured (``spark``); ``workload``: the query (None: any query on it).
    :param partitions: the batches' tasks per stage; ``slots``: the task slots they ran on.
    :param fixed_s: engine seconds of a tiny batch; ``fixed_core_s``: its busy core-seconds.
    :param engine_s_per_byte: engine seconds per byte beyond the fixed part, on ``slots`` slots.
    :param core_s_per_byte: busy core-seconds per byte beyond the fixed part; ``core_s_per_row`` per row.
    :param largest_bytes: the largest batch measured (a model extrapolates beyond it).
    :param no_data_s: engine seconds of a no-data batch (None: none ran); ``no_data_core_s`` its core-seconds.
    :param executor_startup_s: seconds to start an executor (None: not measured here).
    :param fixed_task_share: the share of ``fixed_s`` each task of a tiny batch runs (module docstring; None in a file
        written before it was recorded: derived from ``fixed_core_s``, ``partitions`` and ``fixed_s``).
    :param executor_warmup_s: seconds a new executor's first task on a core runs longer (None: not measured).
    :param state_reload_s: seconds a stateful task runs longer when it loads its state again (None: not measured).
    :param not_measured: why each figure that is None was not measured (``{"state_reload_s": "local mode ..."}``).
    :param first_batch_s: engine seconds a query's first batch takes beyond its size's cost (None: not measured);
        ``first_batch_core_s`` its busy core-seconds beyond it.
    :param rms_s: root mean square of the model's residuals on the large batches (its noise), seconds.
    """

    runtime: str
    workload: str | None
    partitions: int
    slots: int
    fixed_s: float
    fixed_core_s: float
    engine_s_per_byte: float
    core_s_per_byte: float
    core_s_per_row: float
    largest_bytes: int
    no_data_s: float | None = None
    no_data_core_s: float | None = None
    executor_startup_s: float | None = None
    fixed_task_share: float | None = None
    executor_warmup_s: float | None = None
    state_reload_s: float | None = None
    not_measured: Mapping[str, str] = field(default_factory=dict, hash=False)
    first_batch_s: float | None = None
    first_batch_core_s: float | None = None
    rms_s: float = 0.0
    task_core_s: float | None = None
    batch_core_s: float | None = None
    tasks_per_dataset: float | None = None
    core_s_per_byte_se: float | None = None
    points: tuple[CostPoint, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        if self.partitions < 1 or self.slots < 1:
            raise EngineProfileError(f"partitions and slots must be >= 1, got {self.partitions} and {self.slots}")
        for name in ("fixed_s", "fixed_core_s", "engine_s_per_byte", "core_s_per_byte", "core_s_per_row", "rms_s",
                     "no_data_s", "no_data_core_s", "executor_startup_s", "fixed_task_share", "executor_warmup_s",
                     "state_reload_s", "first_batch_s", "first_batch_core_s", "task_core_s", "batch_core_s",
                     "tasks_per_dataset", "core_s_per_byte_se"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise EngineProfileError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.fixed_task_share is None:  # a file from before it was recorded: the same figure, from its parts
            object.__setattr__(self, "fixed_task_share", task_share(self.fixed_core_s, self.fixed_s, self.partitions))
        elif self.fixed_task_share > 1:
            raise EngineProfileError(f"fixed_task_share is a share of fixed_s: at most 1, got {self.fixed_task_share}")
        object.__setattr__(self, "not_measured", dict(self.not_measured))
        if self.largest_bytes < 0:
            raise EngineProfileError(f"largest_bytes must be >= 0, got {self.largest_bytes}")

    @staticmethod
    def waves(partitions: int, slots: float) -> int:
        """Rounds of tasks a stage of ``partitions`` tasks runs in on ``slots`` task slots."""
        return math.ceil(partitions / max(1.0, slots))

    def engine_s(self, nbytes: float, slots: float | None = None) -> float:
        """Engine seconds of a batch of ``nbytes`` on ``slots`` task slots (default: the calibration's): the fixed
        part, and the per-byte part scaled by the task waves there against the calibration's."""
        scale = self.waves(self.partitions, slots or self.slots) / self.waves(self.partitions, self.slots)
        return self.fixed_s + self.engine_s_per_byte * max(0.0, nbytes) * scale

    @property
    def relative_rms(self) -> float:
        """:attr:`rms_s` over the mean engine time of the large batches: how far the linear model is from them
        (a stateful join whose cost grows with its state, not its batch, is far; inf without large batches)."""
        large = [p.trigger_s for p in self.points if p.kind == "large"]
        mean = sum(large) / len(large) if large else 0.0
        return self.rms_s / mean if mean > 0 else math.inf

    @property
    def wall_s(self) -> float:
        """The part of a tiny batch's engine time that holds no cores (the driver's planning and commits): its time
        less its core-seconds spread over the slots its tasks could use (``min(slots, partitions)``)."""
        return max(0.0, self.fixed_s - self.fixed_core_s / min(self.slots, self.partitions))

    def core_s(self, nbytes: float) -> float:
        """Busy core-seconds of a batch of ``nbytes``: what its tasks hold cores for."""
        return self.fixed_core_s + self.core_s_per_byte * max(0.0, nbytes)

    @property
    def bytes_per_row(self) -> float | None:
        """Bytes per row of the batches its per-byte cost was fitted on (the large ones of a calibration, else a
        running query's own, :func:`fit_batches`; None without them): the measure of a row its per-byte costs are
        in, which is its source's (pacer-gen's estimate is not a Kafka record's size, nor a csv line's)."""
        sized = [p for p in self.points if p.kind == "large"] or [p for p in self.points if p.kind == "batch"]
        rows, nbytes = sum(p.rows for p in sized), sum(p.bytes for p in sized)
        return nbytes / rows if rows > 0 and nbytes > 0 else None

    def in_bytes_of(self, bytes_per_row: float) -> EngineProfile:
        """The same costs for a source that measures a row as ``bytes_per_row`` bytes: what a batch costs follows
        its rows, so the per-byte costs and the sizes measured are rescaled (itself where either measure is
        unknown)."""
        own = self.bytes_per_row
        if own is None or not (math.isfinite(bytes_per_row) and bytes_per_row > 0):
            return self
        ratio = bytes_per_row / own
        return replace(self, engine_s_per_byte=self.engine_s_per_byte / ratio,
                       core_s_per_byte=self.core_s_per_byte / ratio, largest_bytes=round(self.largest_bytes * ratio),
                       core_s_per_byte_se=None if self.core_s_per_byte_se is None else self.core_s_per_byte_se / ratio,
                       points=tuple(replace(p, bytes=round(p.bytes * ratio)) for p in self.points))

    def applies_to(self, workload: str | None) -> bool:
        """Whether it is this query's profile: measured on its workload, or on any query (``workload`` None)."""
        return self.workload is None or self.workload == workload

    def as_dict(self) -> dict[str, Any]:
        """The profile file's content (:func:`load` reads it back)."""
        doc = asdict(self)
        doc["points"] = [asdict(p) for p in self.points]
        return {"schema": SCHEMA, **doc}

    def write(self, path: str | Path) -> Path:
        """Write it as JSON to ``path`` (its folder made); returns the path."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(self.as_dict(), indent=2) + "\n")
        return out

    def describe(self) -> str:
        """One line: what a batch costs, for logs and the command's output."""
        parts = [f"{self.runtime} {self.workload or 'any query'}: fixed {1e3 * self.fixed_s:.0f} ms "
                 f"({self.fixed_core_s:.2f} core-s)", f"{1e3 * self.engine_s_per_byte * 1e6:.0f} ms/MB on "
                 f"{self.slots} slots ({self.core_s_per_byte * 1e6:.2f} core-s/MB, "
                 f"{self.core_s_per_row * 1e3:.3f} core-ms/row)", f"task waves ceil({self.partitions}/slots)"]
        if self.no_data_s is not None:
            parts.append(f"no-data batch {1e3 * self.no_data_s:.0f} ms")
        parts.append("executor start-up " + (f"{self.executor_startup_s:.1f} s" if self.executor_startup_s is not None
                                             else "not measured"))
        parts.append(f"each task {self.fixed_task_share:.0%} of the fixed part")
        if self.first_batch_s is not None:
            parts.append(f"a query's first batch {1e3 * self.first_batch_s:.0f} ms more")
        for name, label in (("executor_warmup_s", "executor warm-up"), ("state_reload_s", "state reload")):
            value = getattr(self, name)
            parts.append(f"{label} " + (f"{value:.2f} s" if value is not None else "not measured"))
        parts.append(f"residuals {1e3 * self.rms_s:.0f} ms RMS ({self.relative_rms:.0%} of a large batch's time)")
        return "; ".join(parts)


def task_share(fixed_core_s: float, fixed_s: float, partitions: int) -> float:
    """The share of a tiny batch's engine seconds ``fixed_s`` each of its ``partitions`` tasks runs, when together
    they ran ``fixed_core_s`` core-seconds (at most 1; 0 without engine time)."""
    return min(1.0, fixed_core_s / (max(1, partitions) * fixed_s)) if fixed_s > 0 else 0.0


def fit_profile(points: Sequence[CostPoint], *, runtime: str, workload: str | None, partitions: int, slots: int,
                no_data_s: float | None = None, no_data_core_s: float | None = None,
                executor_startup_s: float | None = None, executor_warmup_s: float | None = None,
                state_reload_s: float | None = None, not_measured: Mapping[str, str] | None = None) -> EngineProfile:
    """The profile of measured batches: fixed costs from the ``tiny`` ones (medians), per-byte and per-row costs from
    the ``large`` ones beyond that fixed part (least squares through it), the tasks' share of the fixed part
    (:func:`task_share`), a query's first batch's excess over that model (medians of the ``first`` ones); ``no_data_s`` and ``no_data_core_s``, the mean no-data batch (the caller's: a runtime counts
    them apart from the batches it sized), ``executor_startup_s``, ``executor_warmup_s`` and ``state_reload_s`` as
    measured, and why any of those is None (``not_measured``).

    :raises EngineProfileError: without tiny and large batches, or with large batches no larger than the tiny ones.
    """
    tiny = [p for p in points if p.kind == "tiny"]
    large = [p for p in points if p.kind == "large"]
    if not tiny or not large:
        raise EngineProfileError(f"a profile needs tiny and large batches; measured {len(tiny)} tiny and "
                                 f"{len(large)} large")
    if max(p.bytes for p in large) <= max(p.bytes for p in tiny):
        raise EngineProfileError("the large batches are no larger than the tiny ones: nothing says what a byte costs")
    fixed_s = statistics.median(p.trigger_s for p in tiny)
    fixed_core_s = _median(p.busy_core_s for p in tiny) or 0.0
    engine_per_byte = _slope_through(((p.bytes, p.trigger_s) for p in large), fixed_s)
    core_per_byte = _slope_through(((p.bytes, p.busy_core_s) for p in large if p.busy_core_s is not None),
                                   fixed_core_s)
    core_per_row = _slope_through(((p.rows, p.busy_core_s) for p in large if p.busy_core_s is not None),
                                  fixed_core_s)
    return _profile(points, large, fixed_s, fixed_core_s, engine_per_byte, core_per_byte, core_per_row,
                    runtime=runtime, workload=workload, partitions=partitions, slots=slots, no_data_s=no_data_s,
                    no_data_core_s=no_data_core_s, executor_startup_s=executor_startup_s,
                    executor_warmup_s=executor_warmup_s, state_reload_s=state_reload_s,
                    not_measured=dict(not_measured or {}))


def fit_batches(points: Sequence[CostPoint], *, runtime: str, workload: str | None, partitions: int,
                slots: int) -> EngineProfile:
    """The profile of a running query's own batches (``batch`` points; ``first``: its first batch), where none was
    sized apart to be tiny or large (pacer-spark's observe mode): the fixed and per-byte (per-row) costs are one
    least-squares line over every batch, intercept and slope both fitted (through the median of the smallest, the
    intercept would carry their per-byte cost and the slope come out too low); each at least 0. Where every batch's
    tasks and datasets were counted, the busy core-seconds' fixed part is split: ``task_core_s`` a task and, where
    the batches ran different counts of tasks, ``batch_core_s`` a batch (``tasks_per_dataset``: the median tasks a
    dataset ran, so a larger batch's tasks follow). ``core_s_per_byte_se`` is the per-byte cost's standard error.

    :raises EngineProfileError: fewer than two batches, or all of one size (nothing says what a byte costs).
    """
    batches = [p for p in points if p.kind == "batch"]
    if len(batches) < 2 or len({p.bytes for p in batches}) < 2:
        raise EngineProfileError(f"{len(batches)} batches of {len({p.bytes for p in batches})} sizes: a fit needs "
                                 "batches of at least two sizes")
    fixed_s, engine_per_byte = _line([(p.bytes, p.trigger_s) for p in batches])
    timed = [p for p in batches if p.busy_core_s is not None]
    counted = [p for p in timed if p.tasks and p.datasets]
    fixed_core_s, core_per_byte, core_per_row = 0.0, 0.0, 0.0
    measured: dict[str, Any] = {}
    if counted and len(counted) == len(timed):
        # A batch's fixed part: per task where the batches ran one count of tasks (a file source reads a file per
        # task: a batch of more files runs more), else a part per batch and a part per task, fitted (a Kafka batch
        # costs about the same whether one topic partition or two had data)
        varied = len({p.tasks for p in counted}) > 1
        columns = [[1.0] * len(counted)] if varied else []
        columns.append([float(p.tasks or 0) for p in counted])
        busy, sizes = [p.busy_core_s or 0.0 for p in counted], [float(p.bytes) for p in counted]
        *fixed, core_per_byte = _nonneg_fit([*columns, sizes], busy)
        *_, core_per_row = _nonneg_fit([*columns, [float(p.rows) for p in counted]], busy)
        batch_core_s, task_core_s = (fixed[0], fixed[1]) if varied else (0.0, fixed[0])
        fixed_core_s = batch_core_s + task_core_s * statistics.median(p.tasks or 0 for p in counted)
        measured = {"task_core_s": task_core_s, "batch_core_s": batch_core_s if varied else None,
                    "tasks_per_dataset": statistics.median((p.tasks or 0) / (p.datasets or 1) for p in counted),
                    "core_s_per_byte_se": _last_se(  # over the parts the fit kept (a negative one is left out)
                        [*(c for c, v in zip(columns, fixed, strict=True) if v > 0), sizes],
                        busy, [*(v for v in fixed if v > 0), core_per_byte])}
    elif timed:  # one line: the intercept is the fixed part of a batch
        fixed_core_s, core_per_byte = _line([(p.bytes, p.busy_core_s or 0.0) for p in timed])
        _, core_per_row = _line([(p.rows, p.busy_core_s or 0.0) for p in timed])
        columns = [[1.0] * len(timed), [float(p.bytes) for p in timed]]
        measured = {"core_s_per_byte_se": _last_se(columns, [p.busy_core_s or 0.0 for p in timed],
                                                   [fixed_core_s, core_per_byte])}
    return _profile(points, batches, fixed_s, fixed_core_s, engine_per_byte, core_per_byte, core_per_row,
                    runtime=runtime, workload=workload, partitions=partitions, slots=slots, **measured)


def _gram(columns: Sequence[Sequence[float]]) -> list[list[float]]:
    """``X'X`` of the design whose columns are ``columns``."""
    return [[sum(a * b for a, b in zip(ci, cj, strict=True)) for cj in columns] for ci in columns]


def _solve(columns: Sequence[Sequence[float]], y: Sequence[float]) -> list[float] | None:
    """Least squares of ``y`` on ``columns`` (the normal equations); None where they are singular."""
    return _solve_gram(_gram(columns), [sum(c * v for c, v in zip(col, y, strict=True)) for col in columns])


def _nonneg_fit(columns: Sequence[Sequence[float]], y: Sequence[float]) -> list[float]:
    """Least squares of ``y`` on ``columns`` with every coefficient at least 0: a coefficient that comes out negative
    is 0 and the others are refitted without it (costs are never negative)."""
    active = list(range(len(columns)))
    while active:
        fit = _solve([columns[i] for i in active], y)
        if fit is None:
            active.pop(0)  # collinear: the first (the batch's own part) goes
            continue
        worst = min(range(len(active)), key=lambda i: fit[i])
        if fit[worst] >= 0.0:
            out = [0.0] * len(columns)
            for i, value in zip(active, fit, strict=True):
                out[i] = value
            return out
        active.pop(worst)
    return [0.0] * len(columns)


def _last_se(columns: Sequence[Sequence[float]], y: Sequence[float], coef: Sequence[float]) -> float:
    """The standard error of the last coefficient of a least-squares fit (``sigma^2 (X'X)^-1``, its last diagonal
    entry): how far the batches seen pin the per-byte cost down, which a prediction for larger batches multiplies
    (0 with too few batches or no spread of sizes)."""
    n, k = len(y), len(columns)
    if n <= k:
        return 0.0
    residual = sum((yi - sum(c * col[i] for c, col in zip(coef, columns, strict=True))) ** 2
                   for i, yi in enumerate(y)) / (n - k)
    unit = [0.0] * k
    unit[-1] = 1.0
    inverse_last = _solve_gram(_gram(columns), unit)
    return math.sqrt(residual * inverse_last[-1]) if inverse_last is not None and inverse_last[-1] > 0 else 0.0


def _solve_gram(gram: Sequence[Sequence[float]], rhs: Sequence[float]) -> list[float] | None:
    """``gram^-1 rhs`` by Gaussian elimination with partial pivoting; None where ``gram`` is singular (collinear
    columns: a pivot below 1e-12 of its row's largest entry)."""
    k = len(rhs)
    a = [[*gram[i], rhs[i]] for i in range(k)]
    for col in range(k):
        pivot = max(range(col, k), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) <= 1e-12 * max(abs(v) for v in gram[col]) or a[pivot][col] == 0.0:
            return None
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(k):
            if r != col:
                factor = a[r][col] / a[col][col]
                a[r] = [v - factor * w for v, w in zip(a[r], a[col], strict=True)]
    return [a[i][k] / a[i][i] for i in range(k)]


def _profile(points: Sequence[CostPoint], fitted: Sequence[CostPoint], fixed_s: float, fixed_core_s: float,
             engine_per_byte: float, core_per_byte: float, core_per_row: float, *, partitions: int,
             **measured: Any) -> EngineProfile:
    """The profile of a fit (:func:`fit_profile`, :func:`fit_batches`): the fitted line's costs, its rms over the
    ``fitted`` points, the ``first`` points' excess over it, the tasks' share of the fixed part, and ``measured``'s
    other fields as given."""
    first = [p for p in points if p.kind == "first"]
    rms = math.sqrt(statistics.fmean((p.trigger_s - fixed_s - engine_per_byte * p.bytes) ** 2 for p in fitted))
    first_s = _median(max(0.0, p.trigger_s - fixed_s - engine_per_byte * p.bytes) for p in first)
    first_core_s = _median(None if p.busy_core_s is None else max(0.0, p.busy_core_s - fixed_core_s - core_per_byte
                                                                   * p.bytes) for p in first)
    return EngineProfile(partitions=partitions, fixed_s=fixed_s, fixed_core_s=fixed_core_s,
                         engine_s_per_byte=engine_per_byte, core_s_per_byte=core_per_byte, core_s_per_row=core_per_row,
                         largest_bytes=max(p.bytes for p in points),
                         fixed_task_share=task_share(fixed_core_s, fixed_s, partitions), first_batch_s=first_s,
                         first_batch_core_s=first_core_s, rms_s=rms, points=tuple(points), **measured)


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares intercept and slope of ``y`` on ``x``, both at least 0 (a negative intercept refits the slope
    through the origin; a negative slope leaves the mean as the intercept)."""
    n = len(points)
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sxx if sxx > 0 and n > 1 else 0.0
    if slope <= 0.0:
        return max(0.0, mean_y), 0.0
    intercept = mean_y - slope * mean_x
    if intercept < 0.0:
        return 0.0, _slope_through(points, 0.0)
    return intercept, slope


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _slope_through(points: Iterable[tuple[float, float | None]], intercept: float) -> float:
    """Least-squares slope of ``y - intercept`` on ``x`` through the origin, at least 0 (0 without sizes)."""
    pts = [(float(x), float(y)) for x, y in points if y is not None]
    sxx = sum(x * x for x, _ in pts)
    return max(0.0, sum(x * (y - intercept) for x, y in pts) / sxx) if sxx > 0 else 0.0


def load(path: str | Path) -> EngineProfile:
    """Read a profile file :meth:`EngineProfile.write` wrote.

    :raises EngineProfileError: naming the file and what is wrong with it (missing, not JSON, another form, a value
        that is not a cost), and what to do.
    """
    where = Path(path)
    try:
        doc = json.loads(where.read_text())
    except FileNotFoundError:
        raise EngineProfileError(f"engine profile {str(where)!r} does not exist; write one with `pacer calibrate "
                                 "--runtime spark --workload W --out FILE`") from None
    except (OSError, ValueError) as exc:
        raise EngineProfileError(f"engine profile {str(where)!r} cannot be read as JSON ({exc})") from None
    return from_dict(doc, f"engine profile {str(where)!r}")


def from_dict(doc: Mapping[str, Any], where: str = "the engine profile") -> EngineProfile:
    """The profile of a mapping in the file's form (:func:`load`)."""
    if not isinstance(doc, Mapping) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, Mapping) else type(doc).__name__
        raise EngineProfileError(f"{where} is not a {SCHEMA} document (schema {found!r}); write one with "
                                 "`pacer calibrate --runtime spark`")
    values = {k: v for k, v in doc.items() if k not in ("schema", "points")}
    try:
        points = tuple(CostPoint(**p) for p in doc.get("points") or ())
        return EngineProfile(**values, points=points)
    except TypeError as exc:
        raise EngineProfileError(f"{where}: {exc}; write it again with `pacer calibrate --runtime spark`") from None
    except EngineProfileError as exc:
        raise EngineProfileError(f"{where}: {exc}") from None


__all__ = ["SCHEMA", "CostPoint", "EngineProfile", "EngineProfileError", "fit_profile", "from_dict", "load",
           "task_share"]
