"""The JVM boundary: every access pacer makes to Spark's Java objects, returning plain Python values.

As PySpark keeps Py4J behind one adapter per concern (``JStreamingQueryListener``, ``fromJObject``), nothing
else in pacer-spark touches a Java object or a Py4J attribute (``_jsq``, ``_jsparkSession``, ``_jvm``,
``_jsc``, ``_gateway``): not even :mod:`pacer_spark.jvm.jar`, which builds pacer's jar and loads it into a running
driver through :func:`driver_loads_class` and :func:`add_driver_jars`. Here:

- a streaming query's own progress buffer (:func:`query_progress`) and offset log (:func:`logged_offsets`);
- the plan Spark executed for a query's last batch (:func:`executed_plan`, :func:`stream_executed_plan`);
- the confs of the session a stream plans its batches in (:func:`set_stream_confs`, by the stream's id
  :func:`set_stream_confs_by_id`) and a session's own confs (:func:`session_conf`);
- a log4j appender that copies one logger's messages, with their thread's name, to a file
  (:func:`add_log_file_appender`, :func:`remove_log_appender`: RAPIDS' explain output);
- pacer's decider registry and the session object it keys registrations by (:func:`decider_registry`,
  :func:`java_session`), and PySpark's Py4J callback server the JVM calls the deciders through
  (:func:`start_callback_server`);
- the driver's data source lookup and the class loader it searches (:func:`finds_data_source`,
  :func:`driver_loader_class`, :func:`driver_loads_class`, :func:`add_driver_jars`: pacer's jar and Spark's Kafka
  connector added to a running driver);
- the executors that ran each query's tasks and the task slots of the live ones (:func:`query_executors`,
  :func:`task_slots`).

Every function says what it returns when the JVM cannot answer (a stopped query, an internal API that moved):
a missing value, never a Py4J error, except where the caller must know (the registry, the class loader).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pacer_spark.jvm import executors
from pacer_spark.jvm.plans import PlanNode, base_name, node_of_json
from pacer_spark.jvm.progress import TriggerProgress

log = logging.getLogger("pacer_spark.jvm.spark_jvm")


def _execution(handle: Any) -> Any:
    """The JVM ``StreamExecution`` behind a PySpark ``StreamingQuery``."""
    return handle._jsq.streamingQuery()


def query_progress(handle: Any, batch_id: int, *, depth: int = 4) -> TriggerProgress | None:
    """The progress of Spark batch ``batch_id`` from the query's own buffer (``StreamingQuery.recentProgress``).

    Spark stores a trigger's progress there before it posts the listener event and before it starts the next
    trigger, so a ``latestOffset`` call of the next trigger finds it without waiting for the listener bus. Looks
    at the newest ``depth`` entries (no-data batches may follow ours).

    :return: None when it is not among them or the JVM cannot be asked (the listener still reports).
    """
    try:
        recent = handle._jsq.recentProgress()
        for i in range(len(recent) - 1, max(-1, len(recent) - 1 - depth), -1):
            if int(recent[i].batchId()) == batch_id:
                return TriggerProgress.from_json(json.loads(recent[i].json()))
    except Exception:  # the query stopped, or an internal API changed
        return None
    return None


def logged_offsets(handle: Any, spark_batch_id: int) -> tuple[dict[str, Any] | None, dict[str, Any] | None] | None:
    """``(start, end)``: the first source's offsets (parsed JSON) Spark logged for the batch before ``spark_batch_id``
    and for ``spark_batch_id`` itself (the start of a query's first batch is ``{"index": 0}``); an entry not
    logged is None. None when the offset log cannot be read (pacer then does not track that batch)."""
    try:
        offset_log = _execution(handle).offsetLog()

        def offset_at(batch: int) -> dict[str, Any] | None:
            if batch < 0:
                return {"index": 0}
            entry = offset_log.get(batch)
            if entry.isEmpty():
                return None
            offsets = entry.get().offsets()
            for i in range(offsets.size()):
                item = offsets.apply(i)
                if not item.isEmpty():
                    return dict(json.loads(item.get().json()))
            return None

        return offset_at(spark_batch_id - 1), offset_at(spark_batch_id)
    except Exception:  # an internal API changed
        log.debug("cannot read the offset log", exc_info=True)
        return None


def set_stream_confs(handle: Any, confs: Mapping[str, str]) -> None:
    """Set ``confs`` on the session the streaming query plans its batches in (``sparkSessionForStream``): the next
    batch it plans sees them."""
    session = _execution(handle).sparkSessionForStream()
    for key, value in confs.items():
        session.conf().set(key, value)


def set_stream_confs_by_id(spark: Any, stream_id: str, confs: Mapping[str, str]) -> bool:
    """As :func:`set_stream_confs`, for the active streaming query ``stream_id`` of ``spark``'s session (its
    ``StreamingQueryManager``); False when no active query has that id there (nothing set)."""
    jquery = spark._jsparkSession.streams().get(stream_id)
    if jquery is None:
        return False
    session = jquery.streamingQuery().sparkSessionForStream()
    for key, value in confs.items():
        session.conf().set(key, value)
    return True


def session_conf(spark: Any, key: str) -> str | None:
    """The value of ``key`` in ``spark``'s session conf (static confs included), None when unset."""
    value = spark._jsparkSession.conf().getOption(key)
    return None if value.isEmpty() else str(value.get())


def add_log_file_appender(spark: Any, logger_name: str, path: str, pattern: str, name: str, *,
                          level: str = "WARN", additive: bool = False) -> None:
    """Copy the messages of log4j logger ``logger_name`` (and its children) at ``level`` or above to the file
    ``path``, formatted by the log4j ``pattern``, through an appender called ``name``.

    The logger's level is set to ``level`` whatever the root's (``setLogLevel("ERROR")`` does not silence it);
    ``additive=False`` keeps its messages out of Spark's console log.
    """
    jvm = spark.sparkContext._jvm
    log4j = jvm.org.apache.logging.log4j
    layout = log4j.core.layout.PatternLayout.newBuilder().withPattern(pattern).build()
    appender = (log4j.core.appender.FileAppender.newBuilder().setName(name).withFileName(path)
                .withImmediateFlush(True).setLayout(layout).build())
    appender.start()
    # a LoggerConfig of its own first: its level holds whatever the root's (Spark's setLogLevel sets the root's)
    log4j.core.config.Configurator.setLevel(logger_name, log4j.Level.toLevel(level))
    logger = log4j.LogManager.getLogger(logger_name)
    logger.addAppender(appender)
    logger.setAdditive(additive)


def remove_log_appender(spark: Any, logger_name: str, name: str) -> None:
    """Detach and stop the appender ``name`` of logger ``logger_name`` (:func:`add_log_file_appender`); the logger
    logs to Spark's console again. Nothing happens when it is not attached or the JVM is gone."""
    try:
        logger = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger(logger_name)
        appender = logger.getAppenders().get(name)
        if appender is not None:
            logger.removeAppender(appender)
            appender.stop()
        logger.setAdditive(True)
    except Exception:  # the session stopped: its JVM took the appender with it
        log.debug("cannot remove log appender %s", name, exc_info=True)


def executed_plan(handle: Any, *, batch_id: int | None = None, metrics: bool = True) -> PlanNode | None:
    """The plan the query executed for its last batch, as :class:`~pacer_spark.plan.dag.PlanNode` values (with its SQL
    metrics unless ``metrics=False``); None before its first batch, or when ``batch_id`` is given and the last
    execution is another batch's (Spark replaces it when it plans the next batch)."""
    return _plan_of(_execution(handle).lastExecution(), batch_id, metrics)


def stream_executed_plan(spark: Any, stream_id: str, batch_id: int, *, metrics: bool = True) -> PlanNode | None:
    """As :func:`executed_plan`, for the streaming query ``stream_id`` of ``spark``'s session (any session of the
    SparkContext's own registry, by id)."""
    execution = spark._jsparkSession.streams().get(stream_id).streamingQuery().lastExecution()
    return _plan_of(execution, batch_id, metrics)


def _plan_of(execution: Any, batch_id: int | None, metrics: bool) -> PlanNode | None:
    if execution is None:
        return None
    if batch_id is not None and int(execution.currentBatchId()) != batch_id:
        return None
    return read_plan(execution.executedPlan(), metrics=metrics)


def read_plan(jplan: Any, *, metrics: bool = True) -> PlanNode:
    """Copy a JVM ``SparkPlan`` tree into :class:`~pacer_spark.plan.dag.PlanNode` values.

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


def decider_registry(spark: Any, registry_class: str) -> Any:
    """pacer's JVM decider registry (``io.pacer.spark.PacerRegistry``) for ``spark``'s JVM."""
    return getattr(spark.sparkContext._jvm, registry_class)


def java_session(spark: Any) -> Any:
    """The JVM ``SparkSession`` of ``spark`` (the registry prefers registrations made for it)."""
    return spark._jsparkSession


def start_callback_server(spark: Any) -> None:
    """Start PySpark's Py4J callback server on ``spark``'s gateway, through which the JVM calls pacer's Python
    deciders; nothing when it runs already."""
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]


def finds_data_source(spark: Any, name: str) -> bool:
    """Whether the driver's data source lookup (``DataSource.lookupDataSource``, as ``format(name)`` runs it, with
    ``spark``'s SQL conf) finds ``name``: False when the lookup fails naming it.

    :raises Exception: any other failure of the lookup (a Py4J error), as Spark raised it.
    """
    try:
        spark.sparkContext._jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf())
    except Exception as exc:  # Py4JJavaError: the driver's class loader lacks the source
        if name.lower() not in str(exc).lower():
            raise
        return False
    return True


def _driver_loader(spark: Any) -> Any:
    """The driver's context class loader (a JVM object, or None)."""
    return spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()


def driver_loader_class(spark: Any) -> str | None:
    """The class name of the driver's context class loader, where Spark looks ``format()`` names up
    (``org.apache.spark.util.MutableURLClassLoader`` when ``spark-submit`` started the driver: it takes jars,
    :func:`add_driver_jars`); None when there is none."""
    loader = _driver_loader(spark)
    return None if loader is None else str(loader.getClass().getName())


def driver_loads_class(spark: Any, class_name: str) -> bool:
    """Whether the driver's context class loader (:func:`driver_loader_class`) loads the class ``class_name``."""
    loader = _driver_loader(spark)
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(class_name, True, loader)
    except Exception:  # py4j wraps ClassNotFoundException
        return False
    return True


def add_driver_jars(spark: Any, jars: Sequence[str]) -> None:
    """Add the jar files ``jars`` to the driver's context class loader, as ``--jars`` would have at launch (it must
    be one that takes jars: :func:`driver_loader_class`).

    :raises Exception: a Py4J error, or AttributeError when the driver has no context class loader.
    """
    jvm = spark.sparkContext._jvm
    loader = _driver_loader(spark)
    for jar in jars:
        loader.addURL(jvm.java.io.File(jar).toURI().toURL())


def query_executors(spark: Any, *, max_jobs: int = executors.MAX_JOBS,
                    sampled: int = executors.SAMPLED_JOBS) -> dict[str, list[str]]:
    """``{query name (or id when unnamed): sorted ids of the executors that ran its tasks}``.

    Reads the descriptions of the newest ``max_jobs`` jobs of the SparkContext and, per query, the executors of
    every stage of ``sampled`` of its jobs spread over the run (its oldest and newest retained ones among them): an
    executor that ran only a few batches in between may be left out. ``"driver"`` is the id in local mode. Empty
    when the status store cannot be read (an internal API that moved): the report then says nothing rather than fail.
    """
    try:
        sc = spark.sparkContext
        convert = sc._jvm.scala.jdk.javaapi.CollectionConverters
        store = sc._jsc.sc().statusStore()
        jobs = convert.asJava(store.jobsList(None))  # newest first
        by_query: dict[str, list[Any]] = {}
        iterator = jobs.iterator()
        for _ in range(min(int(jobs.size()), max_jobs)):
            job = iterator.next()
            description = str(job.description())  # Scala's "Some(...)" or "None"
            key = executors.query_key(description[5:-1]) if description.startswith("Some(") else None
            if key is not None:
                by_query.setdefault(key, []).append(job)
        found: dict[str, list[str]] = {}
        for key, its_jobs in by_query.items():
            ran: set[str] = set()
            for job in executors.spread(its_jobs, sampled):
                for stage in convert.asJava(job.stageIds()):
                    ran.update(str(e) for e in convert.asJava(store.executorSummary(int(stage), 0).keySet()))
            found[key] = sorted(ran)
    except Exception as exc:  # the store or an API of it is not there: no executors in the report
        log.debug("cannot read the executors from Spark's status store: %s", exc)
        return {}
    return found


def task_slots(spark: Any) -> int | None:
    """How many tasks Spark can run at once now: the cores of the live executors (the driver's own in local mode),
    from the status store's executor list. None when it cannot be read (the caller keeps what it had)."""
    try:
        convert = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
        listed = convert.asJava(spark.sparkContext._jsc.sc().statusStore().executorList(True))  # active only
        cores = {str(e.id()): int(e.totalCores()) for e in listed}
    except Exception as exc:  # an internal API that moved, or a stopping JVM
        log.debug("cannot read the executors' cores from Spark's status store: %s", exc)
        return None
    executors_only = [n for name, n in cores.items() if name != "driver"]
    total = sum(executors_only) if executors_only else cores.get("driver", 0)
    return total or None
