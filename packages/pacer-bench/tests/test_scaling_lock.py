"""``pacer_bench.scaling_lock`` runs pacer-spark's driver with a slow cluster manager and keeps what it measured."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pacer_spark")

from pacer_bench import scaling_lock


def test_the_calls_go_one_at_a_time_off_the_asks_and_removals_wait_for_the_batches(tmp_path: Path) -> None:
    fast = scaling_lock.decision_times(0.0, 1.0, 0.01, scale_every_s=0.25)
    slow = scaling_lock.decision_times(0.5, 1.0, 0.01, scale_every_s=0.25)
    # every ask was answered in both (none waited for a call), and the scaling decided all along
    assert fast["decisions"] > 50 and slow["decisions"] > 50 and slow["scaling_decisions"] >= 3
    # without delay, every 3 -> 2 became a removal, made between batches; with it, the calls queue on their thread
    assert fast["removals"] >= 1 and 1 <= slow["calls_made"] <= 1.0 / 0.5 + 1
    assert scaling_lock.main(["--out", str(tmp_path), "--delay", "0.2", "--seconds", "0.5", "--repeat", "1"]) == 0
    assert "| 1 |" in (tmp_path / "scaling-lock.md").read_text() and (tmp_path / "scaling-lock.json").exists()
