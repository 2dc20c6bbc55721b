"""RAPIDS in ``explainOnly`` mode checks, batch by batch, that pacer's placement is the plan RAPIDS would run.

No GPU is needed: the RAPIDS Accelerator's ``explainOnly`` mode plans every query as it would for the GPU, runs it on
the CPU and logs, per exec, whether it would run on the GPU and why not (:mod:`pacer_spark.plan.rapids_explain`).

The session loads the real jar (``com.nvidia:rapids-4-spark_2.13`` from Maven Central, :mod:`pacer_spark.plan.rapids_jar`),
which RAPIDS accepts only on the exact Spark its shim was built for (PySpark 4.2.0 for 26.08.1). These tests skip,
saying which, where the jar is not cached, where the installed PySpark is not that Spark (the default virtualenv
has a newer one), or where a SparkSession without the plugin already runs in this process (the plugin loads at the
JVM's start): ``nox -s rapids`` pins that PySpark, fetches the jar and runs this file in a process of its own.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacer import OperatorDAG, Placement
from pacer.infra import jars
from pacer_spark.plan import rapids_jar
from pacer_spark.plan.dag import PlanNode, dag_from_plan
from pacer_spark.plan.rapids_explain import compare, parse_explain

pytest.importorskip("pacer_conformance")
from pacer_conformance import RuntimePlacementConformance

pytestmark = pytest.mark.spark

#: An explain RAPIDS 26.08.1 logged (explainOnly, explain=ALL) for a batch of rate -> groupBy -> count -> memory with
#: every exec pacer switches allowed (the test below reads the real log; this one pins the parser's reading).
LOGGED = """
! <WriteToDataSourceV2Exec> cannot run on GPU because GPU does not currently support the operator class WriteToDataSourceV2Exec
  *Exec <HashAggregateExec> will run on GPU
    *Expression <AggregateExpression> count(1) will run on GPU
    ! <StateStoreSaveExec> cannot run on GPU because GPU does not currently support the operator class StateStoreSaveExec
      @Expression <AttributeReference> k#2L could run on GPU
      *Exec <HashAggregateExec> will run on GPU
        ! <StateStoreRestoreExec> cannot run on GPU because GPU does not currently support the operator class StateStoreRestoreExec
          *Exec <HashAggregateExec> will run on GPU
            !Exec <ShuffleExchangeExec> cannot run on GPU because REQUIRED_BY_STATEFUL_OPERATOR not supported on GPU
              @Partitioning <HashPartitioning> could run on GPU
              *Exec <HashAggregateExec> will run on GPU
                *Exec <ProjectExec> will run on GPU
                  *Expression <Alias> (value#1L % 7) AS k#2L will run on GPU
                  ! <MicroBatchScanExec> cannot run on GPU because GPU does not currently support the operator class MicroBatchScanExec
"""


def _aggregation_dag() -> OperatorDAG:
    """The DAG pacer reads from the executed plan of that query (what its operators are named, in data-flow order)."""
    scan = PlanNode("MicroBatchScan")
    partial = PlanNode("HashAggregate", children=[PlanNode("Project", children=[scan])])
    merge = PlanNode("HashAggregate", children=[PlanNode("Exchange", children=[partial])])
    restore = PlanNode("StateStoreRestore", children=[merge])
    save = PlanNode("StateStoreSave", children=[PlanNode("HashAggregate", children=[restore])])
    return dag_from_plan(PlanNode("WriteToDataSourceV2", children=[PlanNode("HashAggregate", children=[save])]))


def test_rapids_explain_is_read_as_a_tree_of_execs_with_reasons() -> None:
    (root,) = parse_explain(LOGGED)
    order = [(tag.exec_name, tag.on_gpu) for tag in root.walk_post()]
    assert order == [("MicroBatchScanExec", False), ("ProjectExec", True), ("HashAggregateExec", True),
                     ("ShuffleExchangeExec", False), ("HashAggregateExec", True), ("StateStoreRestoreExec", False),
                     ("HashAggregateExec", True), ("StateStoreSaveExec", False), ("HashAggregateExec", True),
                     ("WriteToDataSourceV2Exec", False)]
    shuffle = next(tag for tag in root.walk_post() if tag.exec_name == "ShuffleExchangeExec")
    assert shuffle.reason == "REQUIRED_BY_STATEFUL_OPERATOR not supported on GPU"


def test_the_shuffle_a_state_store_requires_is_cpu_only() -> None:
    dag = _aggregation_dag()
    assert [op.name for op in dag.operators if op.cpu_only] == ["MicroBatchScan", "Exchange", "StateStoreRestore",
                                                                 "StateStoreSave", "ForeachBatchSink"]


def test_workload_templates_on_spark_keep_what_rapids_cannot_run_on_the_cpu() -> None:
    from pacer_spark.plan.dag import spark_dag
    from pacer_workloads import WORKLOADS

    lr1, lr2 = spark_dag(WORKLOADS["lr1"].dag), spark_dag(WORKLOADS["lr2"].dag)
    # lr1: both shuffles feed the stream-stream join (stateful), which RAPIDS has no exec for, nor for the scans
    assert sorted(op.name for op in lr1.operators if not op.cpu_only) == ["Expand", "Filter", "Filter", "Project",
                                                                         "Project", "Project"]
    # lr2: the shuffle before the state store is pinned, the aggregations stay placeable
    assert [op.name for op in lr2.operators if op.kind == "shuffle" and not op.cpu_only] == []
    assert sum(1 for op in lr2.operators if op.name == "HashAggregate" and not op.cpu_only) == 4


def test_a_placement_rapids_would_not_run_is_reported_with_rapids_reason() -> None:
    dag = _aggregation_dag()
    everything = Placement({op.id: ("cpu" if op.cpu_only else "gpu") for op in dag.operators})
    assert compare("q#1", 0, dag, everything, parse_explain(LOGGED)).agrees
    # pacer keeps the aggregations on the CPU, RAPIDS' plan (of other confs) has them on the GPU: every one differs
    only_project = Placement({op.id: ("gpu" if op.name == "Project" else "cpu") for op in dag.operators})
    check = compare("q#2", 1, dag, only_project, parse_explain(LOGGED))
    assert not check.agrees
    assert sorted({op.name for op in check.operators if not op.agrees}) == ["HashAggregate"]
    # an operator placed on the GPU that RAPIDS keeps on the CPU carries RAPIDS' reason
    shuffle_gpu = Placement({**everything.devices, **{op.id: "gpu" for op in dag.operators if op.name == "Exchange"}})
    unpinned = OperatorDAG(tuple(op if op.name != "Exchange" else type(op)(op.id, op.kind, op.name)
                                 for op in dag.operators), dag.edges)
    shuffle = next(op for op in compare("q#3", 2, unpinned, shuffle_gpu, parse_explain(LOGGED)).operators
                   if op.name == "Exchange")
    assert (shuffle.enacted, shuffle.rapids, shuffle.reason) == ("gpu", "cpu",
                                                                 "REQUIRED_BY_STATEFUL_OPERATOR not supported on GPU")
    assert compare("q#4", 3, dag, everything, []).problem  # no explain logged: not compared, and said so
    # a first batch is placed on a minimal chain: execs of RAPIDS' plan it lacks must not run on the GPU unless their
    # type is enabled (here the aggregations are not: a leak past pacer's placement, reported)
    chain = dag_from_plan(PlanNode("Project", children=[PlanNode("MicroBatchScan")]))
    leak = compare("q#5", 0, chain, Placement({op.id: ("gpu" if op.name == "Project" else "cpu")
                                              for op in chain.operators}), parse_explain(LOGGED))
    assert not leak.agrees and leak.rapids_only_gpu == ("HashAggregateExec",) * 4
    # a template operator Spark did not plan (two projections modelled, one planned) is absent, not a disagreement
    two = dag_from_plan(PlanNode("Project", children=[PlanNode("Project", children=[PlanNode("MicroBatchScan")])]))
    absent = compare("q#6", 0, two, Placement({op.id: "cpu" for op in two.operators}), parse_explain(LOGGED))
    assert absent.to_json()["absent"] == ["project#2"] and [op.rapids for op in absent.operators] == ["cpu", "gpu", None]


def test_pacer_run_rapids_explain_loads_one_jar(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from pacer.cli import main

    monkeypatch.setenv("PACER_PLUGINS", "spark")
    jars_given = [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]
    for jar in jars_given:
        Path(jar).write_bytes(b"")
    argv = ["run", "--workload", "lr2", "--rapids-explain", "--rapids-jar", jars_given[0], "--rapids-jar", jars_given[1]]
    assert main(argv) == 2
    assert "--rapids-explain loads one RAPIDS jar" in capsys.readouterr().err


def test_pacer_run_rapids_explain_names_the_pyspark_the_jar_needs(capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import pyspark

    from pacer.cli import main

    jar = rapids_jar.cached_rapids_jar()
    if jar is None:
        pytest.skip("the RAPIDS jar is not cached (`nox -s rapids` fetches it)")
    shim = rapids_jar.newest_spark(jar)
    if str(pyspark.__version__) in rapids_jar.spark_shims(jar):
        pytest.skip(f"PySpark {pyspark.__version__} is a Spark the jar supports: --rapids-explain accepts it")
    monkeypatch.setenv("PACER_PLUGINS", "spark")
    assert main(["run", "--workload", "lr2", "--rapids-explain", "--rapids-jar", str(jar)]) == 2
    assert f"pin pyspark=={shim}" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- on real Spark + RAPIDS


@pytest.fixture(scope="module")
def rapids_spark() -> Iterator[Any]:
    """A local session with the RAPIDS plugin in explainOnly mode, or a skip naming what is missing."""
    jar = rapids_jar.cached_rapids_jar()
    if jar is None and os.environ.get(rapids_jar.RESOLVE_ENV, "") == "1":
        jar = rapids_jar.resolve_rapids_jar()
    if jar is None:
        where = jars.jar_path(rapids_jar.GROUP, rapids_jar.ARTIFACT, rapids_jar.rapids_version())
        pytest.skip(f"the RAPIDS jar {rapids_jar.GROUP}:{rapids_jar.ARTIFACT}:{rapids_jar.rapids_version()} is not "
                    f"cached at {where}: `nox -s rapids` fetches it (~1 GB) and runs these tests")
    import pyspark
    from pyspark import SparkContext

    try:
        rapids_jar.shim_for_spark(jar, str(pyspark.__version__))
    except rapids_jar.RapidsJarError as exc:
        pytest.skip(f"{exc}; `nox -s rapids` runs these tests under that PySpark")
    if SparkContext._gateway is not None:  # PySpark starts one JVM per process, with the jars of its first session
        pytest.skip("a Spark JVM without the RAPIDS jar already runs in this process (the plugin loads only when "
                    "the JVM starts): run this file alone, as `nox -s rapids` does")
    from pacer_spark.session import explain_only_builder

    session = (explain_only_builder("local[2]", "pacer-rapids-explain-tests", jar=jar)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.5)


def test_every_batch_of_a_paced_aggregation_is_planned_by_rapids_as_pacer_placed_it(
    rapids_spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dStream explores placements batch by batch; for every batch RAPIDS' own plan agrees operator by operator."""
    monkeypatch.delenv("PACER_PLUGINS", raising=False)  # every installed strategy: dstream
    import pacer_spark

    handle = pacer_spark.attach(rapids_spark, admission="asap", placement="dstream", checkpoint_root=str(tmp_path))
    query = None
    try:
        frame = (rapids_spark.readStream.format("pacer").option("pacer.source", "rate")
                 .option("rowsPerSecond", 200).option("numPartitions", 1).load()
                 .selectExpr("value % 7 AS k", "value").groupBy("k").count())
        query = (frame.writeStream.format("memory").queryName("rapids_agg").outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "ck")).start())

        def compared() -> int:
            checks = handle.report()["spark"].get("rapids_explain", {}).get("rapids_agg", {})
            return int(checks.get("compared", 0))

        _wait(lambda: compared() >= 8, 240, "8 batches compared with RAPIDS' plan")
        query.stop()
        report = handle.report()
        reports = handle.controller.reports("rapids_agg")
    finally:
        if query is not None:
            query.stop()
        handle.stop()

    assert query.exception() is None
    checks = report["spark"]["rapids_explain"]["rapids_agg"]
    batches = checks["recent"]
    for batch in batches:  # the per-batch record (pytest -s, -rA): pacer's GPU operators and RAPIDS'
        on_gpu = {who: ",".join(op["operator"] for op in batch.get("operators", ()) if op[who] == "gpu") or "-"
                  for who in ("decided", "enacted", "rapids")}
        print(f"{batch['batch']} (Spark batch {batch['spark_batch']}): decided {on_gpu['decided']}; enacted "
              f"{on_gpu['enacted']}; RAPIDS {on_gpu['rapids']}; agrees={batch['agrees']}"
              f"{' (coarsened)' if batch.get('coarsened') else ''}")
    assert checks["disagreed"] == 0 and not checks["differing"], checks["differing"]
    assert checks["compared"] == checks["batches"] == len(batches), batches
    for batch in batches:
        assert batch["agrees"], batch
        for op in batch["operators"]:
            assert op["rapids"] == op["enacted"], (batch["batch"], op)
            # pacer enacts what it decided, but where one exec type had instances on both devices (all on the CPU)
            assert op["decided"] == op["enacted"] or batch.get("coarsened"), (batch["batch"], op)
            if op["enacted"] == "cpu" and op["exec"] is not None and op["name"] != "MicroBatchScan":
                assert op["reason"], (batch["batch"], op)  # RAPIDS says why: disabled by pacer, or unsupported
    # the placement changed between batches, and RAPIDS followed: some batch had operators on the GPU, some fewer
    gpu_sets = {tuple(op["operator"] for op in b["operators"] if op["rapids"] == "gpu") for b in batches}
    assert len(gpu_sets) >= 2 and any(gpu_sets), gpu_sets
    enactment = report["spark"]["placement_enactment"]
    assert enactment["enacted"] == enactment["batches"] > 0
    # gpu_operator_ratio counts what RAPIDS planned for the GPU, not what pacer asked for: batch by batch
    planned = {b["batch"]: b["rapids_gpu_ratio"] for b in batches}
    ran = {r.batch_id: r.placement.ran_gpu_ratio for r in reports if r.placement is not None}
    assert planned and all(ran[b] == pytest.approx(ratio, abs=1e-4) for b, ratio in planned.items()), (planned, ran)
    assert all(note.startswith("explainOnly") for note in enactment["notes"]), enactment["notes"]
    counts = {row.k: row["count"] for row in rapids_spark.table("rapids_agg").collect()}
    assert sum(counts.values()) > 0 and set(counts) <= set(range(7))


class TestRapidsPlacementConformance(RuntimePlacementConformance):
    """The conformance suite's placement invariants on Spark with RAPIDS in explainOnly mode (pacer-gen queries, every
    installed placement strategy and the strategy mixes), each run's every compared batch agreeing with RAPIDS."""

    @pytest.fixture
    def conformance_runtime(self, rapids_spark: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
        """The Spark runtime on the RAPIDS session: it has a GPU to place on (RAPIDS plans for one) and checks
        every batch against RAPIDS' plan (``rapids-explain``)."""
        monkeypatch.delenv("PACER_PLUGINS", raising=False)  # every installed strategy
        from pacer_spark.run.spark_runtime import SparkRuntime

        class RapidsExplainRuntime(SparkRuntime):
            capabilities = frozenset({"multi-query", "gpu", "rapids-explain"})

        return RapidsExplainRuntime(rapids_spark, time_scale=float(os.environ.get("PACER_SPARK_TIME_SCALE", "0.2")))
