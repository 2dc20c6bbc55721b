"""The driver side: the Controller behind an RPC server, the scheduling gate, the listener, reports.

:func:`attach` is the one entry point. It returns a :class:`PacerSession` that registers queries
with the Controller, hands out pacer sources wired to it, and starts streaming queries whose sink
is wrapped in the scheduling gate.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from pacer import (
    AdmissionDecision,
    Controller,
    Dataset,
    Devices,
    MicroBatch,
    OperatorDAG,
    QuerySpec,
    hookimpl,
)
from pacer.metrics import percentile
from pacer.plugins import PluginManager, get_plugin_manager
from pacer.report import build_report
from pacer_spark import telemetry
from pacer_spark.errors import root_cause, stop_error
from pacer_spark.gate import Gate
from pacer_spark.options import OPT_ADDRESS, OPT_AUTHKEY, OPT_QUERY, GenPlan, parse_seconds
from pacer_spark.paced import PacedQueries
from pacer_spark.plan import dag_from_plan, operator_metrics, rapids_confs, rapids_loaded, read_plan
from pacer_spark.pools import DEFAULT_LADDER
from pacer_spark.rpc import ControllerServer
from pacer_spark.sources import (
    FILES_FORMAT,
    GEN_FORMAT,
    Manifest,
    PacerFilesDataSource,
    PacerGenDataSource,
    ignored_name,
)

log = logging.getLogger("pacer_spark")

Sink = Callable[[DataFrame, int], None]
CONF_PREFIX = "spark.pacer."


class ReplayGuard:
    """A guard plugin: admits exactly the datasets of a batch Spark replays from its offset log after a restart.

    Registered in front of every strategy (``tryfirst``); answers only for a query with a pending replay.
    """

    def __init__(self) -> None:
        self.forced: dict[str, int] = {}

    @hookimpl(tryfirst=True)
    def pacer_admit(self, ctx: Any) -> AdmissionDecision | None:
        """Admit the replayed batch's datasets, nothing else."""
        if ctx.query is None or ctx.query.id not in self.forced:
            return None
        return AdmissionDecision(self.forced.pop(ctx.query.id), 0, "replay of a batch from the offset log")


@dataclass
class _Source:
    """Driver-side state of one query's pacer source."""

    query_id: str
    fmt: str
    options: dict[str, str]
    gen: GenPlan | None = None
    files: dict[int, dict[str, Any]] = field(default_factory=dict)
    next_index: int | None = None
    admitted_end: int | None = None
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    handle: StreamingQuery | None = None
    observe_only: bool = False
    dead: bool = False
    error: str | None = None
    gate_wait_s: list[float] = field(default_factory=list)
    metrics_s: list[float] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)
    shed: list[int] = field(default_factory=list)
    spark_batches: int = 0
    listed: bool = False  # a pacer-files reader has listed its folder at least once


class PacerSession:
    """pacer attached to a SparkSession. Build it with :func:`attach`.

    :ivar controller: the Controller (guard its methods with :attr:`lock`).
    :ivar lock: the lock every Controller call takes (RPC threads and stream threads).
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        admission: str,
        scheduler: str,
        placement: str,
        deadline: float | None,
        fallback: bool,
        admission_params: Mapping[str, Any],
        scheduler_params: Mapping[str, Any],
        placement_params: Mapping[str, Any],
        cores: int | None,
        gpus: int | None,
        concurrency: int,
        gate_timeout: float,
        operator_metrics: bool,
        plugin_manager: PluginManager | None,
        checkpoint_root: str | None,
        overload: str = "shed",
        progress_timeout: float = telemetry.DEFAULT_PROGRESS_TIMEOUT_S,
        paced: bool = False,
    ) -> None:
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline}; omit it to use each window's slide")
        if concurrency < 1:
            raise ValueError(f"gate concurrency must be >= 1, got {concurrency}")
        self.spark = spark
        self.defaults = {"admission": admission, "placement": placement}
        self.default_params = {"admission": dict(admission_params), "placement": dict(placement_params)}
        self.deadline = deadline
        self.collect_metrics = operator_metrics
        sc = spark.sparkContext
        self.cores = cores or max(1, int(sc.defaultParallelism))
        self.rapids = rapids_loaded(spark.conf.get("spark.plugins", ""))
        gpu_count = gpus if gpus is not None else (1 if self.rapids else 0)
        self.pm = plugin_manager or get_plugin_manager()
        self.replay = ReplayGuard()
        self.pm.register(self.replay, name="pacer-spark-replay-guard")
        self.clock = telemetry.PinnedClock()  # reads a trigger's end while a batch completes (telemetry.py)
        self.controller = Controller(
            clock=self.clock, cores=self.cores, devices=Devices(cpu_cores=self.cores, gpus=gpu_count),
            scheduler=scheduler, scheduler_params=scheduler_params or None, plugin_manager=self.pm, fallback=fallback,
            overload=overload,
        )
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.engine = telemetry.BatchCompletion(self.controller, self.cond, self.clock, self._completed,
                                                progress_timeout)
        self.sources: dict[str, _Source] = {}
        self._by_run_id: dict[str, str] = {}
        self.fair = str(spark.conf.get("spark.scheduler.mode", "FIFO")).upper() == "FAIR"
        self.schedule_gate = Gate(self.controller, self.cond, concurrency=concurrency, timeout_s=gate_timeout, fair=self.fair)
        self.rpc_s: list[float] = []
        self.rpc_rtt_s: list[float] = []
        self.polls = 0
        self.started_at = time.time()
        self.checkpoint_root = Path(checkpoint_root or tempfile.mkdtemp(prefix="pacer-spark-"))
        spark.dataSource.register(PacerGenDataSource)
        spark.dataSource.register(PacerFilesDataSource)
        self.server = ControllerServer(self._handle)
        self.listener = telemetry.ProgressListener(self)
        spark.streams.addListener(self.listener)
        self.closed = False
        self.paced: PacedQueries | None = None
        if paced:
            self.paced = PacedQueries(self)

    def map_stream(self, stream_id: str, query_id: str) -> None:
        """Route listener events of the streaming query ``stream_id`` (its id or run id) to ``query_id``."""
        self._by_run_id[stream_id] = query_id

    def excluded(self, batch_id: str) -> bool:
        """Batches the gate's order skips: their query died, or their sink returned and the trigger commits."""
        if self._dead_batch(batch_id):
            return True
        return self.engine.awaiting(batch_id) and not (self.paced is not None and self.paced.running(batch_id))

    # ------------------------------------------------------------------ registration

    def register_query(
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
    ) -> QuerySpec:
        """Add a query to the Controller with its admission and placement strategies.

        ``max_rows``/``max_bytes`` cap every admission (Spark's ``maxOffsetsPerTrigger`` /
        ``maxBytesPerTrigger``; 0: no cap): the Controller trims a batch to the largest prefix within them.

        The operator DAG is the workload's template (``workload``), or ``dag``, or a minimal
        scan -> project -> sink chain (use :func:`pacer_spark.plan.dag_from_plan` on an executed
        plan for a custom query's real DAG).
        """
        parts = partitions or int(self.spark.conf.get("spark.sql.shuffle.partitions", "2") or 2)
        if workload is not None:
            from pacer_workloads import make_query

            spec = make_query(workload, query_id=query_id, deadline=deadline or self.deadline, partitions=parts)
            if dag is not None:
                spec = replace(spec, dag=dag)
        else:
            from pacer import Operator

            dag = dag or OperatorDAG.chain(Operator("scan#0", "scan", "MicroBatchScan"),
                                           Operator("project#1", "project", "Project"),
                                           Operator("sink#2", "sink", "ForeachBatchSink"))
            spec = QuerySpec(id=query_id, dag=dag, window_range=window_range, window_slide=window_slide,
                             deadline=deadline or self.deadline, partitions=parts)
        with self.lock:
            self.controller.add_query(
                spec,
                admission=admission or self.defaults["admission"],
                placement=placement or self.defaults["placement"],
                admission_params={**self.default_params["admission"], **(admission_params or {})},
                placement_params={**self.default_params["placement"], **(placement_params or {})},
                max_rows=max_rows, max_bytes=max_bytes,
            )
        return spec

    def source_options(self, query_id: str) -> dict[str, str]:
        """The ``pacer.*`` options that wire a source of ``query_id`` to this session's Controller."""
        host, port = self.server.address
        return {OPT_QUERY: query_id, OPT_ADDRESS: f"{host}:{port}", OPT_AUTHKEY: self.server.authkey_hex}

    def read_stream(self, query_id: str, fmt: str = GEN_FORMAT, *, schema: str | None = None,
                    **options: Any) -> DataFrame:
        """A streaming DataFrame of a pacer source whose admission this session decides.

        :param query_id: a query registered with :meth:`register_query`.
        :param fmt: ``"pacer-gen"`` or ``"pacer-files"``.
        :param options: the source's options (see :class:`~pacer_spark.sources.PacerGenDataSource`,
            :class:`~pacer_spark.sources.PacerFilesDataSource`).
        """
        if query_id not in self.controller.query_ids():
            raise KeyError(f"query {query_id!r} is not registered; call register_query first")
        opts = {k: str(v) for k, v in options.items()}
        if fmt == GEN_FORMAT:
            opts.setdefault("start", repr(time.time()))
            opts.setdefault("numPartitions", str(self.controller.query(query_id).spec.partitions))
            source = _Source(query_id, fmt, opts, gen=GenPlan.from_options(opts))
        elif fmt == FILES_FORMAT:
            if "path" not in opts:
                raise ValueError("pacer-files needs path=<directory to watch>")
            opts.setdefault("manifest", str(self.checkpoint_root / query_id / "pacer-manifest.jsonl"))
            source = _Source(query_id, fmt, opts)
        else:
            raise ValueError(f"unknown pacer source {fmt!r}; use {GEN_FORMAT!r} or {FILES_FORMAT!r}")
        with self.lock:
            self.sources[query_id] = source
        reader = self.spark.readStream.format(fmt).options(**opts, **self.source_options(query_id))
        if schema is not None:
            reader = reader.schema(schema)
        return reader.load()

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

        :param trigger: None (pacer decides: ``processingTime="0 seconds"``), or a Spark processing-time
            interval such as ``"10 seconds"``: Spark's own fixed trigger, pacer only observes.
        """
        source = self.sources.get(query_id)
        if source is None:
            raise KeyError(f"query {query_id!r} has no pacer source; create it with read_stream")
        source.observe_only = trigger is not None
        location = checkpoint or str(self.checkpoint_root / query_id / "checkpoint")
        writer = (
            frame.writeStream.queryName(query_id)
            .foreachBatch(self.gate(query_id, sink))
            .outputMode(output_mode)
            .option("checkpointLocation", location)
            .trigger(processingTime=trigger or "0 seconds")
        )
        handle = writer.start()
        with self.lock:
            source.handle = handle
            source.dead = False
            self._by_run_id[str(handle.runId)] = query_id
            self._by_run_id[str(handle.id)] = query_id
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
        traffic_params: Mapping[str, float] | None = None,
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

    # ------------------------------------------------------------------ admission (RPC)

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        t0 = time.perf_counter()
        try:
            if request.get("op") != "latest":
                raise ValueError(f"unknown request {request.get('op')!r}")
            return self._latest(str(request["query"]), int(request["start"]), request.get("new") or (),
                                request.get("rtt"))
        finally:
            self.rpc_s.append(time.perf_counter() - t0)

    def _latest(self, query_id: str, start: int, new: Sequence[Mapping[str, Any]], rtt: float | None) -> dict[str, Any]:
        with self.lock:
            source = self.sources.get(query_id)
            if source is None or query_id not in self.controller.query_ids():
                raise KeyError(f"query {query_id!r} is not registered with this pacer session")
            if rtt is not None:
                self.rpc_rtt_s.append(float(rtt))
            source.listed = True
            for entry in new:
                source.files[int(entry["index"])] = dict(entry)
            if source.next_index is None or source.next_index < start:
                source.next_index = start  # datasets before ``start`` were processed by an earlier run
            waiting = self.engine.waiting_spark_batch(query_id)  # its trigger ended: Spark holds its progress
            if waiting is not None and source.handle is not None:
                progress = telemetry.recent_progress(source.handle._jsq, waiting)
                if progress is not None:
                    self.engine.on_progress(progress, event=False)
            stale = self.engine.expire(query_id, time.time())  # its trigger never reported: completed as at its sink
            if stale is not None:
                self._warn_once(f"no-progress-{query_id}", "query %r: no progress event %.0f s after batch %s's "
                                "sink; completed without its engine time", query_id, self.engine.timeout_s,
                                stale.batch_id)
            if source.admitted_end is not None and start < source.admitted_end:
                # another reader of the same query (a self-join), or a repeated ask: same answer
                return {"end": source.admitted_end, "shed": source.shed}
            self._arrive_available(source, time.time())
            self.polls += 1
            batch = self.controller.poll(query_id)
            if batch is None:
                return {"end": start}
            self._admitted(source, batch)
            taken = {int(d.handle) for d in batch.datasets}  # the rest of [start, end) was shed: not to be read
            source.shed = [i for i in range(start, source.admitted_end or start) if i not in taken]
            return {"end": source.admitted_end, "shed": source.shed}

    def _dataset(self, source: _Source, index: int) -> Dataset | None:
        if source.gen is not None:
            return source.gen.dataset(source.query_id, index)
        entry = source.files.get(index)
        if entry is None:
            return None
        return Dataset(f"{index}:{entry['name']}", float(entry["arrival"]), int(entry["bytes"]), int(entry["rows"]),
                       handle=index)

    def _arrive_available(self, source: _Source, now: float) -> None:
        """Hand the Controller every dataset that has arrived and that it has not seen."""
        assert source.next_index is not None
        end = source.gen.available_end(now) if source.gen is not None else max(source.files, default=-1) + 1
        while source.next_index < end:
            dataset = self._dataset(source, source.next_index)
            if dataset is None:
                break
            self.controller.arrive(source.query_id, dataset)
            source.next_index += 1

    def _admitted(self, source: _Source, batch: MicroBatch) -> None:
        indices = [int(d.handle) for d in batch.datasets]
        begin, end = min(indices), max(indices) + 1
        source.ranges[batch.id] = (begin, end)
        source.admitted_end = end
        self._enact(source, batch)
        self.cond.notify_all()

    def _enact(self, source: _Source, batch: MicroBatch) -> None:
        """Apply the batch's placement through RAPIDS confs on the stream's session, or record why not."""
        placement = batch.placement
        if placement is None:
            return
        if not self.rapids:
            enacted, note = False, "not enacted: the RAPIDS Accelerator plugin is not loaded (spark.plugins)"
        elif source.handle is None:
            enacted, note = False, "not enacted: the stream's session is not known yet (first batch)"
        else:
            confs, note = rapids_confs(placement, self.controller.query(source.query_id).spec.dag)
            session = source.handle._jsq.streamingQuery().sparkSessionForStream()
            for key, value in confs.items():
                session.conf().set(key, value)
            enacted = True
        self.controller.record_enactment(batch.id, enacted, note)

    # ------------------------------------------------------------------ the gate (foreachBatch)

    def gate(self, query_id: str, sink: Sink) -> Sink:
        """Wrap ``sink``: wait for the batch's turn (FIFO/EDF) or pick its pool (FAIR/RDAS), run, report."""

        def gated(df: DataFrame, spark_batch_id: int) -> None:
            batch_id = self._claim(query_id, spark_batch_id)
            if batch_id is None:  # a no-data batch (watermark) or one pacer did not form
                sink(df, spark_batch_id)
                return
            self._wait_turn(query_id, batch_id, df)
            try:
                sink(df, spark_batch_id)
            except Exception as exc:
                stopped = stop_error(exc)
                if stopped is None:
                    raise
                raise stopped from None  # the query is being stopped: a short error Spark recognises
            self._finish(query_id, batch_id, spark_batch_id)

        return gated

    def _claim(self, query_id: str, spark_batch_id: int) -> str | None:
        with self.lock:
            source = self.sources[query_id]
            source.spark_batches += 1
            q = self.controller.query(query_id)
            if q.in_flight is not None and not q.in_flight_started:
                return q.in_flight
            if q.in_flight is not None:
                return None
        # No admitted batch: a replay after restart, or a no-data batch. The offset log tells which.
        span = self._offset_range(source, spark_batch_id)
        with self.lock:
            if span is None or span[1] <= span[0]:
                return None
            begin, end = span
            if source.next_index is None or source.next_index < begin:
                source.next_index = begin
            while source.next_index < end:
                dataset = self._dataset(source, source.next_index)
                if dataset is None:
                    self._load_manifest(source)
                    dataset = self._dataset(source, source.next_index)
                if dataset is None:
                    log.warning("query %r: cannot describe dataset %d of replayed batch %d; not tracked",
                                query_id, source.next_index, spark_batch_id)
                    return None
                self.controller.arrive(query_id, dataset)
                source.next_index += 1
            self.replay.forced[query_id] = end - begin
            try:
                batch = self.controller.poll(query_id)
            finally:
                self.replay.forced.pop(query_id, None)
            if batch is None:
                return None
            self._admitted(source, batch)
            log.info("query %r: replaying batch %d (datasets %d..%d) from the checkpoint", query_id,
                     spark_batch_id, begin, end - 1)
            return batch.id

    def _load_manifest(self, source: _Source) -> None:
        if source.fmt == FILES_FORMAT and "manifest" in source.options:
            for entry in Manifest(Path(source.options["manifest"])).entries:
                source.files.setdefault(entry.index, entry.as_json())

    @staticmethod
    def _offset_range(source: _Source, spark_batch_id: int) -> tuple[int, int] | None:
        """``(start, end)`` dataset offsets of a Spark batch, from the query's offset log."""
        if source.handle is None:
            return None
        try:
            log_ = source.handle._jsq.streamingQuery().offsetLog()

            def index_at(batch: int) -> int | None:
                if batch < 0:
                    return 0
                entry = log_.get(batch)
                if entry.isEmpty():
                    return None
                offsets = entry.get().offsets()
                for i in range(offsets.size()):
                    item = offsets.apply(i)
                    if not item.isEmpty():
                        return int(json.loads(item.get().json())["index"])
                return None

            end = index_at(spark_batch_id)
            begin = index_at(spark_batch_id - 1)
        except Exception:  # an internal API changed: pacer then just does not track this batch
            log.debug("cannot read the offset log", exc_info=True)
            return None
        if end is None or begin is None:
            return None
        return begin, end

    def _wait_turn(self, query_id: str, batch_id: str, df: DataFrame) -> None:
        source = self.sources[query_id]
        if source.observe_only:  # Spark's own trigger: pacer only observes
            with self.lock:
                self.controller.start(batch_id)
            return
        turn = self.schedule_gate.pass_batch(batch_id, excluded=self.excluded)
        source.gate_wait_s.append(turn.waited_s)
        df.sparkSession.sparkContext.setLocalProperty("spark.scheduler.pool", turn.pool)  # type: ignore[arg-type]

    def _dead_batch(self, batch_id: str) -> bool:
        query_id = self.controller.batch(batch_id).query_id
        source = self.sources.get(query_id)
        if source is not None:
            return source.dead
        return self.paced is not None and self.paced.dead(query_id)

    def _finish(self, query_id: str, batch_id: str, spark_batch_id: int) -> None:
        """The sink returned: read the operator metrics (the next trigger replaces the executed plan), free the
        gate and leave completion to the trigger's progress event, after commitOffsets (see telemetry.py)."""
        source = self.sources[query_id]
        metrics = []
        if self.collect_metrics and source.handle is not None:
            t0 = time.perf_counter()
            try:
                with self.lock:
                    batch = self.controller.batch(batch_id).batch
                    dag = self.controller.query(query_id).spec.dag
                root = read_plan(source.handle._jsq.streamingQuery().lastExecution().executedPlan())
                metrics = operator_metrics(root, dag, batch.placement,
                                           batch_bytes=batch.bytes, batch_rows=batch.rows)
            except Exception:
                log.debug("no operator metrics for %s", batch_id, exc_info=True)
            source.metrics_s.append(time.perf_counter() - t0)
        self.engine.sink_done(query_id, telemetry.SinkDone(batch_id, spark_batch_id, time.time(), metrics))

    def _completed(self, query_id: str, batch_id: str) -> None:
        source = self.sources.get(query_id)  # None for a format("pacer") query
        if source is not None:
            source.ranges.pop(batch_id, None)

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        self.schedule_gate.warn_once(key, message, *args)

    # ------------------------------------------------------------------ listener callbacks

    def _on_progress(self, progress: telemetry.TriggerProgress) -> None:
        """A trigger ended: keep Spark's durations and complete the batch it ran (the listener's thread)."""
        with self.cond:
            if self.paced is not None and self.paced.owns(progress.query):
                self.paced.on_progress(progress)
                return
            source = self.sources.get(progress.query)
            if source is None:
                return
            source.progress.append(progress.as_json())
            try:
                self.engine.on_progress(progress)
            except Exception as exc:  # a feedback hook raised without fallback: fail the query as foreachBatch did
                log.error("query %r: completing batch %d failed: %s", progress.query, progress.batch_id, exc)
                source.error = source.error or f"{type(exc).__name__}: {exc}"
                source.dead = True
                if source.handle is not None:
                    threading.Thread(target=source.handle.stop, name="pacer-stop", daemon=True).start()

    def _on_terminated(self, run_id: str, exception: str | None) -> None:
        with self.cond:
            query_id = self._by_run_id.get(run_id)
            if self.paced is not None and query_id is not None and self.paced.owns(query_id):
                self.paced.on_terminated(query_id, exception)
            source = self.sources.get(query_id) if query_id else None
            if source is not None and query_id is not None:
                source.dead = True
                source.error = source.error or exception
                try:  # a batch still waiting: its trigger failed after the sink, or the query was stopped
                    self.engine.give_up(query_id)
                except Exception:
                    log.exception("query %r: completing its last batch at termination failed", query_id)
            self.cond.notify_all()

    # ------------------------------------------------------------------ running and reporting

    def executed_dag(self, query_id: str) -> OperatorDAG | None:
        """The operator DAG of the query's last executed plan (None before its first batch)."""
        source = self.sources.get(query_id)
        if source is None or source.handle is None:
            return None
        execution = source.handle._jsq.streamingQuery().lastExecution()
        if execution is None:
            return None
        return dag_from_plan(read_plan(execution.executedPlan(), metrics=False))

    def expected(self, query_id: str) -> int | None:
        """How many datasets a ``pacer-gen`` query will see in all (None for ``pacer-files``)."""
        source = self.sources[query_id]
        return len(source.gen.arrivals()) if source.gen is not None else None

    def drained(self) -> bool:
        """True when every query is done: generated traffic fully processed, no file dataset waiting."""
        with self.lock:
            for query_id, source in self.sources.items():
                if source.dead:
                    if source.error:
                        return False
                    continue
                q = self.controller.query(query_id)
                if q.in_flight is not None or q.buffered_count:
                    return False
                if source.gen is not None:
                    if source.next_index is None or source.next_index < len(source.gen.arrivals()):
                        return False
                else:
                    known = max(source.files) + 1 if source.files else (source.next_index or 0)
                    if not source.listed or known == 0 or known < _files_in(source):
                        return False  # not listed yet, no file yet, or files the reader has not told about
                    if (source.next_index or 0) < known:
                        return False
            return True

    def await_drained(self, timeout: float, *, poll: float = 0.2) -> bool:
        """Wait until :meth:`drained` (or a query failed, or ``timeout``); True when drained."""
        limit = time.time() + timeout
        while time.time() < limit:
            if self.drained():
                return True
            if any(s.dead and s.error for s in self.sources.values()):
                return False
            time.sleep(poll)
        return self.drained()

    def errors(self) -> dict[str, str]:
        """Queries that terminated with an error, and its root cause in one line (:func:`error_traces` has all)."""
        return {query_id: root_cause(trace) for query_id, trace in self.error_traces().items()}

    def error_traces(self) -> dict[str, str]:
        """Queries that terminated with an error, and Spark's full error text."""
        failed = {q: s.error for q, s in self.sources.items() if s.error}
        if self.paced is not None:
            failed.update({q: p.error for q, p in self.paced.queries.items() if p.error})
        return failed

    def overhead(self) -> dict[str, Any]:
        """pacer's own cost on Spark: RPC handling, round trips and operator-metric collection."""
        def us(values: Sequence[float], q: float) -> float | None:
            return 1e6 * percentile(values, q) if values else None

        metrics = [v for s in self.sources.values() for v in s.metrics_s]
        waits = [v for s in self.sources.values() for v in s.gate_wait_s]
        return {
            "rpc_handle_us_p50": us(self.rpc_s, 50), "rpc_handle_us_p99": us(self.rpc_s, 99),
            "rpc_round_trip_us_p50": us(self.rpc_rtt_s, 50), "rpc_round_trip_us_p99": us(self.rpc_rtt_s, 99),
            "rpc_requests": len(self.rpc_s),
            "operator_metrics_ms_avg": 1e3 * sum(metrics) / len(metrics) if metrics else None,
            "gate_wait_ms_avg": 1e3 * sum(waits) / len(waits) if waits else None,
            "gate_wait_ms_max": 1e3 * max(waits) if waits else None,
        }

    def report(self, config: Mapping[str, Any] | None = None, *, interval: float = 1.0,
               end: float | None = None) -> dict[str, Any]:
        """The run as a ``pacer.report/1`` document with ``runtime: "spark"``."""
        import pyspark

        with self.lock:
            placements = [r.placement for r in self.controller.reports() if r.placement is not None]
            spark_info = {
                "spark_version": pyspark.__version__,
                "master": self.spark.sparkContext.master,
                "scheduler_mode": "FAIR" if self.fair else "FIFO",
                "rapids_loaded": self.rapids,
                "pacer_spark_overhead": self.overhead(),
                "placement_enactment": {
                    "batches": len(placements),
                    "enacted": sum(1 for p in placements if p.enacted),
                    "notes": sorted({p.note for p in placements if p.note}),
                },
                "spark_batches": {q: s.spark_batches for q, s in self.sources.items()},
                "spark_duration_ms_avg": {q: telemetry.average_durations(s.progress)
                                          for q, s in self.sources.items()},
                "engine": self.engine.summary(),
                "errors": self.errors(),
                "quarantined_rows": {q: _quarantined(s) for q, s in self.sources.items() if s.fmt == FILES_FORMAT},
                "paced": self.paced.summary() if self.paced is not None else {},
            }
            return build_report(runtime="spark", config=dict(config or {}), controller=self.controller,
                                start=self.started_at, end=end or time.time(), interval=interval,
                                extra={"spark": spark_info})

    def stop(self, *, timeout: float = 10.0) -> None:
        """Stop every query this session started (each between batches when it can), the listener and the server."""
        if self.closed:
            return
        self.closed = True
        with self.cond:
            for source in self.sources.values():
                source.dead = True
            self.cond.notify_all()
        for source in self.sources.values():
            handle = source.handle
            if handle is None or not handle.isActive:
                continue
            limit = time.time() + timeout
            try:
                while time.time() < limit and handle.isActive and handle.status.get("isTriggerActive"):
                    time.sleep(0.05)
                handle.stop()
            except Exception:  # already failing or stopped
                log.debug("stopping %s", source.query_id, exc_info=True)
        self.engine.settle(min(timeout, 2.0))  # the last triggers' progress events are on their way
        try:
            self.spark.streams.removeListener(self.listener)
        except Exception:  # pragma: no cover - session already stopped
            pass
        self.server.close()
        if self.paced is not None:
            self.paced.close()
        self.pm.unregister(self.replay)


def _files_in(source: _Source) -> int:
    """Datasets waiting in a ``pacer-files`` folder right now (what its reader will list)."""
    try:
        return sum(1 for e in os.scandir(source.options["path"]) if e.is_file() and not ignored_name(e.name))
    except FileNotFoundError:
        return 0


def _quarantined(source: _Source) -> int:
    directory = Path(source.options.get("quarantine") or Path(source.options["path"]) / "_pacer_quarantine")
    if not directory.is_dir():
        return 0
    return sum(len(p.read_text().splitlines()) for p in directory.glob("*.bad"))


# ---------------------------------------------------------------------- attach


def _conf(spark: SparkSession, key: str, default: str | None = None) -> str | None:
    value = spark.conf.get(CONF_PREFIX + key, None)
    return default if value in (None, "") else str(value)


def _conf_params(spark: SparkSession, decision: str) -> dict[str, str]:
    prefix = f"{CONF_PREFIX}param.{decision}."
    try:
        items = spark.sparkContext.getConf().getAll()
    except Exception:  # pragma: no cover
        items = []
    out = {k[len(prefix):]: v for k, v in items if k.startswith(prefix)}
    return out


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
    gate_timeout: float | None = None,
    operator_metrics: bool = True,
    plugin_manager: PluginManager | None = None,
    checkpoint_root: str | None = None,
    overload: str | None = None,
    paced: bool = True,
) -> PacerSession:
    """Attach pacer to ``spark``: a Controller, its RPC server, the gate, the listener and the pacer sources.

    With ``paced`` (the default) every ``spark.readStream.format("pacer")`` query of the session is paced
    by it (see :mod:`pacer_spark.paced`): the JVM source is built (javac, cached per Spark version) and
    loaded. Without a JDK that fails: ``paced=False`` attaches for ``pacer-gen``/``pacer-files`` only.

    Every argument left None is read from the session's ``spark.pacer.*`` confs, then defaults:
    ``spark.pacer.admission`` (asap), ``spark.pacer.scheduler`` (fifo), ``spark.pacer.placement``
    (cpu-only), ``spark.pacer.deadline`` (e.g. ``10s``; default each window's slide),
    ``spark.pacer.fallback`` (true: a raising strategy falls back to its baseline),
    ``spark.pacer.param.<admission|scheduler|placement>.<name>``, ``spark.pacer.cores``,
    ``spark.pacer.gpus``, ``spark.pacer.gate.concurrency`` (1: batches run one at a time in the
    scheduler's order), ``spark.pacer.gate.timeout`` (60 s), ``spark.pacer.overload`` (``keep``: only
    report an overload; ``shed``: drop the datasets an overloaded ``pacer-gen`` query can no longer serve
    within its deadline, counted. A ``format("pacer")`` source reads every offset: it never sheds).

    :raises UnknownStrategyError: for a strategy no installed plugin provides.
    :raises ValueError: for a deadline <= 0 or a malformed value.
    """
    from pacer_spark.compat import check_spark_version

    check_spark_version()
    dl = parse_seconds(deadline) if deadline is not None else parse_seconds(_conf(spark, "deadline"))
    fb = fallback if fallback is not None else (_conf(spark, "fallback", "true") or "true").lower() == "true"
    pm = plugin_manager or get_plugin_manager()
    chosen = {
        "admission": admission or _conf(spark, "admission", "asap"),
        "scheduling": scheduler or _conf(spark, "scheduler", "fifo"),
        "placement": placement or _conf(spark, "placement", "cpu-only"),
    }
    for kind, name in chosen.items():
        pm.find(str(name), kind)  # fail now, with the list of installed strategies
    cores_conf = _conf(spark, "cores")
    gpus_conf = _conf(spark, "gpus")
    return PacerSession(
        spark,
        admission=str(chosen["admission"]),
        scheduler=str(chosen["scheduling"]),
        placement=str(chosen["placement"]),
        deadline=dl,
        fallback=fb,
        admission_params=admission_params or _conf_params(spark, "admission"),
        scheduler_params=scheduler_params or _conf_params(spark, "scheduler"),
        placement_params=placement_params or _conf_params(spark, "placement"),
        cores=cores or (int(cores_conf) if cores_conf else None),
        gpus=gpus if gpus is not None else (int(gpus_conf) if gpus_conf else None),
        concurrency=concurrency or int(_conf(spark, "gate.concurrency", "1") or 1),
        gate_timeout=gate_timeout or float(_conf(spark, "gate.timeout", "60") or 60),
        operator_metrics=operator_metrics,
        plugin_manager=pm,
        checkpoint_root=checkpoint_root,
        overload=overload or _conf(spark, "overload", "keep") or "keep",
        paced=paced,
    )


__all__ = ["DEFAULT_LADDER", "PacerSession", "attach", "parse_seconds"]
