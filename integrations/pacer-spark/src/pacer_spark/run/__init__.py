"""Running pacer on Spark from the command line and the bench: ``spark_runtime`` (the ``spark`` runtime of
``pacer run``/``pacer bench``/the conformance suite), ``plugin`` (its pacer-core plugin), ``cli`` (its flags),
``cluster`` and ``cluster_cli`` (a standalone cluster), ``kafka_run``, ``calibrate`` (``pacer calibrate --runtime
spark``), ``no_data`` (Spark's no-data batches measured), ``overhead``, ``gen_cost``, ``soak``. Imports every other
room.
"""

__all__ = [
    "calibrate",
    "cli",
    "cluster",
    "cluster_cli",
    "gen_cost",
    "kafka_run",
    "no_data",
    "overhead",
    "plugin",
    "soak",
    "spark_runtime",
]
