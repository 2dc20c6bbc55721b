"""pacer-spark as a user installs it: wheels built from this tree, no JDK at run time.

The wheels of pacer-core, pacer-workloads and pacer-spark are built (``pip wheel``, build isolation,
pacer-spark's jar compiled by its build backend against the running PySpark's jars) from a copy of
their folders, so nothing is written into the source tree. Then:

- the wheel's metadata asks for what pacer-spark declares (a ``pyspark`` range, ``pacer-core``, ...)
  and nothing of the workspace's dev group, and it carries the jar its manifest names;
- the three wheels go into a fresh virtualenv whose PATH has ``java`` but no ``javac`` (and no
  ``JAVA_HOME``): pip installs what the wheels require, PySpark included (held to the running release
  by a constraints file, :func:`_pin_running_pyspark`; pip's wheel cache makes that seconds after the
  first install), no dev tool comes with it, and a paced
  ``format("pacer")`` query runs on the packaged jar (an empty jar cache stays empty: nothing was
  compiled).
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pacer_spark.jvm import jar as jvm

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
BUILT = ["packages/pacer-core", "packages/pacer-workloads", "integrations/pacer-spark"]
_SKIP_COPY = shutil.ignore_patterns("build", "dist", "*.egg-info", "__pycache__", "tests", ".benchmarks", "target")

APP = """
import json, sys
from pathlib import Path
import pacer_spark
from pacer_spark.jvm import jar as jvm
inbox, out = Path(sys.argv[1]), Path(sys.argv[2])
built = jvm.build_jar()
spark = (pacer_spark.session_builder("local[1]", "wheel").config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
pacer = pacer_spark.attach(spark, admission="asap", deadline="5s")
frame = (spark.readStream.format("pacer").option("pacer.source", "csv").option("header", "true")
         .option("maxFilesPerTrigger", "1").schema("id INT, word STRING").load(str(inbox)))
query = (frame.writeStream.queryName("wheel").format("parquet").option("path", str(out / "data"))
         .option("checkpointLocation", str(out / "checkpoint")).trigger(availableNow=True).start())
query.awaitTermination(180)
ids = sorted(r.id for r in spark.read.parquet(str(out / "data")).collect())
paced = pacer.report()["spark"]["paced"]["wheel"]
print("RESULT " + json.dumps({"jar": str(built.jar), "compiled": built.compiled, "ids": ids, "paced": paced,
                              "batches": len([p for p in query.recentProgress if p["numInputRows"] > 0])}))
pacer.stop()
spark.stop()
"""


def _wheel(folder: Path, dist: str) -> Path:
    (found,) = folder.glob(f"{dist}-*.whl")
    return found


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.parser.Parser().parsestr(z.read(name).decode())


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The three wheels, built from copies of their folders against the running PySpark's jars."""
    work = tmp_path_factory.mktemp("wheels")
    copies = []
    for member in BUILT:
        copy = work / "src" / Path(member).name
        shutil.copytree(ROOT / member, copy, ignore=_SKIP_COPY)
        copies.append(str(copy))
    out = work / "dist"
    env = {**os.environ, "PACER_SPARK_JARS": str(jvm.spark_jars_dir())}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(out), *copies],
                           capture_output=True, text=True, env=env, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    yield out


def test_the_wheel_requires_what_pacer_spark_declares_and_nothing_from_the_dev_group(wheels: Path) -> None:
    meta = _metadata(_wheel(wheels, "pacer_spark"))
    required = [Requirement(r) for r in meta.get_all("Requires-Dist") or []]
    plain: dict[str, Requirement] = {canonicalize_name(r.name): r for r in required if r.marker is None}
    declared = tomllib.loads((ROOT / "integrations/pacer-spark/pyproject.toml").read_text())["project"]["dependencies"]
    assert {n: str(r.specifier) for n, r in plain.items()} == {
        canonicalize_name(Requirement(d).name): str(Requirement(d).specifier) for d in declared}
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    assert not set(plain) & {canonicalize_name(Requirement(d).name) for d in dev}
    assert "pacer-core" in plain
    import pyspark

    spark = plain["pyspark"].specifier
    assert spark.contains(pyspark.__version__) and spark.contains("4.2.0") and not spark.contains("4.1.0")
    assert all(r.marker is not None and "extra" in str(r.marker) for r in required if r.marker is not None)


def test_the_wheel_carries_the_jar_its_manifest_names(wheels: Path, tmp_path: Path) -> None:
    with zipfile.ZipFile(_wheel(wheels, "pacer_spark")) as z:
        names = z.namelist()
        z.extractall(tmp_path)
    packaged = tmp_path / "pacer_spark" / "_jvm"
    entries = jvm.packaged_jars(packaged)
    assert [e.spark for e in entries] == [(jvm.spark_version(),)]
    jar = jvm.packaged_jar(jvm.spark_version(), packaged)
    assert jar is not None and jar.name == f"pacer-spark-jvm-spark{jvm.spark_minor(jvm.spark_version())}.jar"
    assert jvm.packaged_jar("3.5.1", packaged) is None
    with zipfile.ZipFile(jar) as z:
        assert f"{jvm.PROVIDER_CLASS.replace('.', '/')}.class" in z.namelist()
        services = z.read("META-INF/services/org.apache.spark.sql.sources.DataSourceRegister").decode()
    assert services.strip() == jvm.PROVIDER_CLASS
    assert json.loads((packaged / jvm.MANIFEST_NAME).read_text())["sources"] == jvm.sources_hash()
    assert (packaged / "src/main/java/io/pacer/spark/PacedStream.java").is_file()  # javac for another Spark
    assert not [n for n in names if n.endswith(".class")], "classes only inside the jar"


def _javaless_path(tmp: Path) -> str:
    """A PATH of links to every command on the current PATH but the JDK's tools other than ``java``."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("no `java` on the PATH: Spark needs a Java runtime")
    jdk_bin = Path(java).resolve().parent
    folder = tmp / "bin"
    folder.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        if not Path(entry).is_dir():
            continue
        for command in Path(entry).iterdir():
            link = folder / command.name
            if link.exists() or link.is_symlink() or not os.access(command, os.X_OK) or command.is_dir():
                continue
            if command.resolve().parent == jdk_bin and command.name != "java":
                continue
            if command.name in ("javac", "jar"):
                continue
            link.symlink_to(command.resolve())
    return str(folder)


def _pin_running_pyspark(tmp: Path) -> Path:
    """A pip constraints file holding ``pyspark`` to the running release, the one the wheel's jar was compiled
    against (a user's cluster fixes its Spark the same way); everything else resolves as the wheels declare."""
    import pyspark

    constraints = tmp / "constraints.txt"
    constraints.write_text(f"pyspark=={pyspark.__version__}\n")
    return constraints


def test_installed_wheels_pace_a_query_with_java_but_no_javac(wheels: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python = str(env_dir / "bin" / "python")
    path = os.pathsep.join([str(env_dir / "bin"), _javaless_path(tmp_path)])
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAVA_HOME", "SPARK_HOME", "PYTHONPATH", "PACER_JVM_SOURCES", "VIRTUAL_ENV", "PACER_PLUGINS")}
    env.update(PATH=path, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, PACER_JVM_CACHE=str(tmp_path / "cache"))
    assert shutil.which("javac", path=path) is None and shutil.which("java", path=path) is not None

    ours = [str(_wheel(wheels, d)) for d in ("pacer_spark", "pacer_core", "pacer_workloads")]
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                "--constraint", str(_pin_running_pyspark(tmp_path)), *ours],
                               capture_output=True, text=True, env=env, check=False)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            env=env, check=True)
    names = {canonicalize_name(p["name"]) for p in json.loads(listed.stdout)}
    assert {"pyspark", "py4j", "pacer-core", "pacer-workloads", "pyarrow", "pandas"} <= names, names
    dev = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["dev"]
    assert not names & {canonicalize_name(Requirement(d).name) for d in dev}, names
    assert not names & {"pacer-sim", "pacer-bench", "pacer-kafka", "pacer-zstream"}, names

    inbox = tmp_path / "in"
    inbox.mkdir()
    for index in range(3):
        (inbox / f"part-{index}.csv").write_text("id,word\n" + "".join(f"{index * 10 + j},w{j}\n" for j in range(10)))
    app = tmp_path / "app.py"
    app.write_text(APP)
    ran = subprocess.run([python, str(app), str(inbox), str(tmp_path / "out")], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300, check=False)
    lines = [line for line in ran.stdout.splitlines() if line.startswith("RESULT ")]
    assert ran.returncode == 0 and lines, ran.stdout[-3000:] + ran.stderr[-5000:]
    result = json.loads(lines[-1].removeprefix("RESULT "))
    assert not result["compiled"] and Path(result["jar"]).is_relative_to(env_dir), result["jar"]
    assert result["ids"] == list(range(30))  # every row once
    assert result["batches"] == 3, result  # maxFilesPerTrigger=1 kept: one file a batch
    assert result["paced"]["decisions"] > 0 and result["paced"]["failed_open"] == 0, result["paced"]
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.jar"))
