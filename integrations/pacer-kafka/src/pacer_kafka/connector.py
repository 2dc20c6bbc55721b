"""Spark's Kafka connector (``spark-sql-kafka-0-10_2.13``) from Maven Central, for the installed PySpark.

:func:`spark_kafka_jars` resolves the connector at the PySpark version with its transitive
runtime dependencies (:func:`pacer.infra.jars.resolve_with_dependencies`, cached) and drops every jar
whose library the PySpark wheel already ships in ``pyspark/jars`` (compared by artifact name, so a
second ``scala-library`` or ``slf4j-api`` at another version never lands on the classpath). What is
left goes into ``spark.jars``::

    spark = SparkSession.builder.config("spark.jars", ",".join(map(str, spark_kafka_jars()))).getOrCreate()

When Maven Central has no connector at exactly that version (a PySpark release can reach PyPI
before its jars reach Central), the newest *release* (no preview) of the same major version that
is not newer is used instead, with a warning; the choice is remembered in the cache.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from pacer.infra import jars
from pacer_kafka.distribution import KafkaSetupError, jar_base_name

SPARK_GROUP = "org.apache.spark"
CONNECTOR_ARTIFACT = "spark-sql-kafka-0-10_2.13"
_RELEASE = re.compile(r"^\d+\.\d+\.\d+$")
log = logging.getLogger(__name__)


def installed_spark_version() -> str:
    """The installed PySpark's version.

    :raises KafkaSetupError: PySpark is not installed.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise KafkaSetupError("PySpark is not installed: pip install pyspark (or, from the checkout, "
                              "'./integrations/pacer-kafka[spark]')") from exc
    return str(pyspark.__version__)


def pyspark_jar_names() -> set[str]:
    """File names of the jars the installed PySpark wheel ships (``pyspark/jars``)."""
    import pyspark

    folder = Path(pyspark.__file__).parent / "jars"
    return {p.name for p in folder.glob("*.jar")}


def _release_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def choose_release(wanted: str, available: list[str]) -> str | None:
    """The newest release in ``available`` not newer than ``wanted``: same major.minor first, then same major.

    Previews, RCs and other qualified versions are never chosen.
    """
    if not _RELEASE.match(wanted):
        return None
    key = _release_key(wanted)
    releases = sorted((v for v in available if _RELEASE.match(v) and _release_key(v) <= key), key=_release_key)
    same_minor = [v for v in releases if _release_key(v)[:2] == key[:2]]
    same_major = [v for v in releases if _release_key(v)[0] == key[0]]
    candidates = same_minor or same_major
    return candidates[-1] if candidates else None


def published_versions(group: str, artifact: str, *, timeout_s: float = 300.0) -> list[str]:
    """Every version Maven Central lists for ``group:artifact`` (its ``maven-metadata.xml``), read through ``mvn``.

    ``mvn`` resolves a version range over a throw-away POM and a throw-away local repository; the
    metadata it downloads on the way lists the versions (the range's own outcome does not matter).

    :raises KafkaSetupError: no ``mvn``, or no metadata came back (offline, unknown artifact).
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaSetupError("no 'mvn' on PATH: install Apache Maven (e.g. `apt-get install maven`)")
    pom = (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>pacer.infra.jars</groupId><artifactId>versions</artifactId><version>0</version><packaging>pom</packaging>"
        f"<dependencies><dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        "<version>[0,)</version><type>pom</type><exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId>"
        "</exclusion></exclusions></dependency></dependencies></project>"
    )
    with tempfile.TemporaryDirectory(prefix="pacer-versions-") as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(pom, encoding="utf-8")
        proc = subprocess.run(
            [mvn, "-B", "--no-transfer-progress", f"-Dmaven.repo.local={work / 'repo'}",
             f"{jars.DEPENDENCY_PLUGIN}:list"], cwd=work, capture_output=True, text=True, timeout=timeout_s,
            check=False)
        folder = work / "repo" / Path(*group.split(".")) / artifact
        versions: set[str] = set()
        for metadata in folder.glob("maven-metadata-*.xml"):
            versions.update(v.text.strip() for v in ET.parse(metadata).getroot().iter("version") if v.text)
    if not versions:
        said = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("[ERROR]")][:1]
        raise KafkaSetupError(f"Maven lists no version of {group}:{artifact} (is Maven Central reachable?): "
                              f"{said[0] if said else 'mvn printed no error'}")
    return sorted(versions)


def connector_version(spark_version: str) -> str:
    """The connector version to use with Spark ``spark_version``: that version when Central has it, else the fallback.

    :raises KafkaSetupError: neither that version nor a fallback is on Maven Central.
    """
    remembered = jars.artifact_dir(SPARK_GROUP, CONNECTOR_ARTIFACT, spark_version).parent / (
        f"chosen-for-spark-{spark_version}")
    if remembered.is_file():
        return remembered.read_text(encoding="utf-8").strip()
    try:
        jars.resolve(SPARK_GROUP, CONNECTOR_ARTIFACT, spark_version, packaging="pom")
        chosen = spark_version
    except jars.JarResolutionError as exc:
        if "does not hold" not in str(exc) and "not find" not in str(exc).lower():
            raise KafkaSetupError(f"cannot get Spark's Kafka connector: {exc}") from exc
        fallback = choose_release(spark_version, published_versions(SPARK_GROUP, CONNECTOR_ARTIFACT))
        if fallback is None:
            raise KafkaSetupError(f"Maven Central has no {SPARK_GROUP}:{CONNECTOR_ARTIFACT} release for Spark "
                                  f"{spark_version} or an earlier release of Spark {spark_version.split('.')[0]}") from exc
        chosen = fallback
    if chosen != spark_version:
        log.warning("Maven Central has no %s:%s:%s; using %s, the newest release not newer than PySpark %s",
                    SPARK_GROUP, CONNECTOR_ARTIFACT, spark_version, chosen, spark_version)
    remembered.parent.mkdir(parents=True, exist_ok=True)
    remembered.write_text(chosen + "\n", encoding="utf-8")
    return chosen


def spark_kafka_jars(spark_version: str | None = None) -> list[Path]:
    """Jars to add to ``spark.jars`` so that ``format("kafka")`` works on the installed PySpark.

    :param spark_version: the Spark version to match (default: the installed PySpark's).
    :return: the connector and the dependencies PySpark lacks, as cached paths.
    :raises KafkaSetupError: no PySpark, no ``mvn`` (and nothing cached), or nothing suitable on Maven Central.
    """
    wanted = spark_version or installed_spark_version()
    version = connector_version(wanted)
    try:
        resolved = jars.resolve_with_dependencies(SPARK_GROUP, CONNECTOR_ARTIFACT, version)
    except jars.JarResolutionError as exc:
        raise KafkaSetupError(f"cannot get Spark's Kafka connector {version}: {exc}") from exc
    shipped = {jar_base_name(name) for name in pyspark_jar_names()}
    return [path for path in resolved if jar_base_name(path.name) not in shipped]
