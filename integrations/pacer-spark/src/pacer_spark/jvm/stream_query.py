"""A streaming query's own JVM state, as plain values: its progress buffer, its offset log and the plan it executed.

Every function takes PySpark's ``StreamingQuery`` (or the session and the query's id) and says what it returns when
the JVM cannot answer (a stopped query, an internal API that moved).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pacer_spark.jvm.plan_reader import read_plan
from pacer_spark.jvm.plans import PlanNode
from pacer_spark.jvm.progress import TriggerProgress

log = logging.getLogger("pacer_spark.jvm.stream_query")


def _execution(handle: Any) -> Any:
    """The JVM ``StreamExecution`` behind a PySpark ``StreamingQuery``."""
    return handle._jsq.streamingQuery()


def query_progress(handle: Any, batch_id: int, *, depth: int = 4) -> TriggerProgress | None:
    """The progress of Spark batch ``batch_id`` from the query's own buffer (``StreamingQuery.recentProgress``).

    Spark stores a trigger's progress there before it posts the listener event and before it starts the next
    trigger, so a ``latestOffset`` call of the next trigger finds it without waiting for the listener bus. Looks
    at the newest ``depth`` entries (no-data batches may follow ours).

    :return: None when it is not among them or the JVM cannot be asked (the listener still reports).
    """
    try:
        recent = handle._jsq.recentProgress()
        for i in range(len(recent) - 1, max(-1, len(recent) - 1 - depth), -1):
            if int(recent[i].batchId()) == batch_id:
                return TriggerProgress.from_json(json.loads(recent[i].json()))
    except Exception:  # the query stopped, or an internal API changed
        return None
    return None


def logged_offsets(handle: Any, spark_batch_id: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
    """``(start, end)``: the first source's offsets (parsed JSON) Spark logged for the batch before ``spark_batch_id``
    and for ``spark_batch_id`` itself (the start of a query's first batch is ``{"index": 0}``); an entry not
    logged is None. None when the offset log cannot be read (pacer then does not track that batch)."""
    try:
        offset_log = _execution(handle).offsetLog()

        def offset_at(batch: int) -> dict[str, Any] | None:
            if batch < 0:
                return {"index": 0}
            entry = offset_log.get(batch)
            if entry.isEmpty():
                return None
            offsets = entry.get().offsets()
            for i in range(offsets.size()):
                item = offsets.apply(i)
                if not item.isEmpty():
                    return dict(json.loads(item.get().json()))
            return None

        return offset_at(spark_batch_id - 1), offset_at(spark_batch_id)
    except Exception:  # an internal API changed
        log.debug("cannot read the offset log", exc_info=True)
        return None


def stream_active(spark: Any, stream_id: str | None) -> bool | None:
    """Whether streaming query ``stream_id`` runs now in any session of ``spark``'s SparkContext: Spark's shared
    registry of active runs (``SharedState.activeStreamingQueries``, the one that refuses a second run of one
    checkpoint), which drops a run once its stream thread ended, after its sources stopped. None when it cannot be
    asked (no session, no id, an internal API that moved)."""
    if spark is None or not stream_id:
        return None
    try:
        active = spark._jsparkSession.sharedState().activeStreamingQueries()
        return bool(active.containsKey(spark._jvm.java.util.UUID.fromString(stream_id)))
    except Exception:  # a session without a JVM, an id that is no UUID, an internal API that moved
        log.debug("cannot tell whether streaming query %s runs", stream_id, exc_info=True)
        return None


def session_slots(spark: Any) -> tuple[int | None, int | None]:
    """The task slots of ``spark``'s SparkContext (``defaultParallelism``: its cores) and its shuffle partitions
    (``spark.sql.shuffle.partitions``); None for either that cannot be read (no session, no JVM)."""
    try:
        cores = int(spark.sparkContext.defaultParallelism)
    except Exception:  # no session or no JVM behind it
        cores = None
    try:
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions"))
    except Exception:  # the same, or a value that is no number
        partitions = None
    return cores, partitions


def executed_plan(handle: Any, *, batch_id: int | None = None, metrics: bool = True) -> PlanNode | None:
    """The plan the query executed for its last batch, as :class:`~pacer_spark.jvm.plans.PlanNode` values (with its SQL
    metrics unless ``metrics=False``); None before its first batch, or when ``batch_id`` is given and the last
    execution is another batch's (Spark replaces it when it plans the next batch)."""
    return _plan_of(_execution(handle).lastExecution(), batch_id, metrics)


def stream_executed_plan(spark: Any, stream_id: str, batch_id: int, *, metrics: bool = True) -> PlanNode | None:
    """As :func:`executed_plan`, for the streaming query ``stream_id`` of ``spark``'s session (any session of the
    SparkContext's own registry, by id)."""
    execution = spark._jsparkSession.streams().get(stream_id).streamingQuery().lastExecution()
    return _plan_of(execution, batch_id, metrics)


def _plan_of(execution: Any, batch_id: int | None, metrics: bool) -> PlanNode | None:
    if execution is None:
        return None
    if batch_id is not None and int(execution.currentBatchId()) != batch_id:
        return None
    return read_plan(execution.executedPlan(), metrics=metrics)


__all__ = ["executed_plan", "logged_offsets", "query_progress", "stream_executed_plan"]
