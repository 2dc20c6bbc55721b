"""Spark plans as pacer operator DAGs, and placement enacted on them: ``dag`` reads executed plans and their
SQL metrics, ``enact`` applies a batch's placement through RAPIDS confs, ``rapids_explain`` reads RAPIDS' own
tagging back, ``rapids_jar`` finds the RAPIDS jar and what it supports. Imports ``jvm`` and below.
"""

__all__ = [
    "dag",
    "enact",
    "rapids_explain",
    "rapids_jar",
]
