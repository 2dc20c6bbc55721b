"""latency-target --source kafka without a broker: the plan it runs, the source as pacer-bench finds it, and the
kafka section read as the tables read."""

from __future__ import annotations

from typing import Any

import pytest

from pacer.plugins import get_plugin_manager

pytest.importorskip("pacer_kafka", reason="the kafka bench source needs pacer-kafka (pip install './packages/pacer-bench[kafka]')")

from pacer_bench.kafka_source import SOURCE, kafka_figures, topic_name
from pacer_bench.latency_target import analyse
from pacer_bench.runner import ScenarioError, resolve_configs
from pacer_bench.tables import BenchRun
from pacer_bench.traffic_sources import BenchSource, find_source, source_names


def test_pacer_bench_finds_the_kafka_source_through_its_entry_point() -> None:
    assert "kafka" in source_names()
    source = find_source("kafka")
    assert source is SOURCE and isinstance(source, BenchSource)
    assert source.runtime == "spark" and "Kafka" in source.summary


def test_kafka_plan_is_the_admissions_spark_trigger_at_the_deadline_and_asap() -> None:
    pytest.importorskip("pacer_spark")  # --source kafka runs on the Spark runtime
    target = {"source": "kafka", "deadlines": [10.0], "traffics": ["wave"], "workloads": ["lr2"], "configs": []}
    runtime, configs, _ = resolve_configs("latency-target", runtime="sim", quick=False, duration=60.0, seed=7,
                                          plugin_manager=get_plugin_manager(), target=target)
    assert runtime == "spark"
    assert [c.tags["name"] for c in configs] == ["asap", "static 10s", "pid", "min-rows", "fixed-point",
                                                 "lmstream", "zstream @10s"]
    narrowed = {**target, "configs": ["asap", "static"]}
    _, configs, _ = resolve_configs("latency-target", runtime="spark", quick=False, duration=5.0, seed=7,
                                    plugin_manager=get_plugin_manager(), target=narrowed)
    assert [c.tags["name"] for c in configs] == ["asap", "static 10s"]
    with pytest.raises(ScenarioError, match="latency-target"):
        resolve_configs("trigger-sweep", runtime="sim", quick=True, duration=None, seed=7,
                        plugin_manager=get_plugin_manager(), target=target)
    assert topic_name("lr2 wave / zstream @10s", 2).startswith("pacer-bench-lr2-wave-zstream-10s-r2-")


def _kafka_report(p99_ms: float, engine_s: float, miss: float) -> dict[str, Any]:
    quantiles = [p99_ms * i / 99 for i in range(100)] + [p99_ms * 1.5]
    kafka = {"records": 1000, "batches": 10, "deadline_s": 10.0, "miss_share": miss, "engine_s": engine_s,
             "batches_per_min": 10.0, "quantiles_ms": quantiles,
             "latency_ms": {"p50": p99_ms / 2, "p95": p99_ms * 0.95, "p99": p99_ms, "max": p99_ms * 1.5}}
    report: dict[str, Any] = {"queries": {}, "kafka": {"lr2": kafka}, "config": {"rate": 2000.0},
                              "bench": {"latencies_s": {"lr2": [99.0]}}}
    kafka_figures(report, 60.0)
    return report


def _run(name: str, family: str, report: dict[str, Any], **tags: Any) -> BenchRun:
    return BenchRun(f"lr2 wave / {name}", report, baseline=family == "asap", group="lr2 wave",
                    tags={"workload": "lr2", "traffic": "wave", "name": name, "family": family, "deadline": None,
                          **tags})


def test_the_kafka_section_becomes_the_rows_figures() -> None:
    asap = _kafka_report(2000.0, 40.0, 0.0)
    assert "latencies_s" not in asap["bench"]  # the Controller's latencies are not the Kafka ones
    trigger = _kafka_report(15000.0, 10.0, 0.3)
    rows, winners = analyse([_run("asap", "asap", asap), _run("static 10s", "static", trigger, interval=10.0)],
                            [10.0])
    by_name = {r["config"]: r for r in rows}
    assert by_name["asap"]["p99_ms"] == 2000.0 and by_name["asap"]["engine_s"] == 40.0
    assert by_name["asap"]["met"] == "✓" and by_name["static 10s"]["met"] == "✗"
    assert by_name["static 10s"]["deadline_miss"] == 0.3  # the deadline it ran with: Kafka's own miss share
    assert by_name["asap"]["cost_vs_trigger"] == 4.0 and by_name["static 10s"]["cost_vs_trigger"] == 1.0
    assert winners[0]["winner"] == "asap"
    # judged against another deadline: read off the latency at every percentile
    rows, _ = analyse([_run("asap", "asap", asap)], [1.5])
    assert 0.2 < rows[0]["deadline_miss"] < 0.3
