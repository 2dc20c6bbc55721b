from __future__ import annotations

from pathlib import Path

import pytest

from pacer import Dataset, MicroBatch
from pacer.baselines.placement import uniform
from pacer.cli import main
from pacer_sim import CostModel, ResourceChange, Simulation, batch_work
from pacer_workloads import bytes_per_row, make_query


def _max_latency_by_arrival(sim: Simulation, query_id: str, lo: float, hi: float) -> float:
    """Max latency of the datasets that arrived in [lo, hi)."""
    arrival = {d.id: d.arrival for r in sim.controller.reports(query_id) for d in sim.batches[r.batch_id].datasets}
    return max(lat for r in sim.controller.reports(query_id) for d, lat in r.dataset_latencies if lo <= arrival[d] < hi)


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
    """LMStream Fig. 1, zStream Figs. 2-3, Das Fig. 16: processing needs longer than the interval (simulated)."""
    duration = 600.0
    ratios = {}
    for admission, params in (("static", {"interval": 10.0}), ("asap", {})):
        sim = Simulation(cores=2, seed=7)
        sim.add_query("lr1", rate=1500, admission=admission, admission_params=params, duration=duration)
        sim.run(duration)
        sim.controller.ledger.check_complete()
        first = _max_latency_by_arrival(sim, "lr1", 0, duration / 10)
        last = _max_latency_by_arrival(sim, "lr1", duration * 0.9, duration)
        ratios[admission] = last / first
    assert ratios["static"] > 2.0, ratios
    assert ratios["asap"] < 1.5, ratios


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
