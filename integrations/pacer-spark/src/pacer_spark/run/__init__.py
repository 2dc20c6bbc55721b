"""Running pacer on Spark from the command line and the bench: ``spark_runtime`` (the ``spark`` runtime of
``pacer run``/``pacer bench``/the conformance suite), ``plugin`` (its pacer-core plugin), ``cli`` (its flags),
``cluster`` and ``cluster_cli`` (a standalone cluster), ``kafka_run``,
``demo``, ``overhead``, ``gen_cost``, ``soak``. Imports every other room.
"""

__all__ = [
    "cli",
    "cluster",
    "cluster_cli",
    "demo",
    "gen_cost",
    "kafka_run",
    "overhead",
    "plugin",
    "soak",
    "spark_runtime",
]
