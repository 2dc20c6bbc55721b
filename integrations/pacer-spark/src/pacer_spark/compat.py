"""The Spark version check: pacer needs ``DataSourceStreamReader.latestOffset(start, limit)`` (Spark 4.2)."""

from __future__ import annotations

import re

try:  # the Python data source's availableNow mixin, beside latestOffset(start, limit)'s ReadLimit
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - a PySpark without it: availableNow ends at the source's first answer

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no availableNow mixin for Python sources."""

        def prepareForTriggerAvailableNow(self) -> None:
            """Never called by such a PySpark."""


__all__ = ["MIN_SPARK", "SparkVersionError", "SupportsTriggerAvailableNow", "check_spark_version", "parse_version"]

MIN_SPARK = (4, 2)


class SparkVersionError(ImportError):
    """The installed PySpark is older than pacer supports; the message says what to install."""


def parse_version(version: str) -> tuple[int, int]:
    """``"4.3.0"`` -> ``(4, 3)``; ``"4.2.0.dev1"`` -> ``(4, 2)``.

    :raises ValueError: when no ``major.minor`` can be read.
    """
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if not match:
        raise ValueError(f"cannot read a Spark version from {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_spark_version(version: str | None = None) -> str:
    """Raise :class:`SparkVersionError` unless PySpark (or ``version``) is at least 4.2.

    :return: the version checked.
    """
    if version is None:
        try:
            import pyspark
        except ImportError as exc:  # pragma: no cover - pyspark is a dependency
            raise SparkVersionError("pacer-spark needs PySpark >= 4.2: pip install 'pyspark>=4.2'") from exc
        version = pyspark.__version__
    if parse_version(version) < MIN_SPARK:
        raise SparkVersionError(
            f"pacer-spark needs Spark >= {MIN_SPARK[0]}.{MIN_SPARK[1]} (DataSourceStreamReader.latestOffset(start, limit) "
            f"decides each micro-batch's end offset); found PySpark {version}. Upgrade: pip install 'pyspark>=4.2'"
        )
    return version
