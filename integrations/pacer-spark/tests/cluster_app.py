"""The driver program of ``test_cluster_standalone.py``: paced queries on a Spark standalone master.

Run as ``python cluster_app.py --master spark://… --work DIR --cluster-dir DIR --phases kafka,edf,rdas,gen,scale [--bootstrap-servers …]``,
in a process of its own (one SparkContext per process; the suite's own session is ``local[2]``). Every phase
writes ``DIR/<phase>.json``. Rows pass through :func:`tag`, a ``mapInArrow`` function that runs in the executors'
Python workers and stamps each row with what ``TaskContext`` says there (the task's FAIR pool, its stream's query
id and batch id) and the id of the executor JVM it runs in; it also writes one JSON line per task (start, end) under
``DIR/tasks``, and, while a task of the ``kafka`` phase runs, a file ``DIR/busy/<executor id>`` for the test to
know which executor to kill with SIGKILL (it answers with ``DIR/killed.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pacer
from pacer_spark.jvm import status_store
from pacer_spark.run.cluster import executor_id

TAGS = "executor STRING, pool STRING, query_id STRING, spark_batch BIGINT"
KAFKA_ROWS_PER_ROUND, KAFKA_PARTITIONS = 200, 2
SCHEDULE_ROWS, SCHEDULE_FILES = 40, 6


def tag(work: str, phase: str, hold_s: float) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """A ``mapInArrow`` function: every row gets its task's executor, pool, query id and batch id (see module)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None, "tag() runs in a task"
        stamp: dict[str, Any] = {"executor": executor_id(), "pool": context.getLocalProperty("spark.scheduler.pool") or "",
                 "query_id": context.getLocalProperty("sql.streaming.queryId") or "",
                 "spark_batch": int(context.getLocalProperty("streaming.sql.batchId") or -1)}
        started = time.time()
        busy = Path(work) / "busy" / stamp["executor"]
        if phase == "kafka":
            staged = busy.with_suffix(".tmp")
            staged.write_text(json.dumps({"batch": stamp["spark_batch"], "partition": context.partitionId()}))
            os.replace(staged, busy)
        try:
            time.sleep(hold_s)  # a task that lasts: a SIGKILL of its executor lands while it runs
            for batch in batches:
                columns = {name: pa.array([value] * batch.num_rows) for name, value in stamp.items()}
                yield pa.RecordBatch.from_arrays([*batch.columns, *columns.values()],
                                                 names=[*batch.schema.names, *columns])
        finally:
            busy.unlink(missing_ok=True)
        record = {**stamp, "phase": phase, "partition": context.partitionId(), "attempt": context.attemptNumber(),
                  "start": started, "end": time.time()}
        with open(Path(work) / "tasks" / f"{phase}.jsonl", "a") as out:
            out.write(json.dumps(record) + "\n")

    return run


def tagged(frame: Any, work: str, phase: str, hold_s: float) -> Any:
    """``frame`` with :data:`TAGS` appended by :func:`tag` in the executors."""
    schema = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in frame.schema.fields) + ", " + TAGS
    return frame.mapInArrow(tag(work, phase, hold_s), schema)


def wait_for_executors(spark: Any, count: int, timeout_s: float = 120.0) -> None:
    """Until ``count`` executors have registered with the driver."""
    deadline = time.monotonic() + timeout_s
    while spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1 < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"fewer than {count} executors registered within {timeout_s:g} s")
        time.sleep(0.5)


def warm_up(spark: Any, work: Path) -> None:
    """One small job through :func:`tag` into parquet on both executors: their Python workers, the parquet writer
    and the driver's code paths are warm before the first stream's batch (it took 18 s cold here)."""
    frame = spark.range(0, 400, 1, 4).selectExpr("CAST(id AS STRING) AS key")
    tagged(frame, str(work), "warm-up", 0.0).write.mode("overwrite").parquet(str(work / "warm-up"))


def rows_done(query: Any) -> int:
    """Input rows of the query's batches so far (each batch once)."""
    return sum({p["batchId"]: p["numInputRows"] for p in query.recentProgress}.values())


def kafka_to_parquet(spark: Any, servers: str, topic: str, work: Path, phase: str, *, hold_s: float,
                     out: Path) -> Any:
    """Kafka -> ``format("pacer")`` -> :func:`tag` -> parquet at ``out``, started as query ``<phase>_cluster``."""
    frame = (spark.readStream.format("pacer").option("pacer.source", "kafka").option("kafka.bootstrap.servers",
             servers).option("subscribe", topic).option("startingOffsets", "earliest").load()
             .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value"))
    return (tagged(frame, str(work), phase, hold_s).writeStream.queryName(f"{phase}_cluster").format("parquet")
            .option("path", str(out)).option("checkpointLocation", str(work / f"ck-{phase}")).start())


def kafka_phase(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Kafka -> format("pacer") (zStream) -> parquet while the test kills an executor; the output read back."""
    import pacer_spark
    from pacer_kafka.testing import new_topic, produce_numbered

    servers = args.bootstrap_servers
    topic = new_topic(servers, "cluster", KAFKA_PARTITIONS)
    out, killed = work / "kafka-out", work / "killed.json"
    pacer = pacer_spark.attach(spark, admission="zstream", scheduler="fifo", deadline="4s",
                               checkpoint_root=str(work / "pacer-kafka"))
    produced = 0
    # (time, the task slots the Controller plans for, those Spark's status store lists), every 0.1 s
    cores: list[tuple[float, int, int | None]] = []
    sampling = threading.Event()

    def sample() -> None:
        from pacer_spark.jvm.status_store import task_slots

        while not sampling.wait(0.1):
            cores.append((time.time(), pacer.controller.cores, task_slots(spark)))

    threading.Thread(target=sample, name="cores-sampler", daemon=True).start()
    try:
        query = kafka_to_parquet(spark, servers, topic, work, "kafka", hold_s=0.6, out=out)
        rounds_after_kill = 0
        for _ in range(60):  # until the test killed an executor, then 3 rounds more
            produce_numbered(servers, topic, produced, KAFKA_ROWS_PER_ROUND, KAFKA_PARTITIONS)
            produced += KAFKA_ROWS_PER_ROUND
            rounds_after_kill += killed.exists()
            if rounds_after_kill > 3:
                break
            time.sleep(1.0)
        deadline = time.monotonic() + 150
        while rows_done(query) < produced and query.exception() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        # the Worker launches a replacement executor, and the Controller plans for it at the source's next asks
        # (the stream keeps asking while idle); a slow machine may finish the rows before either
        deadline = time.monotonic() + 90
        while cores[-1:] and cores[-1][1:] != (2, 2) and query.exception() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        error = query.exception()
        report = pacer.report({"test": "cluster-kafka"})
        query.stop()
    finally:
        sampling.set()
        pacer.stop()
    rows = spark.read.parquet(str(out)).select("key", "value", "executor").collect() if out.exists() else []
    return {"produced": produced, "keys": sorted(int(r.key) for r in rows),
            "values_match": all(r.value == f"record-{r.key}" for r in rows),
            "executors": sorted({r.executor for r in rows}), "error": str(error) if error else None,
            "killed": json.loads(killed.read_text()) if killed.exists() else None, "report": report, "cores": cores}


class Alternating:
    """A scaling strategy for the ``scale`` phase: 1 and 2 executors in turn at every call, so that pacer's enactment
    (requestTotalExecutors, killExecutors between batches) runs several times within seconds."""

    def __init__(self) -> None:
        self.calls = 0

    @pacer.hookimpl
    def pacer_strategies(self) -> list[Any]:
        return [pacer.StrategyInfo(name="alternating", provides=frozenset({"scaling"}))]

    @pacer.hookimpl
    def pacer_scale(self, ctx: Any, queries: Any, cluster: Any, now: float) -> Any:
        if ctx.chosen != "alternating":
            return None
        self.calls += 1
        return pacer.ScaleDecision(1 if self.calls % 2 else 2, f"call {self.calls}")


def scale_phase(spark: Any, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Kafka -> format("pacer") (zStream) -> parquet while a scaling strategy removes and adds an executor every 4 s;
    the output read back, the report's scaling section and Spark's own record of the executors."""
    import pacer_spark
    from pacer.plugins import get_plugin_manager
    from pacer_kafka.testing import new_topic, produce_numbered

    servers = args.bootstrap_servers
    topic = new_topic(servers, "scale", KAFKA_PARTITIONS)
    out = work / "scale-out"
    pm = get_plugin_manager()
    pm.register(Alternating())
    wait_for_executors(spark, 2)
    began = time.time()
    pacer = pacer_spark.attach(spark, admission="zstream", deadline="4s", scale="alternating", executors=(1, 2),
                               initial_executors=2, scale_every=4.0, plugin_manager=pm,
                               checkpoint_root=str(work / "pacer-scale"))
    produced = 0
    try:
        query = kafka_to_parquet(spark, servers, topic, work, "scale", hold_s=0.3, out=out)
        for _ in range(30):
            produce_numbered(servers, topic, produced, KAFKA_ROWS_PER_ROUND, KAFKA_PARTITIONS)
            produced += KAFKA_ROWS_PER_ROUND
            time.sleep(1.0)
        deadline = time.monotonic() + 150
        while rows_done(query) < produced and query.exception() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        error = query.exception()
        report = pacer.report({"test": "cluster-scale"})
        query.stop()
    finally:
        pacer.stop()
    ended = time.time()
    # Spark's status store hears of a removal after the cluster manager took it: a removal pacer made in the run's
    # last second is listed as removed a moment later
    removed = {e for r in report["scaling"]["removals"] for e in r["executors"]}
    limit = time.monotonic() + 20.0
    while True:
        spans = status_store.executor_spans(spark) or []
        if removed <= {s["id"] for s in spans if s["removed"] is not None} or time.monotonic() > limit:
            break
        time.sleep(0.5)
    rows = spark.read.parquet(str(out)).select("key", "value").collect() if out.exists() else []
    return {"produced": produced, "keys": sorted(int(r.key) for r in rows),
            "values_match": all(r.value == f"record-{r.key}" for r in rows), "error": str(error) if error else None,
            "report": report, "spans": spans, "began": began, "ended": ended}


def put_csv(folder: Path, index: int) -> None:
    """One CSV file of SCHEDULE_ROWS rows, moved into ``folder`` whole."""
    staging = folder.parent / f".{folder.name}-{index}.csv"
    staging.write_text("".join(f"{index * SCHEDULE_ROWS + j},w{j % 7}\n" for j in range(SCHEDULE_ROWS)))
    os.replace(staging, folder / f"part-{index:04d}.csv")


def gen_phase(spark: Any, work: Path) -> dict[str, Any]:
    """Two ``pacer-gen`` queries (static 2 s trigger, FIFO): their readers' ``read()`` runs in the executors'
    Python workers, away from the driver, and the Controller still decides every batch and accounts every dataset."""
    import pacer_spark

    pacer = pacer_spark.attach(spark, admission="static", admission_params={"interval": 2.0}, scheduler="fifo",
                               deadline="10s", paced=False, checkpoint_root=str(work / "gen" / "pacer"))
    try:
        pacer.run_workload("lr2", traffic="wave", rate=800, duration=8)
        pacer.run_workload("cm2", traffic="constant", rate=400, duration=8)
        drained = pacer.await_drained(120)
        report = pacer.report({"test": "cluster-gen"})
    finally:
        pacer.stop()
    try:
        pacer.controller.ledger.check_complete()
        ledger = None
    except Exception as exc:  # the test names it
        ledger = f"{type(exc).__name__}: {exc}"
    keys = ("datasets_in", "datasets_processed", "rows_in", "rows_processed")
    return {"drained": drained, "errors": pacer.errors(), "ledger": ledger, "master": report["spark"]["master"],
            "queries": {q: {k: report["queries"][q][k] for k in keys} for q in ("lr2", "cm2")}}


def schedule_phase(spark: Any, scheduler: str, work: Path) -> dict[str, Any]:
    """Three paced queries (csv -> parquet, deadlines 4 s, 20 s, 60 s) under ``scheduler``, fed together."""
    import pacer_spark
    from pacer.plugins import get_plugin_manager

    deadlines = {"urgent": 4.0, "middle": 20.0, "relaxed": 60.0}
    base = work / scheduler
    pacer = pacer_spark.attach(spark, admission="asap", scheduler=scheduler, concurrency=1,
                               plugin_manager=get_plugin_manager(allowed=["zstream"]),
                               checkpoint_root=str(base / "pacer"))
    pools: dict[str, str | None] = {}  # "<query>/<spark batch>" -> the pool the gate gave it
    assert pacer.paced_service is not None, "attach() paces format('pacer') queries by default"
    service = pacer.paced_service
    decide = service.decide

    def recording(request: Any) -> Any:
        decision = decide(request)
        if decision.index is not None:
            pools[f"{request.query}/{request.batch_id}"] = decision.pool
        return decision

    assert service.bridge is not None
    service.bridge.register_handler("*", recording, service.stopped)
    queries = {}
    try:
        for name, deadline in deadlines.items():
            (base / "in" / name).mkdir(parents=True)
            frame = (spark.readStream.format("pacer").option("pacer.source", "csv").option("pacer.deadline",
                     f"{deadline:g}s").option("maxFilesPerTrigger", "2").schema("id INT, word STRING")
                     .load(str(base / "in" / name)))
            queries[name] = (tagged(frame, str(work), scheduler, 0.0).writeStream.queryName(name).format("parquet")
                             .option("path", str(base / "out" / name))
                             .option("checkpointLocation", str(base / "ck" / name)).start())
        for index in range(SCHEDULE_FILES):
            for name in deadlines:
                put_csv(base / "in" / name, index)
            time.sleep(0.6)
        for query in queries.values():
            query.processAllAvailable()
        report = pacer.report({"test": f"cluster-{scheduler}"})
        with pacer.lock:
            batches = [{"query": b.query_id, "admitted": b.admitted_at, "started": b.started_at,
                        "arrival": b.earliest_arrival} for b in pacer.controller.reports()]
    finally:
        for query in queries.values():
            query.stop()
        pacer.stop()
    rows = {name: [r.asDict() for r in spark.read.parquet(str(base / "out" / name)).collect()] for name in deadlines}
    return {"deadlines": deadlines, "query_ids": {n: str(q.id) for n, q in queries.items()}, "pools": pools,
            "rows": rows, "batches": batches, "report": report}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--master", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--phases", default="kafka,edf,rdas,gen,scale")
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--cluster-dir", required=True, help="the folder of `pacer cluster up` (its secret)")
    args = parser.parse_args(argv)
    import pacer_spark

    work = Path(args.work)
    for sub in ("busy", "tasks"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    from pacer_spark.run.cluster import running_cluster

    cluster = running_cluster(args.cluster_dir)
    assert cluster is not None, f"no cluster runs in {args.cluster_dir}"
    spark = pacer_spark.session_builder(args.master, f"pacer-cluster-{uuid.uuid4().hex[:6]}", kafka=True,
                                        shuffle_partitions=2, conf={
        "spark.executor.memory": "512m", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        **cluster.app_conf()}).getOrCreate()  # the cluster runs with spark.authenticate
    spark.sparkContext.setLogLevel("ERROR")
    print(f"session: {time.monotonic() - began:.1f} s", flush=True)
    wait_for_executors(spark, 2)
    print(f"executors registered: {time.monotonic() - began:.1f} s", flush=True)
    warm_up(spark, work)
    print(f"warmed up: {time.monotonic() - began:.1f} s", flush=True)
    (work / "started").write_text(json.dumps({"jars": spark.sparkContext.getConf().get("spark.jars", "")}))
    for phase in args.phases.split(","):
        started = time.monotonic()
        result = (kafka_phase(spark, args, work) if phase == "kafka" else gen_phase(spark, work) if phase == "gen"
                  else scale_phase(spark, args, work) if phase == "scale" else schedule_phase(spark, phase, work))
        result["seconds"] = time.monotonic() - started
        (work / f"{phase}.json").write_text(json.dumps(result, default=str))
        print(f"phase {phase}: {result['seconds']:.1f} s", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
