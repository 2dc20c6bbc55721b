"""The ``format("pacer")`` front end: the user's own query, paced. ``service`` answers the JVM source's asks,
``truth`` rebuilds a query from what its sources report, ``arrivals`` dates and sizes their snapshots, ``state``
holds one query's driver state, ``runs`` orders a query's runs by what their messages carry, ``progress_metrics``
puts pacer's figures in a query's own progress, ``model_store`` keeps the fitted service model with the
checkpoint. Imports
``driver``, ``plan``, ``jvm`` and below.
"""

__all__ = [
    "arrivals",
    "model_store",
    "progress_metrics",
    "runs",
    "service",
    "state",
    "truth",
]
