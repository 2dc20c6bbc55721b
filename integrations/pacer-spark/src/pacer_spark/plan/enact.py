"""Placement enactment: an admitted batch's placement applied through RAPIDS confs, or the reason it is not.

Every batch, of every front end, is admitted before Spark plans it: a ``format("pacer")`` batch in its JVM
source's ``latestOffset`` (on the query's stream thread, which waits for the answer), a
``pacer-gen``/``pacer-files`` batch in the reader's ``latestOffset``. The confs
:func:`~pacer_spark.plan.dag.rapids_confs` derives from the placement are set then on the stream's own session
(``sparkSessionForStream``), so the batch's plan follows them. Whether it was enacted, and why not, goes to the
driver as an :class:`Enacted` value, which it records with the Controller and from there goes to the batch's report.

Where the RAPIDS plugin runs in ``explainOnly`` mode (:mod:`pacer_spark.plan.rapids_explain`) the placement is enacted
(RAPIDS plans it) and every operator runs on the CPU: the note says so, and when the batch completes
:meth:`Enactment.completed` compares RAPIDS' tagging of its plan with the placement, operator by operator.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pacer import Device, MicroBatch, OperatorDAG
from pacer_spark.jvm import session_confs
from pacer_spark.plan.dag import EXPLAIN_ONLY, enacted_devices, rapids_confs, rapids_loaded

log = logging.getLogger("pacer_spark.plan.enact")

#: Why a placement was not enacted.
NO_RAPIDS = "not enacted: the RAPIDS Accelerator plugin is not loaded (spark.plugins)"
NO_SESSION = "not enacted: the stream's session is not known yet (first batch)"
NOT_ACTIVE = "not enacted: the query is not active in the attached session's StreamingQueryManager"
#: The note of a placement enacted under RAPIDS' explainOnly mode.
EXPLAINED = f"{EXPLAIN_ONLY}: RAPIDS planned it for the GPU as placed; every operator ran on the CPU"


def _note(coarsened: str, explain_only: bool) -> str:
    if explain_only:
        return f"{EXPLAINED}; {coarsened}" if coarsened else EXPLAINED
    return coarsened


class StreamOf(Protocol):
    """Where an admitted batch runs: its streaming query's id, once known (:class:`pacer_spark.driver.loop.Ask`)."""

    @property
    def stream_id(self) -> str | None:
        """The Spark streaming query's id, None while unknown."""


@dataclass(frozen=True)
class Enacted:
    """What enacting a batch's placement came to: whether it was enacted, why not or how, and per operator the
    device Spark planned it on where it may differ from the placement (None: as placed)."""

    enacted: bool
    note: str
    ran: Mapping[str, Device] | None = None


class Enactment:
    """Placement enactment for one attached session: where RAPIDS is loaded, each admitted batch's placement goes to
    its stream's session before Spark plans it; in ``explainOnly`` mode each completed batch is also checked against
    RAPIDS' own tagging of its plan (:class:`~pacer_spark.plan.rapids_explain.RapidsExplainCheck`).

    :param spark: the attached session (its ``spark.plugins`` and ``spark.rapids.sql.mode`` are read once).
    """

    def __init__(self, spark: Any) -> None:
        from pacer_spark.plan import rapids_explain
        self.spark = spark
        self.rapids = rapids_loaded(session_confs.session_conf(spark, "spark.plugins"))
        self.explain_only = self.rapids and rapids_explain.explain_only(spark)
        self.check = rapids_explain.RapidsExplainCheck(spark) if self.explain_only else None
        self._streams: dict[str, str | None] = {}  # batch id -> its streaming query's id, until it completes

    def enact(self, batch: MicroBatch, dag: OperatorDAG, source: StreamOf) -> Enacted | None:
        """Enact ``batch``'s placement (its query's operators ``dag``) on the session of the active streaming query
        ``source.stream_id`` (a ``format("pacer")`` source knows its query's id from its first batch on, a
        ``pacer-gen`` reader once its query started); what came of it (None: the batch has no placement)."""
        if batch.placement is None:
            return None
        if not self.rapids:
            return Enacted(False, NO_RAPIDS)
        stream_id = self._streams[batch.id] = source.stream_id
        if stream_id is None:
            return Enacted(False, NO_SESSION)
        confs, note = rapids_confs(batch.placement, dag, explain_only=self.explain_only)
        try:
            active = session_confs.set_stream_confs_by_id(self.spark, stream_id, confs)
        except Exception as exc:  # py4j: the session stopped under us; Spark plans the batch with the confs it has
            log.warning("query %r: its placement was not enacted (%s)", batch.query_id, exc)
            return Enacted(False, f"not enacted: setting the RAPIDS confs failed ({exc})")
        if not active:
            return Enacted(False, NOT_ACTIVE)
        # what the confs let RAPIDS run on the GPU (a type placed on both devices runs on the CPU); in explainOnly
        # mode RAPIDS' own plan of the batch replaces it when the batch completes (completed)
        return Enacted(True, _note(note, self.explain_only), enacted_devices(batch.placement, dag))

    def completed(self, batch: MicroBatch, dag: OperatorDAG, spark_batch_id: int | None) -> Enacted | None:
        """A batch's trigger ended (before the Controller completes it): in ``explainOnly`` mode, its placement
        compared with RAPIDS' tagging of the plan Spark made for it (``spark_batch_id``: Spark's id of it, None when
        its trigger did not report); None: nothing to record."""
        stream_id = self._streams.pop(batch.id, None)
        if self.check is None or spark_batch_id is None:
            return None
        placement = batch.placement
        result = self.check.check(batch.query_id, stream_id, batch.id, spark_batch_id, dag, placement)
        if placement is None or not placement.enacted or result.problem:
            return None
        # gpu_operator_ratio counts what RAPIDS planned for the GPU, not what pacer asked for
        ran = {op.operator_id: op.rapids or "cpu" for op in result.operators}
        return Enacted(True, placement.note, {op_id: ran.get(op_id, "cpu") for op_id in placement.devices})

    def summary(self) -> dict[str, Any]:
        """The report's ``spark.rapids_explain``: per query, RAPIDS' plans against pacer's placements (explainOnly
        mode only; empty otherwise)."""
        return self.check.summary() if self.check is not None else {}

    def close(self) -> None:
        """Stop reading RAPIDS' log."""
        if self.check is not None:
            self.check.close()


__all__ = ["EXPLAINED", "NOT_ACTIVE", "NO_RAPIDS", "NO_SESSION", "Enacted", "Enactment", "StreamOf"]
