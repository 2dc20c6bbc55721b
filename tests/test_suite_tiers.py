"""The suite's own rules (the repository's ``conftest.py``), run on a small suite of their own in a folder of its own:
a test that starts a JVM is marked ``jvm`` (from its fixtures) or fails saying so; under ``CI=true`` a missing
prerequisite fails instead of skipping, and Hypothesis draws the same examples every run; CI's JVM tier (``--dist
loadgroup``) runs the tests of one broker in one worker."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SUITE = '''
import subprocess

import pytest
from hypothesis import given, strategies as st


@pytest.fixture
def spark():
    return "a session"


def test_takes_the_spark_fixture(spark):
    assert spark


def test_starts_java_unmarked():
    subprocess.run(["java", "-version"], check=False)


@pytest.mark.jvm
def test_marked_jvm():
    pass


def test_skips_for_maven():
    pytest.skip("mvn is not installed (apt-get install maven)")


def test_skips_for_a_gpu():
    pytest.skip("no GPU visible (nvidia-smi -L failed)")


@pytest.mark.xfail(reason="a known limit", strict=True)
def test_skips_not_but_fails_as_expected():
    assert False


@pytest.fixture
def kafka_broker():
    return "a broker"


@pytest.mark.parametrize("topic", range(4))
def test_reads_the_broker(kafka_broker, topic):
    pass


@given(st.integers())
def test_draws(n):
    with open("draws.txt", "a") as out:
        out.write(f"{n}\\n")
'''


def _run(tmp_path: Path, *args: str, ci: bool = False) -> subprocess.CompletedProcess[str]:
    shutil.copy(ROOT / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_small.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    jvm: starts a JVM\n    spark: Spark\n"
                                         "    cluster: a cluster\n    gpu: a GPU\n    full(reason): full suite\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "HYPOTHESIS_PROFILE", "PYTEST_ADDOPTS")}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=env, check=False)


def _outcomes(out: str) -> dict[str, str]:
    """Test name -> FAILED, ERROR, SKIPPED, XFAIL or PASSED, from ``-v``'s lines (a test that passed and then erred at its
    teardown has two: the worse word wins)."""
    rank = {"PASSED": 0, "XFAIL": 1, "SKIPPED": 1, "ERROR": 2, "FAILED": 3}
    found: dict[str, str] = {}
    for line in out.splitlines():
        if not line.startswith("test_small.py::"):
            continue
        name, _, rest = line.removeprefix("test_small.py::").partition(" ")
        word = rest.split(" ")[0]
        if word in rank and rank[word] >= rank[found.get(name, "PASSED")]:
            found[name] = word
    return found


def test_the_fast_tier_runs_no_jvm_and_an_unmarked_jvm_test_fails_naming_the_mark(tmp_path: Path) -> None:
    done = _run(tmp_path, "-m", "not jvm", "-k", "not draws and not skips and not broker")
    outcomes = _outcomes(done.stdout)
    # the fixture named like the one that starts Spark marks its test; the marked one is left out
    assert "test_takes_the_spark_fixture" not in outcomes and "test_marked_jvm" not in outcomes, done.stdout
    assert outcomes["test_starts_java_unmarked"] == "ERROR", done.stdout
    assert "is not marked jvm and started a JVM" in done.stdout and "java -version" in done.stdout, done.stdout


def test_on_ci_a_missing_prerequisite_fails_and_no_gpu_skips(tmp_path: Path) -> None:
    local = _outcomes(_run(tmp_path, "-k", "skips").stdout)
    assert local == {"test_skips_for_maven": "SKIPPED", "test_skips_for_a_gpu": "SKIPPED",
                     "test_skips_not_but_fails_as_expected": "XFAIL"}, local
    done = _run(tmp_path, "-k", "skips", ci=True)
    assert _outcomes(done.stdout) == {"test_skips_for_maven": "FAILED", "test_skips_for_a_gpu": "SKIPPED",
                                      "test_skips_not_but_fails_as_expected": "XFAIL"}, done.stdout  # not a skip
    assert "skipped on CI, where every prerequisite is installed (CI=true): mvn is not installed" in done.stdout


def test_on_ci_hypothesis_draws_the_same_examples_every_run(tmp_path: Path) -> None:
    runs = []
    for _ in range(2):
        done = _run(tmp_path, "-k", "draws", ci=True)
        assert done.returncode == 0, done.stdout[-2000:]
        runs.append((tmp_path / "draws.txt").read_text())
        (tmp_path / "draws.txt").unlink()
    assert runs[0] == runs[1] and len(runs[0].splitlines()) >= 10


def test_the_jvm_tier_runs_the_tests_of_one_broker_in_one_worker(tmp_path: Path) -> None:
    # pytest 9.2 with pytest-xdist 3.8 spread them (xdist wrote the group where pytest no longer read it): the
    # repository's conftest.py stops such a run, naming the pin
    done = _run(tmp_path, "-n", "2", "--dist", "loadgroup", "-k", "broker")
    assert done.returncode == 0, done.stdout[-3000:]
    ran = [line.split(" PASSED ") for line in done.stdout.splitlines()
           if " PASSED test_small.py::test_reads_the_broker" in line]  # "[gw0] [ 60%]", "test_small.py::...@kafka"
    assert len(ran) == 4 and all(name.strip().endswith("@kafka") for _, name in ran), done.stdout[-3000:]
    workers = {where.split("]")[0] for where, _ in ran}
    assert len(workers) == 1, done.stdout[-3000:]
