"""The shared conformance suite on real Spark.

Strategies run end to end through the pacer-gen source, the RPC and the gate. By default a reduced
set that fits CI runs (``REDUCED`` in this folder's conftest.py: every admission strategy, the paper schedulers and
placements, the error paths); ``PACER_SPARK_CONFORMANCE=1`` (``nox -s "conformance(runtime='spark')"``)
runs every test over every installed strategy. Scenarios are shortened by ``PACER_SPARK_TIME_SCALE``
(default 0.2: a 30 s scenario streams for 6 s).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

pytest.importorskip("pacer_conformance")
from pacer_conformance import RuntimeConformance

pytestmark = pytest.mark.spark

@pytest.fixture
def _baselines_only() -> None:
    """Overrides the package-wide fixture: the suite runs every installed strategy, not the baselines only."""


@pytest.fixture
def conformance_runtime(spark: Any) -> Any:
    from pacer_spark.run.spark_runtime import SparkRuntime

    return SparkRuntime(spark, time_scale=float(os.environ.get("PACER_SPARK_TIME_SCALE", "0.2")))


class TestSparkConformance(RuntimeConformance):
    """Every runtime-level conformance test, on Spark."""
