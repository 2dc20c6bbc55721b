"""pacer.infra.jars against the real ``mvn`` and Maven Central (skipped, with the reason, where ``mvn`` is absent)."""

from __future__ import annotations

import os
import re
import shutil
import stat
import zipfile
from pathlib import Path

import pytest

from pacer.infra import jars, trusted

needs_mvn = pytest.mark.skipif(shutil.which("mvn") is None, reason="mvn is not installed (apt-get install maven)")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(jars.CACHE_ENV, str(tmp_path / "maven"))
    return tmp_path / "maven"


@needs_mvn
@pytest.mark.jvm  # runs Maven
def test_resolve_fetches_once_into_the_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jar = jars.resolve("com.google.code.gson", "gson", "2.10.1")
    assert jar == cache / "com.google.code.gson" / "gson" / "2.10.1" / "gson-2.10.1.jar"
    with zipfile.ZipFile(jar) as zf:
        assert "com/google/gson/Gson.class" in zf.namelist()
    monkeypatch.setenv("PATH", "/nonexistent")  # no mvn now: the cached jar is returned without it
    assert jars.resolve("com.google.code.gson", "gson", "2.10.1") == jar


@needs_mvn
@pytest.mark.jvm  # runs Maven
def test_resolve_with_dependencies_returns_a_classpath(cache: Path, umask_002: None) -> None:
    paths = jars.resolve_with_dependencies("org.slf4j", "slf4j-simple", "2.0.9")
    assert [p.name for p in paths] == ["slf4j-api-2.0.9.jar", "slf4j-simple-2.0.9.jar"]
    assert all(p.is_file() and p.parent.name == "with-dependencies" for p in paths)
    # what mvn wrote under umask 002 was made private before it was moved into place
    assert all(trusted.untrusted_chain(cache, p) is None for p in [*paths, paths[0].parent / ".complete"])
    assert jars.resolve("org.slf4j", "slf4j-simple", "2.0.9", transitive=True).name == "slf4j-simple-2.0.9.jar"


@needs_mvn
@pytest.mark.jvm  # runs Maven
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
    with pytest.raises(ValueError, match="not a valid coordinate"):  # a path out of the cache
        jars.resolve("..", "..", "1.0")


# -- trust: a cached jar runs on a JVM's classpath, so one another user could write is never used --------------------

JAR = ("com.example", "lib", "1.0")


@pytest.fixture
def no_mvn(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mvn: whatever resolve returns comes from the cache (and a refusal is not a failed download)."""
    monkeypatch.setenv("PATH", "/nonexistent")



def _plant(cache: Path, path: Path, data: bytes = b"PK\x05\x06" + b"\0" * 18) -> Path:
    """``path`` in ``cache`` as pacer leaves it: folders 0o755, the file 0o644, whatever the umask."""
    folder = cache
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    for part in path.parent.relative_to(cache).parts:
        folder = folder / part
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)
    path.write_bytes(data)
    path.chmod(0o644)
    return path


def _plant_listing(cache: Path, names: tuple[str, ...] = ("dep-2.0.jar", "lib-1.0.jar")) -> Path:
    """A complete ``with-dependencies`` folder as pacer leaves it."""
    folder = jars.artifact_dir(*JAR, cache=cache) / "with-dependencies"
    for name in names:
        _plant(cache, folder / name)
    _plant(cache, folder / ".complete", "".join(f"{n}\n" for n in names).encode())
    return folder


def test_a_trusted_cached_jar_is_returned_and_one_others_can_write_is_refused(cache: Path, no_mvn: None) -> None:
    jar = _plant(cache, jars.jar_path(*JAR))
    assert jars.resolve(*JAR) == jar
    jar.chmod(0o664)
    with pytest.raises(
        jars.UntrustedCacheError, match=re.escape(f"cache: {jar} is writable by group or others (mode 664)")
    ):
        jars.resolve(*JAR)


@pytest.mark.parametrize(
    ("where", "mode"), [("jar", 0o646), ("version folder", 0o775), ("artifact folder", 0o757), ("cache root", 0o1777)]
)
def test_a_cached_jar_or_folder_others_can_write_is_refused(cache: Path, no_mvn: None, where: str, mode: int) -> None:
    """The cache root 1777 stands for a PACER_MAVEN_CACHE of /tmp: anyone could have put the jar there."""
    jar = _plant(cache, jars.jar_path(*JAR))
    loose = {"jar": jar, "version folder": jar.parent, "artifact folder": jar.parent.parent, "cache root": cache}[where]
    loose.chmod(mode)
    with pytest.raises(jars.UntrustedCacheError) as refused:
        jars.resolve(*JAR)
    said = str(refused.value)
    assert f"{loose} is writable by group or others" in said
    assert str(jar) in said and "delete that" in said and f"set {jars.CACHE_ENV} to a folder of your own" in said


def test_a_cached_jar_that_is_a_symlink_is_refused_and_its_target_left_alone(
    cache: Path, tmp_path: Path, no_mvn: None
) -> None:
    elsewhere = tmp_path / "someone-elses.jar"
    elsewhere.write_bytes(b"not the artifact")
    jar = jars.jar_path(*JAR)
    _plant(cache, jar).unlink()
    jar.symlink_to(elsewhere)
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{jar} is a symbolic link")):
        jars.resolve(*JAR)
    assert jar.is_symlink() and elsewhere.read_bytes() == b"not the artifact"


def test_a_cache_folder_that_is_a_symlink_is_refused(cache: Path, tmp_path: Path, no_mvn: None) -> None:
    jar = _plant(cache, jars.jar_path(*JAR))
    moved = tmp_path / "moved"
    jar.parent.rename(moved)
    jar.parent.symlink_to(moved)  # the file itself is fine; the folder on the way to it is a link
    assert jar.is_file()
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{jar.parent} is a symbolic link")):
        jars.resolve(*JAR)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user (chown) needs root")
@pytest.mark.parametrize("where", ["jar", "version folder"])
def test_a_cached_jar_or_folder_another_user_owns_is_refused(cache: Path, no_mvn: None, where: str) -> None:
    jar = _plant(cache, jars.jar_path(*JAR))
    os.chown(jar if where == "jar" else jar.parent, 65534, 65534)  # nobody
    with pytest.raises(jars.UntrustedCacheError, match=r"belongs to another user \(uid 65534\)"):
        jars.resolve(*JAR)


def test_a_trusted_listing_is_returned_without_mvn(cache: Path, no_mvn: None) -> None:
    folder = _plant_listing(cache)
    assert jars.resolve_with_dependencies(*JAR) == [folder / "dep-2.0.jar", folder / "lib-1.0.jar"]
    assert jars.resolve(*JAR, transitive=True) == folder / "lib-1.0.jar"


@pytest.mark.parametrize("loose", ["with-dependencies", ".complete", "dep-2.0.jar"])
def test_a_listing_its_folder_or_a_listed_jar_others_can_write_is_refused(
    cache: Path, no_mvn: None, loose: str
) -> None:
    folder = _plant_listing(cache)
    path = folder if loose == "with-dependencies" else folder / loose
    path.chmod(0o775 if path.is_dir() else 0o664)
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{path} is writable by group or others")):
        jars.resolve_with_dependencies(*JAR)


def test_a_listed_jar_that_is_a_symlink_is_refused(cache: Path, tmp_path: Path, no_mvn: None) -> None:
    folder = _plant_listing(cache)
    elsewhere = tmp_path / "elsewhere.jar"
    elsewhere.write_bytes(b"other code")
    (folder / "dep-2.0.jar").unlink()
    (folder / "dep-2.0.jar").symlink_to(elsewhere)
    with pytest.raises(jars.UntrustedCacheError, match=r"dep-2\.0\.jar is a symbolic link"):
        jars.resolve_with_dependencies(*JAR)
    assert elsewhere.read_bytes() == b"other code"


def test_a_failed_marker_is_never_read_through_a_symlink(cache: Path, tmp_path: Path, no_mvn: None) -> None:
    """The remembered failure is quoted in the error: a marker linked to a private file must not leak it."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET\n")
    jar = jars.jar_path(*JAR)
    _plant(cache, jar).unlink()
    marker = jar.parent / f".failed-{jar.name}"
    marker.symlink_to(secret)
    with pytest.raises(jars.UntrustedCacheError, match=re.escape(f"{marker} is a symbolic link")) as refused:
        jars.resolve(*JAR)
    assert "TOP SECRET" not in str(refused.value) and secret.read_text() == "TOP SECRET\n"


def _fake_mvn(args: list[str], coord: str, *, cwd: Path, timeout_s: float) -> None:
    """What ``mvn`` leaves in ``-DoutputDirectory`` (created here under the test's umask, as mvn would)."""
    out = Path(next(a for a in args if a.startswith("-DoutputDirectory=")).partition("=")[2])
    out.mkdir(mode=0o777, exist_ok=True)
    spec = next((a.partition("=")[2] for a in args if a.startswith("-Dartifact=")), None)
    if spec is None:  # copy-dependencies
        names = ["dep-2.0.jar", "lib-1.0.jar"]
    else:
        _, artifact, version, packaging, *_ = spec.split(":")
        names = [f"{artifact}-{version}.{packaging}"]
    for name in names:
        (out / name).write_bytes(b"PK\x05\x06" + b"\0" * 18)


def test_a_cache_pacer_fills_under_umask_002_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_002: None
) -> None:
    """Folders pacer creates (the cache root and the folders above it too) lose group write, and the files it moves
    into place are 0o644: the next call uses them (before, mkdir(parents=True) made them 0o775: refused)."""
    cache = tmp_path / "home" / ".cache" / "maven"
    monkeypatch.setenv(jars.CACHE_ENV, str(cache))
    monkeypatch.setattr(jars, "_run_mvn", _fake_mvn)
    jar = jars.resolve(*JAR)
    classpath = jars.resolve_with_dependencies(*JAR)

    level = tmp_path / "home"
    while level != jar.parent:
        assert stat.S_IMODE(level.stat().st_mode) == 0o755, level
        level = level / jar.relative_to(level).parts[0]
    assert [stat.S_IMODE(p.stat().st_mode) for p in (jar.parent, jar, *classpath)] == [0o755] + [0o644] * 3
    assert stat.S_IMODE(classpath[0].parent.stat().st_mode) == 0o755
    assert trusted.untrusted_chain(cache, jar) is None

    def no_second_fetch(args: list[str], coord: str, *, cwd: Path, timeout_s: float) -> None:
        raise AssertionError(f"mvn asked again for {coord}")

    monkeypatch.setattr(jars, "_run_mvn", no_second_fetch)  # the cache alone answers now
    assert jars.resolve(*JAR) == jar and jars.resolve_with_dependencies(*JAR) == classpath
