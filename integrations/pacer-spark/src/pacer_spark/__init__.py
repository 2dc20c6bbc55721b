"""pacer on Apache Spark Structured Streaming.

Importing checks that PySpark is at least 4.2 (``DataSourceStreamReader.latestOffset(start, limit)``
decides each micro-batch's end offset) and raises :class:`SparkVersionError` otherwise.

>>> import pacer_spark
>>> spark = pacer_spark.session_builder("local[2]").getOrCreate()      # doctest: +SKIP
>>> pacer = pacer_spark.attach(spark, admission="zstream", scheduler="edf")  # doctest: +SKIP
>>> pacer.run_workload("lr2", traffic="wave", rate=1000, duration=120)  # doctest: +SKIP
"""

from pacer_spark.compat import SparkVersionError, check_spark_version

SPARK_VERSION = check_spark_version()

from pacer_spark.config import PacerConfig  # noqa: E402
from pacer_spark.errors import ScalingRefused  # noqa: E402
from pacer_spark.runtime import PacerSession, attach, parse_seconds  # noqa: E402
from pacer_spark.session import add_kafka_connector, session_builder  # noqa: E402
from pacer_spark.session_kind import UnsupportedSessionError  # noqa: E402
from pacer_spark.sources.files_source import PacerFilesDataSource  # noqa: E402
from pacer_spark.sources.gen import PacerGenDataSource  # noqa: E402

__all__ = [
    "SPARK_VERSION",
    "PacerConfig",
    "PacerFilesDataSource",
    "PacerGenDataSource",
    "PacerSession",
    "ScalingRefused",
    "SparkVersionError",
    "UnsupportedSessionError",
    "add_kafka_connector",
    "attach",
    "check_spark_version",
    "parse_seconds",
    "session_builder",
]
__version__ = "0.1.0"
