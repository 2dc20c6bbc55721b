"""``pacer bench device-sweep --grid`` (issue 20, item 1): the grid's cells, its judging per row processed, its
outputs, and dStream within the bounds on held-out cells of it (simulated)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pacer_bench import device_grid as g
from pacer_bench.device_grid_outputs import CSV_COLUMNS, write_grid


def test_cpu_capacity_is_the_rate_one_second_batches_keep_up_with_on_the_cpu() -> None:
    model, _ = g.cost_model(1)
    caps = {w: g.cpu_capacity(w, model) for w in g.WORKLOADS}
    assert caps["lr3"] > caps["cm2"] > caps["cm1"] > caps["lr1"] > 100  # lr1's self-join is the costliest
    grid = g.cells(seeds=[7], gpus=[1], workloads=["lr3"], traffics=["constant"], overloads=["keep"])
    assert [c.rate for c in grid] == [round(f * caps["lr3"], 1) for f in g.RATE_FACTORS]


def _cell(workload: str, traffic: str, factor: float, overload: str, seed: int = 7) -> g.Cell:
    (cell,) = g.cells(seeds=[seed], gpus=[1], workloads=[workload], traffics=[traffic], factors=[factor],
                      overloads=[overload])
    return cell


# Held out: not the case dStream's under-load fix was tuned on (lr3, random, 40 000 rows/s, keep).
HELD_OUT = [
    ("cm2", "binary", 3.0, "shed", 7),  # overloaded under shed: dStream formed 4 batches, missed 99.5 % (gpu-only 59 %)
    ("lr3", "binary", 3.0, "shed", 7),  # with cold_start=bound: +12 points of misses over gpu-only
    ("cm1", "wave", 0.3, "keep", 7),  # light load: the CPU is the better device
    # exploration=paper: the grid's worst cell (1.294x cpu-only per row, +11.7 points: one exploring GPU batch on
    # lr1, whose join has no GPU exec, grew every batch after it)
    ("lr1", "constant", 2.0, "shed", 9),
    # exploration=paper: the first batch on the CPU, +2.5 points over gpu-only. On traffic drawn under its seed
    # (binary bursts at drawn onsets, Poisson rows) dStream is 1.061x gpu-only per row here (seeds 8-11: 1.061,
    # 1.000, 1.059, 1.045): over the 1.05 bound on 12-14 batches, a finding for dStream kept failing strictly
    pytest.param("lr3", "binary", 3.0, "keep", 8, marks=pytest.mark.xfail(
        strict=True, reason="dStream is 1.061x the better device per row on drawn binary traffic (bound 1.05)")),
]


@pytest.mark.parametrize(("workload", "traffic", "factor", "overload", "seed"), HELD_OUT)
def test_dstream_holds_per_row_and_in_misses_on_held_out_cells(
    workload: str, traffic: str, factor: float, overload: str, seed: int
) -> None:
    cell = _cell(workload, traffic, factor, overload, seed)
    (dstream,) = [j for j in g.judge(cell, g.run_cell(cell, 120.0)) if j.strategy == "dstream"]
    assert dstream.holds, (cell.name, dstream.x_best, dstream.miss_points)
    ours, best = dstream.outcomes["dstream"], dstream.outcomes[dstream.best]
    assert ours.batches >= 0.5 * best.batches, "no runaway batches: overload handling keeps bounding them"


def test_judging_and_outputs(tmp_path: Path) -> None:
    cell = _cell("lr3", "constant", 2.0, "keep")
    judged = g.judge(cell, g.run_cell(cell, 60.0))
    assert [j.strategy for j in judged] == list(g.STRATEGIES)
    j = judged[0]
    base = j.outcomes[j.best]
    other = j.outcomes["gpu-only" if j.best == "cpu-only" else "cpu-only"]
    assert base.per_row_us <= other.per_row_us  # the better single device is the cheaper per row
    assert j.x_best == pytest.approx(j.outcomes["dstream"].per_row_us / base.per_row_us)
    paths = write_grid(tmp_path / "g", judged, meta={"seed": 7})
    rows = list(csv.DictReader(paths["csv"].open()))
    assert tuple(rows[0]) == CSV_COLUMNS and [r["placement"] for r in rows] == list(g.PLACEMENTS)
    text = paths["md"].read_text()
    assert "| dstream | 1 |" in text and "## Every cell" in text and cell.name in text
    assert "| strategy | conditions |" in text and "seeds=7 " in text  # one repetition: a condition of one seed
    assert next(iter(csv.DictReader(paths["conditions"].open())))["seed"] == "7"


def test_grid_is_only_for_device_sweep_and_needs_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pacer.cli import main

    assert main(["bench", "trigger-sweep", "--grid", "--out", str(tmp_path)]) == 2
    assert "--grid applies to device-sweep" in capsys.readouterr().err
    assert main(["bench", "device-sweep", "--grid", "--gpus", "0", "--out", str(tmp_path)]) == 2
    assert "needs --gpus >= 1" in capsys.readouterr().err


def test_a_condition_sums_its_repetitions_before_judging() -> None:
    """Per seed the single devices swap places by where the batch boundaries fall (lr1 random at 2x, keep: gpu-only
    0.87x, 1.06x and 1.13x cpu-only per row on seeds 7-9); a condition is judged on its repetitions summed."""
    def outcome(placement: str, engine_s: float, rows: int, misses: float) -> g.Outcome:
        return g.Outcome(placement, engine_s, rows, rows, misses, 5, 0, 0.0, True)

    runs = {7: {"cpu-only": (10.0, 100, 0.10), "gpu-only": (8.0, 100, 0.30), "dstream": (10.0, 100, 0.10),
                "lmstream": (9.0, 100, 0.20)},
            8: {"cpu-only": (10.0, 300, 0.00), "gpu-only": (13.0, 300, 0.00), "dstream": (10.0, 300, 0.00),
                "lmstream": (12.0, 300, 0.00)}}
    judged = []
    for seed, by_placement in runs.items():
        cell = _cell("lr1", "random", 2.0, "keep", seed)
        judged += g.judge(cell, {p: outcome(p, *o) for p, o in by_placement.items()})
    per_seed = {(j.cell.seed, j.strategy): j for j in judged}
    assert per_seed[7, "dstream"].x_best == pytest.approx(1.25)  # gpu-only's lucky seed: 0.08 s/row against 0.10
    (dstream, lmstream) = g.conditions(judged)
    assert dstream.cell.seeds == (7, 8) and "seeds=7,8" in dstream.cell.name
    assert dstream.best == "cpu-only"  # 20 s / 400 rows against gpu-only's 21 s / 400
    assert dstream.x_best == pytest.approx(1.0) and dstream.holds
    assert lmstream.x_best == pytest.approx(21.0 / 20.0)
    # misses weighted by rows in: (0.2 * 100 + 0) / 400 = 5 %, against cpu-only's 2.5 %
    assert lmstream.outcomes["lmstream"].miss_ratio == pytest.approx(0.05)
    assert lmstream.miss_points == pytest.approx(2.5) and not lmstream.holds


def test_lmstream_seeded_from_the_cells_profile_beats_its_fixed_threshold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The grid's worst LMStream cell with the paper's fixed InfPT_0 of 150 KB per partition: cm2's small batches
    went to the GPU. From the cells' profile InfPT_0 is cm2's crossover, and it matches the better device."""
    cell = _cell("cm2", "binary", 0.3, "keep", 8)
    (seeded,) = [j for j in g.judge(cell, g.run_cell(cell, 120.0)) if j.strategy == "lmstream"]
    assert seeded.holds, (seeded.x_best, seeded.miss_points)
    monkeypatch.setattr(g, "PROFILED", ())  # no profile named, and none known: the paper's letter
    monkeypatch.setattr("pacer_lmstream.profile.known_profile", lambda: None)
    (fixed,) = [j for j in g.judge(cell, g.run_cell(cell, 120.0)) if j.strategy == "lmstream"]
    assert seeded.x_best == 1.0 < 1.03 < fixed.x_best  # engine time counts Spark's no-data batches, the same CPU work
    # under every placement, which dilutes the fixed threshold's cost: 1.04 with one after every batch from the first
    # (the watermark moves at once, as Spark's), 1.18 when they began after a minute, 1.3 and more before the
    # simulator ran them; within the grid's 1.05 bound now, so it no longer fails that cell


def test_the_grid_says_why_its_gpu_counts_give_the_same_figures(tmp_path: Path) -> None:
    """One query per cell: a lone batch runs at one GPU's speed whatever the count, and the page says so."""
    cells = g.cells(seeds=[7], gpus=[1, 2], workloads=["cm2"], traffics=["binary"], factors=[2.0], overloads=["keep"])
    judged = [j for cell in cells for j in g.judge(cell, g.run_cell(cell, 30.0))]
    text = write_grid(tmp_path / "g", judged, meta={})["md"].read_text()
    assert "GPU counts [1, 2]: every figure is the same on each" in text
    two = [j for j in judged if j.cell.gpus == 2]
    assert [(j.x_best, j.miss_points) for j in two] == [(j.x_best, j.miss_points) for j in judged if j.cell.gpus == 1]
