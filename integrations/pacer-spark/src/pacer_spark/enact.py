"""Placement enactment: an admitted batch's placement applied through RAPIDS confs, or the reason it is not.

A ``pacer-gen``/``pacer-files`` batch is admitted in its source's ``latestOffset``, before Spark plans it:
the confs :func:`~pacer_spark.plan.rapids_confs` derives from the placement are set on the stream's own
session then, so the batch's plan follows them. Whether it was enacted, and why not, goes to the
Controller (:meth:`pacer.Controller.record_enactment`) and from there to the report.
"""

from __future__ import annotations

from pyspark.sql.streaming.query import StreamingQuery

from pacer import Controller, MicroBatch
from pacer_spark import spark_jvm
from pacer_spark.plan import rapids_confs

#: Why a placement was not enacted.
NO_RAPIDS = "not enacted: the RAPIDS Accelerator plugin is not loaded (spark.plugins)"
NO_SESSION = "not enacted: the stream's session is not known yet (first batch)"


def enact_placement(controller: Controller, batch: MicroBatch, handle: StreamingQuery | None, *, rapids: bool) -> None:
    """Apply ``batch``'s placement through RAPIDS confs on the session of the stream ``handle``, or record why not.

    The caller holds the lock that guards ``controller``.

    :param handle: the batch's streaming query (None before it started: its first batch).
    :param rapids: whether the RAPIDS Accelerator is loaded (:func:`~pacer_spark.plan.rapids_loaded`).
    """
    placement = batch.placement
    if placement is None:
        return
    if not rapids:
        enacted, note = False, NO_RAPIDS
    elif handle is None:
        enacted, note = False, NO_SESSION
    else:
        confs, note = rapids_confs(placement, controller.query(batch.query_id).spec.dag)
        spark_jvm.set_stream_confs(handle, confs)
        enacted = True
    controller.record_enactment(batch.id, enacted, note)


__all__ = ["NO_RAPIDS", "NO_SESSION", "enact_placement"]
