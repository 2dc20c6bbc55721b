"""``PacerSession.report()`` on real Spark: a versioned, typed :class:`pacer.report_types.Report` that is still the
dict every reader indexes."""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

import pytest

from pacer.report import validate_report
from pacer.report_types import QueryReport, Report, ReportDocument

pytestmark = pytest.mark.spark


def test_the_session_s_report_is_a_typed_versioned_dict(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    pacer = pacer_spark.attach(spark, admission="asap", checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr3", traffic="constant", rate=300, duration=3)
        assert pacer.await_drained(90), pacer.errors()
    finally:
        pacer.stop()
    report = pacer.report()
    validate_report(report)
    assert isinstance(report, Report) and isinstance(report, dict)
    assert report.version == 1 and report["schema"] == "pacer.report/1" and report.runtime == "spark"
    assert report.query("lr3") is report["queries"]["lr3"] and report.query("lr3")["datasets_processed"] == 3
    assert set(report) <= set(typing.get_type_hints(ReportDocument)), set(report) - set(
        typing.get_type_hints(ReportDocument))
    assert set(report.query("lr3")) <= set(typing.get_type_hints(QueryReport))
    assert "spark" in report and Report.from_json(report.to_json()) == json.loads(json.dumps(report))
