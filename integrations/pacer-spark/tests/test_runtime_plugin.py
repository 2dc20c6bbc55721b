"""The ``spark`` runtime through the ``pacer_runtimes`` hook, and the datasets it feeds (no Spark started)."""

from __future__ import annotations

import pytest

from pacer import QueryRun, RunConfig, get_plugin_manager
from pacer_spark.gen_plan import GenPlan
from pacer_workloads import WORKLOADS

CONFIG = RunConfig((QueryRun("lr2", traffic="random", rate=900), QueryRun("cm2", traffic="wave", rate=700,
                                                                        traffic_params={"period": 20.0})),
                   duration=40.0, seed=5, cores=2, gpus=0)


def test_spark_is_a_runtime_and_pacer_run_defaults_to_it() -> None:
    from pacer.cli import build_parser
    from pacer_spark.run.spark_runtime import SparkRuntime

    pm = get_plugin_manager(allowed=["spark"])
    runtime = pm.find_runtime("spark")
    assert isinstance(runtime, SparkRuntime) and runtime.capabilities == frozenset({"multi-query"})
    parser, _ = build_parser(pm)
    args = parser.parse_args(["run", "--workload", "lr2", "--master", "local[1]"])
    assert args.runtime == "spark" and args.master == "local[1]"


def test_pacer_gen_feeds_the_datasets_the_simulator_feeds() -> None:
    """Query i of one RunConfig streams, through pacer-gen, the datasets the simulator is fed: same ids, rows,
    bytes and arrival times (after the wall-clock start), because both take seed + i and pacer.arrival_dataset."""
    pytest.importorskip("pacer_sim")
    from pacer_sim import SIM_RUNTIME

    fed = SIM_RUNTIME.run(CONFIG).controller
    for i, (qid, q) in enumerate(zip(CONFIG.query_ids(), CONFIG.queries, strict=True)):
        # the options PacerSession.run_workload gives the pacer-gen source of query i
        options = {"stream": WORKLOADS[q.workload].stream, "traffic": q.traffic, "rate": str(q.rate),
                   "duration": str(CONFIG.duration), "seed": str(CONFIG.query_seed(i)), "start": "1000.0",
                   **{f"traffic.{k}": str(v) for k, v in q.traffic_params.items()}}
        plan = GenPlan.from_options(options)
        datasets = [plan.dataset(qid, k) for k in range(len(plan.arrivals()))]
        assert plan.dataset(qid, len(datasets)) is None
        on_spark = [(d.arrival - 1000.0, d.rows, d.bytes) for d in datasets if d is not None]
        assert [(round(t, 6), rows, nbytes) for t, rows, nbytes in on_spark] == [
            (round(t, 6), rows, nbytes) for t, rows, nbytes in fed.recorder.arrivals(qid)], qid
        assert [d.id for d in datasets if d is not None] == [f"{qid}-{k}" for k in range(len(datasets))]
        assert fed.ledger.counts[qid]["arrived"] == len(datasets)
