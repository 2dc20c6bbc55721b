"""Which executors ran each streaming query, for the report's ``spark.executors``: the plain-Python part.

:func:`pacer_spark.jvm.status_store.query_executors` reads Spark's status store (what the web UI shows, kept with the UI
off too): every job of a streaming query's batch is described by Spark as ``<name>\\nid = <query id>\\nrunId =
...\\nbatch = N``; each of its stages' per-executor summary names the executors that ran its tasks. Here: which
query a job belongs to, and which of its jobs are looked up.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("pacer_spark.jvm.executors")

#: The newest jobs whose descriptions are read (Spark keeps ``spark.ui.retainedJobs``, 1000 by default).
MAX_JOBS = 500
#: The jobs of one query whose stages are looked up, spread evenly over its retained jobs: each lookup scans Spark's
#: in-memory status store (about 50 ms with 600 stages stored on 2 cores), so the report's cost stays bounded.
SAMPLED_JOBS = 4


def query_key(description: str) -> str | None:
    """The query a streaming job belongs to: its name (the description's first line), else its id; None when the
    job is not a streaming batch's."""
    lines = description.split("\n")
    ids = [line[len("id = "):] for line in lines[1:] if line.startswith("id = ")]
    if not ids:
        return None
    return lines[0] or ids[0]


def spread(items: list[Any], count: int) -> list[Any]:
    """``count`` of ``items`` evenly spaced, the first and the last among them (all of them when fewer)."""
    if len(items) <= count:
        return items
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


__all__ = ["MAX_JOBS", "SAMPLED_JOBS", "query_key", "spread"]
