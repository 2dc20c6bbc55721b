"""The ``format("pacer")`` front end's transport: ``service`` connects the JVM sources (over Py4J) to the driver, whose
protocol room (:mod:`pacer_spark.driver.protocol`) decides their asks. Imports ``driver``, ``jvm`` and below.
"""

__all__ = [
    "service",
]
