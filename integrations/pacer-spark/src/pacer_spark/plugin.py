"""pacer's ``spark`` plugin: the ``spark`` runtime (``pacer run``, ``pacer bench``, the conformance suite),
``pacer demo`` and ``pacer cluster``."""

from __future__ import annotations

from collections.abc import Sequence

from pacer import Runtime, hookimpl
from pacer.cli import Command


@hookimpl
def pacer_runtimes() -> Sequence[Runtime]:
    """Spark (importing it checks PySpark's version only when a run needs it)."""
    from pacer_spark.spark_runtime import SPARK_RUNTIME

    return [SPARK_RUNTIME]


@hookimpl
def pacer_cli_commands() -> Sequence[Command]:
    """``pacer demo`` and ``pacer cluster`` (``pacer run`` is core's, with this runtime's flags)."""
    from pacer_spark.cluster_cli import CLUSTER_COMMAND
    from pacer_spark.demo import DEMO_COMMAND

    return [DEMO_COMMAND, CLUSTER_COMMAND]
