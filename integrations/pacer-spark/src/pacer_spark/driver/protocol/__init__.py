"""The protocol between the sources and the driver: one room, entered only through
:meth:`pacer_spark.driver.loop.Driver.step` with a source's report (a plain value), answered with a plain value.

``paced`` (the ``format("pacer")`` JVM sources: their asks and stop events), ``truth`` (a query rebuilt from what its
sources report: unanswered admissions, the batch in flight, replays), ``runs`` (a query's runs ordered by what their
messages carry), ``state`` (one query's driver state), ``arrivals`` (snapshots dated and sized), ``progress_metrics``
(pacer's figures in a query's own progress), ``model_store`` (the fitted service model kept with the checkpoint),
``readers`` (the ``pacer-gen``/``pacer-files`` readers' asks, their manifest, their ``foreachBatch``),
``reader_state`` (what one reader listed and was admitted), ``registry`` (a query registered over the session's
defaults: the one place they merge). The transports that translate into these reports live in ``paced`` (Py4J) and
``sources`` (the readers' RPC, the ``foreachBatch`` wrapper). Imports the driver's own modules, ``plan``, ``jvm`` and
the shared top-level modules.
"""

__all__ = [
    "arrivals",
    "model_store",
    "paced",
    "progress_metrics",
    "reader_state",
    "readers",
    "registry",
    "runs",
    "state",
    "truth",
]
