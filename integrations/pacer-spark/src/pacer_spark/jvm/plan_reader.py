"""A JVM ``SparkPlan`` tree copied into :class:`~pacer_spark.jvm.plans.PlanNode` values: in one Py4J call where
pacer's JVM classes are loaded, else node by node."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from pacer_spark.jvm.plans import PlanNode, base_name, node_of_json

log = logging.getLogger("pacer_spark.jvm.plan_reader")


def read_plan(jplan: Any, *, metrics: bool = True) -> PlanNode:
    """Copy a JVM ``SparkPlan`` tree into :class:`~pacer_spark.jvm.plans.PlanNode` values.

    In one Py4J call where pacer's JVM classes are loaded (``io.pacer.spark.PlanReader``); else node by node over
    Py4J (:func:`walk_plan`).
    """
    text = _plan_json(jplan, metrics)
    return node_of_json(json.loads(text)) if text is not None else walk_plan(jplan, metrics)


_METRIC = re.compile(r"(\w+) -> SQLMetric\(id: \d+, name: [^,]*?, value: (-?\d+)\)")
_METRIC_TYPES: dict[tuple[str, str], str] = {}


def walk_plan(jplan: Any, metrics: bool) -> PlanNode:
    """A JVM ``SparkPlan`` tree node by node over Py4J (about five round trips a node): each node's metrics in one
    call (the metric map's string form), a metric's type (``timing``, ``nsTiming``, ``size``, ``sum``) asked once per
    node name and key, then cached."""
    node = PlanNode(base_name(str(jplan.nodeName())))
    if metrics:
        jmetrics = None
        for key, value in _METRIC.findall(str(jplan.metrics().toString())):
            mtype = _METRIC_TYPES.get((node.name, key))
            if mtype is None:
                jmetrics = jmetrics or jplan.metrics()
                mtype = _METRIC_TYPES[(node.name, key)] = str(jmetrics.apply(key).metricType())
            node.metrics[key] = (float(value), mtype)
    children = jplan.children()
    for i in range(children.size()):
        node.children.append(walk_plan(children.apply(i), metrics))
    return node


def _plan_json(jplan: Any, metrics: bool) -> str | None:
    """The plan in one Py4J call where pacer's JVM classes are loaded (``io.pacer.spark.PlanReader``), else None."""
    from pyspark import SparkContext

    try:
        return str(SparkContext._jvm.io.pacer.spark.PlanReader.json(jplan, metrics))  # type: ignore[union-attr]
    except Exception:  # the class is not loaded (a session without pacer's jar): py4j's "JavaPackage" error
        log.debug("io.pacer.spark.PlanReader is not loaded; reading the plan node by node", exc_info=True)
        return None


__all__ = ["read_plan", "walk_plan"]
