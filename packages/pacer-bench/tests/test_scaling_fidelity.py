"""``python -m pacer_bench.scaling_fidelity``: the committed standalone-cluster autoscale run beside the calibrated
simulator's replay of it, exactly as ``bench-results/fidelity-scaling`` shows (the simulator is deterministic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pacer_bench.scaling_fidelity import main

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "bench-results" / "fidelity-scaling"


def test_the_committed_comparison_is_what_the_command_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the command as the README shows it, with relative paths
    assert main(["--spark", "bench-results/autoscale-spark-cluster", "--calibrated",
                 "bench-results/fidelity-spark-run4/lr2-spark.json", "--out", str(tmp_path)]) == 0
    made = (tmp_path / "fidelity-scaling.md").read_text().splitlines()
    committed = (RESULTS / "fidelity-scaling.md").read_text().splitlines()
    assert [line for line in made if line.startswith("| wave")] == \
        [line for line in committed if line.startswith("| wave")]
    assert len([line for line in made if line.startswith("| wave")]) == 3
