"""One local SparkSession for the whole pacer-spark suite (set PACER_TEST_MASTER for another master)."""

from __future__ import annotations

import os
import shutil
import subprocess
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
    # the deadline-aware admissions and PID backpressure (asap and static run on Spark in the CLI's and
    # pacer-kafka's tests, fixed-point in the demo's and a strategy mix; min-rows' threshold is the simplest): CI
    # has 45 minutes on 2 cores; the full suite (nox) and the simulator's conformance cover every strategy
    "test_admission_nothing_lost_or_duplicated": frozenset({"pid", "lmstream", "zstream"}),
    "test_scheduler_with_three_queries": frozenset({"edf", "rdas"}),
    "test_placement_nothing_lost": frozenset({"dstream", "lmstream"}),
    "test_zero_byte_datasets_and_idle_periods": frozenset({"zstream"}),
}


def full_suite() -> bool:
    """True when ``PACER_SPARK_CONFORMANCE`` (or ``PACER_FULL_SUITE``) asks for every test over every installed
    strategy."""
    return any(os.environ.get(name, "") not in ("", "0") for name in ("PACER_SPARK_CONFORMANCE", "PACER_FULL_SUITE"))


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
    # The suite's one long-lived session keeps the C2 compiler, which pays off over its many minutes; the root
    # conftest.py gives the short-lived driver JVMs (each `pacer run` child) C1 only. Measured on 2 cores: this
    # suite's in-process tests took 1.3x longer under C1.
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if "TieredStopAtLevel=1" in submit_args:
        del os.environ["PYSPARK_SUBMIT_ARGS"]
    try:
        session = (
            pacer_spark.session_builder(master, "pacer-spark-tests", shuffle_partitions=2)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate()
        )
    finally:
        if submit_args:
            os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    session.sparkContext.setLogLevel("ERROR")
    # JIT warm-up: the first stateful batch of a JVM costs seconds, which would skew the first test.
    session.range(20000).selectExpr("id % 7 AS k", "id AS v").groupBy("k").sum("v").collect()
    yield session
    session.stop()


def pacer_command(*args: str, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
    """Run the ``pacer`` command installed beside this Python (as a user would), capturing its output; with every
    installed plugin (``_baselines_only`` narrows ``PACER_PLUGINS`` for this process's tests, not for the command)."""
    script = Path(sys.executable).with_name("pacer")
    command = [str(script)] if script.exists() else [shutil.which("pacer") or "pacer"]
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=timeout, check=False, env=env)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone cluster on 127.0.0.1 started by ``pacer cluster up`` (Spark's own Master and two 1-core
    Workers from the installed PySpark), stopped by ``pacer cluster down``, which must leave no process behind."""
    from pacer_spark.run.cluster import group_members, running_cluster

    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark's master and workers cannot run here")
    directory = tmp_path_factory.mktemp("spark-cluster")
    up = pacer_command("cluster", "up", "--dir", str(directory), "--workers", "2", "--cores", "1", "--memory", "1g")
    assert up.returncode == 0, f"pacer cluster up failed:\n{up.stdout}{up.stderr}"
    info = running_cluster(directory)
    assert info is not None and up.stdout.strip().splitlines()[-1] == info.master_url, up.stdout
    try:
        yield info
    finally:
        down = pacer_command("cluster", "down", "--dir", str(directory), timeout=120)
        left = {pid: group_members(pid) for pid in (info.master_pid, *info.worker_pids) if group_members(pid)}
        assert down.returncode == 0 and not left, f"pacer cluster down left {left}:\n{down.stdout}{down.stderr}"
