"""The report a run gives is a documented, versioned, typed ``pacer.report/1`` document that is still a dict."""

from __future__ import annotations

import json
import pickle
import typing
from collections.abc import Callable
from pathlib import Path

import pytest

from pacer import Controller
from pacer.report import REQUIRED_QUERY_KEYS, build_report, dumps, validate_report
from pacer.report_types import SCHEMA, SCHEMA_VERSION, QueryReport, Report, ReportDocument, schema_version


def _report(ran: Callable[[int], Controller]) -> Report:
    return build_report(runtime="sim", config={"seed": 1}, controller=ran(3), start=0.0, end=3.0)


def test_a_report_is_a_dict_with_typed_views(ran: Callable[[int], Controller]) -> None:
    report = _report(ran)
    assert isinstance(report, Report) and isinstance(report, dict)
    validate_report(report)
    assert report["schema"] == report.schema == SCHEMA == "pacer.report/1"
    assert report.version == SCHEMA_VERSION == 1 and report.runtime == "sim"
    assert report.query("q1") is report["queries"]["q1"] is report.queries["q1"]
    assert report.query("q1")["latency_ms"]["p99"] == report["queries"]["q1"]["latency_ms"]["p99"]
    assert report.typed() is report
    with pytest.raises(KeyError, match=r"no query 'q9' in this report; it has \['q1'\]"):
        report.query("q9")


def test_it_serialises_as_before(ran: Callable[[int], Controller], tmp_path: Path) -> None:
    report = _report(ran)
    assert report.to_json() == dumps(report) and json.loads(report.to_json()) == report
    plain = report.as_dict()
    assert type(plain) is dict and plain == report and plain["queries"] is not report["queries"]
    assert pickle.loads(pickle.dumps(report)) == report
    path = tmp_path / "r.json"
    path.write_text(report.to_json())
    again = Report.load(path)
    assert again == report and again.version == 1


def test_the_version_is_read_from_the_schema_and_a_later_one_refused() -> None:
    assert schema_version("pacer.report/1") == 1 and schema_version("pacer.report/12") == 12
    for bad in ("pacer.run/1", "pacer.report/x", None):
        with pytest.raises(ValueError, match="not a pacer.report/<version> schema"):
            schema_version(bad)
    with pytest.raises(ValueError, match=r"pacer.report/2 report, newer than this pacer reads"):
        Report.from_json(json.dumps({"schema": "pacer.report/2", "queries": {}}))
    with pytest.raises(ValueError, match="a JSON list"):
        Report.from_json("[]")


def test_the_typed_dicts_name_every_key_the_report_has(ran: Callable[[int], Controller]) -> None:
    """A key added to the report and not to its types (or the other way round) fails here."""
    report = _report(ran)
    query_keys = set(typing.get_type_hints(QueryReport))
    assert set(report["queries"]["q1"]) == query_keys and set(REQUIRED_QUERY_KEYS) <= query_keys
    assert set(report) <= set(typing.get_type_hints(ReportDocument))
