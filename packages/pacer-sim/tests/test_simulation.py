from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer import Dataset, MicroBatch, StrategyError
from pacer.baselines.placement import uniform
from pacer.cli import main
from pacer.metrics import gpu_operator_ratio
from pacer.report import max_latency_trend_ms
from pacer_sim import CostModel, ResourceChange, Simulation, batch_work
from pacer_workloads import bytes_per_row, make_query


def test_cli_same_seed_gives_byte_identical_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["sim", "--workload", "lr2", "--traffic", "random", "--rate", "2000", "--admission", "static",
            "--interval", "10", "--scheduler", "fifo", "--placement", "cpu-only", "--duration", "120", "--seed", "7"]
    assert main([*args, "--report", str(tmp_path / "a.json")]) == 0
    assert main([*args, "--report", str(tmp_path / "b.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert main([*args[:-1], "8", "--report", str(tmp_path / "c.json")]) == 0
    assert (tmp_path / "a.json").read_bytes() != (tmp_path / "c.json").read_bytes()
    assert "lr2" in capsys.readouterr().out


def test_every_dataset_is_processed_with_several_queries() -> None:
    sim = Simulation(cores=2, seed=3)
    for w in ("lr2", "lr3", "cm2"):
        sim.add_query(w, traffic="wave", rate=1500, admission="static", admission_params={"interval": 5}, duration=120)
    report = sim.run(120)
    sim.controller.ledger.check_complete()
    for q in report["queries"].values():
        assert q["datasets_in"] == q["datasets_processed"] == 120
        assert q["rows_in"] == q["rows_processed"]


def test_static_trigger_latency_grows_without_bound_while_asap_stays_flat() -> None:
    """LMStream Fig. 1, zStream Figs. 2-3, Das Fig. 16: a 10 s LR1 batch needs more than 10 s (simulated)."""
    duration = 300.0
    figures = {}
    for admission, params in (("static", {"interval": 10.0}), ("asap", {})):
        sim = Simulation(cores=2, seed=7)
        sim.add_query("lr1", rate=1500, admission=admission, admission_params=params, duration=duration)
        report = sim.run(duration)
        assert report["queries"]["lr1"]["datasets_processed"] == 300
        figures[admission] = max_latency_trend_ms(report, "lr1")
    static_first, static_last = figures["static"]
    asap_first, asap_last = figures["asap"]
    assert static_first > 10_000  # the first 10 s batch already takes longer than its interval
    assert static_last > 2 * static_first, figures
    assert asap_last < 1.5 * asap_first, figures
    assert asap_last < 2_000, figures


def test_fifo_queues_where_fair_shares() -> None:
    def queueing(scheduler: str) -> float:
        sim = Simulation(cores=2, scheduler=scheduler, seed=1)
        for w in ("lr2", "cm1"):
            sim.add_query(w, rate=4000, admission="static", admission_params={"interval": 5}, duration=60)
        sim.run(60)
        return sum(r.queueing_s for r in sim.controller.reports())

    assert queueing("fifo") > queueing("fair") + 1.0


def test_losing_cores_slows_processing() -> None:
    def processing(changes: list[ResourceChange]) -> float:
        sim = Simulation(cores=4, seed=1, resource_changes=changes)
        sim.add_query("cm1", rate=3000, admission="static", admission_params={"interval": 5}, partitions=4, duration=120)
        sim.run(120)
        reports = [r for r in sim.controller.reports("cm1") if 40 <= r.started_at < 80]
        return sum(r.processing_s for r in reports) / len(reports)

    assert processing([ResourceChange(30, 90, 0.5)]) > 1.2 * processing([])


def test_busy_core_seconds_are_the_cores_running_tasks_and_allocated_the_cores_the_engine_had() -> None:
    """The three costs in the simulator, as on Spark: a batch's busy core-seconds are the cores running its tasks
    (its GPU and CPU phases, each task's own fixed part included; the driver's part of the fixed cost, planning and
    commit, runs none), Spark's no-data batches' count in the query's too, the run's allocated core-seconds are its
    cores over time less a loss."""
    model = CostModel(noise=0)
    driver_s = model.batch_overhead * (1 - model.fixed_task_share)
    sim = Simulation(cores=4, seed=1, cost_model=model)
    # ASAP: each batch ends before the next dataset arrives, so Spark's no-data batch runs after it (a static trigger's
    # tick finds data, and its one no-data batch would come after the run's end)
    sim.add_query("cm1", rate=3000, admission="asap", partitions=4, duration=120)
    report = sim.run(120)
    batches = sim.controller.reports("cm1")
    for r in batches:  # alone on 4 cores with 4 partitions: 4 slots held from start to end, running tasks after
        assert r.cores_used == 4.0  # the driver's part too
        assert r.busy_core_s == pytest.approx(4.0 * (r.processing_s - driver_s))
        assert r.gate_wait_s == 0.0 and r.trigger_s == r.cost_s
    cost = report["queries"]["cm1"]["cost"]
    assert cost["no_data"]["batches"] > 0  # cm1 aggregates with a 60 s watermark
    assert cost["busy_batches"] == len(batches) and cost["busy_core_s"] == pytest.approx(
        sum(r.busy_core_s or 0.0 for r in batches) + cost["no_data"]["busy_core_s"], rel=1e-6)
    assert report["cost"]["busy_core_s"] == pytest.approx(cost["busy_core_s"], rel=1e-6)
    assert cost["busy_core_s"] < report["cost"]["allocated_core_s"] == pytest.approx(4 * report["duration_s"])
    lossy = Simulation(cores=4, seed=1, resource_changes=[ResourceChange(30, 90, 0.5)], cost_model=model)
    lossy.add_query("cm1", rate=3000, admission="static", admission_params={"interval": 5}, partitions=4,
                    duration=120)
    end = lossy.run(120)["duration_s"]
    assert lossy.allocated_core_s(end) == pytest.approx(4 * end - 2 * 60)  # half of 4 cores taken for 60 s


def _work_seconds(device: str, rows: int) -> float:
    spec = make_query("lr2")
    nbytes = int(rows * bytes_per_row("linear_road"))
    batch = MicroBatch("b", "lr2", 1, (Dataset("d", 0.0, nbytes, rows),), 0.0, placement=uniform(spec.dag, device, device))  # type: ignore[arg-type]
    work = batch_work(CostModel(noise=0), spec, batch, gpus=1, seed=1)
    return work.serial_s + work.cpu_core_s / 2


def test_gpu_loses_on_small_batches_and_wins_on_large_ones() -> None:
    assert _work_seconds("gpu", 100) > _work_seconds("cpu", 100)
    assert _work_seconds("gpu", 200_000) < _work_seconds("cpu", 200_000)


def test_operator_metrics_reach_the_strategies() -> None:
    sim = Simulation(cores=2, gpus=1, seed=1)
    sim.add_query("lr1", rate=1000, placement="gpu-only", duration=10)
    sim.run(10)
    report = sim.controller.reports("lr1")[0]
    devices = {m.operator_id: m.device for m in report.operator_metrics}
    assert devices["join#9"] == "gpu" and devices["sink#11"] == "cpu"
    assert all(m.time_s > 0 and m.bytes_in >= 0 for m in report.operator_metrics)


def test_bad_arguments_fail_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--workload", "lr2", "--admission", "zstrem"]) == 2
    assert "unknown admission strategy 'zstrem'" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr2", "--deadline", "0"]) == 2
    assert "--deadline must be > 0" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr9"]) == 2
    assert "unknown workload 'lr9'" in capsys.readouterr().err
    assert main(["sim", "--workload", "lr2", "--resource-loss", "5:1:0.2"]) == 2
    assert main(["sim", "--workload", "lr2", "--param", "rho=1"]) == 2
    assert main(["sim", "--workload", "lr2", "--interval", "5"]) == 2  # asap has no interval
    assert main(["sim", "--workload", "lr2", "--cost-param", "join.speed=2"]) == 2


def _processing_s(placement: str, workload: str, rate: float, *, gpus: int = 1, queries: int = 1, cores: int = 2) -> float:
    sim = Simulation(cores=cores, gpus=gpus, seed=3, cost_model=CostModel(noise=0))
    for _ in range(queries):
        sim.add_query(workload, rate=rate, placement=placement, admission="static", admission_params={"interval": 1.0},
                      duration=30)
    sim.run(30)
    reports = sim.controller.reports()
    return sum(r.processing_s for r in reports) / len(reports)


def test_gpu_placement_wins_on_large_batches_and_loses_on_small_ones_end_to_end() -> None:
    """dStream/LMStream shape: ~8 KB per partition favours the CPU, ~850 KB the GPU (simulated)."""
    assert _processing_s("gpu-only", "cm1", 50) > _processing_s("cpu-only", "cm1", 50)
    assert _processing_s("gpu-only", "cm1", 10_000) < 0.8 * _processing_s("cpu-only", "cm1", 10_000)


def test_one_gpu_is_shared_and_does_not_scale_with_cores() -> None:
    alone = _processing_s("gpu-only", "cm1", 10_000, cores=4)
    shared = _processing_s("gpu-only", "cm1", 10_000, queries=2, cores=4)
    two_gpus = _processing_s("gpu-only", "cm1", 10_000, gpus=2, queries=2, cores=4)
    assert shared > 1.2 * alone
    assert two_gpus == pytest.approx(alone, rel=0.02)
    spec = make_query("cm1", partitions=8)
    rows = 10_000
    batch = MicroBatch("b", "cm1", 1, (Dataset("d", 0.0, int(rows * bytes_per_row("cluster_monitoring")), rows),), 0.0,
                       placement=uniform(spec.dag, "gpu", "gpu-only"))
    work = batch_work(CostModel(noise=0), spec, batch, gpus=1, seed=1)
    assert work.gpu_s > 0
    assert work.alone_s(2) - work.alone_s(8) == pytest.approx(work.cpu_core_s / 2 - work.cpu_core_s / 8)


def test_without_a_gpu_a_gpu_placement_falls_back_to_the_cpu_or_fails() -> None:
    """The core contract: a GPU placement without a GPU is ill-formed; with fallback the cpu-only baseline runs
    (same processing as cpu-only, nothing counted as GPU), without it the run stops naming the fix."""
    def run(fallback: bool) -> Simulation:
        sim = Simulation(cores=2, gpus=0, seed=3, cost_model=CostModel(noise=0), fallback=fallback)
        sim.add_query("cm1", rate=10_000, placement="gpu-only", admission="static", admission_params={"interval": 1.0},
                      duration=30)
        sim.run(30)
        return sim

    sim = run(True)
    reports = sim.controller.reports()
    assert sum(r.processing_s for r in reports) / len(reports) == pytest.approx(_processing_s("cpu-only", "cm1", 10_000))
    assert all(m.device == "cpu" for r in reports for m in r.operator_metrics)
    assert gpu_operator_ratio(reports) == 0.0
    with pytest.raises(StrategyError, match="--gpus 1"):
        run(False)


def test_polls_only_while_idle_with_data() -> None:
    """ASAP: one arrival, one poll and about one completion per dataset, and per no-data batch (Spark's, after each
    batch moved the 60 s watermark) the trigger that found no data and its end; idle gaps cost no events."""
    sim = Simulation(cores=2, seed=1)
    sim.add_query("lr2", rate=1000, admission="asap", duration=200)
    report = sim.run(200)
    assert report["queries"]["lr2"]["batches"] == 200
    no_data = report["queries"]["lr2"]["cost"]["no_data"]["batches"]
    # every dataset moved the watermark (Spark's starts at the epoch, below every event time); the last one's no-data
    # batch comes after the run's end, as on Spark, whose run stops its queries once drained
    assert no_data == 199
    assert sim.events <= 4 * 200 + 2 * no_data
    static = Simulation(cores=2, seed=1, watermark_s=None)  # with one, the stream waits for its next tick unpolled
    static.add_query("lr2", rate=1000, admission="static", admission_params={"interval": 5.0}, duration=200)
    static.run(200)
    assert static.events > 10 * sim.events  # polled every 10 ms while data waits for the trigger


def test_fair_runs_batches_side_by_side_on_shares() -> None:
    sim = Simulation(cores=2, scheduler="fair", seed=1)
    for w in ("lr2", "cm1"):
        sim.add_query(w, rate=4000, admission="static", admission_params={"interval": 5}, duration=60)
    sim.run(60)
    assert any(r.cores_used is not None and r.cores_used < 1.99 for r in sim.controller.reports())
    fifo = Simulation(cores=2, scheduler="fifo", seed=1)
    fifo.add_query("lr2", rate=4000, admission="static", admission_params={"interval": 5}, duration=60)
    fifo.run(60)
    assert all(r.cores_used == pytest.approx(2.0) for r in fifo.controller.reports())


def test_cost_model_overrides_and_validation() -> None:
    model = CostModel().with_overrides({"batch_overhead": "0.5", "join.gpu_fixed": 0.2})
    assert model.batch_overhead == 0.5 and model.operators["join"].gpu_fixed == 0.2
    assert CostModel().operators["join"].gpu_fixed != 0.2  # the default is untouched
    assert model.as_config()["operators"]["join"]["gpu_fixed"] == 0.2
    for bad in ({"nope": 1}, {"join.nope": 1}, {"batch_overhead": "x"}):
        with pytest.raises(ValueError):
            CostModel().with_overrides(bad)
    with pytest.raises(ValueError):
        CostModel(batch_overhead=-1)
    crossings = [c.crossover_mb() for k, c in CostModel().operators.items() if k not in ("state", "sink")]
    assert all(c is not None and 0.08 < c < 0.2 for c in crossings), crossings  # ~150 KB per partition


def test_report_records_every_argument_and_measure_overhead_is_opt_in(tmp_path: Path) -> None:
    args = ["sim", "--workload", "cm2", "--duration", "20", "--cost-param", "batch_overhead=0.4",
            "--resource-loss", "5:10:0.25", "--param", "admission.rho=0.7", "--admission", "fixed-point"]
    assert main([*args, "--report", str(tmp_path / "a.json")]) == 0
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["runtime"] == "sim" and report["config"]["run"]["options"]["sim"]["cost_param"] == ["batch_overhead=0.4"]
    assert report["config"]["cost_model"]["batch_overhead"] == 0.4
    assert report["config"]["resource_changes"] == [[5.0, 10.0, 0.25]]
    assert report["overhead"]["measured"] is False
    assert main([*args, "--measure-overhead", "--report", str(tmp_path / "b.json")]) == 0
    assert json.loads((tmp_path / "b.json").read_text())["overhead"]["measured"] is True
