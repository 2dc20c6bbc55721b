"""pacer's ``spark`` plugin: the ``spark`` runtime (``pacer run``, ``pacer bench``, the conformance suite) and
``pacer cluster``."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import Runtime, hookimpl
from pacer.cli import Command


@hookimpl
def pacer_runtimes() -> Sequence[Runtime]:
    """Spark (importing it checks PySpark's version only when a run needs it)."""
    from pacer_spark.run.spark_runtime import SPARK_RUNTIME

    return [SPARK_RUNTIME]


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer cluster`` (``pacer run`` is core's, with this runtime's flags; ``pacer demo`` is pacer-bench's)."""
    from pacer_spark.run.cluster_cli import CLUSTER_COMMAND

    return [CLUSTER_COMMAND]
