"""Maven artifacts (jars) resolved with ``mvn`` into pacer's cache, fetched once.

pacer never ships a jar: Kafka's, RAPIDS', NVIDIA's qualification tool's come from
Maven Central through the user's own ``mvn`` (and its ``settings.xml``: mirrors, proxies,
credentials) and are copied into a cache directory, so the second call costs a ``stat``::

    from pacer.infra import jars
    jar = jars.resolve("com.google.code.gson", "gson", "2.10.1")
    classpath = jars.resolve_with_dependencies("org.apache.kafka", "kafka-clients", "3.7.0")

The cache is ``$PACER_MAVEN_CACHE`` or ``~/.cache/pacer/maven``; a jar lies at
``<cache>/<group>/<artifact>/<version>/<artifact>-<version>[-<classifier>].<packaging>``,
an artifact with its dependencies in ``.../<version>/with-dependencies[-<classifier>]/``.
Files are copied into a temporary directory first and moved into place once ``mvn``
succeeded, so an interrupted download never leaves a half jar that looks resolved.

Without ``mvn`` on ``PATH``, without network, or for coordinates the repository does not
hold, :class:`JarResolutionError` says which, what ``mvn`` printed, and what to do
(install Maven, check the coordinates, or put the jar at the path it names). ``mvn`` takes
seconds to fail, so a failure is remembered in the cache (``.failed`` beside where the file
would be) for ``$PACER_MAVEN_RETRY_S`` seconds (600; 0: always ask again) and raised again
without running ``mvn``; delete that file to retry at once.

A cached jar ends up on a JVM's classpath, code that runs as the user, so it is loaded only when no
other local user could have written it or could replace it (:mod:`pacer.infra.trusted`, the check
pacer-spark's ``format("pacer")`` jar cache makes): the cache's root, every folder below it on the
way, the file, and a ``with-dependencies`` folder's ``.complete`` listing and each jar it lists must
be no symbolic link, owned by this user or root, and writable by their owner alone. Otherwise
:class:`UntrustedCacheError` (a :class:`JarResolutionError`) names what fails and why, and says to
delete it or to set ``$PACER_MAVEN_CACHE`` to a folder of your own (``/tmp`` itself, or a folder there
another user made, is refused). Folders pacer creates in the cache are made without group or other
write and files it moves into place ``0o644``, whatever the umask, so a cache pacer made passes; a
``.failed`` file is never read through a symbolic link.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from pacer.infra import trusted

#: Environment variable naming the cache directory.
CACHE_ENV = "PACER_MAVEN_CACHE"
#: The dependency plugin pacer runs (its ``copy`` goal needs no project since 3.x).
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
#: The plugin :func:`resolve` copies one file with: 3.9.0's ``copy`` fetches the file without reading its
#: POM, so an artifact whose parent POM the repository lacks (rapids-4-spark_2.13 26.08.1 on the mirror
#: here: rapids-4-spark-parent_2.13 is missing) still resolves (so does 3.10.0; 3.6.1, 3.8.1 and 3.11.0 fail).
COPY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.9.0"
#: Seconds one ``mvn`` call may take before it is stopped.
DEFAULT_TIMEOUT_S = 900.0
#: Environment variable: seconds a failed resolution is remembered before ``mvn`` is asked again.
RETRY_ENV = "PACER_MAVEN_RETRY_S"
DEFAULT_RETRY_S = 600.0

_COORD = re.compile(r"^[A-Za-z0-9_.\-]+$")
_COMPLETE = ".complete"


class JarResolutionError(RuntimeError):
    """An artifact could not be resolved; the message names it, the reason and what to do."""


class UntrustedCacheError(JarResolutionError):
    """A cached file or folder another user could have written or could replace: never loaded (:mod:`pacer.infra.trusted`)."""


def cache_dir() -> Path:
    """The cache directory: ``$PACER_MAVEN_CACHE`` when set, else ``~/.cache/pacer/maven``."""
    override = os.environ.get(CACHE_ENV, "").strip()
    return Path(override).expanduser() if override else Path.home() / ".cache" / "pacer" / "maven"


def coordinates(group: str, artifact: str, version: str, *, classifier: str | None = None,
                packaging: str = "jar") -> str:
    """``group:artifact:packaging[:classifier]:version`` as Maven prints it.

    :raises ValueError: for an empty or malformed part (Maven coordinates hold letters, digits, ``_ . -``).
    """
    parts = {"group": group, "artifact": artifact, "version": version, "packaging": packaging}
    if classifier is not None:
        parts["classifier"] = classifier
    for name, value in parts.items():
        if not value or not _COORD.match(value) or value in (".", ".."):  # ".." would leave the cache
            raise ValueError(f"Maven {name} {value!r} is not a valid coordinate part (letters, digits, '_', '.', '-')")
    return ":".join([group, artifact, packaging, *([classifier] if classifier else []), version])


def artifact_dir(group: str, artifact: str, version: str, *, cache: Path | None = None) -> Path:
    """Where an artifact's files are cached (it may not exist yet)."""
    return (cache or cache_dir()) / group / artifact / version


def jar_path(group: str, artifact: str, version: str, *, classifier: str | None = None, packaging: str = "jar",
             cache: Path | None = None) -> Path:
    """Where :func:`resolve` puts the artifact (it may not exist yet)."""
    coordinates(group, artifact, version, classifier=classifier, packaging=packaging)
    suffix = f"-{classifier}" if classifier else ""
    return artifact_dir(group, artifact, version, cache=cache) / f"{artifact}-{version}{suffix}.{packaging}"


def check_trusted(path: Path, *, cache: Path | None = None) -> Path:
    """``path`` in the cache, once it and every folder from the cache's root down to it pass
    :func:`pacer.infra.trusted.untrusted_chain` (no link, this user's or root's, writable by the owner alone).

    :param cache: the cache ``path`` lies in (default :func:`cache_dir`).
    :raises UntrustedCacheError: one of them fails: the message names it, why, and what to do.
    """
    _refuse(path, trusted.untrusted_chain(cache or cache_dir(), path))
    return path


def make_trusted_dirs(folder: Path, *, cache: Path | None = None) -> Path:
    """Create ``folder`` in the cache (and the folders above it) so that :func:`check_trusted` accepts them under
    any umask, then check it.

    :raises UntrustedCacheError: a folder that was there already fails the check.
    """
    trusted.make_dirs(folder)
    return check_trusted(folder, cache=cache)


def _refuse(path: Path, problem: str | None) -> None:
    if problem is not None:
        raise UntrustedCacheError(
            f"pacer does not load {path} from its Maven jar cache: {problem}, so another user could have written "
            f"or could replace code that would run on a JVM's classpath; delete that (pacer fetches it again), or "
            f"set {CACHE_ENV} to a folder of your own"
        )


def resolve(group: str, artifact: str, version: str, *, classifier: str | None = None, transitive: bool = False,
            packaging: str = "jar", cache: Path | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Path:
    """The cached path of ``group:artifact:version``, fetched with ``mvn dependency:copy`` on first use.

    :param classifier: e.g. ``"cuda12"`` for RAPIDS' per-CUDA jars.
    :param transitive: also fetch its runtime dependencies into the cache (see
        :func:`resolve_with_dependencies`); the artifact's own file is returned either way.
    :param packaging: the file type (``jar``, ``pom``, ``zip``...).
    :param cache: the cache directory (default :func:`cache_dir`).
    :param timeout_s: how long ``mvn`` may take.
    :return: the path of the artifact's file in the cache.
    :raises JarResolutionError: ``mvn`` is missing, offline, or the repository lacks the artifact.
    :raises UntrustedCacheError: the cached file, or a folder on the way to it, another user could write (see above).
    :raises ValueError: for malformed coordinates.
    """
    root = cache or cache_dir()
    target = jar_path(group, artifact, version, classifier=classifier, packaging=packaging, cache=root)
    if transitive:
        name = target.name
        for path in resolve_with_dependencies(group, artifact, version, classifier=classifier, cache=cache,
                                              timeout_s=timeout_s):
            if path.name == name:
                return path
        raise JarResolutionError(f"mvn copied the dependencies of {group}:{artifact}:{version} but not {name}")
    if target.is_file():
        return check_trusted(target, cache=root)
    coord = coordinates(group, artifact, version, classifier=classifier, packaging=packaging)
    make_trusted_dirs(target.parent, cache=root)  # before anything is read or written there
    marker = target.parent / f".failed-{target.name}"
    _raise_recent_failure(marker)
    with tempfile.TemporaryDirectory(prefix=".mvn-", dir=target.parent) as tmp:
        spec = ":".join([group, artifact, version, packaging, *([classifier] if classifier else [])])
        _mvn([f"{COPY_PLUGIN}:copy", f"-Dartifact={spec}", f"-DoutputDirectory={tmp}",
              "-Dmdep.overWriteReleases=true", "-Dtransitive=false"], coord, cwd=Path(tmp), timeout_s=timeout_s,
             marker=marker)
        copied = Path(tmp) / target.name
        if not copied.is_file():
            found = ", ".join(sorted(p.name for p in Path(tmp).iterdir())) or "nothing"
            raise JarResolutionError(f"mvn resolved {coord} but copied {found}, not {target.name}")
        copied.chmod(trusted.FILE_MODE)
        os.replace(copied, target)
    return target


def resolve_with_dependencies(group: str, artifact: str, version: str, *, classifier: str | None = None,
                              scope: str = "runtime", cache: Path | None = None,
                              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Path]:
    """The artifact and its transitive dependencies of ``scope``, as cached jar paths (a classpath).

    ``mvn dependency:copy-dependencies`` runs once over a throw-away POM that depends on the
    artifact; the set is cached as a whole (a ``.complete`` file lists it), so a later call
    returns the same paths without ``mvn``.

    :param scope: Maven's ``includeScope`` (``runtime`` includes ``compile``).
    :return: the jar paths, sorted by file name.
    :raises JarResolutionError: ``mvn`` is missing, offline, or the repository lacks an artifact.
    :raises UntrustedCacheError: the cached folder, its listing or a listed jar another user could write.
    """
    coord = coordinates(group, artifact, version, classifier=classifier)
    if scope not in ("compile", "runtime", "provided", "test", "system"):
        raise ValueError(f"scope {scope!r} is not a Maven scope; use runtime or compile")
    root = cache or cache_dir()
    folder = artifact_dir(group, artifact, version, cache=root) / (
        "with-dependencies" + (f"-{classifier}" if classifier else "") + ("" if scope == "runtime" else f"-{scope}"))
    listed = _complete_listing(folder, root)
    if listed is not None:
        return listed
    make_trusted_dirs(folder.parent, cache=root)  # before anything is read or written there
    marker = folder.parent / f".failed-{folder.name}"
    _raise_recent_failure(marker)
    with tempfile.TemporaryDirectory(prefix=".mvn-", dir=folder.parent) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(_pom(group, artifact, version, classifier), encoding="utf-8")
        out = work / "out"
        _mvn(["-f", str(work / "pom.xml"), f"{DEPENDENCY_PLUGIN}:copy-dependencies", f"-DoutputDirectory={out}",
              f"-DincludeScope={scope}"], coord, cwd=work, timeout_s=timeout_s, marker=marker)
        names = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        if not names:
            raise JarResolutionError(f"mvn resolved {coord} but copied no jar")
        (out / _COMPLETE).write_text("\n".join(names) + "\n", encoding="utf-8")
        for name in [*names, _COMPLETE]:
            (out / name).chmod(trusted.FILE_MODE)
        out.chmod(trusted.FOLDER_MODE)
        if folder.is_symlink() or folder.is_file():
            folder.unlink()
        elif folder.exists():
            shutil.rmtree(folder)
        os.replace(out, folder)
    listed = _complete_listing(folder, root)
    assert listed is not None
    return listed


def _retry_s() -> float:
    raw = os.environ.get(RETRY_ENV, "").strip()
    try:
        return max(0.0, float(raw)) if raw else DEFAULT_RETRY_S
    except ValueError:
        raise JarResolutionError(f"{RETRY_ENV}={raw!r} is not a number of seconds") from None


def _raise_recent_failure(marker: Path) -> None:
    """Raise the remembered failure again when it is younger than ``$PACER_MAVEN_RETRY_S``; the file is read
    as a message, never through a symbolic link (it could point at another file, then quoted in the error)."""
    try:
        fd = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            return
        raise UntrustedCacheError(
            f"{marker} is a symbolic link: pacer does not read it (it may point at another file); delete it, or "
            f"set {CACHE_ENV} to a folder of your own"
        ) from None
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(fd)
        age = time.time() - st.st_mtime
        if not stat.S_ISREG(st.st_mode) or age >= _retry_s():
            return
        message = file.read().decode("utf-8", "replace").strip()
    raise JarResolutionError(f"{message} [remembered for {_retry_s() - age:.0f} s more: delete {marker} to retry]")


def _complete_listing(folder: Path, root: Path) -> list[Path] | None:
    """The jars a complete ``with-dependencies`` folder lists (None: not complete), once the folder, its listing
    and each jar pass :func:`check_trusted`."""
    marker = folder / _COMPLETE
    if not marker.is_file():
        return None
    check_trusted(marker, cache=root)  # the root, each folder down to the listing, and the listing
    names = marker.read_text(encoding="utf-8").split()
    if any("/" in name or name in (".", "..") for name in names):
        return None  # not a listing pacer wrote: resolve again
    paths = [folder / name for name in names]
    if not all(p.is_file() for p in paths):
        return None
    for path in paths:
        _refuse(path, trusted.untrusted(path))
    return paths


def _pom(group: str, artifact: str, version: str, classifier: str | None) -> str:
    extra = f"<classifier>{classifier}</classifier>" if classifier else ""
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>pacer.jars</groupId><artifactId>resolve</artifactId><version>0</version><packaging>pom</packaging>"
        f"<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version>{extra}</dependency></dependencies></project>"
    )


def _mvn(args: Sequence[str], coord: str, *, cwd: Path, timeout_s: float, marker: Path | None = None) -> None:
    """Run ``mvn -B -U args`` (``-U``: a failure cached while offline does not stick); turn every failure into a :class:`JarResolutionError` that says what to do."""
    try:
        _run_mvn(args, coord, cwd=cwd, timeout_s=timeout_s)
    except JarResolutionError as exc:
        if marker is not None and _retry_s() > 0:
            _write_marker(marker, str(exc) + "\n")
        raise
    if marker is not None:
        marker.unlink(missing_ok=True)


def _write_marker(marker: Path, text: str) -> None:
    """Replace ``marker`` with ``text``, never writing through whatever was left there (a link is replaced)."""
    fd, staged = tempfile.mkstemp(prefix=".tmp-", dir=marker.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    os.chmod(staged, trusted.FILE_MODE)
    os.replace(staged, marker)


def _run_mvn(args: Sequence[str], coord: str, *, cwd: Path, timeout_s: float) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError(
            f"cannot resolve {coord}: 'mvn' is not on PATH; install Apache Maven (e.g. apt-get install maven) "
            f"or put the file in {cache_dir()} as this error's path says (set {CACHE_ENV} to use another cache)"
        )
    try:
        proc = subprocess.run([mvn, "-B", "-U", "--no-transfer-progress", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise JarResolutionError(f"cannot resolve {coord}: mvn did not finish in {timeout_s:g} s") from None
    if proc.returncode == 0:
        return
    errors = [line.removeprefix("[ERROR]").strip() for line in (proc.stdout + proc.stderr).splitlines()
              if line.startswith("[ERROR]") and line.removeprefix("[ERROR]").strip()]
    said = errors[0] if errors else (proc.stderr.strip() or proc.stdout.strip())[-500:]
    said = re.sub(r"^Failed to execute goal \S+ \([^)]*\) on project \S+: ", "", said)
    said = re.sub(r"\s*-> \[Help \d+\]$", "", said)
    text = proc.stdout + proc.stderr
    if re.search(r"UnknownHost|Could not transfer|Connection refused|Network is unreachable|offline", text):
        hint = "the repository could not be reached: check the network or the mirror/proxy in ~/.m2/settings.xml"
    elif re.search(r"Could not find|was not found|Failed to resolve version", text):
        hint = "the repository does not hold it: check the coordinates (group, artifact, version, classifier)"
    else:
        hint = "see mvn's message"
    raise JarResolutionError(f"cannot resolve {coord} with mvn (exit {proc.returncode}): {hint}; mvn said: {said}")
