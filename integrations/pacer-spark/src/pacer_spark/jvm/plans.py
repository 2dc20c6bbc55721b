"""Spark plan trees as plain values: what :mod:`pacer_spark.jvm.plan_reader` reads from an executed plan (its nodes,
their SQL metrics, their children), for :mod:`pacer_spark.plan.dag` to turn into operator DAGs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


def base_name(node_name: str) -> str:
    """``"WholeStageCodegen (2)"`` -> ``"WholeStageCodegen"``; ``"GpuFilter"`` keeps its name."""
    return node_name.split(" (")[0].strip()


@dataclass
class PlanNode:
    """A plan node read from the JVM: its name, metrics (name -> (value, type)) and children."""

    name: str
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)
    children: list[PlanNode] = field(default_factory=list)

    def walk_post(self) -> Iterator[PlanNode]:
        """Children before parents (data-flow order)."""
        for child in self.children:
            yield from child.walk_post()
        yield self


def node_of_json(tree: Mapping[str, Any]) -> PlanNode:
    """A plan tree from its JSON form (``{"name", "metrics": {key: [value, type]}, "children": [...]}``, as
    ``io.pacer.spark.PlanReader`` writes it)."""
    node = PlanNode(base_name(str(tree["name"])),
                    {key: (float(value), str(mtype)) for key, (value, mtype) in tree["metrics"].items()})
    node.children = [node_of_json(child) for child in tree["children"]]
    return node
