"""One local SparkSession for the whole pacer-spark suite (set PACER_TEST_MASTER for another master)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


#: The CI subset: for a parametrised test, the strategies it runs with (None: all installed);
#: tests not listed run unparametrised or over everything. See ``pytest_collection_modifyitems``.
REDUCED: dict[str, frozenset[str] | None] = {
    # every admission but the two simplest baselines (static's fixed interval, min-rows' threshold), which
    # the full suite (nox) and the simulator's conformance run cover: CI has 30 minutes
    "test_admission_nothing_lost_or_duplicated": frozenset({"asap", "pid", "fixed-point", "lmstream", "zstream"}),
    "test_scheduler_with_three_queries": frozenset({"edf", "rdas"}),
    "test_placement_nothing_lost": frozenset({"dstream", "lmstream"}),
    "test_zero_byte_datasets_and_idle_periods": frozenset({"static", "zstream"}),
}


def full_suite() -> bool:
    """True when ``PACER_SPARK_CONFORMANCE`` asks for every test over every installed strategy."""
    return os.environ.get("PACER_SPARK_CONFORMANCE", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the Spark conformance parametrisations outside the CI subset, unless the full suite is asked for."""
    if full_suite():
        return
    keep, drop = [], []
    for item in items:
        allowed = REDUCED.get(getattr(item, "originalname", item.name))
        params = getattr(getattr(item, "callspec", None), "params", {})
        strategies = {v for k, v in params.items() if k.endswith("_strategy")}
        in_module = item.path == Path(__file__).with_name("test_conformance.py")
        if in_module and allowed is not None and strategies and not strategies <= allowed:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


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
