"""nox sessions for pacer: tests, conformance per runtime, lint, benchmarks, Spark and RAPIDS matrices.

``nox --list`` shows every session with its docstring.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import tomllib
import zipfile
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MEMBERS: list[str] = PYPROJECT["tool"]["pacer"]["workspace"]["members"]
DEV: list[str] = PYPROJECT["dependency-groups"]["dev"]
PYTHON = PYPROJECT["project"]["requires-python"].removeprefix(">=")
#: The PySpark releases pacer supports and tests, one per minor (pacer-spark's pyproject.toml: pyspark >=4.2,<4.4);
#: `nox -s spark` runs the Spark tests on each, `nox -s build` compiles pacer-spark's wheel jar against each.
SUPPORTED_SPARK = ["4.2.1", "4.3.0"]
SPARK_VERSIONS = [nox.param(v, id="spark-" + ".".join(v.split(".")[:2])) for v in SUPPORTED_SPARK]
#: The PySpark of `nox -s rapids`, pinned apart from SUPPORTED_SPARK: a RAPIDS shim matches one exact Spark release,
#: and rapids-4-spark_2.13 26.08.1 (the newest on Maven Central, pacer_spark.plan.rapids_jar.DEFAULT_VERSION) has shims
#: for 3.5.0-3.5.9, 4.0.0-4.0.4, 4.1.1-4.1.3 and 4.2.0 (rapids_jar.spark_shims), none for 4.2.1 or 4.3. 4.2.0 is the
#: newest of those and inside pacer's range (pyspark >=4.2,<4.4); move it with a RAPIDS release that has a newer shim.
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
    """Every package's tests, Spark included (the README's test command, in its own virtualenv; CI's default run,
    without the tests marked ``full``: set PACER_FULL_SUITE=1 for those)."""
    _install(session)
    session.run("python", "-m", "pytest", *session.posargs)


@nox.session(python=PYTHON)
@nox.parametrize("runtime", ["sim", "spark"])
def conformance(session: nox.Session, runtime: str) -> None:
    """The shared conformance suite over every installed strategy, on one runtime (sim or spark)."""
    _install(session)
    paths = {"sim": ["conformance/tests"], "spark": ["integrations/pacer-spark/tests/test_conformance.py"]}[runtime]
    session.env["PACER_FULL_SUITE"] = "1"  # every strategy, not CI's subset (conftest.py)
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
def docs(session: nox.Session) -> None:
    """The documentation site: reference pages generated from the code, then ``mkdocs build --strict`` into site/
    (a broken link, page or snippet fails); MkDocs with Material: Markdown like the READMEs, whose sections the site
    includes (pymdownx.snippets) so each text lives once."""
    _install(session)
    session.run("python", "scripts/gen_docs.py", "--build", *session.posargs)


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
    """The Spark tests on one supported PySpark release (SUPPORTED_SPARK: 4.2.1, 4.3.0).

    Every test of the two Spark integrations (pacer-spark: format("pacer")'s jar compiled with javac and
    the wheel's jar, both against this release; pacer-kafka), then the tests marked ``spark`` elsewhere.
    """
    _install(session, spark=spark)
    session.env["PACER_FULL_SUITE"] = "1"  # the tests marked full too (conftest.py)
    session.run("python", "-c", f"import pyspark, sys; sys.exit(pyspark.__version__ != {spark!r} and "
                f"'pyspark ' + pyspark.__version__ + ' installed, {spark} asked for')")
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", "integrations/pacer-kafka/tests",
                *session.posargs)
    session.run("python", "-m", "pytest", "packages", "strategies", "conformance", "-m", "spark", *session.posargs,
                success_codes=[0, 5])  # 5: none selected (posargs such as -k may leave none there)


def _spark_jars(session: nox.Session, version: str) -> Path:
    """The jars of PySpark ``version`` (``pip download``, pip's cache first), unpacked once under .nox/."""
    folder = ROOT / ".nox" / "_spark-jars" / version
    if (folder / f"spark-core_2.13-{version}.jar").is_file():
        return folder
    with tempfile.TemporaryDirectory(prefix="pacer-pyspark-") as tmp:
        session.run("python", "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp, f"pyspark=={version}")
        (archive,) = Path(tmp).iterdir()
        staged = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        if archive.suffix == ".whl":  # a wheel: pyspark/jars/; an sdist: pyspark-VERSION/deps/jars/
            with zipfile.ZipFile(archive) as z:
                for name in z.namelist():
                    if name.startswith("pyspark/jars/") and name.endswith(".jar"):
                        (staged / Path(name).name).write_bytes(z.read(name))
        else:
            with tarfile.open(archive) as tar:
                for member in tar:
                    if member.isfile() and "/deps/jars/" in member.name and member.name.endswith(".jar"):
                        (staged / Path(member.name).name).write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
        if not (staged / f"spark-core_2.13-{version}.jar").is_file():
            session.error(f"{archive.name} holds no spark-core_2.13-{version}.jar")
        shutil.rmtree(folder, ignore_errors=True)
        staged.rename(folder)
    return folder


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Every workspace member's wheel and sdist into dist/ (``-- DIR`` for another folder).

    pacer-spark's wheel carries format("pacer")'s jar compiled against the jars of each supported PySpark
    (SUPPORTED_SPARK, passed as PACER_SPARK_JARS to its build backend, build_jar.py; one jar when their
    classes are byte-identical); needs a JDK. The JVM part's JUnit tests run first where `mvn` is on the
    PATH (warned otherwise). The session checks that the wheel's manifest serves every
    supported minor and that the sdist carries the Java sources and no jar.
    """
    session.install("build>=1.2")
    if shutil.which("mvn"):  # the jar is built from sources whose unit tests pass (jvm/pom.xml, JUnit 5)
        with tempfile.TemporaryDirectory(prefix="pacer-mvn-") as target:
            session.run("mvn", "-B", "-q", "-f", str(ROOT / "integrations/pacer-spark/jvm/pom.xml"), "test",
                        f"-Dpacer.build.dir={target}", external=True)
    else:
        session.warn("`mvn` is not on the PATH: the JVM part's JUnit tests (jvm/pom.xml) did not run before the build")
    out = Path(session.posargs[0]).resolve() if session.posargs else ROOT / "dist"
    shutil.rmtree(out, ignore_errors=True)
    session.env["PACER_SPARK_JARS"] = os.pathsep.join(str(_spark_jars(session, v)) for v in SUPPORTED_SPARK)
    for member in MEMBERS:
        session.run("python", "-m", "build", "--outdir", str(out), str(ROOT / member))
    (wheel,) = out.glob("pacer_spark-*.whl")
    with zipfile.ZipFile(wheel) as z:
        manifest = json.loads(z.read("pacer_spark/_jvm/manifest.json"))
    served = {minor for entry in manifest["jars"] for minor in entry["minors"]}
    wanted = {".".join(v.split(".")[:2]) for v in SUPPORTED_SPARK}
    if not wanted <= served:
        session.error(f"{wheel.name} serves Spark {sorted(served)}, not every supported minor {sorted(wanted)}")
    (sdist,) = out.glob("pacer_spark-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    if any(n.endswith(".jar") for n in names) or not any(n.endswith("/jvm/src/main/java/io/pacer/spark/PacedStream.java")
                                                          for n in names):
        session.error(f"{sdist.name} must carry jvm/src (the Java sources) and no jar")
    built = sorted(p.name for p in out.iterdir())
    session.log(f"{len(built)} files in {out}: {', '.join(built)}; {wheel.name} jars: "
                + "; ".join(f"{e['file']} for Spark {', '.join(e['spark'])}" for e in manifest["jars"]))


@nox.session(python=PYTHON, tags=["spark"])
def cluster(session: nox.Session) -> None:
    """The standalone-cluster tests alone (``pacer cluster up``: a Master and two Workers, authentication on; the
    default test run takes them too)."""
    _install(session)
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", "-m", "cluster", *session.posargs)


@nox.session(python=PYTHON, tags=["spark"])
def soak(session: nox.Session) -> None:
    """Bounded driver memory: the simulator's soak (2 million datasets) and a paced Spark query for 3000 batches.

    Each prints memory and the p99 decision time at every checkpoint and the slope, and fails when pacer's
    traced Python heap grows (``python -m pacer_sim.soak``, ``python -m pacer_spark.run.soak``).
    """
    _install(session)
    session.env["PACER_PLUGINS"] = ""
    session.run("python", "-m", "pacer_sim.soak", "--datasets", "2000000")
    session.run("python", "-m", "pacer_spark.run.soak", "--batches", "3000")


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
    the exec names pacer switches (test_rapids_execs.py), then, with no GPU needed, Spark with the plugin in
    explainOnly mode: every batch of paced queries (format("pacer") under dStream, and the conformance suite's
    placement invariants over every installed placement strategy) checked against RAPIDS' own plan
    (test_rapids_explain.py, in a process of its own: the plugin loads when the JVM starts); then the GPU
    tests, skipped, naming the jar, where no GPU is visible.
    """
    spark = os.environ.get("PACER_RAPIDS_SPARK", RAPIDS_SPARK)
    _install(session, spark=spark)
    session.env["PACER_RAPIDS_RESOLVE"] = "1"
    resolved = session.run("python", "-m", "pacer_spark.plan.rapids_jar", "--spark", spark, silent=True)
    jar = str(resolved).strip().splitlines()[-1]
    session.log(f"RAPIDS jar: {jar}")
    session.env["PACER_RAPIDS_JARS"] = jar
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests/test_rapids_execs.py", *session.posargs)
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests/test_rapids_explain.py", *session.posargs)
    if not _gpu_visible():
        session.skip(f"no GPU visible (nvidia-smi -L failed): the GPU tests did not run; RAPIDS jar resolved: {jar}")
    session.run("python", "-m", "pytest", "integrations/pacer-spark/tests", "-m", "gpu", *session.posargs)
