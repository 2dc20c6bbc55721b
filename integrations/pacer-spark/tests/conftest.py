"""One local SparkSession for the whole pacer-spark suite (set PACER_TEST_MASTER for another master)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(autouse=True)
def _baselines_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests here load the baselines only, not whatever strategy packages happen to be installed.

    A fixture rather than a module-level assignment, so that the other packages' tests, collected in
    the same pytest run, still see every installed plugin.
    """
    if "PACER_PLUGINS" not in os.environ:
        monkeypatch.setenv("PACER_PLUGINS", "")


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A FAIR-mode session built by :func:`pacer_spark.session_builder`, warmed up once."""
    import pacer_spark

    master = os.environ.get("PACER_TEST_MASTER", "local[2]")
    session = (
        pacer_spark.session_builder(master, "pacer-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # JIT warm-up: the first stateful batch of a JVM costs seconds, which would skew the first test.
    session.range(20000).selectExpr("id % 7 AS k", "id AS v").groupBy("k").sum("v").collect()
    yield session
    session.stop()
