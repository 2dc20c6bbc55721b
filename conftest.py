"""Repository-wide pytest hooks: the fast tier, the default run (CI's) and the full suite, and the checks that keep
them honest.

- **The fast tier**, ``python -m pytest -m "not jvm"``: no JVM. A test that starts one (Spark, the Kafka broker, a
  standalone cluster, Maven, ``javac``) is marked ``jvm``: derived here from the fixtures that start one
  (:data:`JVM_FIXTURES`) and from the ``spark``, ``cluster`` and ``gpu`` marks. A test without the mark that starts
  a JVM anyway fails, saying so: its ``java``, ``javac`` and ``mvn`` are a stand-in that refuses (:func:`_no_jvm`).
- **The default run**, ``python -m pytest`` (CI runs it as the two tiers, one after the other): a test marked
  ``full`` is a longer variant of behaviour that the default run already proves with another test (another source
  format, the other signal, another strategy of the same kind); it is skipped, saying why and how to run it;
  ``PACER_FULL_SUITE=1`` runs it, as the Spark sessions of nox do (``nox -s spark``, ``nox -s cluster``).
- **Under** ``CI=true`` a skipped test fails unless its reason is one CI expects (:data:`SKIPS_CI_EXPECTS`: no GPU,
  the full suite's variants): a prerequisite missing on CI (Java, Maven, Chromium, a plugin) is a failure there.
- **Hypothesis** draws with the ``ci`` profile under ``CI=true`` (derandomized: the same draws on every run, no
  example database) and ``deep`` with ``HYPOTHESIS_PROFILE=deep`` (ten times the examples), else its defaults.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

#: The environment variable that asks for the full suite.
FULL_SUITE_ENV = "PACER_FULL_SUITE"

# The short-lived Spark driver JVMs the tests start (every ``pacer run`` child process, the apps the tests launch)
# compile with C1 only, as the Kafka broker and the standalone cluster's daemons do: on 2 shared cores C2's compiler
# threads compete with the short runs (a 4 s ``pacer run`` on Spark: 52 s -> 45 s end to end, its batches 2.5 s ->
# 2.0 s on average). pacer-spark's long-lived suite session keeps C2 (its conftest.py). A PYSPARK_SUBMIT_ARGS set by
# the caller is kept.
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 pyspark-shell")


#: Fixtures that start a JVM (Spark's driver, the Kafka broker, a standalone cluster): a test taking one is ``jvm``.
JVM_FIXTURES = frozenset({"spark", "spark_cluster", "kafka_broker", "own_broker", "rapids_spark", "gpu_spark",
                          "wheels"})
#: Fixtures whose tests share one process under pytest-xdist (``--dist loadgroup``): one standalone cluster, one
#: Kafka broker per run rather than one per worker.
SHARED_FIXTURES = (("spark_cluster", "cluster"), ("kafka_broker", "kafka"), ("own_broker", "kafka"))

#: Marks whose tests start a JVM.
JVM_MARKS = ("spark", "cluster", "gpu")
#: Marks whose tests are ``serial`` too (run alone: CI's last pass, after the JVM tier's parallel one): like the
#: modules marked ``serial`` (they measure Spark's timing), they run the standalone cluster or a GPU, which a second
#: Spark beside them on 2 cores skews (seen: a calibration step missed, a join's batch past its bound, an executor's
#: lifetime).
SERIAL_MARKS = ("cluster", "gpu")

#: Skip reasons CI expects (a regular expression): there is no GPU (nor the RAPIDS jar it needs), a variant runs in the
#: full suite only, a branch another test covers on this machine, giving a file away needs root, a conformance check
#: of a property the runtime does not claim (Spark is not deterministic under a seed).
SKIPS_CI_EXPECTS = re.compile(r"GPU|RAPIDS|NVVM|nvidia|full suite only|covers it|needs root|is a Spark the jar supports"
                              r"|does not declare capability", re.IGNORECASE)


def on_ci() -> bool:
    """Whether this run is CI's (``CI=true``, as CI services set it; ``.ci/run`` does too)."""
    return os.environ.get("CI", "").lower() == "true"


settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("deep", max_examples=1000, print_blob=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])
elif on_ci():
    settings.load_profile("ci")


def full_suite() -> bool:
    """True when ``PACER_FULL_SUITE`` asks for every test, those marked ``full`` included."""
    return os.environ.get(FULL_SUITE_ENV, "") not in ("", "0")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``jvm`` the tests that start a JVM (module docstring); skip the tests marked ``full`` outside the full
    suite, naming what covers them in the default run."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        if JVM_FIXTURES & used or any(item.get_closest_marker(m) for m in JVM_MARKS):
            item.add_marker(pytest.mark.jvm)
        if any(item.get_closest_marker(m) for m in SERIAL_MARKS):
            item.add_marker(pytest.mark.serial)
        # under xdist's loadgroup: a module's tests in one worker (its module fixtures built once), and the tests of
        # the one cluster or broker together
        group = next((name for fixture, name in SHARED_FIXTURES if fixture in used), item.nodeid.split("::")[0])
        item.add_marker(pytest.mark.xdist_group(group))
    if full_suite():
        return
    for item in items:
        marker = item.get_closest_marker("full")
        if marker is not None:
            covered_by = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
            item.add_marker(pytest.mark.skip(reason=f"full suite only ({covered_by}); {FULL_SUITE_ENV}=1 or "
                                             "nox -s spark runs it"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: object, ids: list[str]) -> None:
    """Under ``--dist loadgroup`` (CI's JVM tier), stop the run where a worker's tests came back without their groups
    (every test has one: :func:`pytest_collection_modifyitems`): pytest-xdist's scheduler would spread a group's tests
    over every worker, each building the module's fixtures and its own broker (pytest 9.2 with pytest-xdist 3.8, which
    still writes the group into the node id where pytest 9.2 no longer reads it: three brokers on three workers)."""
    config = getattr(node, "config", None)
    if config is None or config.getvalue("dist") != "loadgroup" or not ids or any("@" in i for i in ids):
        return
    pytest.exit(f"--dist loadgroup: pytest-xdist left every test out of its group (e.g. {ids[0]}), so each worker "
                f"would build every module's fixtures and a broker of its own; pytest {pytest.__version__} with this "
                "pytest-xdist does not group: install the pytest pyproject.toml's dev group pins "
                "(python -m pip install -r requirements-dev.txt)", returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture
def umask_002() -> Iterator[None]:
    """The umask of a shared-group setup (what is created is group-writable unless the code says otherwise)."""
    old = os.umask(0o002)
    try:
        yield
    finally:
        os.umask(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under ``CI=true``, a skip CI does not expect (:data:`SKIPS_CI_EXPECTS`) is a failure."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not hasattr(report, "wasxfail"):  # an expected failure is no skip
        _fail_an_unexpected_skip(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Under ``CI=true``, a module skipped whole (``pytest.importorskip``) for a reason CI does not expect fails."""
    outcome = yield
    _fail_an_unexpected_skip(outcome.get_result())


def _fail_an_unexpected_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Under ``CI=true``, turn ``report``'s skip into a failure unless its reason is one CI expects."""
    if not (report.skipped and on_ci()):
        return
    reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if not SKIPS_CI_EXPECTS.search(reason):
        report.outcome = "failed"
        report.longrepr = (f"{report.nodeid} skipped on CI, where every prerequisite is installed (CI=true): "
                           f"{reason}\ninstall what it names, or add the reason to conftest.SKIPS_CI_EXPECTS if CI "
                           "cannot have it")


_REFUSING_JVM = """#!/bin/sh
echo "$0 $*" >> "{log}"
echo "pacer's test suite: this test is not marked jvm, and it started $(basename "$0"): mark it" \
     "@pytest.mark.jvm, or take a fixture that starts the JVM (conftest.JVM_FIXTURES)" >&2
exit 97
"""


@pytest.fixture(scope="session")
def _refusing_java(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JAVA_HOME whose ``java``, ``javac`` and ``mvn`` refuse, logging each call (for :func:`_no_jvm`)."""
    home = tmp_path_factory.mktemp("no-jvm")
    (home / "bin").mkdir()
    for tool in ("java", "javac", "mvn"):
        path = home / "bin" / tool
        path.write_text(_REFUSING_JVM.format(log=home / "calls.log"))
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return home


@pytest.fixture(autouse=True)
def _no_jvm(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A test not marked ``jvm`` gets Java and Maven that refuse (JAVA_HOME and the front of PATH), so that one
    starting a JVM fails, saying it should be marked: the fast tier (``-m "not jvm"``) then never starts one."""
    if request.node.get_closest_marker("jvm") is not None:
        yield
        return
    home: Path = request.getfixturevalue("_refusing_java")
    log = home / "calls.log"
    before = log.read_text() if log.exists() else ""
    started = time.time()
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    yield
    calls = (log.read_text() if log.exists() else "")[len(before):]
    if calls:
        _forget_refusals(started)
        pytest.fail(f"{request.node.nodeid} is not marked jvm and started a JVM ({calls.strip().splitlines()[0]}): "
                    "mark it @pytest.mark.jvm or take a fixture that starts one (conftest.JVM_FIXTURES)")


def _forget_refusals(since: float) -> None:
    """Delete the failures pacer's jar cache remembered since ``since`` (the refusing ``mvn``'s, which would make
    the marked tests after it fail without asking Maven)."""
    from pacer.infra.jars import cache_dir

    for marker in cache_dir().rglob(".failed*"):
        if marker.is_file() and not marker.is_symlink() and marker.stat().st_mtime >= since - 1:
            marker.unlink()
