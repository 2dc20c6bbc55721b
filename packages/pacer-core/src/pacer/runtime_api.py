"""The run contract: what runs (:class:`RunConfig`, its :class:`QueryRun` queries), the :class:`Runtime` protocol
every runtime implements, and the :class:`RunResult` it returns.

A leaf module: it imports nothing of pacer at run time, and for its annotations only the leaf
:mod:`pacer.engine_profile` (under ``TYPE_CHECKING``), so the hook specifications, the plugin manager, the
Controller and every runtime can import it without an import cycle, type-only imports included (the
Controller and the plugin manager it names without importing them: see ``_Controller``). :mod:`pacer.run` and
:mod:`pacer` re-export its names; :mod:`pacer.run` says what a configuration holds (seeds, query ids, saving and
loading).
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    import argparse

    from pacer.engine_profile import EngineProfile

__all__ = ["DEADLINE_ADMISSION", "DEFAULT_ADMISSION", "DEFAULT_OVERLOAD", "OVERLOAD_CHOICES", "RUN_SCHEMA",
           "CalibratesEngine", "QueryRun", "RunConfig", "RunResult", "Runtime", "default_admission", "executor_bounds",
           "to_toml"]


#: A :class:`pacer.controller.Controller` (what a run hands back in :attr:`RunResult.controller`) and a
#: :class:`pacer.plugins.PluginManager` (what a runtime is given), named without importing them, as ``Any``: both
#: modules import this one (the plugin manager finds :class:`Runtime` objects). A ``Protocol`` would not do: a
#: runtime annotates these parameters with the class itself (an implementation's parameter may widen the
#: protocol's, never narrow it), and whoever reads a result uses the whole Controller.
_Controller: TypeAlias = Any
_PluginManager: TypeAlias = Any

RUN_SCHEMA = "pacer.run/1"
OVERLOAD_CHOICES = ("keep", "shed")
#: The overload policy wherever none is asked for (``pacer run``, ``pacer sim``, ``pacer bench``, ``attach``): keep,
#: no data is dropped unless asked, as in Spark; ``shed`` drops the datasets that can no longer make their deadline.
DEFAULT_OVERLOAD = "keep"
#: The admission wherever none is named and no deadline is stated: ``asap``, Spark's default trigger.
DEFAULT_ADMISSION = "asap"
#: The admission wherever none is named and a deadline is stated (``pacer run --deadline``, ``attach(deadline=...)``):
#: zStream forms a batch when its predicted completion reaches the deadline, taking the data that still meets it.
DEADLINE_ADMISSION = "zstream"


def default_admission(deadline_stated: bool) -> str:
    """The admission a query gets when none is named: :data:`DEADLINE_ADMISSION` where a deadline is stated, else
    :data:`DEFAULT_ADMISSION`."""
    return DEADLINE_ADMISSION if deadline_stated else DEFAULT_ADMISSION


def _plain(value: Any) -> Any:
    """Mappings and sequences as dicts and lists, for JSON and TOML."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class QueryRun:
    """One query of a run: its workload, its traffic and the strategies deciding for it.

    :param workload: ``lr1``, ``lr1t``, ``lr2``, ``lr3``, ``cm1`` or ``cm2`` (``pacer_workloads.WORKLOADS``).
    :param query_id: its id (default: the workload; see :meth:`RunConfig.query_ids`).
    :param traffic: a traffic pattern (``pacer_workloads.TRAFFIC_PATTERNS``); ``rate`` its mean rows/s.
    :param traffic_params: the pattern's parameters (``period``, ``min``, ``max``, ``noise``, ...): numbers, or
        text where the pattern takes text (``trace``'s ``file`` and ``format``).
    :param deadline: seconds (None: the query's window slide).
    :param max_rows: read cap per batch in rows (Spark's ``maxOffsetsPerTrigger``; 0: none).
    :param max_bytes: read cap per batch in bytes (Spark's ``maxBytesPerTrigger``; 0: none).
    """

    workload: str
    query_id: str | None = None
    traffic: str = "constant"
    rate: float = 1000.0
    traffic_params: Mapping[str, float | str] = field(default_factory=dict)
    admission: str = DEFAULT_ADMISSION
    admission_params: Mapping[str, Any] = field(default_factory=dict)
    placement: str = "cpu-only"
    placement_params: Mapping[str, Any] = field(default_factory=dict)
    deadline: float | None = None
    max_rows: int = 0
    max_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.workload:
            raise ValueError("a query needs a workload (lr1, lr1t, lr2, lr3, cm1, cm2)")
        if not (self.rate >= 0 and math.isfinite(self.rate)):
            raise ValueError(f"query {self.query_id or self.workload!r}: rate must be >= 0 rows/s, got {self.rate}")
        if self.deadline is not None and not self.deadline > 0:
            raise ValueError(f"query {self.query_id or self.workload!r}: deadline must be > 0 seconds, "
                             f"got {self.deadline}; leave it out to use the window slide")
        if self.max_rows < 0 or self.max_bytes < 0:
            raise ValueError(f"query {self.query_id or self.workload!r}: max_rows and max_bytes must be >= 0 "
                             "(0: no cap)")

    def as_dict(self) -> dict[str, Any]:
        """Plain values (None left out), for a file or a report's ``config``."""
        out = {f.name: _plain(getattr(self, f.name)) for f in fields(self)}
        return {k: v for k, v in out.items() if v is not None}


def executor_bounds(value: str | Sequence[int], initial: int | None = None, *,
                    setting: str = "executors") -> tuple[int, int]:
    """``"MIN:MAX"`` (or one number, min = max) or a ``(min, max)`` pair -> ``(min, max)``, checked once for every
    place that takes them (``pacer run --executors``, :class:`pacer.RunConfig`, pacer-spark's ``executors=`` and
    ``spark.pacer.scale.executors``), with ``initial`` executors, where given, within them.

    :raises ValueError: naming ``setting`` and the form expected, for bounds that are not it, out of order, or an
        ``initial`` outside them.
    """
    try:
        if isinstance(value, str):
            low, _, high = value.partition(":")
            parts: Sequence[Any] = (low, high or low)
        else:
            parts = tuple(value)
        if len(parts) != 2:
            raise ValueError
        bounds = (int(parts[0]), int(parts[1]))
    except (TypeError, ValueError):
        raise ValueError(f"{setting} are MIN:MAX (e.g. 1:8) or one count, got {value!r}") from None
    if bounds[0] < 1 or bounds[1] < bounds[0]:
        raise ValueError(f"{setting}: executors need 1 <= MIN <= MAX, got {value!r}")
    if initial is not None and not bounds[0] <= initial <= bounds[1]:
        raise ValueError(f"initial executors {initial} outside {setting} {bounds[0]}:{bounds[1]}: give a count "
                         "within them, or none (the runtime's own)")
    return bounds


@dataclass(frozen=True)
class RunConfig:
    """A run, for every runtime (module docstring: seeds, query ids, files).

    :param queries: the queries, in order (query ``i`` gets the seed ``seed + i``).
    :param scheduler: the scheduling strategy; ``scheduler_params`` its parameters.
    :param duration: seconds of traffic.
    :param seed: the run's seed.
    :param cores: task slots (None: the runtime's own: 2 simulated, Spark's default parallelism).
    :param gpus: GPUs (None: the runtime's own: none simulated, one on Spark when RAPIDS is loaded).
    :param partitions: partitions per batch, the most cores one batch uses (Spark's shuffle partitions).
    :param overload: the Controller's overload policy, ``keep`` or ``shed``.
    :param fallback: a raising strategy falls back to its baseline for that decision instead of failing.
    :param monitor_interval: seconds per row of the report's ``series``.
    :param scale: the scaling strategy (``fixed``: the executors stay; ``spark-dynamic``, ``deadline``...);
        ``scale_params`` its parameters.
    :param executors: ``(min, max)`` executors the scaler may hold (None: the runtime's cores, unscaled); the run
        starts with ``min``.
    :param cores_per_executor: task slots per executor, where ``executors`` is given.
    :param initial_executors: executors the run starts with (None: ``executors``' min; Spark's
        ``spark.dynamicAllocation.initialExecutors``).
    :param options: per runtime name, what only that runtime reads.
    """

    queries: tuple[QueryRun, ...]
    scheduler: str = "fifo"
    scheduler_params: Mapping[str, Any] = field(default_factory=dict)
    duration: float = 300.0
    seed: int = 7
    cores: int | None = None
    gpus: int | None = None
    partitions: int = 2
    overload: str = DEFAULT_OVERLOAD
    fallback: bool = False
    monitor_interval: float = 1.0
    scale: str = "fixed"
    scale_params: Mapping[str, Any] = field(default_factory=dict)
    executors: tuple[int, int] | None = None
    cores_per_executor: int = 1
    initial_executors: int | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "queries", tuple(self.queries))
        if self.executors is not None:
            object.__setattr__(self, "executors", executor_bounds(self.executors, self.initial_executors))
        elif self.initial_executors is not None:
            raise ValueError("initial_executors needs executors (min, max)")
        if self.cores_per_executor < 1:
            raise ValueError(f"cores_per_executor must be >= 1, got {self.cores_per_executor}")
        if not self.queries:
            raise ValueError("a run needs at least one query")
        for what, value in (("duration", self.duration), ("monitor_interval", self.monitor_interval)):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{what} must be > 0 seconds, got {value}")
        for what, count, low in (("cores", self.cores, 1), ("gpus", self.gpus, 0), ("partitions", self.partitions, 1)):
            if count is not None and count < low:
                raise ValueError(f"{what} must be >= {low}, got {count}")
        if self.overload not in OVERLOAD_CHOICES:
            raise ValueError(f"overload must be one of {OVERLOAD_CHOICES}, got {self.overload!r}")

    # ------------------------------------------------------------------ the rules

    def query_seed(self, index: int) -> int:
        """The traffic seed of query ``index`` (0-based): ``seed + index``, on every runtime."""
        return self.seed + index

    def query_ids(self) -> list[str]:
        """Each query's id: ``query_id`` or the workload, a repeat suffixed ``-2``, ``-3``, ..."""
        taken: set[str] = set()
        out = []
        for q in self.queries:
            base = q.query_id or q.workload
            qid, n = base, 1
            while qid in taken:
                n += 1
                qid = f"{base}-{n}"
            taken.add(qid)
            out.append(qid)
        return out

    def options_for(self, runtime: str) -> Mapping[str, Any]:
        """What only ``runtime`` reads (empty when nothing was given)."""
        return self.options.get(runtime, {})

    def with_options(self, runtime: str, **values: Any) -> RunConfig:
        """The same run with ``values`` added to ``options[runtime]``."""
        merged = {**self.options, runtime: {**self.options_for(runtime), **values}}
        return replace(self, options=merged)

    # ------------------------------------------------------------------ files

    def as_dict(self) -> dict[str, Any]:
        """Plain values (None left out): what :meth:`from_dict` reads back."""
        out: dict[str, Any] = {"schema": RUN_SCHEMA}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "queries":
                out["queries"] = [q.as_dict() for q in value]
            elif value is not None:
                out[f.name] = _plain(value)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Read :meth:`as_dict`'s form (or a ``pacer.report/1`` whose ``config.run`` holds it).

        :raises ValueError: for an unknown key or a bad value, naming it.
        """
        if data.get("schema") == "pacer.report/1":
            run = (data.get("config") or {}).get("run")
            if not isinstance(run, Mapping):
                raise ValueError("this pacer.report/1 has no config.run to repeat (written before pacer.run/1)")
            data = run
        body = {k: v for k, v in data.items() if k != "schema"}
        if data.get("schema", RUN_SCHEMA) != RUN_SCHEMA:
            raise ValueError(f"not a {RUN_SCHEMA} configuration: schema={data.get('schema')!r}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ValueError(f"unknown run setting(s) {unknown}; known: {sorted(known)}")
        raw = body.get("queries")
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise ValueError("a run needs 'queries': a list of tables with at least 'workload'")
        query_keys = {f.name for f in fields(QueryRun)}
        queries = []
        for i, q in enumerate(raw):
            if not isinstance(q, Mapping):
                raise ValueError(f"queries[{i}] must be a table, got {q!r}")
            bad = sorted(set(q) - query_keys)
            if bad:
                raise ValueError(f"queries[{i}]: unknown setting(s) {bad}; known: {sorted(query_keys)}")
            queries.append(QueryRun(**q))
        try:
            return cls(**{**body, "queries": tuple(queries)})
        except TypeError as exc:
            raise ValueError(f"bad run configuration: {exc}") from None

    def dumps(self, fmt: str = "json") -> str:
        """The configuration as ``json`` or ``toml`` text."""
        if fmt == "json":
            return json.dumps(self.as_dict(), indent=2, sort_keys=True) + "\n"
        if fmt == "toml":
            return to_toml(self.as_dict())
        raise ValueError(f"unknown format {fmt!r}; use json or toml")

    def save(self, path: str | Path) -> Path:
        """Write the configuration to ``path`` (``.toml``: TOML, anything else: JSON), creating folders."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.dumps("toml" if out.suffix == ".toml" else "json"))
        return out

    @classmethod
    def load(cls, path: str | Path) -> RunConfig:
        """Read a configuration :meth:`save` wrote (TOML or JSON by its suffix), or a report's ``config.run``.

        :raises ValueError: for a missing, unreadable or malformed file, naming it.
        """
        source = Path(path)
        try:
            text = source.read_text()
        except OSError as exc:
            raise ValueError(f"cannot read run configuration {str(source)!r}: {exc.strerror}") from None
        try:
            data = tomllib.loads(text) if source.suffix == ".toml" else json.loads(text)
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{str(source)!r} is not valid {source.suffix.lstrip('.') or 'JSON'}: {exc}") from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{str(source)!r}: {exc}") from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write {value!r} to TOML")


def to_toml(data: Mapping[str, Any]) -> str:
    """A run configuration as TOML: scalars first, then ``[options]`` and one ``[[queries]]`` table per query."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items()
             if v is not None and k not in ("queries", "options")]
    for runtime, opts in (data.get("options") or {}).items():
        lines += ["", f"[options.{json.dumps(str(runtime))}]"]
        lines += [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in opts.items() if v is not None]
    for query in data.get("queries") or ():
        lines += ["", "[[queries]]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in query.items() if v is not None]
    return "\n".join(lines) + "\n"


@dataclass
class RunResult:
    """What a runtime's :meth:`Runtime.run` returns.

    :ivar report: the ``pacer.report/1`` document.
    :ivar controller: the :class:`~pacer.controller.Controller` that ran (read it through its views).
    :ivar status: 0, or 1 when the run did not drain or a query failed.
    :ivar notes: lines for the person who ran it, printed after the summary table.
    """

    report: dict[str, Any]
    controller: _Controller
    status: int = 0
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Runtime(Protocol):
    """A runtime pacer runs on, registered through the ``pacer_runtimes`` hook.

    ``capabilities`` declares optional features: ``deterministic`` (same configuration, same
    report bytes), ``multi-query``, ``gpu`` (real or modelled GPU devices). A runtime may also have a
    ``defaults`` mapping: ``pacer run`` defaults of its own (``{"duration": 600.0}`` on the simulator).
    What a run's queries and resources leave to the runtime (``cores``/``gpus`` None) it decides.
    """

    name: str
    summary: str
    capabilities: frozenset[str]

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """Add this runtime's own flags to ``pacer run`` (in its own argument group)."""

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: _PluginManager) -> RunConfig:
        """Check this runtime's flags (before anything starts) and fold them into ``config.options[name]``.

        :raises ValueError: with what to do (the command reports it as a usage error).
        """

    def run(self, config: RunConfig, *, plugin_manager: _PluginManager | None = None) -> RunResult:
        """Run ``config`` to completion (its traffic, then its backlog) and report it."""


@runtime_checkable
class CalibratesEngine(Protocol):
    """A runtime that measures what a workload's batches cost it (``pacer calibrate --runtime NAME``): the
    :class:`~pacer.engine_profile.EngineProfile` its runs then start from."""

    def calibrate_engine(self, config: RunConfig, *, intervals: Sequence[float], batches: int,
                         note: Callable[[str], None] = ...) -> EngineProfile:
        """Measure ``config.queries[0]``'s workload at its rate under fixed triggers of ``intervals`` seconds
        (``batches`` of each) and in tiny batches; ``note`` hears each step."""
