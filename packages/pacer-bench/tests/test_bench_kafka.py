"""``pacer bench latency-target --source kafka``: each configuration a ``pacer run --source kafka`` on its own
fresh topic, its traffic produced while it runs, the table's figures measured from the Kafka timestamps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_latency_target_reads_kafka_and_measures_latency_from_its_timestamps(
    kafka_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pacer_kafka")
    from pacer_bench import kafka_source
    from pacer_bench.runner import run_scenario

    monkeypatch.setattr(kafka_source, "KAFKA_WARM_UP_S", 0.0)  # not measured here: the test needs no warm JIT

    target = {"source": "kafka", "deadlines": [3.0], "traffics": ["binary"], "workloads": ["lr2"],
              "configs": ["asap", "static"]}
    paths = run_scenario("latency-target", runtime="spark", out=tmp_path, duration=3.0, progress=False,
                         target=target, source_options={"bootstrap_servers": kafka_broker.bootstrap_servers})
    data = json.loads(paths["json"].read_text())
    rows = {r["config"]: r for r in data["rows"]}
    # asap paced through format("pacer"); Spark's own 3 s trigger on format("kafka"), the deadline's baseline
    assert set(rows) == {"asap", "static 3s"}
    assert all(r["deadline_s"] == 3.0 and r["p99_ms"] > 0 and r["engine_s"] > 0 for r in rows.values())
    assert rows["asap"]["cost_vs_default"] == 1.0 and rows["static 3s"]["cost_vs_default"] > 0
    for run in data["runs"]:
        report = run["report"]
        kafka = report["kafka"]["lr2"]
        produced = report["bench"]["produce"]
        # every record produced while the query ran was read once; the table's p99 is the Kafka one
        assert produced["error"] is None and produced["failed"] == 0 and produced["produced"] > 0
        assert kafka["records"] == produced["produced"]
        assert len(kafka["quantiles_ms"]) == 101
        assert abs(kafka["latency_ms"]["p99"] - rows[run["tags"]["name"]]["p99_ms"]) < 1.0
        # busy core-seconds measured for both, Spark's own trigger too (pacer's task-time listener, by query id)
        assert kafka["busy_core_s"] > 0 and report["queries"]["lr2"]["cost"]["busy_core_s"] == kafka["busy_core_s"]
    assert [w["cost"] for w in data["winners"]] == ["busy core-s"]  # every run measured it: compared in it
    meta = json.loads(paths["meta"].read_text())
    assert meta["source"] == "kafka" and meta["runtime"] == "spark"


def test_multi_query_reads_one_topic_per_query_and_every_record_once(
    kafka_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """multi-query on Kafka: each of the three queries reads its own topic, its traffic produced while they run;
    every record read once, busy core-seconds measured for Spark's trigger and for pacer (asap under EDF) alike."""
    pytest.importorskip("pacer_kafka")
    from pacer_bench import kafka_source
    from pacer_bench.runner import run_scenario

    monkeypatch.setattr(kafka_source, "KAFKA_WARM_UP_S", 0.0)
    paths = run_scenario("multi-query", runtime="spark", out=tmp_path, quick=True, duration=4.0, progress=False,
                         target={"source": "kafka", "configs": ["fifo + static 2s", "edf + asap"]},
                         source_options={"bootstrap_servers": kafka_broker.bootstrap_servers})
    data = json.loads(paths["json"].read_text())
    assert [r["label"] for r in data["runs"]] == ["fifo + static 2s", "edf + asap"]
    for run in data["runs"]:
        report = run["report"]
        produce = report["bench"]["produce"]
        assert set(produce) == set(report["kafka"]) == {"lr2", "lr3", "cm2"}
        assert len({p["topic"] for p in produce.values()}) == 3  # a topic of its own per query
        for query_id, k in report["kafka"].items():
            assert produce[query_id]["error"] is None and produce[query_id]["failed"] == 0
            assert k["records"] == produce[query_id]["produced"] > 0, (run["label"], query_id)
            assert k["busy_core_s"] > 0
    assert data["analysis"]["cost"] == "busy core-s"
