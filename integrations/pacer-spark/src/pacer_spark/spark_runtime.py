"""Real Spark as a pacer runtime (``pacer run --runtime spark``, ``pacer bench --runtime spark``, the conformance suite).

:class:`SparkRuntime` runs a :class:`pacer.RunConfig` through the ``pacer-gen`` source (or ``pacer-files`` with
``options["spark"]["input"]``) on a SparkSession: the one it was given, or one it builds from
``options["spark"]``: ``master`` (``local[2]``), ``rapids_jar`` (jars), ``warm_up`` (true) and ``keep_session``
(keep it for the next run until :meth:`SparkRuntime.close`, as ``pacer bench`` does). Query ``i`` gets the traffic
seed ``seed + i`` (:meth:`pacer.RunConfig.query_seed`), as on the simulator.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, ClassVar

from pacer import RunConfig, RunResult
from pacer.plugins import PluginManager, get_plugin_manager


class SparkRuntime:
    """Spark Structured Streaming: wall clock, not deterministic; GPUs only with RAPIDS. Declares ``multi-query``.

    :param spark: a SparkSession to run on (None: built per run from the options).
    :param time_scale: shortens every run's traffic (a 30 s run streams ``30 * time_scale`` s, at least 2 s).
    :param drain_timeout: seconds a run's backlog may take after its traffic (None: ``options["drain_timeout"]``,
        default 120).
    """

    name = "spark"
    summary = "Apache Spark Structured Streaming (local or a cluster) through pacer's sources"
    capabilities = frozenset({"multi-query"})
    #: ``pacer run --runtime spark`` defaults that differ from the other runtimes'.
    defaults: ClassVar[Mapping[str, Any]] = {"duration": 120.0}

    def __init__(self, spark: Any = None, *, time_scale: float = 1.0, drain_timeout: float | None = None) -> None:
        if not time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {time_scale}")
        self.spark = spark
        self.time_scale = time_scale
        self.drain_timeout = drain_timeout
        self._kept: tuple[tuple[str, tuple[str, ...], int, bool], Any] | None = None

    def configure(self, group: argparse._ArgumentGroup) -> None:
        """Spark's own ``pacer run`` flags (:func:`pacer_spark.cli.configure_spark`)."""
        from pacer_spark.cli import configure_spark

        configure_spark(group)

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: PluginManager) -> RunConfig:
        """Check every flag before Spark starts and fold the Spark ones in (:func:`pacer_spark.cli.apply_args`)."""
        from pacer_spark.cli import apply_args

        return apply_args(args, config, plugin_manager)

    def _session(self, options: Any, partitions: int) -> tuple[Any, bool, bool]:
        """The session to run on, whether this run must stop it, and whether it is new and wants warming."""
        if self.spark is not None:
            return self.spark, False, False
        from pacer_spark.cli import build_session, warm_up

        kafka = options.get("source") == "kafka"
        key = (str(options.get("master", "local[2]")), tuple(options.get("rapids_jar") or ()), partitions, kafka)
        if self._kept is not None and self._kept[0] == key:
            return self._kept[1], False, False
        self.close()
        spark = build_session(key[0], "pacer run", partitions=partitions, rapids_jars=list(key[1]), kafka=kafka)
        warm = bool(options.get("warm_up", True))
        if warm:
            warm_up(spark)
        if options.get("keep_session"):
            self._kept = (key, spark)
            return spark, False, warm
        return spark, True, warm

    def run(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> RunResult:
        """Stream ``config`` on Spark, wait for its backlog, and report (status 1: not drained or a query failed)."""
        from pacer_spark.cli import run_configuration

        if self.time_scale != 1.0:
            config = replace(config, duration=max(2.0, config.duration * self.time_scale))
        if self.drain_timeout is not None:
            config = config.with_options(self.name, drain_timeout=self.drain_timeout)
        options = config.options_for(self.name)
        scratch = None
        if not options.get("checkpoint") and not options.get("input"):
            scratch = tempfile.mkdtemp(prefix="pacer-spark-")
            config = config.with_options(self.name, checkpoint=scratch)
        spark, owned, fresh = self._session(options, config.partitions)
        pm = plugin_manager or get_plugin_manager()
        try:
            if fresh and not options.get("input") and options.get("source") != "kafka":  # never read a user's data
                warm_scratch = tempfile.mkdtemp(prefix="pacer-spark-warm-up-")
                try:
                    run_configuration(spark, stream_warm_up(config, warm_scratch), pm, label="warm-up")
                finally:
                    shutil.rmtree(warm_scratch, ignore_errors=True)
            return run_configuration(spark, config, pm, label=str(options.get("label", "pacer run")))
        finally:
            if owned:
                spark.stop()
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)

    def close(self) -> None:
        """Stop the session kept for the next run (``keep_session``), if any."""
        if self._kept is not None:
            self._kept[1].stop()
            self._kept = None


#: Seconds of traffic the streaming warm-up of a new session runs before the measured run.
STREAM_WARM_UP_S = 8.0


def stream_warm_up(config: RunConfig, checkpoint: str) -> RunConfig:
    """A short throwaway run of the same queries (Spark's default trigger, nothing dropped, no progress lines).

    A fresh JVM's first streaming batch of a stateful query pays the Python source's worker start-up, code
    generation and JIT: 12-18 s on 2 cores against ~1 s later. Measured, it would be the first batch of every
    run (and 2 % of a 180 s run's datasets late by it); a long-running query pays it once in its lifetime.
    It streams into its own ``checkpoint`` folder, never the measured run's.
    """
    queries = tuple(replace(q, admission="asap", admission_params={}) for q in config.queries)
    warm = replace(config, queries=queries, duration=min(STREAM_WARM_UP_S, config.duration), overload="keep")
    return warm.with_options("spark", progress_every=0, trigger=None, label="warm-up", checkpoint=checkpoint)


#: The instance the ``pacer_runtimes`` hook returns (it builds its sessions from each run's options).
SPARK_RUNTIME = SparkRuntime()
