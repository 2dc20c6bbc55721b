"""The RAPIDS Accelerator jar from Maven Central, the Spark versions it has shims for, and the execs it supports.

pacer never ships the jar. :func:`resolve_rapids_jar` fetches ``com.nvidia:rapids-4-spark_2.13`` with
``mvn`` into pacer's Maven cache (:mod:`pacer.infra.jars`; about 1 GB, once) and :func:`cached_rapids_jar`
finds it there without a download::

    from pacer_spark.plan import rapids_jar
    jar = rapids_jar.resolve_rapids_jar()                  # ~/.cache/pacer/maven/com.nvidia/...
    rapids_jar.spark_shims(jar)                            # {"3.5.0": "spark350", ..., "4.2.0": "spark420"}
    rapids_jar.supported_execs(jar, "4.2.0")["FilterExec"]   # "S"

The jar is a "parallel worlds" jar: the classes of each Spark release it supports lie under
``spark<ver>/`` (``spark420/`` for Spark 4.2.0), code common to all under ``spark-shared/``, and
``META-INF/services/com.nvidia.spark.rapids.SparkShimServiceProvider`` lists one provider per
shim. A shim matches one exact Spark version, so PySpark must be pinned to a version the jar
lists (:func:`shim_for_spark` says which when it is not).

Which execs the jar supports is asked of the jar itself: :func:`supported_execs` runs RAPIDS'
own ``com.nvidia.spark.rapids.SupportedOpsForTools`` (the generator of the ``supportedExecs.csv``
that NVIDIA's qualification tool reads) on the shim's classes, with the installed PySpark's jars
on the class path, and reads the ``supportedExecs.csv`` it writes (cached beside the jar). The
``Exec`` column is the simple class name of a Spark exec, the ``<Exec>`` in
``spark.rapids.sql.exec.<Exec>``; an exec with no rule in the jar is absent.

Run ``python -m pacer_spark.plan.rapids_jar`` to resolve the jar and print its path (``nox -s rapids``
does); ``--execs`` also prints the supported execs.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pacer.infra import jars

#: Maven coordinates of the RAPIDS Accelerator (Scala 2.13 builds: the only ones for Spark 4).
GROUP = "com.nvidia"
ARTIFACT = "rapids-4-spark_2.13"
#: The release pacer pins: the newest on Maven Central, with a shim for Spark 4.2.0.
DEFAULT_VERSION = "26.08.1"
#: Environment variable choosing another release.
VERSION_ENV = "PACER_RAPIDS_VERSION"
#: Environment variable that allows a test run to download the jar (``nox -s rapids`` sets it to 1).
RESOLVE_ENV = "PACER_RAPIDS_RESOLVE"

#: The list of shims inside the jar, one provider class per Spark version.
SHIM_SERVICES = "META-INF/services/com.nvidia.spark.rapids.SparkShimServiceProvider"
#: RAPIDS' generator of the qualification tool's CSV files (``main(file, "execs")`` writes the exec table).
SUPPORTED_OPS_CLASS = "com.nvidia.spark.rapids.SupportedOpsForTools"

# The dependency plugin pacer.infra.jars runs reads the artifact's POM before copying it, and the POM
# of rapids-4-spark names a parent (rapids-4-spark-parent_2.13) that a repository may lack (the
# Maven Central mirror here does): 3.9.0's copy goal resolves the file alone, without the POM
# (measured: 3.9.0 and 3.10.0 copy it; 3.6.1, 3.8.1 and 3.11.0 fail on the missing parent).
_COPY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.9.0"
_SHIM = re.compile(r"^com\.nvidia\.spark\.rapids\.shims\.(spark(\d)(\d)(\d+))\.SparkShimServiceProvider$")
_JAVA_CLASS = "RapidsSupportedOps"
# ShimLoader adds the shim's folder to the context class loader through URLClassLoader.addURL (reflection).
_JVM_OPENS = tuple(f"--add-opens=java.base/{package}=ALL-UNNAMED"
                   for package in ("java.lang", "java.net", "java.nio", "java.util", "sun.nio.ch"))
# Runs a RAPIDS class's main (args: jar, shim folder, class, its arguments...) with the classes laid out
# the way RAPIDS' ShimLoader loads them: the shim's folder of the jar first, then spark-shared/, then
# the jar's root, over the class loader that holds Spark's jars.
_JAVA_SOURCE = """\
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.Arrays;

public class RapidsSupportedOps {
    public static void main(String[] args) throws Exception {
        String root = "jar:" + Path.of(args[0]).toUri() + "!/";
        URL[] urls = {new URL(root + args[1] + "/"), new URL(root + "spark-shared/"), new URL(root)};
        try (URLClassLoader loader = new URLClassLoader(urls, RapidsSupportedOps.class.getClassLoader())) {
            Thread.currentThread().setContextClassLoader(loader);
            Class<?> main = Class.forName(args[2], true, loader);
            main.getMethod("main", String[].class).invoke(null, (Object) Arrays.copyOfRange(args, 3, args.length));
        }
    }
}
"""


class RapidsJarError(RuntimeError):
    """The RAPIDS jar could not be resolved or read; the message says why and what to do."""


class ShimSparkMismatchError(RapidsJarError):
    """The jar's shim cannot be loaded on the Spark jars at hand (RAPIDS loads a shim only on its exact Spark)."""


def rapids_version() -> str:
    """The RAPIDS release to use: ``$PACER_RAPIDS_VERSION`` or :data:`DEFAULT_VERSION`."""
    return os.environ.get(VERSION_ENV, "").strip() or DEFAULT_VERSION


def cached_rapids_jar(version: str | None = None, *, cache: Path | None = None) -> Path | None:
    """The jar's path in pacer's Maven cache when it is there, else None (never downloads).

    :raises pacer.infra.jars.UntrustedCacheError: it is there, but another user could have written it (a link, another
        owner, group or other write on it or a folder above it in the cache).
    """
    path = jars.jar_path(GROUP, ARTIFACT, version or rapids_version(), cache=cache)
    return jars.check_trusted(path, cache=cache) if path.is_file() else None


def resolve_rapids_jar(version: str | None = None, *, cache: Path | None = None,
                       timeout_s: float = jars.DEFAULT_TIMEOUT_S) -> Path:
    """The cached jar of ``com.nvidia:rapids-4-spark_2.13:<version>``, fetched with ``mvn`` on first use.

    :func:`pacer.infra.jars.resolve` is asked first; where it fails because the repository lacks the
    POM's parent, the file alone is copied with the dependency plugin 3.9.0 into the same cache path.

    :param version: the RAPIDS release (default :func:`rapids_version`).
    :raises RapidsJarError: ``mvn`` is missing, offline, or the repository lacks the release.
    """
    version = version or rapids_version()
    try:
        return jars.resolve(GROUP, ARTIFACT, version, cache=cache, timeout_s=timeout_s)
    except jars.JarResolutionError as exc:
        if "artifact descriptor" not in str(exc):
            raise RapidsJarError(f"{exc}; or set {VERSION_ENV} to a release the repository holds") from exc
        first = exc
    try:
        return _copy_without_descriptor(version, cache=cache, timeout_s=timeout_s)
    except RapidsJarError as exc:
        raise RapidsJarError(f"{exc} (pacer.infra.jars said first: {first})") from exc


def _copy_without_descriptor(version: str, *, cache: Path | None, timeout_s: float) -> Path:
    target = jars.jar_path(GROUP, ARTIFACT, version, cache=cache)
    coord = jars.coordinates(GROUP, ARTIFACT, version)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RapidsJarError(f"cannot resolve {coord}: 'mvn' is not on PATH; install Apache Maven or put the jar "
                             f"at {target}")
    jars.make_trusted_dirs(target.parent, cache=cache)
    with tempfile.TemporaryDirectory(prefix=".mvn-", dir=target.parent) as tmp:
        args = [mvn, "-B", "-U", "--no-transfer-progress", f"{_COPY_PLUGIN}:copy",
                f"-Dartifact={GROUP}:{ARTIFACT}:{version}:jar", f"-DoutputDirectory={tmp}",
                "-Dmdep.overWriteReleases=true", "-Dtransitive=false"]
        try:
            proc = subprocess.run(args, cwd=tmp, capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise RapidsJarError(f"cannot resolve {coord}: mvn did not finish in {timeout_s:g} s") from None
        copied = Path(tmp) / target.name
        if proc.returncode != 0 or not copied.is_file():
            errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[ERROR]")]
            said = errors[0] if errors else (proc.stdout + proc.stderr).strip()[-500:]
            raise RapidsJarError(f"cannot resolve {coord} with mvn (exit {proc.returncode}): {said}")
        copied.chmod(0o644)  # under umask 002 mvn writes it group-writable, which the cache's check refuses
        os.replace(copied, target)
    (target.parent / f".failed-{target.name}").unlink(missing_ok=True)
    return target


def _open(jar: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(jar)
    except (OSError, zipfile.BadZipFile) as exc:
        raise RapidsJarError(f"{jar} is not a readable jar ({exc}); delete it and resolve it again") from None


def spark_shims(jar: Path) -> dict[str, str]:
    """Spark version -> shim folder for every Apache Spark release the jar supports (Databricks left out).

    Read from the jar's ``SparkShimServiceProvider`` services file, e.g. ``{"4.2.0": "spark420"}``.
    """
    with _open(jar) as zf:
        try:
            lines = zf.read(SHIM_SERVICES).decode().splitlines()
        except KeyError:
            raise RapidsJarError(f"{jar} has no {SHIM_SERVICES}: it is not a RAPIDS Accelerator dist jar") from None
    shims: dict[str, str] = {}
    for line in lines:
        match = _SHIM.match(line.strip())
        if match:
            folder, major, minor, patch = match.groups()
            shims[f"{major}.{minor}.{int(patch)}"] = folder
    if not shims:
        raise RapidsJarError(f"{jar}'s {SHIM_SERVICES} names no Apache Spark shim")
    return dict(sorted(shims.items(), key=lambda kv: tuple(int(p) for p in kv[0].split("."))))


def newest_spark(jar: Path) -> str:
    """The newest Spark version the jar has a shim for (the PySpark to pin for it)."""
    return list(spark_shims(jar))[-1]


def shim_for_spark(jar: Path, spark_version: str) -> str:
    """The shim folder of ``spark_version`` in the jar.

    :raises RapidsJarError: the jar has no shim for that exact version; the message lists those it has.
    """
    shims = spark_shims(jar)
    version = spark_version.split("+")[0].split(".dev")[0]
    if version not in shims:
        raise RapidsJarError(
            f"{jar.name} has no shim for Spark {spark_version} (it supports {', '.join(shims)}): "
            f"pin pyspark=={newest_spark(jar)} or choose another RAPIDS release ({VERSION_ENV})")
    return shims[version]


def supported_execs(jar: Path, spark_version: str | None = None, *, spark_jars: Path | None = None,
                    refresh: bool = False, timeout_s: float = 300.0) -> dict[str, str]:
    """Exec class name -> support level, as the jar's ``SupportedOpsForTools`` writes them for one Spark version.

    The level is RAPIDS' ``Supported`` column: ``S`` supported, ``PS`` partly, ``NS`` not supported or
    off by default (its ``Notes`` say which); an exec the jar has no rule for is absent.

    RAPIDS' ShimLoader loads a shim only on the exact Spark it was built for, so the generator runs
    with that Spark's jars (``spark_jars``, default the installed PySpark's ``jars/``). The table it
    writes is a function of the jar and the shim alone: for a jar in pacer's Maven cache it is kept
    beside the jar (``supportedExecs-<shim>.csv``) and read from there later, under any PySpark.

    :param spark_version: the Spark whose shim to read (default: the installed PySpark's).
    :param refresh: run the generator even when the table is cached.
    :raises ShimSparkMismatchError: no table cached and no jars of that Spark to generate it with.
    :raises RapidsJarError: no shim for that Spark, no ``java``, or the generator failed.
    """
    if spark_version is None:
        import pyspark

        spark_version = str(pyspark.__version__)
    shim = shim_for_spark(jar, spark_version)
    cached = _table_cache(jar, shim)
    if cached is not None and cached.is_file() and not refresh:
        return _read_exec_table(cached)
    if spark_jars is None:
        from pacer_spark.jvm.jar import spark_jars_dir

        spark_jars = spark_jars_dir()
    found = _spark_version_of(spark_jars)
    if found != spark_version:
        raise ShimSparkMismatchError(
            f"{jar.name}'s shim {shim} loads only on Spark {spark_version}, and the Spark jars at {spark_jars} are "
            f"{found or 'of an unknown version'}: run this once under PySpark {spark_version} (nox -s rapids does; "
            f"the table is then cached beside the jar) or pass spark_jars of Spark {spark_version}")
    with tempfile.TemporaryDirectory(prefix="pacer-rapids-ops-") as tmp:
        table = _generate(jar, shim, spark_jars, Path(tmp), timeout_s)
        execs = _read_exec_table(table)
        if cached is not None:
            keep = cached.with_name(f".{cached.name}.tmp")
            shutil.copyfile(table, keep)
            os.replace(keep, cached)
    return execs


def _table_cache(jar: Path, shim: str) -> Path | None:
    """Where the exec table of a jar in pacer's Maven cache is kept; None for a jar elsewhere."""
    try:
        jar.resolve().relative_to(jars.cache_dir().resolve())
    except ValueError:
        return None
    return jar.parent / f"supportedExecs-{shim}.csv"


def _spark_version_of(spark_jars: Path) -> str | None:
    """The Spark version of a folder of Spark jars, from its ``spark-core_<scala>-<version>.jar``."""
    for core in spark_jars.glob("spark-core_*-*.jar"):
        return core.stem.rsplit("-", 1)[1]
    return None


def _generate(jar: Path, shim: str, spark_jars: Path, tmp: Path, timeout_s: float) -> Path:
    """Run ``SupportedOpsForTools.main(<file>, "execs")`` on the jar's shim; return the CSV it wrote."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home and (Path(home) / "bin" / "java").exists() else shutil.which("java")
    if java is None:
        raise RapidsJarError("`java` was not found: install a JDK 17 or newer, or set JAVA_HOME")
    source = tmp / f"{_JAVA_CLASS}.java"
    source.write_text(_JAVA_SOURCE, encoding="utf-8")
    table = tmp / "supportedExecs.csv"
    args = [java, *_JVM_OPENS, "-cp", f"{spark_jars}/*", str(source), str(jar.resolve()), shim,
            SUPPORTED_OPS_CLASS, str(table), "execs"]
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise RapidsJarError(f"{SUPPORTED_OPS_CLASS} did not finish in {timeout_s:g} s") from None
    if proc.returncode != 0 or not table.is_file():
        said = (proc.stderr or proc.stdout).strip()[-1500:]
        raise RapidsJarError(f"{SUPPORTED_OPS_CLASS} of {jar.name} ({shim}, Spark jars {spark_jars}) failed "
                             f"(exit {proc.returncode}): {said}")
    return table


def _read_exec_table(table: Path) -> dict[str, str]:
    with table.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or "Exec" not in rows[0] or "Supported" not in rows[0]:
        raise RapidsJarError(f"{table.name} has no Exec/Supported columns: the RAPIDS release changed its format")
    return {row["Exec"]: row["Supported"] for row in rows}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pacer_spark.plan.rapids_jar``: resolve the jar, print its path (and, with ``--execs``, its execs)."""
    parser = argparse.ArgumentParser(prog="python -m pacer_spark.plan.rapids_jar", description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=None, help=f"RAPIDS release (default {DEFAULT_VERSION}, ${VERSION_ENV})")
    parser.add_argument("--spark", default=None, help="check the jar has a shim for this Spark (default: installed)")
    parser.add_argument("--execs", action="store_true", help="also print each supported exec and its level")
    args = parser.parse_args(argv)
    try:
        jar = resolve_rapids_jar(args.version)
        if args.spark or args.execs:
            import pyspark

            spark = args.spark or str(pyspark.__version__)
            shim_for_spark(jar, spark)
        if args.execs:
            for name, level in sorted(supported_execs(jar, spark).items()):
                print(f"{name}\t{level}")
    except RapidsJarError as exc:
        parser.exit(1, f"error: {exc}\n")
    print(jar)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
