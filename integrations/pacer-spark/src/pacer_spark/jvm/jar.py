"""The JVM half of ``format("pacer")``: the jar a wheel carries, or one built with ``javac``; load it.

A wheel of pacer-spark carries the jar, compiled when the wheel was built (``build_jar.py`` beside
pacer-spark's ``pyproject.toml``, through :func:`compile_jar`) against the PySpark releases it
supports, with a manifest naming them (``pacer_spark/_jvm/manifest.json``): when the running Spark's
minor version is one of them, :func:`build_jar` returns that jar and no JDK is needed. Otherwise (a
source checkout, ``pip install -e``; or a Spark the wheel carries no jar for) the jar is built from
the Java sources on first use. The sources live in ``integrations/pacer-spark/jvm/`` (see its README
for the design and the wire format; a wheel carries a copy under ``pacer_spark/_jvm/``).
:func:`build_jar` compiles them against the jars of the installed Spark (pyspark
ships them under ``pyspark/jars``; ``$SPARK_HOME/jars`` when set) and caches the jar under
``~/.cache/pacer/jvm/<spark-version>-<classpath-key>/pacer-spark-jvm.jar`` (``PACER_JVM_CACHE``
moves the cache; the key hashes the names and sizes of the Spark jars compiled against). A stamp
beside the jar records the hash of the sources, the classpath key and the SHA-256 of the jar itself:
an edited source or another Spark rebuilds, and a jar whose content is not the one built (or a jar
or stamp another user owns or could write) is rebuilt, never loaded. A read-only cache holding a
valid jar is used as is; nothing binary is committed.

To use it, either put the jar on the driver's classpath before the session starts
(:func:`jar_conf`: ``spark.jars``), or call :func:`ensure_loaded` on a running session: it adds
the jar to the driver's context class loader, which is where Spark looks up ``format()`` names.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The Java package of the JVM side.
JAVA_PACKAGE = "io.pacer.spark"
#: The provider class ``format("pacer")`` resolves to (through META-INF/services).
PROVIDER_CLASS = f"{JAVA_PACKAGE}.PacerSourceProvider"
#: The registry class Python registers its deciders in.
REGISTRY_CLASS = f"{JAVA_PACKAGE}.PacerRegistry"
#: The file name of the built jar inside the cache folder of a Spark version.
JAR_NAME = "pacer-spark-jvm.jar"
_STAMP_NAME = "pacer-spark-jvm.stamp.json"
#: Where a wheel keeps its built jars, their manifest and a copy of the Java sources.
PACKAGED_DIR = Path(__file__).resolve().parents[1] / "_jvm"  # pacer_spark/_jvm/ of a wheel
#: The manifest of the packaged jars: ``{"format": 1, "sources": SHA, "jars": [{"file", "spark",
#: "minors", "sha256"}]}`` (written by ``build_jar.py``).
MANIFEST_NAME = "manifest.json"

log = logging.getLogger("pacer_spark.jvm.jar")


class JvmBuildError(RuntimeError):
    """The JVM side could not be built or loaded; the message says what to install or set."""


@dataclass(frozen=True)
class JarBuild:
    """Where the jar is, whether this call compiled it, and how long the call took."""

    jar: Path
    compiled: bool
    seconds: float


def sources_dir() -> Path:
    """The folder holding the Java sources under ``src/main``: ``PACER_JVM_SOURCES``, else the source
    checkout's ``jvm/``, else the copy a wheel carries (:data:`PACKAGED_DIR`)."""
    override = os.environ.get("PACER_JVM_SOURCES")
    candidates = [Path(override)] if override else [Path(__file__).resolve().parents[3] / "jvm", PACKAGED_DIR]
    for folder in candidates:
        if (folder / "src" / "main" / "java").is_dir():
            return folder
    raise JvmBuildError(
        f"the Java sources of format('pacer') are not at {candidates[0]}: install pacer-spark from a wheel "
        "(it carries them) or from its source tree (pip install -e integrations/pacer-spark), or point "
        "PACER_JVM_SOURCES at the jvm/ folder"
    )


@dataclass(frozen=True)
class PackagedJar:
    """One jar a wheel carries and the Spark releases it was compiled against."""

    jar: Path
    spark: tuple[str, ...]
    minors: tuple[str, ...]
    sha256: str


def spark_minor(version: str) -> str:
    """``"4.3"`` for ``"4.3.0"``: a packaged jar serves every release of the minor it was built for."""
    return ".".join(version.split(".")[:2])


def packaged_jars(folder: Path | None = None) -> list[PackagedJar]:
    """The jars a wheel carries, from its manifest; empty in a source checkout.

    :raises JvmBuildError: the manifest is there but unreadable (a broken installation).
    """
    manifest = (folder or PACKAGED_DIR) / MANIFEST_NAME
    if not manifest.is_file():
        return []
    try:
        entries = json.loads(manifest.read_text())["jars"]
        return [PackagedJar(manifest.parent / e["file"], tuple(e["spark"]), tuple(e["minors"]), e["sha256"])
                for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise JvmBuildError(f"the manifest of format('pacer')'s packaged jars {manifest} is unreadable ({exc}): "
                            "reinstall pacer-spark") from exc


def packaged_jar(version: str | None = None, folder: Path | None = None) -> Path | None:
    """The packaged jar built for the minor of Spark ``version`` (default: the installed one), if any.

    A jar whose SHA-256 is not the manifest's is not used (warned): the caller falls back to javac.
    """
    minor = spark_minor(version or spark_version())
    for entry in packaged_jars(folder):
        if minor not in entry.minors:
            continue
        if entry.jar.is_file() and _sha256(entry.jar) == entry.sha256:
            return entry.jar
        log.warning("the packaged jar %s is missing or not the one the wheel was built with: ignoring it", entry.jar)
    return None


def _packaged_note() -> str:
    """What a wheel carries, for an error that says why javac was needed ('' in a source checkout)."""
    try:
        carried = packaged_jars()
    except JvmBuildError as exc:
        return f" ({exc})"
    if not carried:
        return ""
    minors = ", ".join(sorted({m for e in carried for m in e.minors}))
    return (f". This pacer-spark carries format('pacer') built for Spark {minors} only, and this is Spark "
            f"{spark_version()}: install a JDK (javac) or a pacer-spark wheel built for Spark {spark_version()}")


def spark_jars_dir() -> Path:
    """The folder of the Spark jars to compile against: ``$SPARK_HOME/jars``, else pyspark's."""
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    import pyspark

    folder = Path(pyspark.__file__).resolve().parent / "jars"
    if not folder.is_dir():
        raise JvmBuildError(f"no Spark jars at {folder}: reinstall pyspark or set SPARK_HOME")
    return folder


def spark_version() -> str:
    """The installed PySpark's version, the cache key of the jar."""
    import pyspark

    return str(pyspark.__version__)


def classpath_key(jars: Path | None = None) -> str:
    """A SHA-256 over the names and sizes of the Spark jars compiled against (:func:`spark_jars_dir`)."""
    digest = hashlib.sha256()
    for path in sorted((jars or spark_jars_dir()).glob("*.jar")):
        digest.update(f"{path.name}\0{path.stat().st_size}\n".encode())
    return digest.hexdigest()


def cache_dir(version: str | None = None, key: str | None = None) -> Path:
    """The cache folder of one Spark version and classpath (``PACER_JVM_CACHE`` or ``~/.cache/pacer/jvm``)."""
    root = os.environ.get("PACER_JVM_CACHE") or str(Path.home() / ".cache" / "pacer" / "jvm")
    return Path(root) / f"{version or spark_version()}-{(key or classpath_key())[:16]}"


def sources_hash(folder: Path | None = None) -> str:
    """A SHA-256 over every source and resource file (names and contents) of the JVM side."""
    root = (folder or sources_dir()) / "src" / "main"
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _tool(name: str) -> str:
    """``$JAVA_HOME/bin/<name>`` when it exists, else ``<name>`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise JvmBuildError(
            f"`{name}` was not found: compiling format('pacer')'s JVM part needs a JDK 17 or newer (for "
            f"example `apt-get install openjdk-17-jdk-headless`, or set JAVA_HOME){_packaged_note()}"
        )
    return found


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``folder`` so that two processes never build at once (a folder this
    user owns loses group and other write, which :func:`_jar_problem` refuses)."""
    folder.mkdir(parents=True, exist_ok=True)
    st = folder.lstat()
    if st.st_uid == os.geteuid() and st.st_mode & 0o022 and not folder.is_symlink():
        folder.chmod(st.st_mode & 0o755)
    from pacer.infra.trusted import untrusted  # here: build_jar.py loads this module by path, without pacer-core

    unsafe = untrusted(folder)  # before anything is opened in it: another user could swap what is built here
    if unsafe:
        raise JvmBuildError(f"refusing to build format('pacer')'s jar into {folder}: {unsafe}; set "
                            "PACER_JVM_CACHE to a folder of your own")
    lock = folder / ".lock"
    try:  # never through a link, never truncating: a planted .lock must not reach another file
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise JvmBuildError(f"{lock} is a symbolic link: pacer does not open it (it may point at another file); "
                            "remove it, or set PACER_JVM_CACHE to a folder of your own") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _jar_problem(folder: Path, wanted: dict[str, str]) -> str | None:
    """Why the jar in ``folder`` cannot be used (None when it can): missing, built from other sources or
    against other Spark jars, not the jar its stamp recorded, or open to other users."""
    jar, stamp = folder / JAR_NAME, folder / _STAMP_NAME
    if not (jar.is_file() and stamp.is_file()):
        return "holds no jar built for these sources and this Spark"
    from pacer.infra.trusted import untrusted  # here: build_jar.py loads this module by path, without pacer-core

    for path in (folder, stamp, jar):
        problem = untrusted(path)
        if problem:
            return f"is not trusted: {problem}"
    try:
        recorded = json.loads(stamp.read_text())
    except ValueError:
        return "has an unreadable stamp"
    if not isinstance(recorded, dict) or any(recorded.get(k) != v for k, v in wanted.items()):
        return "holds a jar built from other sources or against other Spark jars"
    if recorded.get("jar_sha256") != _sha256(jar):
        return f"holds a jar whose content is not the one built there ({JAR_NAME} was replaced)"
    return None


def build_jar(*, force: bool = False, cache: Path | None = None) -> JarBuild:
    """The jar of the JVM side for the installed Spark: the wheel's (:func:`packaged_jar`), else one
    compiled now only when not cached.

    The wheel's jar is used unless ``force``, ``cache`` or ``PACER_JVM_SOURCES`` asks for a build.
    A cached jar is used only when its stamp matches the sources, the classpath and the jar's own
    SHA-256 (:func:`_jar_problem`); reading a valid cache needs no write access.

    :param force: compile even when a jar built from the same sources is cached.
    :param cache: the folder to keep the jar in (default :func:`cache_dir`).
    :raises JvmBuildError: no packaged jar for this Spark and no JDK, no Spark jars, the compiler failed
        (its output included), or the jar must be built and the cache cannot be written.
    """
    started = time.perf_counter()
    if not force and cache is None and not os.environ.get("PACER_JVM_SOURCES"):
        packaged = packaged_jar()
        if packaged is not None:
            return JarBuild(packaged, False, time.perf_counter() - started)
    folder = cache or cache_dir()
    jar, stamp = folder / JAR_NAME, folder / _STAMP_NAME
    wanted = {"sources": sources_hash(), "classpath": classpath_key()}
    problem = "was asked to rebuild" if force else _jar_problem(folder, wanted)
    if problem is None:
        return JarBuild(jar, False, time.perf_counter() - started)
    try:
        with _locked(folder):
            problem = "was asked to rebuild" if force else _jar_problem(folder, wanted)  # built meanwhile?
            if problem is None:
                return JarBuild(jar, False, time.perf_counter() - started)
            if jar.exists():
                log.warning("the jar cache %s %s: rebuilding the jar", folder, problem)
            _compile(sources_dir(), jar)
            jar.chmod(0o644)
            staged = stamp.with_suffix(".tmp")
            staged.unlink(missing_ok=True)
            staged.write_text(json.dumps({**wanted, "jar_sha256": _sha256(jar)}, indent=1) + "\n")
            staged.chmod(0o644)
            os.replace(staged, stamp)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        raise JvmBuildError(
            f"the format('pacer') jar cache {folder} {problem}, and it cannot be written ({exc.strerror}): "
            "build the jar there once as a user who can write it (python -c 'import pacer_spark.jvm.jar as j; "
            "j.build_jar()'), or set PACER_JVM_CACHE to a folder of your own"
        ) from exc
    return JarBuild(jar, True, time.perf_counter() - started)


def _compile(sources: Path, jar: Path) -> None:
    """:func:`compile_jar` against the installed Spark's jars."""
    compile_jar(sources, jar, spark_jars_dir())


def compile_jar(sources: Path, jar: Path, spark_jars: Path) -> None:
    """``javac`` the sources against the Spark jars in ``spark_jars``, then ``jar`` them with their
    resources into ``jar`` (replaced whole). The wheel build (``build_jar.py``) calls this too."""
    javac, jar_tool = _tool("javac"), _tool("jar")
    java_files = sorted(str(p) for p in (sources / "src" / "main" / "java").rglob("*.java"))
    with tempfile.TemporaryDirectory(prefix="pacer-jvm-") as work:
        classes = Path(work) / "classes"
        classes.mkdir()
        classpath = str(spark_jars / "*")
        compiled = subprocess.run(
            [
                javac,
                "--release",
                "17",
                "-nowarn",
                "-encoding",
                "UTF-8",
                "-cp",
                classpath,
                "-d",
                str(classes),
                *java_files,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            raise JvmBuildError(
                f"javac failed on the format('pacer') sources against the Spark jars in {spark_jars}:\n"
                f"{compiled.stdout}{compiled.stderr}"
            )
        resources = sources / "src" / "main" / "resources"
        if resources.is_dir():
            shutil.copytree(resources, classes, dirs_exist_ok=True)
        partial = Path(work) / JAR_NAME
        packed = subprocess.run(
            [jar_tool, "--create", "--file", str(partial), "-C", str(classes), "."],
            capture_output=True,
            text=True,
            check=False,
        )
        if packed.returncode != 0:
            raise JvmBuildError(f"`jar` failed:\n{packed.stdout}{packed.stderr}")
        jar.parent.mkdir(parents=True, exist_ok=True)
        staged = jar.with_suffix(".jar.tmp")
        staged.unlink(missing_ok=True)  # never write through whatever was left there
        shutil.copyfile(partial, staged)
        os.replace(staged, jar)


def jar_conf(existing: str | None = None) -> dict[str, str]:
    """``{"spark.jars": ...}`` with the built jar appended to ``existing`` (a comma list)."""
    jar = str(build_jar().jar)
    jars = [j for j in (existing or "").split(",") if j]
    if jar not in jars:
        jars.append(jar)
    return {"spark.jars": ",".join(jars)}


def is_loaded(spark: Any) -> bool:
    """Whether the driver JVM of ``spark`` can load the ``format("pacer")`` provider."""
    # imported here, not above: build_jar.py loads this module by path, where the package is not importable
    from pacer_spark.jvm import classpath
    return classpath.driver_loads_class(spark, PROVIDER_CLASS)


def ensure_loaded(spark: Any) -> Path:
    """Builds the jar if needed and makes ``format("pacer")`` resolvable in ``spark``'s driver.

    When the jar is not on the driver's classpath yet (the session was started without
    :func:`jar_conf`), it is added to the driver's context class loader, which Spark's
    ``DataSource.lookupDataSource`` and Py4J's callback proxies both use.

    :raises JvmBuildError: the build failed, or the class loader cannot take a jar at run time.
    """
    from pacer_spark.jvm import classpath  # here, not above: as in is_loaded

    jar = build_jar().jar
    if is_loaded(spark):
        return jar
    try:
        classpath.add_driver_jars(spark, [str(jar)])
    except Exception as exc:
        raise JvmBuildError(
            f"cannot add {jar} to the running driver ({exc}); start the session with "
            "pacer_spark.jvm.jar.jar_conf() in its config (spark.jars)"
        ) from exc
    if not is_loaded(spark):
        raise JvmBuildError(f"{PROVIDER_CLASS} is still not loadable after adding {jar}")
    return jar
