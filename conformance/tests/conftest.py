"""The conformance suite's own run: every installed strategy on the simulator."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def conformance_runtime() -> Any:
    from pacer_sim.conformance import SimRuntime

    return SimRuntime()
