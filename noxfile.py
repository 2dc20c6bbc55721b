"""nox sessions for pacer: tests, conformance per runtime, lint, benchmarks, Spark and RAPIDS matrices.

``nox --list`` shows every session with its docstring.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MEMBERS: list[str] = PYPROJECT["tool"]["pacer"]["workspace"]["members"]
DEV: list[str] = PYPROJECT["dependency-groups"]["dev"]
PYTHON = PYPROJECT["project"]["requires-python"].removeprefix(">=")
SPARK_VERSIONS = [nox.param("4.2.1", id="spark-4.2"), nox.param("4.3.0", id="spark-4.3")]
#: The PySpark of `nox -s rapids`: the newest Spark rapids-4-spark_2.13 26.08.1 has a shim for (exactly 4.2.0).
RAPIDS_SPARK = "4.2.0"

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True


def _install(session: nox.Session, *extra: str, spark: str | None = None) -> None:
    editable = [arg for member in MEMBERS for arg in ("-e", str(ROOT / member))]
    pins = [f"pyspark=={spark}"] if spark else []
    session.install(*editable, *pins, *DEV, *extra)  # the dev dependency group of pyproject.toml
    session.env["PYSPARK_PYTHON"] = str(Path(session.bin) / "python")
    session.env["PYSPARK_DRIVER_PYTHON"] = session.env["PYSPARK_PYTHON"]


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Every package's tests, Spark included (the README's test command, in its own virtualenv)."""
    _install(session)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("runtime", ["sim", "spark"])
def conformance(session: nox.Session, runtime: str) -> None:
    """The shared conformance suite over every installed strategy, on one runtime (sim or spark)."""
    _install(session)
    paths = {"sim": ["conformance/tests"], "spark": ["integrations/pacer-spark/tests/test_conformance.py"]}[runtime]
    strategy_suites = [str(p) for p in ROOT.glob("strategies/*/tests/test_conformance.py")] if runtime == "sim" else []
    session.run("python", "-m", "pytest", *paths, *strategy_suites, *session.posargs)


def requirements_text() -> str:
    """requirements-dev.txt as pyproject.toml's members and dev group make it."""
    lines = ["# Generated from pyproject.toml ([tool.pacer.workspace] members, [dependency-groups] dev) by",
             "# `nox -s requirements`; do not edit. One command installs every pacer distribution for development,",
             "# in dependency order:  python -m pip install -r requirements-dev.txt"]
    lines += [f"-e ./{member}" for member in MEMBERS]
    lines += ["# development tools", *DEV]
    return "\n".join(lines) + "\n"


@nox.session(python=False)
def requirements(session: nox.Session) -> None:
    """Regenerate requirements-dev.txt from pyproject.toml (``-- --check``: fail when it is out of date)."""
    path = ROOT / "requirements-dev.txt"
    if "--check" in session.posargs:
        if path.read_text() != requirements_text():
            session.error("requirements-dev.txt is out of date with pyproject.toml: run `nox -s requirements`")
        return
    path.write_text(requirements_text())
    session.log(f"wrote {path}")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff lint and mypy (strict on pacer-core) over the whole workspace."""
    _install(session)
    session.run("ruff", "check", ".")
    sources = [str(p) for member in MEMBERS for p in [ROOT / member / "src"] if p.exists()]
    session.run("mypy", *sources)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """pytest-benchmark suites (outside default collection); writes .benchmarks/pacer-bench.json."""
    _install(session)
    suites = [str(p) for p in sorted(ROOT.glob("*/*/benchmarks")) + sorted(ROOT.glob("*/benchmarks")) if p.is_dir()]
    out = ROOT / ".benchmarks" / "pacer-bench.json"
    out.parent.mkdir(exist_ok=True)
    session.run("python", "-m", "pytest", *suites, "--benchmark-only", f"--benchmark-json={out}", *session.posargs)
    session.log(f"benchmark results: {out}")


@nox.session(python=PYTHON, tags=["spark"])
@nox.parametrize("spark", SPARK_VERSIONS)
def spark(session: nox.Session, spark: str) -> None:
    """pacer-spark's tests against one PySpark release from PyPI (4.2.x and 4.3.x; pacer needs >= 4.2)."""
    _install(session, spark=spark)
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", *session.posargs)


@nox.session(python=PYTHON, tags=["spark"])
def cluster(session: nox.Session) -> None:
    """A short stream on local-cluster[2,1,1024]: two executor JVMs on loopback."""
    _install(session)
    session.env["PACER_TEST_MASTER"] = "local-cluster[2,1,1024]"
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", "-m", "cluster", *session.posargs)


@nox.session(python=PYTHON, tags=["spark"])
def soak(session: nox.Session) -> None:
    """Bounded driver memory: the simulator's soak (2 million datasets) and a paced Spark query for 3000 batches.

    Each prints memory and the p99 decision time at every checkpoint and the slope, and fails when pacer's
    traced Python heap grows (``python -m pacer_sim.soak``, ``python -m pacer_spark.soak``).
    """
    _install(session)
    session.env["PACER_PLUGINS"] = ""
    session.run("python", "-m", "pacer_sim.soak", "--datasets", "2000000")
    session.run("python", "-m", "pacer_spark.soak", "--batches", "3000")


def _gpu_visible() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True, check=False).returncode == 0


@nox.session(python=PYTHON, tags=["gpu"])
def rapids(session: nox.Session) -> None:
    """pacer-spark with the RAPIDS Accelerator (com.nvidia:rapids-4-spark_2.13 from Maven Central) on a GPU.

    Resolves the jar with mvn into pacer's cache (about 1 GB, once; PACER_RAPIDS_VERSION picks another
    release), checks it has a shim for the pinned PySpark (PACER_RAPIDS_SPARK, default 4.2.0: a RAPIDS
    shim matches one exact Spark version and 26.08.1 has none for 4.2.1 or 4.3), runs the CPU check of
    the exec names pacer switches (test_rapids_execs.py), then the GPU tests; skips those, naming the
    jar, where no GPU is visible.
    """
    spark = os.environ.get("PACER_RAPIDS_SPARK", RAPIDS_SPARK)
    _install(session, spark=spark)
    session.env["PACER_RAPIDS_RESOLVE"] = "1"
    resolved = session.run("python", "-m", "pacer_spark.rapids_jar", "--spark", spark, silent=True)
    jar = str(resolved).strip().splitlines()[-1]
    session.log(f"RAPIDS jar: {jar}")
    session.env["PACER_RAPIDS_JARS"] = jar
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests/test_rapids_execs.py", *session.posargs)
    if not _gpu_visible():
        session.skip(f"no GPU visible (nvidia-smi -L failed): the GPU tests did not run; RAPIDS jar resolved: {jar}")
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", "-m", "gpu", *session.posargs)
