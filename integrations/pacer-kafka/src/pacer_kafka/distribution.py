"""Apache Kafka's own jars and a ``java`` to run them: what ``pacer kafka up`` needs on this machine.

The broker is ``org.apache.kafka:kafka_2.13`` with its runtime dependencies, resolved from Maven
Central with ``mvn`` into pacer's jar cache (:mod:`pacer.infra.jars`) once; later calls cost a ``stat``.
Kafka's POM leaves the SLF4J binding to the distribution (its tarball ships one), so
``log4j-slf4j-impl`` at Kafka's own Log4j version is added: without it the broker would log
nothing, and a failed start could not say why.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from pacer.infra import jars

#: The Kafka release ``pacer kafka up`` runs unless told otherwise.
KAFKA_VERSION = "4.3.1"
#: Environment variable overriding :data:`KAFKA_VERSION`.
KAFKA_VERSION_ENV = "PACER_KAFKA_VERSION"
#: Scala binary version of the ``kafka_<scala>`` artifact.
SCALA_BINARY = "2.13"
KAFKA_GROUP = "org.apache.kafka"
LOG4J_GROUP = "org.apache.logging.log4j"
#: The SLF4J 1.x → Log4j 2 binding (Kafka's classpath carries slf4j-api 1.7).
SLF4J_BINDING = "log4j-slf4j-impl"

_JAR_VERSION = re.compile(r"^(?P<base>.+?)-(?P<version>\d+(?:\.\d+)*(?:[.-][A-Za-z0-9]+)*)\.jar$")


class KafkaSetupError(RuntimeError):
    """Something this machine lacks to run Kafka (a JDK, Maven, network); the message says what to install or do."""


def kafka_version(version: str | None = None) -> str:
    """The Kafka release to run: ``version``, else ``$PACER_KAFKA_VERSION``, else :data:`KAFKA_VERSION`."""
    chosen = version or os.environ.get(KAFKA_VERSION_ENV, "").strip() or KAFKA_VERSION
    if not re.fullmatch(r"\d+\.\d+\.\d+(?:[.-][A-Za-z0-9]+)*", chosen):
        raise KafkaSetupError(f"Kafka version {chosen!r} is not a release number such as {KAFKA_VERSION}")
    return chosen


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` when set, else the one on ``PATH``.

    :raises KafkaSetupError: when there is none, naming what to install.
    """
    home = os.environ.get("JAVA_HOME", "").strip()
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("java")
    if found is None:
        raise KafkaSetupError(
            "no 'java' found (JAVA_HOME is not set and none is on PATH): Kafka needs a Java runtime 17 or newer; "
            "install one, e.g. `apt-get install openjdk-17-jre-headless`, or set JAVA_HOME"
        )
    return found


def jar_base_name(file_name: str) -> str:
    """A jar's artifact name without its version: ``kafka-clients-3.9.2.jar`` → ``kafka-clients``.

    Used to tell whether two jars are the same library at different versions.
    """
    match = _JAR_VERSION.match(file_name)
    return match.group("base") if match else file_name.removesuffix(".jar")


def _jar_version(paths: list[Path], base: str) -> str | None:
    for path in paths:
        match = _JAR_VERSION.match(path.name)
        if match and match.group("base") == base:
            return match.group("version")
    return None


def kafka_classpath(version: str | None = None) -> list[Path]:
    """Kafka's broker classpath (``kafka_2.13`` + runtime dependencies + an SLF4J binding), fetched once.

    :param version: the Kafka release (default :func:`kafka_version`).
    :return: cached jar paths.
    :raises KafkaSetupError: ``mvn`` is missing, Maven Central cannot be reached, or the release does not exist.
    """
    release = kafka_version(version)
    try:
        paths = jars.resolve_with_dependencies(KAFKA_GROUP, f"kafka_{SCALA_BINARY}", release)
        log4j = _jar_version(paths, "log4j-core")
        if log4j is not None and _jar_version(paths, SLF4J_BINDING) is None:
            paths = [*paths, jars.resolve(LOG4J_GROUP, SLF4J_BINDING, log4j)]
    except jars.JarResolutionError as exc:
        raise KafkaSetupError(f"cannot get Apache Kafka {release}'s jars: {exc}") from exc
    return paths


def kafka_unavailable_reason(version: str | None = None) -> str | None:
    """Why a Kafka broker cannot be started here (no JDK; no Maven and no cached jars), or None when it can."""
    try:
        find_java()
    except KafkaSetupError as exc:
        return str(exc)
    if shutil.which("mvn") is None:
        try:
            kafka_classpath(version)
        except KafkaSetupError:
            return ("no 'mvn' on PATH and Kafka's jars are not cached: install Apache Maven "
                    "(e.g. `apt-get install maven`) so pacer can fetch them from Maven Central")
    return None
