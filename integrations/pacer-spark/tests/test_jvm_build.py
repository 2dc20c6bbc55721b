"""The JVM part as a built artifact: its Java unit tests (Maven), the wheel build backend's jar packaging
(``build_jar.py``), and which jar :func:`pacer_spark.jvm.jar.build_jar` picks (the wheel's, else javac's)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from pacer_spark.jvm import jar as jvm

PACER_SPARK = Path(__file__).resolve().parents[1]


@pytest.mark.jvm  # Maven runs the JUnit tests
def test_the_java_unit_tests_of_the_decision_logic_pass(tmp_path: Path) -> None:
    """``mvn test`` in ``jvm/`` (PacedStream: snapshots, caps, fail-open; KafkaPieces), built outside the source tree."""
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.skip("`mvn` is not on the PATH: the JVM part's JUnit tests (jvm/pom.xml) did not run")
    ran = subprocess.run([mvn, "-B", "-q", "test", f"-Dpacer.build.dir={tmp_path / 'target'}"],
                         cwd=PACER_SPARK / "jvm", capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-6000:]
    reports = list((tmp_path / "target" / "surefire-reports").glob("TEST-*.xml"))
    assert {r.name for r in reports} >= {"TEST-io.pacer.spark.PacedStreamTest.xml",
                                          "TEST-io.pacer.spark.PacedStreamFailOpenTest.xml",
                                          "TEST-io.pacer.spark.KafkaPiecesTest.xml"}
    assert all('failures="0"' in r.read_text() and 'errors="0"' in r.read_text() for r in reports)


# -- the build backend ------------------------------------------------------------------------------


@pytest.fixture
def backend() -> ModuleType:
    """``build_jar.py`` (pacer-spark's PEP 517 backend), loaded by path."""
    pytest.importorskip("setuptools")
    spec = importlib.util.spec_from_file_location("_pacer_build_jar_test", PACER_SPARK / "build_jar.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spark_home(root: Path, version: str) -> Path:
    jars = root / version / "jars"
    jars.mkdir(parents=True)
    (jars / f"spark-core_2.13-{version}.jar").write_bytes(b"")
    return jars


def _fake_compile(classes: dict[str, bytes]) -> object:
    """A stand-in for javac: a jar whose single class's bytes depend on the Spark folder's release."""
    def compile_jar(sources: Path, jar: Path, spark_jars: Path) -> None:
        with zipfile.ZipFile(jar, "w") as z:
            z.writestr("META-INF/MANIFEST.MF", f"Built-Against: {spark_jars}\n")  # differs: must not count
            z.writestr("io/pacer/spark/PacerSourceProvider.class", classes[spark_jars.parent.name])
    return compile_jar


def test_releases_with_identical_classes_share_one_jar(backend: ModuleType, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folders = [_spark_home(tmp_path, v) for v in ("4.2.1", "4.3.0", "5.0.0")]
    runtime = backend._runtime_jvm()
    monkeypatch.setattr(runtime, "compile_jar", _fake_compile({"4.2.1": b"A", "4.3.0": b"A", "5.0.0": b"B"}))
    manifest = backend.package_jvm(tmp_path / "out", folders)
    assert [(e["file"], e["spark"], e["minors"]) for e in manifest["jars"]] == [
        ("pacer-spark-jvm-spark4.2-4.3.jar", ["4.2.1", "4.3.0"], ["4.2", "4.3"]),
        ("pacer-spark-jvm-spark5.0.jar", ["5.0.0"], ["5.0"]),
    ]
    out = tmp_path / "out"
    assert jvm.packaged_jar("4.2.0", out) == out / "pacer-spark-jvm-spark4.2-4.3.jar"
    assert jvm.packaged_jar("5.0.1", out) == out / "pacer-spark-jvm-spark5.0.jar"
    assert jvm.packaged_jar("4.1.0", out) is None
    assert (out / "src/main/java/io/pacer/spark/PacedStream.java").is_file()
    assert json.loads((out / jvm.MANIFEST_NAME).read_text()) == manifest


def test_two_releases_of_one_minor_with_different_classes_are_refused(backend: ModuleType, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    folders = [_spark_home(tmp_path, v) for v in ("4.2.0", "4.2.1")]
    monkeypatch.setattr(backend._runtime_jvm(), "compile_jar", _fake_compile({"4.2.0": b"A", "4.2.1": b"B"}))
    with pytest.raises(backend.JarPackagingError, match=r"releases of Spark 4\.2 compile to different classes"):
        backend.package_jvm(tmp_path / "out", folders)


def test_the_build_environment_gets_pyspark_unless_spark_jars_are_named(backend: ModuleType, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backend._setuptools, "get_requires_for_build_wheel", lambda config_settings=None: ["wheel"])
    monkeypatch.delenv(backend.SPARK_JARS_ENV, raising=False)
    assert backend.get_requires_for_build_wheel() == ["wheel", backend.pyspark_requirement()]
    assert backend.pyspark_requirement().startswith("pyspark>=4.2")
    jars = _spark_home(tmp_path, "4.3.0")
    monkeypatch.setenv(backend.SPARK_JARS_ENV, str(jars))
    assert backend.get_requires_for_build_wheel() == ["wheel"]
    assert backend.spark_jar_folders() == [jars] and backend.spark_version_of(jars) == "4.3.0"
    monkeypatch.setenv(backend.SPARK_JARS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(backend.JarPackagingError, match="do not exist"):
        backend.spark_jar_folders()


# -- which jar the runtime takes --------------------------------------------------------------------


def _packaged(folder: Path, minors: list[str], content: bytes = b"PK-jar") -> Path:
    folder.mkdir(parents=True)
    jar = folder / "pacer-spark-jvm-test.jar"
    jar.write_bytes(content)
    manifest = {"format": 1, "sources": "x", "jars": [{"file": jar.name, "spark": [f"{m}.0" for m in minors],
                                                        "minors": minors, "sha256": hashlib.sha256(content).hexdigest()}]}
    (folder / jvm.MANIFEST_NAME).write_text(json.dumps(manifest))
    return jar


def test_the_packaged_jar_of_the_running_minor_is_used_without_a_jdk(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _packaged(tmp_path / "_jvm", [jvm.spark_minor(jvm.spark_version())])
    monkeypatch.setattr(jvm, "PACKAGED_DIR", tmp_path / "_jvm")
    monkeypatch.delenv("PACER_JVM_SOURCES", raising=False)

    def no_javac(sources: Path, jar: Path) -> None:
        raise AssertionError("compiled although the wheel carries a jar for this Spark")

    monkeypatch.setattr(jvm, "_compile", no_javac)
    built = jvm.build_jar()
    assert built.jar == jar and not built.compiled


def test_a_packaged_jar_that_is_not_the_built_one_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = _packaged(tmp_path / "_jvm", [jvm.spark_minor(jvm.spark_version())])
    jar.write_bytes(b"PK-swapped")
    assert jvm.packaged_jar(folder=tmp_path / "_jvm") is None


def test_without_a_jar_for_this_spark_and_without_javac_the_error_says_what_the_wheel_carries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _packaged(tmp_path / "_jvm", ["3.4", "3.5"])
    monkeypatch.setattr(jvm, "PACKAGED_DIR", tmp_path / "_jvm")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PACER_JVM_CACHE", str(tmp_path / "cache"))
    with pytest.raises(jvm.JvmBuildError) as raised:
        jvm.build_jar()
    message = str(raised.value)
    assert "`javac` was not found" in message and "JDK 17" in message
    assert f"built for Spark 3.4, 3.5 only, and this is Spark {jvm.spark_version()}" in message
    assert f"a pacer-spark wheel built for Spark {jvm.spark_version()}" in message


def test_a_source_checkout_compiles_and_never_looks_for_a_packaged_jar() -> None:
    assert not (Path(jvm.__file__).parent / "_jvm").exists(), "a build left jars in the source tree"
    assert jvm.packaged_jars() == [] and jvm.sources_dir() == PACER_SPARK / "jvm"
