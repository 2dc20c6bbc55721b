"""Real Spark as a runtime of the shared conformance suite: :class:`~pacer_spark.spark_runtime.SparkRuntime`
given the test session (``SparkRuntime(spark, time_scale=0.2)``); kept here for imports."""

from pacer_spark.spark_runtime import SparkRuntime

__all__ = ["SparkRuntime"]
