from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from pacer import Controller
from pacer.metrics import deadline_miss_ratio, latency_summary_ms, percentile, series
from pacer.report import SCHEMA, build_report, dumps, validate_report


def test_percentile_interpolates_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 100) == 4.0
    assert percentile([], 99) == 0.0
    assert latency_summary_ms([1.0, 3.0]) == {"avg": 2000.0, "p50": 2000.0, "p95": 2900.0, "p99": 2980.0, "max": 3000.0}


def test_deadline_miss_ratio() -> None:
    assert deadline_miss_ratio([1.0, 2.0, 5.0, 6.0], 4.0) == 0.5


def test_report_has_the_documented_shape(ran: Callable[[int], Controller]) -> None:
    c = ran(4)
    report = build_report(runtime="sim", config={"seed": 1}, controller=c, start=0.0, end=4.0)
    validate_report(report)
    assert report["schema"] == SCHEMA
    q = report["queries"]["q1"]
    assert q["datasets_in"] == q["datasets_processed"] == 4
    assert q["rows_in"] == q["rows_processed"] == 40
    assert q["latency_ms"]["max"] == 500.0
    assert q["throughput_rows_per_s"] == 10.0
    assert q["deadline_ms"] == 10000.0
    assert len(q["series"]) == 4 and q["series"][0]["batch_bytes"] == 1000.0
    assert report["overhead"]["measured"] is False and report["overhead"]["admission_poll_us_p99"] is None
    assert dumps(report) == dumps(json.loads(dumps(report)))


def test_series_assigns_batches_to_their_completion_interval(ran: Callable[[int], Controller]) -> None:
    c = ran(4)
    rows = series(c.reports("q1"), c.recorder.arrivals("q1"), start=0.0, end=4.0, interval=2.0)
    assert [r["batches"] for r in rows] == [2, 2]
    assert rows[0]["input_rows_per_s"] == 10.0
    with pytest.raises(ValueError):
        series([], [], start=0, end=1, interval=0)


def test_validate_report_names_missing_keys() -> None:
    with pytest.raises(ValueError, match="not a pacer.report/1"):
        validate_report({"schema": "x"})
    with pytest.raises(ValueError, match="lacks \\['latency_ms'"):
        validate_report({"schema": SCHEMA, "runtime": "sim", "config": {}, "overhead": {}, "queries": {"q": {}}})
def test_max_latency_trend_takes_the_first_and_last_tenth_of_the_series() -> None:
    from pacer.report import max_latency_trend_ms

    rows = [{"t": float(t), "max_latency_ms": 100.0 * t, "batch_bytes": 0.0} for t in range(1, 21)]
    report = {"queries": {"q": {"series": rows}}}
    assert max_latency_trend_ms(report, "q") == (200.0, 2000.0)  # tenth = 2 rows
    assert max_latency_trend_ms({"queries": {"q": {"series": []}}}, "q") == (0.0, 0.0)
    idle = [{"t": 0.0, "max_latency_ms": 0.0, "batches": 0}] * 5
    busy = [{"t": 9.0, "max_latency_ms": 700.0, "batches": 1}]
    assert max_latency_trend_ms({"queries": {"q": {"series": idle + busy + idle}}}, "q") == (700.0, 700.0)
