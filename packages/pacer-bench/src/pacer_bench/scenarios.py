"""The papers' experiments as named scenarios: each is a list of configurations run side by side."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class QueryConfig:
    """One query of a configuration."""

    workload: str
    traffic: str = "constant"
    rate: float = 1000.0
    traffic_params: Mapping[str, float] = field(default_factory=dict)
    admission: str = "asap"
    admission_params: Mapping[str, Any] = field(default_factory=dict)
    placement: str = "cpu-only"
    placement_params: Mapping[str, Any] = field(default_factory=dict)
    deadline: float | None = None
    query_id: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain values for a report's ``config``."""
        return {
            "workload": self.workload, "traffic": self.traffic, "rate": self.rate,
            "traffic_params": dict(self.traffic_params), "admission": self.admission,
            "admission_params": dict(self.admission_params), "placement": self.placement,
            "placement_params": dict(self.placement_params), "deadline": self.deadline, "query_id": self.query_id,
        }


@dataclass(frozen=True)
class Config:
    """One configuration of an experiment: its queries, scheduler and resources."""

    label: str
    queries: tuple[QueryConfig, ...]
    scheduler: str = "fifo"
    duration: float = 300.0
    seed: int = 7
    cores: int = 2
    gpus: int = 0
    resource_loss: tuple[float, float, float] | None = None  # (start, end, fraction of cores taken)
    baseline: bool = False
    group: str = ""  # ratios compare a run with the baseline of its group (e.g. one rate of a sweep)
    x: float | None = None  # the swept value (rate in KB/s), for the sweep plots
    series: str = ""  # the line a swept run belongs to in the sweep plots (e.g. its placement)

    def with_seed(self, seed: int) -> Config:
        """The same configuration with another seed."""
        return replace(self, seed=seed)

    def with_duration(self, duration: float) -> Config:
        """The same configuration over another duration (resource loss scaled along)."""
        loss = self.resource_loss
        if loss is not None:
            scale = duration / self.duration
            loss = (loss[0] * scale, loss[1] * scale, loss[2])
        return replace(self, duration=duration, resource_loss=loss)


@dataclass(frozen=True)
class Scenario:
    """A named experiment: what it reproduces, and its configurations (full and quick)."""

    name: str
    summary: str
    build: Callable[[bool, str], list[Config]]


ADAPTIVE_ADMISSION = ("fixed-point", "zstream", "lmstream")


def _trigger_sweep(quick: bool, runtime: str) -> list[Config]:
    # On Spark, LR2 at 2000 rows/s: the rate both the 10 s trigger and small batches sustain on 2 cores
    # (LR1's join is capacity-bound, not superlinear, there; see the pacer-spark README).
    if runtime == "sim":
        workload, rate, duration = "lr1", 1500.0, (90.0 if quick else 300.0)
    else:
        workload, rate, duration = "lr2", 2000.0, (60.0 if quick else 90.0)
    configs = [
        Config(f"static {s}s", (QueryConfig(workload, rate=rate, admission="static", admission_params={"interval": float(s)}),), duration=duration, baseline=s == 10)
        for s in ((10,) if quick else (2, 5, 8, 10))
    ]
    configs.append(Config("asap", (QueryConfig(workload, rate=rate),), duration=duration))
    for name in ADAPTIVE_ADMISSION[:1] if quick and runtime == "spark" else ADAPTIVE_ADMISSION:
        configs.append(Config(name, (QueryConfig(workload, rate=rate, admission=name, deadline=10.0),), duration=duration))
    return configs


def _multi_query(quick: bool, runtime: str) -> list[Config]:
    duration = 120.0 if quick else 300.0
    traffic = {"min": 200.0, "max": 3000.0, "period": 30.0}

    def queries(admission: str, params: Mapping[str, Any]) -> tuple[QueryConfig, ...]:
        return tuple(
            QueryConfig(w, traffic="binary", rate=1600.0, traffic_params=traffic, admission=admission, admission_params=params, deadline=d)
            for w, d in (("lr2", 5.0), ("lr3", 10.0), ("cm2", 20.0))
        )

    static = {"interval": 10.0}
    return [
        Config("fifo + static 10s", queries("static", static), scheduler="fifo", duration=duration, baseline=True),
        Config("fair + static 10s", queries("static", static), scheduler="fair", duration=duration),
        Config("edf + zstream", queries("zstream", {}), scheduler="edf", duration=duration),
        Config("rdas + zstream", queries("zstream", {}), scheduler="rdas", duration=duration),
    ]


DEVICE_RATES_KB = (64, 256, 1024, 4096, 16384)
PLACEMENTS = ("cpu-only", "gpu-only", "static-preference", "lmstream", "dstream")


def _device_sweep(quick: bool, runtime: str) -> list[Config]:
    duration = 60.0 if quick else 180.0
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
                    (QueryConfig("lr2", rate=rate, admission_params={"max_datasets": 1},
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


def _sinusoidal(quick: bool, runtime: str) -> list[Config]:
    duration = 180.0 if quick else 600.0
    rate = 1500.0
    traffic = {"period": 60.0}
    configs = [
        Config(f"static {s}s", (QueryConfig("lr2", traffic="sinusoidal", rate=rate, traffic_params=traffic, admission="static", admission_params={"interval": float(s)}),), duration=duration, baseline=s == 10)
        for s in (2, 5, 10)
    ]
    configs.append(Config("fixed-point", (QueryConfig("lr2", traffic="sinusoidal", rate=rate, traffic_params=traffic, admission="fixed-point"),), duration=duration))
    return configs


def _resource_loss(quick: bool, runtime: str) -> list[Config]:
    duration = 180.0 if quick else 600.0
    loss = (duration / 3, 2 * duration / 3, 0.25)
    return [
        Config("static 10s", (QueryConfig("lr2", rate=2500.0, admission="static", admission_params={"interval": 10.0}),), duration=duration, cores=4, resource_loss=loss, baseline=True),
        Config("asap", (QueryConfig("lr2", rate=2500.0),), duration=duration, cores=4, resource_loss=loss),
        Config("fixed-point", (QueryConfig("lr2", rate=2500.0, admission="fixed-point"),), duration=duration, cores=4, resource_loss=loss),
    ]


def _frequency(quick: bool, runtime: str) -> list[Config]:
    duration = 120.0 if quick else 300.0
    configs = []
    for pattern in ("increasing", "decreasing", "wave", "binary"):
        for admission, params in (("static", {"interval": 10.0}), ("asap", {}), ("fixed-point", {})):
            label = f"{pattern} / {admission}"
            configs.append(
                Config(label, (QueryConfig("lr2", traffic=pattern, rate=2000.0, admission=admission, admission_params=params, query_id="lr2"),), duration=duration, baseline=admission == "static", group=pattern)
            )
    return configs


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("trigger-sweep", "Static triggers 2/5/8/10 s and ASAP vs each admission strategy (LMStream Figs. 6-9, zStream Figs. 13-14)", _trigger_sweep),
        Scenario("multi-query", "Three queries with deadlines under binary bursts: FIFO/FAIR vs EDF/RDAS (zStream Figs. 7-12)", _multi_query),
        Scenario("device-sweep", "Rates 64 KB/s-16 MB/s, every placement strategy (dStream Figs. 6-11)", _device_sweep),
        Scenario("sinusoidal", "Fixed-point vs static intervals under sinusoidal load (Das Fig. 15)", _sinusoidal),
        Scenario("resource-loss", "25 % of the cores taken away mid-run (Das §5.5, Figs. 19-20)", _resource_loss),
        Scenario("frequency", "SPBench data-frequency patterns: increasing, decreasing, wave, binary", _frequency),
    )
}
