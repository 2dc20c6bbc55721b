"""``pacer bench latency-target --grid``: zStream against the default trigger on every workload and traffic (simulated).

The cells tested here are the ones that ran away before the service-time model's guards (pacer-core's
``test_service_time_guards.py`` tests the guards themselves): lr1's join, whose cost grows faster than its rows, under
random traffic at 0.9 of capacity (seed 9 ran to 91 % of rows late, 5.5× the default trigger's busy core-s), and a
linear query under rising traffic where a noisy surprise once kept batches at one dataset (cm2, seed 9: 6.7 %).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer_bench import runaway_grid as g


def _cell(workload: str, traffic: str, factor: float, seed: int) -> g.Cell:
    (cell,) = g.cells(seeds=[seed], workloads=[workload], traffics=[traffic], factors=[factor])
    return cell


@pytest.mark.parametrize(("workload", "traffic", "seed"), [("lr1", "random", 9), ("cm2", "increasing", 9)])
def test_zstream_does_not_run_away_where_it_did(workload: str, traffic: str, seed: int) -> None:
    cell = _cell(workload, traffic, 0.9, seed)
    outcomes = g.run_cell(cell, 600.0)
    assert g.holds(outcomes), outcomes
    assert outcomes["zstream"].busy_core_s <= 1.1 * outcomes["asap"].busy_core_s, "no runaway batches"


def test_the_grid_writes_every_cell_and_names_the_ones_that_fail(tmp_path: Path) -> None:
    from pacer.cli import main

    assert main(["bench", "latency-target", "--grid", "--quick", "--jobs", "1", "--out", str(tmp_path)]) == 0
    rows = (tmp_path / "grid.csv").read_text().splitlines()
    assert rows[0] == ",".join(g.CSV_COLUMNS) and len(rows) == 1 + 4 * len(g.STRATEGIES)
    text = (tmp_path / "grid.md").read_text()
    assert "cells hold" in text and "| lr1 | random | 0.9 |" in text and "## Cells that fail" in text
    # the docs' results page shows a grid by its section, found through its meta (scripts/gen_docs.py)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["scenario"] == "latency-target" and meta["grid"] is True and meta["cells"] == 4
    section = (tmp_path / "readme-section.md").read_text()
    assert section.startswith("# latency-target --grid") and "cells hold" in section and "| lr1 |" not in section
    failing = g.Cell("lr1", "spike", 0.9, 1.0, 7)
    bad = {"asap": g.Outcome(0.10, 1.0, 10), "zstream": g.Outcome(0.12, 1.0, 5)}
    paths = g.write_grid(tmp_path / "judged", [(failing, bad)], meta={"duration": 1.0})
    assert not g.holds(bad) and "- lr1 spike 0.9× (1 rows/s) seed 7: zstream 12.0 % late against asap's 10.0 %" \
        in paths["md"].read_text()
