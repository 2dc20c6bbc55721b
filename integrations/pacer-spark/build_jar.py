"""pacer-spark's build backend: setuptools', plus format("pacer")'s JVM part compiled into the wheel.

``pyproject.toml`` names this module as the PEP 517 backend (``backend-path = ["."]``). Everything is
setuptools' (``setuptools.build_meta``) except two things:

- ``build_py`` (:class:`BuildPy`), when building a wheel (not an editable install, which compiles on
  first use from the checkout), compiles the Java sources under ``jvm/src/main`` with the same javac
  path as the runtime (``pacer_spark.jvm.jar.compile_jar``) against the jars of each Spark release to
  build for, and puts under ``pacer_spark/_jvm/`` of the wheel: one jar per distinct result (releases
  whose compiled classes are byte-identical share one jar), ``manifest.json`` naming the releases and
  minors each jar serves and its SHA-256, and a copy of the Java sources (javac-on-first-use for a
  Spark the wheel has no jar for).
- ``get_requires_for_build_wheel`` adds pacer-spark's own ``pyspark`` requirement to the isolated
  build environment, so that a plain ``pip wheel``/``python -m build`` compiles against that PySpark's
  jars, unless ``PACER_SPARK_JARS`` names the Spark jar folders to build for (``os.pathsep``-separated;
  ``nox -s build`` passes one per supported release, see ``noxfile.py``).

A JDK 17 or newer (``javac``, ``jar``; ``JAVA_HOME`` or the PATH) is needed to build a wheel; none is
needed to install or run it. Nothing built is written into the source tree.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (every PEP 517 hook not redefined here)
from setuptools.command.build_py import build_py as _build_py

#: The folders of Spark jars to build for (``os.pathsep``-separated); default: the build's PySpark.
SPARK_JARS_ENV = "PACER_SPARK_JARS"
HERE = Path(__file__).resolve().parent
JVM_SOURCES = HERE / "jvm"
#: Where, inside the wheel's ``pacer_spark`` package, the jars go (``pacer_spark.jvm.jar.PACKAGED_DIR``).
PACKAGED = "_jvm"
_CORE_JAR = re.compile(r"^spark-core_[0-9.]+-(?P<version>[0-9][^/]*)\.jar$")


class JarPackagingError(RuntimeError):
    """format("pacer")'s jar could not be built for the wheel; the message says what to install or set."""


def pyspark_requirement() -> str:
    """pacer-spark's ``pyspark`` requirement, as its ``pyproject.toml`` states it."""
    project = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]
    found = [d for d in project["dependencies"] if re.match(r"^pyspark\b", d)]
    if len(found) != 1:
        raise JarPackagingError(f"pacer-spark's pyproject.toml must list pyspark once in dependencies, found {found}")
    return str(found[0])


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, plus the PySpark to compile against unless PACER_SPARK_JARS says."""
    extra = [] if os.environ.get(SPARK_JARS_ENV) else [pyspark_requirement()]
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *extra]


def spark_version_of(jars: Path) -> str:
    """The Spark release of a folder of Spark jars, read from its ``spark-core_*-VERSION.jar``."""
    versions = {m["version"] for p in jars.glob("spark-core_*.jar") if (m := _CORE_JAR.match(p.name))}
    if len(versions) != 1:
        raise JarPackagingError(f"{jars} is not one Spark release's jars folder (spark-core jars: {sorted(versions)})")
    return versions.pop()


def spark_jar_folders() -> list[Path]:
    """The Spark jar folders to build for: PACER_SPARK_JARS, else the importable PySpark's, else SPARK_HOME's."""
    listed = [Path(p) for p in os.environ.get(SPARK_JARS_ENV, "").split(os.pathsep) if p]
    if listed:
        missing = [str(p) for p in listed if not p.is_dir()]
        if missing:
            raise JarPackagingError(f"{SPARK_JARS_ENV} names folders that do not exist: {', '.join(missing)}")
        return listed
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
        if jars.is_dir():
            return [jars]
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return [Path(home) / "jars"]
    raise JarPackagingError(
        "no Spark jars to compile format('pacer') against: build with build isolation (pip installs the "
        f"PySpark of {pyspark_requirement()!r} into the build environment), or set {SPARK_JARS_ENV} to the "
        "jars folders of the Spark releases to build for"
    )


def _runtime_jvm() -> ModuleType:
    """``pacer_spark/jvm/jar.py`` loaded by path (importing the package would need its dependencies)."""
    spec = importlib.util.spec_from_file_location("_pacer_spark_jvm_build", HERE / "src" / "pacer_spark" / "jvm" / "jar.py")
    if spec is None or spec.loader is None:
        raise JarPackagingError("pacer_spark/jvm/jar.py cannot be loaded")
    module = sys.modules.get(spec.name)
    if module is None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
    return module


def classes_digest(jar: Path) -> str:
    """A SHA-256 over a jar's entries (names and bytes), its manifest left out: equal for equal classes."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(jar) as z:
        for name in sorted(n for n in z.namelist() if n != "META-INF/MANIFEST.MF" and not n.endswith("/")):
            digest.update(name.encode() + b"\0" + z.read(name))
    return digest.hexdigest()


def package_jvm(dest: Path, folders: list[Path] | None = None, sources: Path = JVM_SOURCES) -> dict[str, Any]:
    """Compiles the JVM part against each Spark jars folder into ``dest`` (jars, manifest, sources).

    :returns: the manifest written to ``dest/manifest.json``.
    :raises JarPackagingError: no Spark jars, or two releases of one minor compile to different classes.
    """
    jvm = _runtime_jvm()
    built: dict[str, tuple[Path, list[str]]] = {}  # classes digest -> (jar, spark releases)
    if dest.exists():  # what an earlier build left in setuptools' build/ folder never ships
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="pacer-wheel-jar-") as work:
        for index, folder in enumerate(folders or spark_jar_folders()):
            version = spark_version_of(folder)
            jar = Path(work) / f"{index}.jar"
            try:
                jvm.compile_jar(sources, jar, folder)
            except jvm.JvmBuildError as exc:
                raise JarPackagingError(f"building format('pacer')'s jar for Spark {version} failed: {exc}") from exc
            built.setdefault(classes_digest(jar), (jar, []))[1].append(version)
        entries = []
        for jar, versions in built.values():
            minors = sorted({jvm.spark_minor(v) for v in versions})
            name = f"pacer-spark-jvm-spark{'-'.join(minors)}.jar"
            shutil.copyfile(jar, dest / name)
            entries.append({"file": name, "spark": sorted(versions), "minors": minors,
                            "sha256": hashlib.sha256((dest / name).read_bytes()).hexdigest()})
    clashing = [m for m in {m for e in entries for m in e["minors"]} if sum(m in e["minors"] for e in entries) > 1]
    if clashing:
        raise JarPackagingError(f"releases of Spark {', '.join(sorted(clashing))} compile to different classes: a "
                                f"jar per minor cannot serve them all ({entries}); build for one release per minor")
    shutil.copytree(sources / "src" / "main", dest / "src" / "main", dirs_exist_ok=True)
    manifest = {"format": 1, "sources": jvm.sources_hash(sources), "jars": entries}
    (dest / jvm.MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


class BuildPy(_build_py):  # type: ignore[misc]  # setuptools ships no types here
    """setuptools' ``build_py``, plus :func:`package_jvm` into the wheel (not for editable installs)."""

    def run(self) -> None:
        """Builds the Python modules, then the packaged jars beside them."""
        super().run()
        if getattr(self, "editable_mode", False):
            return
        manifest = package_jvm(Path(self.build_lib) / "pacer_spark" / PACKAGED)
        for entry in manifest["jars"]:
            self.announce(f"format('pacer'): {entry['file']} for Spark {', '.join(entry['spark'])}", level=2)
