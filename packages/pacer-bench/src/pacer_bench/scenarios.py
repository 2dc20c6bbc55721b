"""The papers' experiments as a registry of named scenarios (:data:`SCENARIOS`): each builds its configurations,
run side by side, and writes its own outputs.

The runner looks a scenario up by name (:func:`find_scenario`) and asks it everything that differs between
scenarios (its configurations, its outputs, what it needs of a runtime, whether it takes latency-target's choices,
a ``--grid`` variant), so a scenario added to :data:`SCENARIOS` runs without a change to the runner.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pacer import QueryRun, RunConfig
from pacer_bench.runtime_traits import EXECUTORS, GPU, RESOURCE_LOSS, SIMULATOR, SPARK_DEFAULT

if TYPE_CHECKING:
    from pacer_bench.tables import BenchRun

#: Traffic parameters that are rates (rows/s): :meth:`Config.with_rate_scale` scales them with the mean.
RATE_PARAMS = frozenset({"min", "max", "amplitude", "offset", "sd"})


@dataclass(frozen=True)
class Config:
    """One configuration of an experiment: its queries, scheduler and resources (a :class:`pacer.RunConfig`,
    :meth:`run_config`), and how the tables and plots treat it."""

    label: str
    queries: tuple[QueryRun, ...]
    scheduler: str = "fifo"
    duration: float = 300.0
    seed: int = 7
    cores: int | None = None  # None: the runtime's (2 simulated, Spark's parallelism)
    gpus: int | None = None  # None: the runtime's (none simulated, one on Spark with RAPIDS)
    resource_loss: tuple[float, float, float] | None = None  # (start, end, fraction of cores taken)
    baseline: bool = False
    group: str = ""  # ratios compare a run with the baseline of its group (e.g. one rate of a sweep)
    x: float | None = None  # the swept value (rate in KB/s), for the sweep plots
    series: str = ""  # the line a swept run belongs to in the sweep plots (e.g. its placement)
    deadline: float | None = None  # judge every query of this run against it (None: the baseline's deadline)
    overload: str = "keep"  # the Controller's overload policy: keep (measure every dataset) or shed
    tags: Mapping[str, Any] = field(default_factory=dict)  # what the configuration is, for the analysis
    partitions: int = 2  # the most cores one batch uses
    scale: str = "fixed"  # the scaling strategy, with executors (min, max) and the executors the run starts with
    scale_params: Mapping[str, Any] = field(default_factory=dict)  # the scaling strategy's parameters
    executors: tuple[int, int] | None = None
    initial_executors: int | None = None
    executor_startup: float | None = None  # simulated seconds from asking for an executor to its running

    @property
    def needs(self) -> frozenset[str]:
        """The runtime capabilities this configuration cannot run without (``resource-loss`` when it takes cores
        away, ``executors`` when it scales them): the runner refuses it on a runtime that lacks one."""
        return (frozenset({RESOURCE_LOSS}) if self.resource_loss else frozenset()) | \
            (frozenset({EXECUTORS}) if self.executors else frozenset())

    def run_config(self) -> RunConfig:
        """The run this configuration is, for any runtime (fallback off: a raising strategy fails the run; the runner
        adapts it to the runtime it runs on, see :attr:`pacer_bench.runtime_traits.RuntimeTraits.adapt`)."""
        sim: dict[str, Any] = {"resource_loss": [list(self.resource_loss)]} if self.resource_loss else {}
        if self.executor_startup is not None:
            sim["executor_startup"] = self.executor_startup
        return RunConfig(self.queries, scheduler=self.scheduler, duration=self.duration, seed=self.seed,
                         cores=self.cores, gpus=self.gpus, overload=self.overload, partitions=self.partitions,
                         scale=self.scale, scale_params=dict(self.scale_params), executors=self.executors,
                         initial_executors=self.initial_executors,
                         options={SIMULATOR: sim} if sim else {})

    def with_seed(self, seed: int) -> Config:
        """The same configuration with another seed."""
        return replace(self, seed=seed)

    def with_overload(self, overload: str) -> Config:
        """The same configuration under another overload policy (``keep`` or ``shed``)."""
        return replace(self, overload=overload)

    def with_rate_scale(self, scale: float) -> Config:
        """The same configuration with every query's input rate multiplied by ``scale``: its mean rate and the rates
        its traffic parameters name (``min``, ``max``, ``amplitude``, ``offset``, ``sd``), so the shape stays; a
        parameter that is text (a trace's file) is kept."""
        def scaled(q: QueryRun) -> QueryRun:
            params = {k: v * scale if k in RATE_PARAMS and isinstance(v, int | float) else v
                      for k, v in dict(q.traffic_params).items()}
            return replace(q, rate=q.rate * scale, traffic_params=params)

        return replace(self, queries=tuple(scaled(q) for q in self.queries))

    def with_gpus(self, gpus: int) -> Config:
        """The same configuration with another number of (simulated) GPUs."""
        return replace(self, gpus=gpus)

    def with_duration(self, duration: float) -> Config:
        """The same configuration over another duration (resource loss scaled along)."""
        loss = self.resource_loss
        if loss is not None:
            scale = duration / self.duration
            loss = (loss[0] * scale, loss[1] * scale, loss[2])
        return replace(self, duration=duration, resource_loss=loss)


class ScenarioError(ValueError):
    """A scenario that cannot run as asked (unknown scenario, strategy or runtime, a bad option), found before
    anything runs; ``pacer bench`` reports it as a usage error."""


@dataclass(frozen=True)
class Request:
    """What a scenario is asked to build: the full or the quick version, for which kind of runtime, with which of
    latency-target's choices.

    :param simulated: the runtime simulates time (:attr:`pacer_bench.runtime_traits.RuntimeTraits.simulated`): long
        runs cost little there, so scenarios run longer than on a wall-clock engine.
    :param target: latency-target's choices (:func:`narrow_plan`: deadlines, traffics, workloads, configs, source).
    :param source: the registered traffic source ``target["source"]`` names
        (:class:`pacer_bench.traffic_sources.BenchSource`; None: pacer's generated traffic).
    :param master: the Spark master the runs go to (``--master``; a standalone cluster's can change executors).
    :param executors: autoscale on a standalone cluster: ``(min, max)`` executors (None: its default).
    :param calibrated: fidelity: the engine profiles the simulator predicts Spark's runs from (``--calibrated``).
    """

    quick: bool = False
    simulated: bool = True
    target: Mapping[str, Any] = field(default_factory=dict)
    source: Any = None
    master: str = "local[2]"
    executors: tuple[int, int] | None = None
    calibrated: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScenarioResult:
    """What a scenario's writer gets once every configuration ran: the runs (repetitions folded in), the request
    they were built from, and the text every output carries (summary line, notes, machine)."""

    name: str
    runs: Sequence[BenchRun]
    request: Request
    summary: str
    notes: Sequence[str]
    machine: str


def write_tables(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
    """The outputs every scenario has: :func:`pacer_bench.outputs.write_outputs` under the scenario's name."""
    from pacer_bench.outputs import write_outputs

    return write_outputs(out, result.name, result.runs, summary=result.summary, notes=result.notes,
                         machine=result.machine)


@dataclass(frozen=True)
class Scenario:
    """A named experiment: what it reproduces, how it builds its configurations, how it writes its outputs and what
    it needs of a runtime.

    :param build: its configurations for a :class:`Request` (full or quick, simulated or not, narrowed).
        A ``ValueError`` it raises is reported as a :class:`ScenarioError`.
    :param write: its outputs under a folder (default :func:`write_tables`); returns the paths by kind.
    :param needs: runtime capabilities it cannot show its point without
        (:data:`pacer_bench.runtime_traits.GPU`), each with why: on a runtime that lacks one it runs on the
        simulator and says so, and ``--gpus 0`` is refused where it needs a GPU.
    :param narrowed: it takes latency-target's choices (``--source``, ``--deadline``, ``--traffic``, ``--workload``,
        ``--config``); any other scenario refuses them (``--config`` aside, which every scenario takes).
    :param sourced: it takes ``--source`` without the rest of latency-target's choices (multi-query: each query its
        own topic).
    :param grid: its ``--grid`` variant, ``(out, *, quick, duration, seed, repeat, gpus, jobs)`` -> the paths
        written (None: ``--grid`` does not apply).
    :param calibrated: it sets a wall-clock runtime beside the simulator calibrated by ``--calibrated`` profiles
        (fidelity): it takes them, and it does not run on the simulator alone; any other scenario refuses them.
    """

    name: str
    summary: str
    build: Callable[[Request], list[Config]]
    write: Callable[[str | Path, ScenarioResult], dict[str, Path]] = write_tables
    needs: Mapping[str, str] = field(default_factory=dict)
    narrowed: bool = False
    sourced: bool = False
    grid: Callable[..., dict[str, Path]] | None = None
    calibrated: bool = False


ADAPTIVE_ADMISSION = ("fixed-point", "zstream", "lmstream")


#: trigger-sweep judges every row against this deadline (zStream and LMStream target it too).
TRIGGER_SWEEP_DEADLINE = 10.0


def _trigger_sweep(request: Request) -> list[Config]:
    # On Spark, LR2 at 2000 rows/s: the rate both the 10 s trigger and small batches sustain on 2 cores
    # (LR1's join is capacity-bound, not superlinear, there; see the pacer-spark README).
    quick = request.quick
    if request.simulated:
        workload, rate, duration = "lr1", 1500.0, (90.0 if quick else 300.0)
    else:
        workload, rate, duration = "lr2", 2000.0, (60.0 if quick else 90.0)
    d = TRIGGER_SWEEP_DEADLINE

    def query(admission: str, params: Mapping[str, Any] | None = None) -> tuple[QueryRun, ...]:
        return (QueryRun(workload, rate=rate, admission=admission, admission_params=dict(params or {}), deadline=d),)

    configs = [
        Config(f"static {s}s", query("static", {"interval": float(s)}), duration=duration, baseline=s == 10, deadline=d)
        for s in ((10,) if quick else (2, 5, 8, 10))
    ]
    configs.append(Config("asap", query("asap"), duration=duration, deadline=d))
    for name in ADAPTIVE_ADMISSION[:1] if quick and not request.simulated else ADAPTIVE_ADMISSION:
        configs.append(Config(name, query(name), duration=duration, deadline=d))
    return configs


#: multi-query's queries: (workload, deadline s), under binary bursts of :data:`MULTI_QUERY_TRAFFIC`.
MULTI_QUERY_QUERIES = (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
MULTI_QUERY_TRAFFIC = {"min": 200.0, "max": 3000.0, "period": 30.0}
#: Static trigger intervals (s) multi-query sweeps under FIFO and under FAIR (one interval for every query, as
#: Spark's trigger of a run is): full, and ``--quick`` (two, so that a quick Spark run stays within minutes).
MULTI_QUERY_STATICS = (1, 2, 3, 4, 5, 10)
MULTI_QUERY_STATICS_QUICK = (2, 10)
#: The adaptive configurations of multi-query: (scheduler, admission).
MULTI_QUERY_ADAPTIVE = (("edf", "asap"), ("edf", "zstream"), ("rdas", "zstream"), ("edf", "lmstream"))


def multi_query_duration(quick: bool, simulated: bool) -> float:
    """Seconds of traffic of every multi-query configuration: 300 simulated (120 quick); on Spark 90 (30 quick:
    8 configurations of about 40 s each)."""
    if simulated:
        return 120.0 if quick else 300.0
    return 30.0 if quick else 90.0


def _multi_query(request: Request) -> list[Config]:
    quick = request.quick
    duration = multi_query_duration(quick, request.simulated)

    def queries(admission: str, params: Mapping[str, Any]) -> tuple[QueryRun, ...]:
        return tuple(
            QueryRun(w, traffic="binary", rate=1600.0, traffic_params=MULTI_QUERY_TRAFFIC, admission=admission,
                     admission_params=params, deadline=d)
            for w, d in MULTI_QUERY_QUERIES
        )

    configs = [
        Config(f"{scheduler} + static {s}s", queries("static", {"interval": float(s)}), scheduler=scheduler,
               duration=duration, baseline=scheduler == "fifo" and s == 10,
               tags={"scheduler": scheduler, "admission": "static", "family": "static", "interval": float(s)})
        for scheduler in ("fifo", "fair")
        for s in (MULTI_QUERY_STATICS_QUICK if quick else MULTI_QUERY_STATICS)
    ]
    configs += [
        Config(f"{scheduler} + {admission}", queries(admission, {}), scheduler=scheduler, duration=duration,
               tags={"scheduler": scheduler, "admission": admission, "family": admission})
        for scheduler, admission in MULTI_QUERY_ADAPTIVE
    ]
    return configs


DEVICE_RATES_KB = (64, 256, 1024, 4096, 16384)
PLACEMENTS = ("cpu-only", "gpu-only", "static-preference", "lmstream", "dstream")


def _device_sweep(request: Request) -> list[Config]:
    duration = 60.0 if request.quick else 180.0
    from pacer_workloads import bytes_per_row

    per_row = bytes_per_row("linear_road")
    configs = []
    for kb in DEVICE_RATES_KB:
        rate = kb * 1000.0 / per_row
        for placement in PLACEMENTS:
            configs.append(
                Config(
                    f"{placement} @ {kb} KB/s",
                    # One dataset (one second of data) per batch whatever the placement and the backlog, so
                    # processing times compare directly: Spark's default trigger with maxFilesPerTrigger=1.
                    (QueryRun("lr2", rate=rate, admission_params={"max_datasets": 1},
                                 placement=placement, query_id="lr2"),),
                    duration=duration,
                    gpus=1,
                    baseline=placement == "cpu-only",
                    group=f"{kb} KB/s",
                    x=float(kb),
                    series=placement,
                )
            )
    return configs


def _sinusoidal(request: Request) -> list[Config]:
    duration = 180.0 if request.quick else 600.0
    rate = 1500.0
    traffic = {"period": 60.0}
    configs = [
        Config(f"static {s}s", (QueryRun("lr2", traffic="sinusoidal", rate=rate, traffic_params=traffic, admission="static", admission_params={"interval": float(s)}),), duration=duration, baseline=s == 10)
        for s in (2, 5, 10)
    ]
    configs.append(Config("fixed-point", (QueryRun("lr2", traffic="sinusoidal", rate=rate, traffic_params=traffic, admission="fixed-point"),), duration=duration))
    return configs


def _resource_loss(request: Request) -> list[Config]:
    duration = 180.0 if request.quick else 600.0
    loss = (duration / 3, 2 * duration / 3, 0.25)
    return [
        Config("static 10s", (QueryRun("lr2", rate=2500.0, admission="static", admission_params={"interval": 10.0}),), duration=duration, cores=4, resource_loss=loss, baseline=True),
        Config("asap", (QueryRun("lr2", rate=2500.0),), duration=duration, cores=4, resource_loss=loss),
        Config("fixed-point", (QueryRun("lr2", rate=2500.0, admission="fixed-point"),), duration=duration, cores=4, resource_loss=loss),
    ]


def _frequency(request: Request) -> list[Config]:
    duration = 120.0 if request.quick else 300.0
    configs = []
    for pattern in ("increasing", "decreasing", "wave", "binary"):
        for admission, params in (("static", {"interval": 10.0}), ("asap", {}), ("fixed-point", {})):
            label = f"{pattern} / {admission}"
            configs.append(
                Config(label, (QueryRun("lr2", traffic=pattern, rate=2000.0, admission=admission, admission_params=params, query_id="lr2"),), duration=duration, baseline=admission == "static", group=pattern)
            )
    return configs


#: Deadlines (s) the latency-target scenario judges every configuration against.
LATENCY_DEADLINES = (5.0, 10.0, 20.0)
#: Admission strategies that read the query's deadline: they run once per deadline; the rest run once per
#: workload and traffic and are judged against every deadline (LMStream targets the window slide, not it).
DEADLINE_AWARE = ("zstream",)
#: Admission strategies that need no hand-tuned interval, in the order the tables list them.
TARGET_ADAPTIVE = ("pid", "min-rows", "fixed-point", "lmstream", "zstream")


def latency_target_plan(request: Request) -> dict[str, Any]:
    """What latency-target runs: workloads and rates, traffic patterns, static intervals, deadlines, duration.

    ``--quick`` is LR2 under binary bursts with statics 2/5/10 s (11 configurations), 120 s of traffic on the
    simulator and 30 s on Spark.

    The request's ``target`` holds the command line's choices (:func:`narrow_plan`): ``deadlines``, ``traffics``,
    ``workloads`` (names), ``configs`` (names or families); with a ``source`` whose ``statics_at_deadlines`` is
    set (``kafka``), the static triggers are the engine's trigger at each deadline.
    """
    quick, simulated = request.quick, request.simulated
    if simulated and 0 in (request.target.get("statics") or ()):
        raise ValueError("--static 0 is Spark's own default trigger, which the simulator does not have: its asap is "
                         "the default trigger")
    workloads = (("lr2", 2000.0),) if quick else (("lr2", 2000.0), ("cm2", 1000.0))
    plan: dict[str, Any] = {
        "workloads": workloads,
        "traffics": ("binary",) if quick else ("constant", "wave", "binary", "spike"),
        "statics": (2, 5, 10) if quick else (2, 3, 5, 8, 10, 15, 20),
        "deadlines": LATENCY_DEADLINES,
        "duration": (120.0 if simulated else 30.0) if quick else (300.0 if simulated else 60.0),
        "configs": (),
    }
    return narrow_plan(plan, request.target, request.source)


def narrow_plan(plan: dict[str, Any], target: Mapping[str, Any], source: Any = None) -> dict[str, Any]:
    """``plan`` narrowed to the command line's choices (an empty choice keeps the plan's); a ``source`` that sets
    ``statics_at_deadlines`` (:class:`pacer_bench.traffic_sources.BenchSource`) makes the statics one per deadline.

    :raises ValueError: a workload the plan does not hold, or a deadline not > 0.
    """
    if target.get("deadlines"):
        if any(not float(d) > 0 for d in target["deadlines"]):
            raise ValueError(f"deadlines must be > 0 s, got {list(target['deadlines'])}")
        plan["deadlines"] = tuple(float(d) for d in target["deadlines"])
    if target.get("traffics"):
        plan["traffics"] = tuple(target["traffics"])
    if target.get("workloads"):
        from pacer_workloads import WORKLOADS

        unknown = [w for w in target["workloads"] if w not in WORKLOADS]
        if unknown:
            raise ValueError(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(WORKLOADS)}")
        rates = dict(plan["workloads"])  # the plan's rate, else LR's 2000 and CM's 1000 rows/s
        plan["workloads"] = tuple((w, rates.get(w, 1000.0 if w.startswith("cm") else 2000.0))
                                  for w in target["workloads"])
    if getattr(source, "statics_at_deadlines", False):  # the engine's trigger at each deadline (Kafka on Spark)
        plan["statics"] = tuple(sorted({d if d != int(d) else int(d) for d in plan["deadlines"]}))
    if target.get("statics"):  # the intervals asked for (0: the engine's default trigger)
        if any(float(s) < 0 for s in target["statics"]):
            raise ValueError(f"static intervals must be >= 0 s, got {list(target['statics'])}")
        plan["statics"] = tuple(sorted({float(s) if s != int(s) else int(s) for s in target["statics"]}))
    plan["configs"] = tuple(target.get("configs") or ())
    return plan


def _target_config(workload: str, rate: float, traffic: str, duration: float, plain: bool, name: str, family: str,
                   admission: str, params: Mapping[str, Any] | None = None, deadline: float | None = None,
                   **tags: Any) -> Config:
    """One latency-target configuration; its group is the workload and traffic, its baseline Spark's default trigger:
    plain where the plan runs it (``plain``: ``--static 0``), else pacer's ``asap``."""
    group = f"{workload} {traffic}"
    query = QueryRun(workload, traffic=traffic, rate=rate, admission=admission,
                        admission_params=dict(params or {}), deadline=deadline, query_id=workload)
    baseline = name == SPARK_DEFAULT if plain else family == "asap"
    return Config(f"{group} / {name}", (query,), duration=duration, baseline=baseline, group=group,
                  tags={"workload": workload, "traffic": traffic, "name": name, "family": family,
                        "deadline": deadline, **tags})


def latency_target_configs(plan: Mapping[str, Any]) -> list[Config]:
    """The configurations of a latency-target plan (:func:`latency_target_plan`); with ``plan["configs"]``
    only those whose name (``static 5s``, ``zstream @10s``) or family (``static``, ``zstream``) it lists."""
    configs = []
    for workload, rate in plan["workloads"]:
        for traffic in plan["traffics"]:
            common = (workload, rate, traffic, plan["duration"], 0 in plan["statics"])
            configs.append(_target_config(*common, "asap", "asap", "asap"))
            configs += [_target_config(*common, f"static {s}s" if s else SPARK_DEFAULT, "static", "static",
                                       {"interval": float(s)}, interval=float(s)) for s in plan["statics"]]
            for name in TARGET_ADAPTIVE:
                if name in DEADLINE_AWARE:
                    configs += [_target_config(*common, f"{name} @{d:g}s", name, name, deadline=d)
                                for d in plan["deadlines"]]
                else:
                    configs.append(_target_config(*common, name, name, name))
    wanted = set(plan.get("configs") or ())
    if wanted:
        configs = [c for c in configs if c.tags["name"] in wanted or c.tags["family"] in wanted]
    return configs


def _latency_target(request: Request) -> list[Config]:
    """latency-target's configurations (:func:`latency_target_plan`, narrowed by the request's target).

    :raises ValueError: a bad choice, or ``--config`` names no configuration.
    """
    configs = latency_target_configs(latency_target_plan(request))
    if not configs:
        raise ValueError(f"--config {', '.join(request.target.get('configs') or ())}: no latency-target "
                         "configuration has that name or family (asap, static, pid, min-rows, fixed-point, "
                         "lmstream, zstream, or a name such as 'static 10s', 'zstream @10s')")
    return configs


def _write_latency_target(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
    """latency-target's winners, bounds and Pareto plots, judged against the plan's deadlines."""
    from pacer_bench.latency_target import write_latency_target

    return write_latency_target(out, result.runs, latency_target_plan(result.request)["deadlines"],
                                summary=result.summary, notes=result.notes, machine=result.machine)


def _autoscale(request: Request) -> list[Config]:
    """autoscale's configurations (:func:`pacer_bench.autoscale.autoscale_plan`)."""
    from pacer_bench.autoscale import autoscale_plan

    return [Config(**kw) for kw in autoscale_plan(request.quick, simulated=request.simulated,
                                                       executors=request.executors)]


def _write_autoscale(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
    """autoscale's goal lines, scaling table and plots before the common tables."""
    from pacer_bench.autoscale import write_autoscale

    return write_autoscale(out, result.runs, summary=result.summary, notes=result.notes, machine=result.machine)


def _fidelity(request: Request) -> list[Config]:
    """fidelity's configurations (:func:`pacer_bench.fidelity.fidelity_plan`), on Spark only.

    :raises ValueError: on the simulator (it would compare the simulator with itself), or without profiles."""
    from pacer_bench.fidelity import fidelity_plan

    if request.simulated:
        raise ValueError("fidelity compares real Spark with the calibrated simulator: run it with --runtime spark")
    if not request.calibrated:
        raise ValueError("fidelity needs the engine profiles the simulator predicts from: --calibrated FILE (one per "
                         "workload, written by pacer calibrate --runtime spark --workload W --out FILE)")
    return [Config(**kw) for kw in fidelity_plan(request.quick)]


def _write_fidelity(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
    """fidelity's table of predicted beside measured before the common tables."""
    from pacer_bench.fidelity import write_fidelity

    return write_fidelity(out, result.runs, result.request.calibrated, summary=result.summary, notes=result.notes,
                          machine=result.machine)


def _write_multi_query(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
    """multi-query's summary and bound tables before the common ones."""
    from pacer_bench.multi_query import write_multi_query

    return write_multi_query(out, result.runs, summary=result.summary, notes=result.notes, machine=result.machine)


def _device_grid(out: str | Path, **options: Any) -> dict[str, Path]:
    """device-sweep's ``--grid``: every cell simulated (:func:`pacer_bench.device_grid_outputs.run_device_grid`)."""
    from pacer_bench.device_grid_outputs import run_device_grid

    return run_device_grid(out, **options)


def _runaway_grid(out: str | Path, **options: Any) -> dict[str, Path]:
    """latency-target's ``--grid``: does zStream run away against the default trigger, on every workload and traffic
    (:func:`pacer_bench.runaway_grid.run_runaway_grid`, simulated)."""
    from pacer_bench.runaway_grid import run_runaway_grid

    return run_runaway_grid(out, **options)


#: Every scenario ``pacer bench`` runs, by name (the order the help lists them in is sorted).
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("trigger-sweep", "Static triggers 2/5/8/10 s and ASAP vs each admission strategy (LMStream Figs. 6-9, zStream Figs. 13-14)", _trigger_sweep),
        Scenario("multi-query", "Three queries with deadlines 5/10/20 s under binary bursts sharing the cores: FIFO and "
                 "FAIR with static triggers (the cheapest that meets every deadline marked) vs asap, zStream and "
                 "LMStream admission under EDF and RDAS, by total engine time (zStream Figs. 7-12)", _multi_query,
                 write=_write_multi_query, sourced=True),
        Scenario("device-sweep", "Rates 64 KB/s-16 MB/s, every placement strategy (dStream Figs. 6-11)", _device_sweep,
                 needs={GPU: "compares CPU and GPU placements"}, grid=_device_grid),
        Scenario("sinusoidal", "Fixed-point vs static intervals under sinusoidal load (Das Fig. 15)", _sinusoidal),
        Scenario("autoscale", "How many executors each scaler holds and what the deadlines pay: pacer's deadline "
                 "scaler, Spark's dynamic allocation (as documented and tuned), Spark Streaming's ratio rule and fixed "
                 "counts, against the cheapest fixed count and a perfect-foresight oracle, under step, wave, spike "
                 "and daily traffic",
                 _autoscale, write=_write_autoscale,
                 needs={EXECUTORS: "changes a run's executors"}),
        Scenario("resource-loss", "25 % of the cores taken away mid-run (Das §5.5, Figs. 19-20)", _resource_loss),
        Scenario("latency-target", "What a latency target costs: deadlines 5/10/20 s, Spark's default trigger, "
                 "static triggers (the cheapest that meets each deadline marked) and adaptive admission, by busy core-seconds (engine time where a run did not measure them)",
                 _latency_target, write=_write_latency_target, narrowed=True, grid=_runaway_grid),
        Scenario("frequency", "SPBench data-frequency patterns: increasing, decreasing, wave, binary", _frequency),
        Scenario("fidelity", "Does the simulator predict Spark: each configuration on real Spark, then simulated with "
                 "costs from Spark's engine profiles (--calibrated), batches, rows late and busy core-s side by "
                 "side", _fidelity, write=_write_fidelity, calibrated=True),
    )
}


def find_scenario(name: str) -> Scenario:
    """The registered scenario called ``name``.

    :raises ScenarioError: none is, naming the ones that are.
    """
    try:
        return SCENARIOS[name]
    except KeyError:
        raise ScenarioError(f"unknown scenario {name!r}; choose from {', '.join(sorted(SCENARIOS))}") from None
