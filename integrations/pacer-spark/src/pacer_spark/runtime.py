"""The driver side: the public facade over a session's driver, its two front ends and telemetry.

:func:`attach` is the one entry point. It returns a :class:`PacerSession` that registers queries
with the Controller, hands out pacer sources wired to it, and starts streaming queries whose sink
is wrapped in the scheduling gate. The parts, one module each:

- :mod:`pacer_spark.config`: :class:`~pacer_spark.config.PacerConfig`, ``attach``'s keywords and the
  ``spark.pacer.*`` confs;
- :mod:`pacer_spark.driver.loop`: the :class:`~pacer_spark.driver.loop.Driver` built first (Controller, its lock, batch
  completion, gate, replay guard) and handed to the front ends below, never the session;
- :mod:`pacer_spark.driver.protocol.readers`: the ``pacer-gen``/``pacer-files`` sources' admission (RPC, replays);
- :mod:`pacer_spark.plan.enact`: placements enacted through RAPIDS confs;
- :mod:`pacer_spark.driver.gate` and :mod:`pacer_spark.sources.sink_gate`: the scheduling gate, and its
  ``foreachBatch`` wrapper;
- :mod:`pacer_spark.driver.completion`, :mod:`pacer_spark.driver.listener` and :mod:`pacer_spark.session_telemetry`:
  batch completion, the listener, overhead and the report's ``spark`` part;
- :mod:`pacer_spark.driver.protocol.paced`: ``format("pacer")`` queries.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pacer import BatchReport, Controller, Devices, OperatorDAG, QuerySpec
from pacer.engine_profile import EngineProfile
from pacer.plugins import PluginManager, UnknownStrategyError, get_plugin_manager
from pacer.report_types import Report
from pacer.scaler import Scaler
from pacer_spark.checkpoint import clear_interrupted_first_batch
from pacer_spark.config import PacerConfig, no_data_batches_enabled, setting_names
from pacer_spark.driver.clock import PinnedClock
from pacer_spark.driver.listener import ProgressListener
from pacer_spark.driver.loop import Driver
from pacer_spark.driver.pools import DEFAULT_LADDER
from pacer_spark.driver.protocol.paced import PacedQueries
from pacer_spark.driver.protocol.readers import AdmissionService, ReplayGuard, SourceState
from pacer_spark.driver.protocol.registry import QueryRegistry
from pacer_spark.driver.scaling import ExecutorScaling, ScalingClock, saved_state
from pacer_spark.errors import ScalingRefused
from pacer_spark.gen_plan import GEN_FORMAT
from pacer_spark.jvm import executor_requests, jar, status_store, stream_query, task_time
from pacer_spark.manifest import FILES_FORMAT
from pacer_spark.options import OPT_ADDRESS, OPT_QUERY, OPT_TIMEOUT, parse_seconds
from pacer_spark.paced.service import PacedService
from pacer_spark.plan.dag import dag_from_plan, rapids_loaded
from pacer_spark.plan.enact import Enactment
from pacer_spark.session_kind import require_classic
from pacer_spark.session_telemetry import SessionTelemetry
from pacer_spark.sources.files_source import PacerFilesDataSource
from pacer_spark.sources.gen import PacerGenDataSource
from pacer_spark.sources.reader_calls import reader_handler
from pacer_spark.sources.rpc import ControllerServer
from pacer_spark.sources.sink_gate import Sink, SinkGate

log = logging.getLogger("pacer_spark")

#: Seconds a report of running queries waits, at most, for Spark's listener bus to hand over the triggers that ended
#: (each takes its own tasks' cost; what runs after the last one counts in a later report).
REPORT_LISTENERS_WAIT_S = 2.0


class PacerSession:
    """pacer attached to a SparkSession. Build it with :func:`attach` (or from a :class:`PacerConfig`).

    :ivar config: what it was built with.
    :ivar controller: the Controller, to read (its views, its reports) while holding :attr:`lock`; only the
        session's :class:`~pacer_spark.driver.loop.Driver` changes it.
    :ivar lock: the driver's one lock around the Controller (RPC threads, stream threads and the listener take it).
    :ivar driver: the driver every front end decides through.
    :ivar admission: the ``pacer-gen``/``pacer-files`` sources' admission service.
    :ivar observer: errors, overhead and the report's ``spark`` part.
    :ivar paced: the ``format("pacer")`` queries (None when attached with ``paced=False``).
    """

    def __init__(self, spark: SparkSession, config: PacerConfig | None = None) -> None:
        config = config or PacerConfig()
        self.spark = spark
        self.config = config
        self.cores = config.cores or max(1, int(spark.sparkContext.defaultParallelism))
        self.rapids = rapids_loaded(spark.conf.get("spark.plugins", ""))
        gpu_count = config.gpus if config.gpus is not None else (1 if self.rapids else 0)
        self.pm = config.plugin_manager or get_plugin_manager()
        self.replay = ReplayGuard()
        self.pm.register(self.replay, name="pacer-spark-replay-guard")
        self.clock = PinnedClock()  # reads a trigger's end while a batch completes (driver/completion.py)
        self.controller = Controller(
            clock=self.clock, cores=self.cores, devices=Devices(cpu_cores=self.cores, gpus=gpu_count),
            scheduler=config.scheduler, scheduler_params=dict(config.scheduler_params) or None, plugin_manager=self.pm,
            fallback=config.fallback, overload=config.overload,
        )
        self.fair = str(spark.conf.get("spark.scheduler.mode", "FIFO")).upper() == "FAIR"
        self.enactment = Enactment(spark)  # placements to RAPIDS confs; explainOnly: RAPIDS' plan checked
        #: the core-seconds each query's tasks executed (pacer's listener on Spark's bus; None: not measured)
        self.task_time = _task_time(spark)
        #: the executors' scaler (None: scale "fixed" without bounds; "spark-dynamic": Spark's own manager)
        self.scaling = _scaling(spark, config, self.pm)
        self.driver = Driver(self.controller, self.clock, self.replay, concurrency=config.concurrency,
                             gate_timeout=config.gate_timeout, fair=self.fair, progress_timeout=config.progress_timeout,
                             enactment=self.enactment, cores=None if config.cores else self._task_slots,
                             task_time=self.task_time, scaling=self.scaling)
        self.lock = self.driver.lock
        #: the session's ``format("pacer")`` queries (None: not paced); connected to the JVM below, once listening.
        #: Built first: the driver hands a trigger's progress to the front end that registered first and claims it,
        #: and a paced query's run is matched by its run id, before any ``pacer-gen`` query of the same name
        #: registers queries over the session's defaults: the one place they merge
        self.registry = QueryRegistry(self.driver, config, self._shuffle_partitions)
        self.paced = PacedQueries(self.driver, spark, config, self.registry) if config.paced else None
        #: the JVM sources' line to the driver (Py4J)
        self.paced_service = PacedService(self.driver, spark, config.decide_timeout_s) if config.paced else None
        self.admission = AdmissionService(self.driver, rapids=self.rapids, collect_metrics=config.operator_metrics)
        self.sinks = SinkGate(self.driver)
        self.observer = SessionTelemetry(spark, self.driver, self.admission, fair=self.fair, rapids=self.rapids,
                                         paced=self.paced, enactment=self.enactment)
        self.started_at = time.time()
        #: a checkpoint root pacer made (none given) is pacer's to remove at stop()
        self._own_root = config.checkpoint_root is None
        self.checkpoint_root = Path(config.checkpoint_root or tempfile.mkdtemp(prefix="pacer-spark-"))
        spark.dataSource.register(PacerGenDataSource)
        spark.dataSource.register(PacerFilesDataSource)
        self.server = ControllerServer(reader_handler(self.driver))
        self.listener = ProgressListener(self.driver)
        spark.streams.addListener(self.listener)
        self.closed = False
        if self.paced_service is not None:
            self.paced_service.connect()
        #: the executors' own clock: on a cluster, the Controller follows the task slots Spark lists and the scaler
        #: the load while no source asks (a stream thread waits out a batch whose executor was lost)
        on_cluster = not str(spark.sparkContext.master).startswith("local") and not config.cores
        self.scaling_clock = ScalingClock(self.driver.scaling_turn) if self.scaling is not None or on_cluster \
            else None
        if self.scaling_clock is not None:
            self.scaling_clock.start()

    def _shuffle_partitions(self) -> int:
        """The session's ``spark.sql.shuffle.partitions``: a query's default parallelism."""
        return int(self.spark.conf.get("spark.sql.shuffle.partitions", "2") or 2)

    def _task_slots(self) -> int | None:
        """How many tasks Spark runs at once now (the executors' cores on a cluster, the threads in local mode; those
        of executors pacer asked to leave left out)."""
        if self.scaling is not None and self.scaling.enact:
            return self.scaling.task_slots()
        return status_store.task_slots(self.spark)

    @property
    def sources(self) -> dict[str, SourceState]:
        """Query id -> the state of its ``pacer-gen``/``pacer-files`` source."""
        return self.admission.sources

    # ------------------------------------------------------------------ registration

    def register_query(self, query_id: str, **settings: Any) -> QuerySpec:
        """Add a query to the Controller with its admission and placement strategies; ``settings`` are
        :meth:`pacer_spark.driver.protocol.registry.QueryRegistry.register`'s keywords (``workload``, ``dag``,
        ``deadline``, ``admission``, ``placement`` and their ``*_params``, ``window_range``, ``window_slide``,
        ``partitions``, ``max_rows``, ``max_bytes``, ``overload``, ``probe_rows``, ``engine_profile``), each left out
        the session's. A keyword it does not take raises ``TypeError`` naming it."""
        return self.registry.register(query_id, **settings)

    def source_options(self, query_id: str) -> dict[str, str]:
        """The ``pacer.*`` options that wire a source of ``query_id`` to this session's Controller (the reply
        timeout outlasts the gate's, where an admitted batch waits for its turn before the answer)."""
        from pacer_spark.options import OPT_AUTHKEY_FILE

        host, port = self.server.address
        # the authkey stays out of the options (Spark shows them): only its private file's path goes in
        return {OPT_QUERY: query_id, OPT_ADDRESS: f"{host}:{port}", OPT_AUTHKEY_FILE: str(self.server.authkey_file),
                OPT_TIMEOUT: f"{self.driver.gate_timeout_s + 30:g}"}

    def read_stream(self, query_id: str, fmt: str = GEN_FORMAT, *, schema: str | None = None,
                    **options: Any) -> DataFrame:
        """A streaming DataFrame of a pacer source whose admission this session decides.

        :param query_id: a query registered with :meth:`register_query`.
        :param fmt: ``"pacer-gen"`` or ``"pacer-files"``.
        :param options: the source's options (see :class:`~pacer_spark.sources.gen.PacerGenDataSource`,
            :class:`~pacer_spark.sources.files_source.PacerFilesDataSource`). A ``pacer-files`` source without option
            ``manifest`` keeps its manifest in the checkpoint :meth:`start` gets
            (``<checkpoint>/pacer-files/manifest.jsonl``), so a restart on that checkpoint, from a new session too,
            reads every file once; a query started with a plain ``writeStream`` keeps it under ``checkpoint_root``.
        """
        if not self.driver.knows(query_id):
            raise KeyError(f"query {query_id!r} is not registered; call register_query first")
        given = {k: str(v) for k, v in options.items()}
        if fmt == FILES_FORMAT and not any(k.lower() == "timezone" for k in given):
            given["timeZone"] = str(self.spark.conf.get("spark.sql.session.timeZone", "UTC"))
        opts = self.admission.add(query_id, fmt, given,
                                  partitions=self.driver.spec(query_id).partitions,
                                  manifest=self.checkpoint_root / query_id / "pacer-manifest.jsonl")
        reader = self.spark.readStream.format(fmt).options(**opts, **self.source_options(query_id))
        if schema is not None:
            reader = reader.schema(schema)
        return reader.load()

    def gate(self, query_id: str, sink: Sink) -> Sink:
        """Wrap ``sink``: wait for the batch's turn (FIFO/EDF) or pick its pool (FAIR/RDAS), run, report."""
        return self.sinks.wrap(query_id, sink)

    def start(
        self,
        frame: DataFrame,
        query_id: str,
        sink: Sink,
        *,
        checkpoint: str | None = None,
        output_mode: str = "append",
        trigger: str | None = None,
    ) -> StreamingQuery:
        """Start ``frame`` with ``sink`` wrapped in the scheduling gate.

        :param trigger: None (pacer decides: ``processingTime="0 seconds"``); ``"availableNow"`` or ``"once"``
            (pacer decides the batches of what is there when the query starts, then it stops); or a Spark
            processing-time interval such as ``"10 seconds"``: Spark's own fixed trigger, pacer only observes.
        """
        source = self.sources.get(query_id)
        if source is None:
            raise KeyError(f"query {query_id!r} has no pacer source; create it with read_stream")
        ends = {"availablenow": {"availableNow": True}, "once": {"once": True}}.get((trigger or "").lower())
        source.observe_only = trigger is not None and ends is None
        location = checkpoint or str(self.checkpoint_root / query_id / "checkpoint")
        self.admission.checkpointed(query_id, location)  # a pacer-files manifest lives in it: before Spark asks
        # a run stopped while Spark logged its first batch (even an empty one) can leave a temp file Spark refuses
        clear_interrupted_first_batch(location, active=[str(q.id) for q in self.spark.streams.active])
        writer = (
            frame.writeStream.queryName(query_id)
            .foreachBatch(self.gate(query_id, sink))
            .outputMode(output_mode)
            .option("checkpointLocation", location)
        )
        writer = writer.trigger(**ends) if ends else writer.trigger(processingTime=trigger or "0 seconds")
        source.no_data_batches = no_data_batches_enabled(self.spark)
        handle = writer.start()
        self.admission.started(query_id, handle)
        return handle

    def run_workload(
        self,
        workload: str,
        *,
        query_id: str | None = None,
        traffic: str = "constant",
        rate: float = 1000.0,
        duration: float = 120.0,
        seed: int = 7,
        traffic_params: Mapping[str, float | str] | None = None,
        files: str | None = None,
        file_format: str = "csv",
        deadline: float | None = None,
        admission: str | None = None,
        placement: str | None = None,
        admission_params: Mapping[str, Any] | None = None,
        placement_params: Mapping[str, Any] | None = None,
        sink: Sink | None = None,
        checkpoint: str | None = None,
        trigger: str | None = None,
        watermark: float = 60.0,
        source_options: Mapping[str, str] | None = None,
        max_rows: int = 0,
        max_bytes: int = 0,
    ) -> StreamingQuery:
        """Register, read and start one of the papers' workloads (``pacer-gen`` traffic, or ``files``).

        ``max_rows``/``max_bytes``: read caps per batch (see :meth:`register_query`).
        """
        from pacer_spark.workloads import build_workload, noop_sink
        from pacer_workloads import WORKLOADS

        qid = query_id or workload
        stream = WORKLOADS[workload].stream if workload in WORKLOADS else ""
        if trigger is not None:
            admission, admission_params = "asap", None
        self.register_query(qid, workload=workload, deadline=deadline, admission=admission, placement=placement,
                            admission_params=admission_params, placement_params=placement_params,
                            max_rows=max_rows, max_bytes=max_bytes)
        extra: dict[str, Any] = dict(source_options or {})
        if files is not None:
            df = self.read_stream(qid, FILES_FORMAT, path=files, format=file_format, stream=stream, **extra)
        else:
            params: dict[str, Any] = {f"traffic.{k}": v for k, v in (traffic_params or {}).items()}
            df = self.read_stream(qid, GEN_FORMAT, stream=stream, traffic=traffic, rate=rate, duration=duration,
                                  seed=seed, **params, **extra)
        query = build_workload(workload, df, watermark=watermark)
        return self.start(query.frame, qid, sink or noop_sink(query.finish), checkpoint=checkpoint,
                          output_mode=query.output_mode, trigger=trigger)

    # ------------------------------------------------------------------ running and reporting

    def executed_dag(self, query_id: str) -> OperatorDAG | None:
        """The operator DAG of the query's last executed plan (None before its first batch)."""
        source = self.sources.get(query_id)
        if source is None or source.handle is None:
            return None
        root = stream_query.executed_plan(source.handle, metrics=False)
        return dag_from_plan(root) if root is not None else None

    def expected(self, query_id: str) -> int | None:
        """How many datasets a ``pacer-gen`` query will see in all (None for ``pacer-files``)."""
        source = self.sources[query_id]
        return len(source.gen.arrivals()) if source.gen is not None else None

    def drained(self) -> bool:
        """True when every query is done: generated traffic fully processed, no file dataset waiting."""
        return self.admission.drained()

    def await_drained(self, timeout: float, *, poll: float = 0.2) -> bool:
        """Wait until :meth:`drained` (or a query failed, or ``timeout``); True when drained."""
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            if self.drained():
                return True
            if self.admission.failed():
                return False
            time.sleep(poll)
        return self.drained()

    def errors(self) -> dict[str, str]:
        """Queries that terminated with an error, and its root cause in one line (:func:`error_traces` has all)."""
        return self.observer.errors()

    def error_traces(self) -> dict[str, str]:
        """Queries that terminated with an error, and Spark's full error text."""
        return self.observer.error_traces()

    def overhead(self) -> dict[str, Any]:
        """pacer's own cost on Spark: RPC handling, round trips and operator-metric collection."""
        return self.observer.overhead()

    def report(self, config: Mapping[str, Any] | None = None, *, interval: float = 1.0,
               end: float | None = None) -> Report:
        """The run so far (or, after :meth:`stop`, the whole run) as a ``pacer.report/1`` document.

        A :class:`pacer.report_types.Report`: a ``dict`` (``report()["queries"][name]["latency_ms"]["p99"]``, and
        ``json.dump`` as before) with typed views: ``.version`` (1; the ``schema`` key, ``"pacer.report/1"``, carries
        it: within a version keys are only added), ``.queries`` / ``.query(name)`` (each a
        :class:`pacer.report_types.QueryReport`), ``.to_json()``, ``.as_dict()``. The keys are named by
        :class:`pacer.report_types.ReportDocument` and explained in :mod:`pacer.report`; Spark adds ``runtime:
        "spark"``, ``spark`` (Spark's side: ``spark.paced`` per ``format("pacer")`` query, ``spark.executors`` the
        executors whose tasks ran each query, ``driver`` in local mode) and, where pacer scales executors,
        ``scaling``.

        :param config: what to record as the run's ``config`` (a run's settings, for a reader to repeat it).
        :param interval: the per-query ``series``'s interval, seconds.
        :param end: the clock time the report runs to (default: now).
        """
        end = end or time.time()
        executors = status_store.query_executors(self.spark)  # Py4J calls to Spark's status store: outside the Controller's lock
        allocated = status_store.allocated_core_s(self.spark, self.started_at, end)
        if self.task_time is not None and not self.closed:  # the triggers that ended have taken their tasks' cost
            task_time.wait_for_listeners(self.spark, REPORT_LISTENERS_WAIT_S)
        self.driver.settle_busy(final=self.closed)

        def extra(completed: list[BatchReport]) -> dict[str, Any]:  # under the driver's lock
            out: dict[str, Any] = {"spark": {**self.observer.spark_section(completed), "executors": executors}}
            if self.scaling is not None:
                out["scaling"] = {**self.scaling.report(),
                                  "enacted_by": "pacer" if self.scaling.enact else "Spark's dynamic allocation"}
            return out

        return self.driver.report(extra, runtime="spark", config=dict(config or {}), start=self.started_at, end=end,
                                  interval=interval, allocated_core_s=allocated)

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every query this session started (each between batches when it can), the listener and the server."""
        if self.closed:
            return
        self.closed = True
        if self.scaling_clock is not None:
            self.scaling_clock.stop()
        self.admission.stop(timeout)
        # the last triggers' progress events and task ends are on their way: to pacer's listeners before they go
        task_time.wait_for_listeners(self.spark, min(timeout, REPORT_LISTENERS_WAIT_S))
        self.driver.settle(min(timeout, 2.0))
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception:  # pragma: no cover - session already stopped
            pass
        self.server.close()
        if self.paced_service is not None:
            self.paced_service.close()
        if self.scaling is not None:
            self.scaling.close()
        self.enactment.close()
        if self.task_time is not None:
            task_time.remove_task_time(self.spark, self.task_time)
        self.pm.unregister(self.replay)
        _ATTACHED.pop(id(self.spark), None)
        if self._own_root:
            shutil.rmtree(self.checkpoint_root, ignore_errors=True)


# ---------------------------------------------------------------------- attach


def _task_time(spark: SparkSession) -> task_time.TaskTime | None:
    """pacer's task-time listener on ``spark``'s bus, its jar loaded first (the jar ``format("pacer")`` needs too);
    None, with a warning, where the jar cannot be loaded: batches then carry no ``busy_core_s``."""
    try:
        jar.ensure_loaded(spark)
    except Exception as exc:  # no JDK, or a driver whose class loader takes no jar at run time
        log.warning("pacer: the core-seconds of each query's tasks (busy_core_s) are not measured: pacer's jar is "
                    "not loaded (%s)", exc)
        return None
    return task_time.add_task_time(spark)


def attach(
    spark: SparkSession,
    *,
    admission: str | None = None,
    scheduler: str | None = None,
    placement: str | None = None,
    deadline: float | str | None = None,
    fallback: bool | None = None,
    admission_params: Mapping[str, Any] | None = None,
    scheduler_params: Mapping[str, Any] | None = None,
    placement_params: Mapping[str, Any] | None = None,
    cores: int | None = None,
    gpus: int | None = None,
    concurrency: int | None = None,
    gate_timeout: float | str | None = None,
    decide_timeout: float | str | None = None,
    operator_metrics: bool | None = None,
    plugin_manager: PluginManager | None = None,
    checkpoint_root: str | os.PathLike[str] | None = None,
    overload: str | None = None,
    paced: bool | None = None,
    progress_timeout: float | str | None = None,
    scale: str | None = None,
    scale_params: Mapping[str, Any] | None = None,
    executors: tuple[int, int] | str | None = None,
    initial_executors: int | None = None,
    scale_every: float | str | None = None,
    scale_recommend_only: bool | None = None,
    engine_profile: EngineProfile | str | os.PathLike[str] | None = None,
) -> PacerSession:
    """Attach pacer to ``spark``: a Controller, its RPC server, the gate, the listener and the pacer sources.

    Every keyword is a field of :class:`~pacer_spark.config.PacerConfig`. One left out (None) is read from the
    session's conf named beside it, then takes its default. Every value, keyword or conf, is checked here, before
    anything starts: a bad one raises naming the setting, the value and what it takes. A duration is seconds, or a
    string in Spark's wording: ``"10s"``, ``"500ms"``, ``"2min"``, ``"1h"``, ``"7d"``, ``"10 seconds"``,
    ``"500 milliseconds"``, ``"1 minute"``; a boolean conf is ``true`` or ``false``.

    :param admission: the admission strategy of a query that names none (``spark.pacer.admission``; default
        ``zstream`` where a deadline is stated, else ``asap``, Spark's default trigger).
    :param scheduler: the scheduling strategy (``spark.pacer.scheduler``; default ``fifo``).
    :param placement: the placement strategy of a query that names none (``spark.pacer.placement``; default
        ``cpu-only``).
    :param deadline: every query's deadline, a duration (``spark.pacer.deadline``; default each window's slide).
    :param fallback: a raising strategy falls back to its baseline (``spark.pacer.fallback``; default true).
    :param admission_params: admission parameters by name (``spark.pacer.param.admission.<name>``).
    :param scheduler_params: scheduling parameters (``spark.pacer.param.scheduler.<name>``).
    :param placement_params: placement parameters (``spark.pacer.param.placement.<name>``).
    :param cores: the cores the Controller plans for, >= 1 (``spark.pacer.cores``; default Spark's parallelism).
    :param gpus: the GPUs it plans for, >= 0 (``spark.pacer.gpus``; default 1 with RAPIDS loaded, else 0).
    :param concurrency: batches of an ordered schedule running at once, >= 1 (``spark.pacer.gate.concurrency``;
        default 1: one at a time in the scheduler's order).
    :param gate_timeout: the longest a batch waits for its turn, a duration (``spark.pacer.gate.timeout``; 60 s).
    :param decide_timeout: the longest a ``format("pacer")`` source waits for the driver's answer, a duration
        (``spark.pacer.decide.timeout``; default the gate's timeout + 30 s).
    :param operator_metrics: read per-operator metrics from each batch's executed plan (default true).
    :param plugin_manager: where strategies come from (default every installed plugin).
    :param checkpoint_root: where queries keep checkpoints and manifests (default a temporary folder).
    :param overload: ``keep`` (only report an overload) or ``shed`` (drop the datasets an overloaded ``pacer-gen``
        query can no longer serve within its deadline, counted; a ``format("pacer")`` source never sheds)
        (``spark.pacer.overload``; default ``keep``).
    :param paced: pace every ``spark.readStream.format("pacer")`` query of the session (default true): the JVM
        source is built (javac, cached per Spark version) and loaded, which needs a JDK; ``paced=False`` attaches
        for ``pacer-gen``/``pacer-files`` only (see :mod:`pacer_spark.driver.protocol.paced`).
    :param progress_timeout: how long after a sink's end a batch whose trigger never reported is completed, a
        duration (default 10 s).
    :param scale: the scaling strategy: ``fixed`` (default: the executors stay), ``deadline`` (pacer-scaler),
        ``spark-dynamic`` (Spark's dynamic allocation) (``spark.pacer.scale``).
    :param scale_params: scaling parameters (``spark.pacer.param.scale.<name>``).
    :param executors: ``(min, max)`` executors a scaler may hold (``spark.pacer.scale.executors``, ``MIN:MAX``).
    :param initial_executors: executors at the start (``spark.pacer.scale.initial``; default those Spark runs).
    :param scale_every: the time between scaling decisions, a duration (``spark.pacer.scale.every``; 5 s).
    :param scale_recommend_only: report what the scaling strategy would hold, enact nothing
        (``spark.pacer.scale.recommendOnly``; default false).
    :param engine_profile: an engine profile or its file (``pacer calibrate --runtime spark``;
        ``spark.pacer.engineProfile``).
    :raises UnsupportedSessionError: for a Spark Connect session (no Py4J: see :mod:`pacer_spark.session_kind`).
    :raises ScalingRefused: for a ``scale`` this session cannot enact (local mode; Spark's dynamic allocation on for a
        pacer strategy, off for ``spark-dynamic``), naming what to do.
    :raises UnknownStrategyError: for a strategy no installed plugin provides, naming the setting.
    :raises ValueError: for a malformed value or one out of range, naming the setting, the value and what it takes.
    """
    options = {name: value for name, value in locals().items() if name != "spark" and value is not None}
    from pacer_spark.compat import check_spark_version

    require_classic(spark)  # a Spark Connect session is refused by name, before anything is asked of it
    check_spark_version()
    earlier = _ATTACHED.get(id(spark))
    if earlier is not None and not earlier.closed:
        raise RuntimeError("pacer is attached to this SparkSession already (a second PacerSession would leave the "
                           "first one's listener, RPC server and deciders running beside it): call stop() on the "
                           "first one, or attach to spark.newSession()")
    config = PacerConfig.from_spark(spark, **options)
    pm = config.plugin_manager or get_plugin_manager()
    if config.admission_source == "deadline default":
        admission, why_not = pm.default_admission(deadline_stated=True)
        if why_not:
            log.warning("pacer: %s, or name one (admission=..., spark.pacer.admission)", why_not)
            config = replace(config, admission=admission, admission_source="default (zstream not installed)")
    keywords = {"admission": "admission", "scheduling": "scheduler", "placement": "placement", "scaling": "scale"}
    for decision, name in config.strategies().items():
        try:
            pm.find(name, decision)  # fail now, with the list of installed strategies
        except UnknownStrategyError as exc:
            raise UnknownStrategyError(f"{setting_names(keywords[decision])}: {exc}") from None
    session = PacerSession(spark, replace(config, plugin_manager=pm))
    _ATTACHED[id(spark)] = session
    return session


#: The file in a checkpoint root where the executors' scaling keeps its state (:func:`saved_state`).
SCALING_STATE = "pacer-scaling.json"


def _scaling(spark: SparkSession, config: PacerConfig, pm: Any) -> ExecutorScaling | None:
    """The session's executor scaling (:mod:`pacer_spark.driver.scaling`): None for ``fixed`` without bounds; for
    ``spark-dynamic`` one that watches what Spark's own dynamic allocation holds.

    :raises ScalingRefused: where the session cannot scale (local mode; dynamic allocation on for a pacer
        strategy, or off for ``spark-dynamic``), naming what to do.
    """
    if config.scale == "fixed" and config.executors is None:
        return None
    refusal = executor_requests.scaling_refusal(spark, config.scale, recommend_only=config.scale_recommend_only)
    if refusal is not None:
        raise ScalingRefused(refusal)
    cores = conf_cores = int(spark.conf.get("spark.executor.cores", "0") or 0)  # 0: read from Spark's executors
    watch = config.scale == "spark-dynamic"
    bounds = config.executors or (_allocation_bounds(spark) if watch else None)
    assert bounds is not None  # PacerConfig refuses a pacer strategy without bounds
    state_path = Path(config.checkpoint_root) / SCALING_STATE if config.checkpoint_root and not watch else None
    saved = saved_state(state_path) if state_path is not None else {}
    initial = config.initial_executors
    if initial is None and not watch:  # what a previous run wanted, else what Spark runs now, within the bounds
        running = len(status_store.live_executors(spark) or [])
        initial = min(bounds[1], max(bounds[0], int(saved.get("wanted", 0)) or running))
    if not cores and saved.get("cores_per_executor"):
        cores = int(saved["cores_per_executor"])
    scaler = Scaler(config.scale, config.scale_params, plugin_manager=pm, executors=bounds,
                    initial=None if watch else initial, cores_per_executor=max(1, cores),
                    every_s=config.scale_every, fallback=config.fallback,
                    recommend_only=config.scale_recommend_only and not watch)
    profile = config.engine_profile
    startup = saved.get("startup_s") or (profile.executor_startup_s if profile is not None else None)
    scaling = ExecutorScaling(scaler, spark, enact=not watch, learn_cores=not conf_cores,
                              startup_s=float(startup) if startup is not None else None, state_path=state_path)
    scaling.start()
    return scaling


def _allocation_bounds(spark: SparkSession) -> tuple[int, int]:
    """The executors Spark's dynamic allocation moves between (``spark.dynamicAllocation.min/maxExecutors``; at
    least 1, :data:`~pacer_spark.jvm.executor_requests.NO_MAX_EXECUTORS` where no maximum is set)."""
    low = int(spark.conf.get("spark.dynamicAllocation.minExecutors", "0") or 0)
    high = int(spark.conf.get("spark.dynamicAllocation.maxExecutors", "") or executor_requests.NO_MAX_EXECUTORS)
    return max(1, low), max(1, low, high)


#: id(SparkSession) -> the PacerSession attached to it and not stopped (the session object is kept alive by it)
_ATTACHED: dict[int, PacerSession] = {}


__all__ = ["DEFAULT_LADDER", "PacerConfig", "PacerSession", "ReplayGuard", "Sink", "attach", "parse_seconds"]
