"""Where a query's settings meet the session's defaults: the one place they merge.

A query registers with what it names (its workload or DAG, deadline, strategies and their parameters, read caps);
whatever it leaves out is the session's (``spark.pacer.*``, :class:`~pacer_spark.config.PacerConfig`). A
``format("pacer")`` query restarted with other options, or joined by another paced source (a union), is given its
merged options the same way (:meth:`QueryRegistry.reconfigure`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pacer import Operator, OperatorDAG, QuerySpec
from pacer.engine_profile import EngineProfile
from pacer_spark.config import PacerConfig
from pacer_spark.plan.dag import spark_dag

if TYPE_CHECKING:
    from pacer_spark.driver.books import Books
    from pacer_spark.driver.loop import Driver


class QueryRegistry:
    """Registers queries with the driver's Controller over the session's defaults (module docstring).

    :param driver: the session's driver; ``config``: the session's configuration (the defaults).
    :param partitions: reads the session's ``spark.sql.shuffle.partitions`` (a query's default parallelism).
    """

    def __init__(self, driver: Driver, config: PacerConfig, partitions: Callable[[], int]) -> None:
        self.driver = driver
        self.config = config
        self.partitions = partitions

    def register(
        self,
        query_id: str,
        *,
        workload: str | None = None,
        dag: OperatorDAG | None = None,
        deadline: float | None = None,
        admission: str | None = None,
        placement: str | None = None,
        admission_params: Mapping[str, Any] | None = None,
        placement_params: Mapping[str, Any] | None = None,
        window_range: float = 0.0,
        window_slide: float = 0.0,
        partitions: int | None = None,
        max_rows: int = 0,
        max_bytes: int = 0,
        overload: str | None = None,
        probe_rows: int = 0,
        engine_profile: EngineProfile | None = None,
    ) -> QuerySpec:
        """Add a query to the Controller with its admission and placement strategies; what it leaves None is the
        session's.

        ``overload``: this query's overload policy (None: the session's); ``format("pacer")`` queries are
        ``keep`` (Spark reads every offset their source logged).

        ``max_rows``/``max_bytes`` cap every admission (Spark's ``maxOffsetsPerTrigger`` /
        ``maxBytesPerTrigger``; 0: no cap): the Controller trims a batch to the largest prefix within them.
        ``probe_rows``: until the query's service-time model is fitted, each batch is a probe of at most this many
        rows, doubling per batch (0: none; :meth:`pacer.Controller.add_query`). ``engine_profile`` is the query's
        prior (a ``format("pacer")`` query's ``pacer.engineProfile``); without one, the session's is, where it was
        measured on the query's workload.

        The operator DAG is the workload's template (``workload``), or ``dag``, or a minimal
        scan -> project -> sink chain (use :func:`pacer_spark.plan.dag.dag_from_plan` on an executed
        plan for a custom query's real DAG), with what Spark + RAPIDS run only on the CPU marked CPU-only
        (:func:`pacer_spark.plan.dag.spark_dag`).
        """
        c = self.config
        parts = partitions or self.partitions()
        if workload is not None:
            from pacer_workloads import make_query

            spec = make_query(workload, query_id=query_id, deadline=deadline or c.deadline, partitions=parts)
            if dag is not None:
                spec = replace(spec, dag=dag)
        else:
            dag = dag or OperatorDAG.chain(Operator("scan#0", "scan", "MicroBatchScan"),
                                           Operator("project#1", "project", "Project"),
                                           Operator("sink#2", "sink", "ForeachBatchSink"))
            spec = QuerySpec(id=query_id, dag=dag, window_range=window_range, window_slide=window_slide,
                             deadline=deadline or c.deadline, partitions=parts)
        spec = replace(spec, dag=spark_dag(spec.dag))  # what Spark + RAPIDS run only on the CPU is CPU-only
        if engine_profile is None and c.engine_profile is not None and c.engine_profile.applies_to(spec.workload):
            engine_profile = c.engine_profile  # the session's, for the workload it was measured on
        self.driver.add_query(spec, max_rows=max_rows, max_bytes=max_bytes, overload=overload,
                              probe_rows=probe_rows, engine_profile=engine_profile,
                              **self.strategies(admission, placement, admission_params, placement_params))
        return spec

    def reconfigure(self, books: Books, query_id: str, *, deadline: float | None, admission: str | None,
                    placement: str | None, admission_params: Mapping[str, Any],
                    placement_params: Mapping[str, Any]) -> None:
        """Give registered ``query_id`` new settings (a restart with other options, a union's merged ones), over the
        session's defaults as at registration."""
        spec = replace(books.query(query_id).spec, deadline=deadline or self.config.deadline)
        books.reconfigure(spec, **self.strategies(admission, placement, admission_params, placement_params))

    def strategies(self, admission: str | None, placement: str | None, admission_params: Mapping[str, Any] | None,
                   placement_params: Mapping[str, Any] | None) -> dict[str, Any]:
        """A query's strategies and their parameters over the session's."""
        c = self.config
        return {"admission": admission or c.admission, "placement": placement or c.placement,
                "admission_params": {**c.admission_params, **(admission_params or {})},
                "placement_params": {**c.placement_params, **(placement_params or {})}}


__all__ = ["QueryRegistry"]
