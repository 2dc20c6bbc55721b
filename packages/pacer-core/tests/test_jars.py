"""pacer.jars against the real ``mvn`` and Maven Central (skipped, with the reason, where ``mvn`` is absent)."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

from pacer import jars

needs_mvn = pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn is not installed (apt-get install maven)")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "maven"))
    return tmp_path / "maven"


@needs_mvn
def test_resolve_fetches_once_into_the_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = jars.resolve("com.google.code.gson", "gson", "2.10.1")
    assert jar == cache / "com.google.code.gson" / "gson" / "2.10.1" / "gson-2.10.1.jar"
    with zipfile.ZipFile(jar) as zf:
        assert "com/google/gson/Gson.class" in zf.namelist()
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn now: the cached jar is returned without it
    assert jars.resolve("com.google.code.gson", "gson", "2.10.1") == jar


@needs_mvn
def test_resolve_with_dependencies_returns_a_classpath(cache: Path) -> None:
    paths = jars.resolve_with_dependencies("org.slf4j", "slf4j-simple", "2.0.9")
    assert [p.name for p in paths] == ["slf4j-api-2.0.9.jar", "slf4j-simple-2.0.9.jar"]
    assert all(p.is_file() and p.parent.name == "with-dependencies" for p in paths)
    assert jars.resolve("org.slf4j", "slf4j-simple", "2.0.9", transitive=True).name == "slf4j-simple-2.0.9.jar"


@needs_mvn
def test_a_missing_artifact_says_so_and_is_remembered(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(jars.JarResolutionError, match=r"com\.google\.code\.gson:gson:jar:0\.0\.404.*does not hold it"):
        jars.resolve("com.google.code.gson", "gson", "0.0.404")
    monkeypatch.setenv("PATH", "/nonexistent")  # the remembered failure is raised again without mvn
    with pytest.raises(jars.JarResolutionError, match="remembered"):
        jars.resolve("com.google.code.gson", "gson", "0.0.404")
    monkeypatch.setenv(jars.RETRY_ENV, "0")  # retry at once: now mvn is missing
    with pytest.raises(jars.JarResolutionError, match="'mvn' is not on PATH"):
        jars.resolve("com.google.code.gson", "gson", "0.0.404")


def test_without_mvn_the_error_says_what_to_install(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(jars.JarResolutionError, match=r"'mvn' is not on PATH; install Apache Maven"):
        jars.resolve_with_dependencies("org.slf4j", "slf4j-simple", "2.0.9")
    assert not (cache / "org.slf4j" / "slf4j-simple" / "2.0.9" / "with-dependencies").exists()


def test_cache_location_and_malformed_coordinates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(jars.CACHE_ENV, raising=False)
    assert jars.cache_dir() == Path.home() / ".cache" / "pacer" / "maven"
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path))
    assert jars.jar_path("g", "a", "1", classifier="cuda12") == tmp_path / "g" / "a" / "1" / "a-1-cuda12.jar"
    with pytest.raises(ValueError, match="not a valid coordinate"):
        jars.resolve("com.example", "a b", "1.0")
    with pytest.raises(ValueError, match="not a valid coordinate"):
        jars.resolve("com.example", "a", "")
