"""Placement enactment on a session without the RAPIDS plugin: every batch says it was not enacted, and why.

The enacted path (RAPIDS loaded, confs set on the stream's session before Spark plans each batch, and RAPIDS' own
plan of it checked) is ``test_rapids_explain.py``'s, which needs the PySpark the RAPIDS jar's shim supports.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pacer_spark.plan.enact import NO_RAPIDS

pytestmark = pytest.mark.spark


def test_each_format_pacer_batch_reports_why_its_placement_was_not_enacted(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    handle = pacer_spark.attach(spark, admission="asap", placement="static-preference", checkpoint_root=str(tmp_path))
    query = None
    try:
        frame = (spark.readStream.format("pacer").option("pacer.source", "rate").option("rowsPerSecond", 50)
                 .option("numPartitions", 1).load().selectExpr("value % 3 AS k").groupBy("k").count())
        query = (frame.writeStream.format("memory").queryName("enact_rate").outputMode("complete")
                 .option("checkpointLocation", str(tmp_path / "ck")).start())
        deadline = time.monotonic() + 120
        while len([p for p in query.recentProgress if p["numInputRows"] > 0]) < 2:
            assert time.monotonic() < deadline, "no two batches in 120 s"
            time.sleep(0.3)
        query.stop()
        report = handle.report()
    finally:
        if query is not None:
            query.stop()
        handle.stop()

    spark_part = report["spark"]
    assert spark_part["rapids_loaded"] is False and spark_part["rapids_explain"] == {}
    mine = [b for b in spark_part["placement_enactment"]["recent"] if b["query"] == "enact_rate"]
    assert len(mine) >= 2, spark_part["placement_enactment"]
    assert all(b["enacted"] is False and b["note"] == NO_RAPIDS for b in mine), mine
    assert report["queries"]["enact_rate"]["gpu_operator_ratio"] == 0.0  # nothing ran on a GPU
