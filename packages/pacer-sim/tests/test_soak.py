"""Soak: a paced query for 90 minutes of simulated time holds flat memory and decision time.

On the code before bounded state (every dataset id in the ledger, every arrival and batch report in the
recorder, every completed batch in the simulator) this test fails: the heap grew by about 6 KB per dataset,
24.4 MB from the first quarter of this run to its end (measured), against a 1 MB allowance here; bounded,
it grows by about 0.2 MB (windows still filling).
"""

from __future__ import annotations

import pytest

from pacer_sim.soak import slope_per_hour, soak_simulation

HOURS = 1.5


@pytest.fixture(scope="module")
def points() -> list:  # type: ignore[type-arg]
    return soak_simulation(HOURS, admission="static", admission_params={"interval": 1.0}, checkpoints=8,
                           mode="heap")


def test_memory_stays_flat_over_a_long_paced_run(points: list) -> None:  # type: ignore[type-arg]
    quarter = points[1]  # t = 1/4 of the run: every bounded window of recent batches is full by then
    last = points[-1]
    assert last.datasets >= 0.99 * 3600 * HOURS
    grown = last.memory_bytes - quarter.memory_bytes
    assert grown <= 1_000_000, f"heap grew {grown / 1e6:.2f} MB from 1/4 to the end of the run: {points}"
    mb_per_hour = slope_per_hour(points, lambda p: p.memory_bytes / 1e6)
    assert mb_per_hour <= 0.6, f"{mb_per_hour:.2f} MB per simulated hour"


def test_decision_time_stays_flat_over_a_long_paced_run(points: list) -> None:  # type: ignore[type-arg]
    early = min(p.poll_p99_us for p in points[1:3])
    late = max(p.poll_p99_us for p in points[-2:])
    assert all(p.polls > 100 for p in points)
    assert late <= 3.0 * early + 500.0, f"p99 poll {early:.0f} us early, {late:.0f} us late: {points}"
