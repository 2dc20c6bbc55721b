"""A short stream on a multi-JVM master (``nox -s cluster`` sets ``PACER_TEST_MASTER=local-cluster[2,1,1024]``).

``local-cluster`` starts a standalone master and two executor JVMs in separate processes: the
pacer-gen reader's ``read()`` then runs in executors' Python workers, away from the driver, and the
Controller still decides every batch and accounts for every dataset.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def test_a_stream_on_two_executor_jvms_loses_nothing(spark: Any, tmp_path: Path) -> None:
    import pacer_spark

    master = spark.sparkContext.master
    if not master.startswith("local-cluster"):
        pytest.skip(f"needs a local-cluster master (got {master!r}); run `nox -s cluster`")
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # minus the driver
    assert executors == 2, f"expected two executor JVMs, found {executors}"
    pacer = pacer_spark.attach(spark, admission="static", admission_params={"interval": 2.0}, scheduler="fifo",
                               deadline="10s", checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr2", traffic="wave", rate=800, duration=8)
        pacer.run_workload("cm2", traffic="constant", rate=400, duration=8)
        assert pacer.await_drained(120), pacer.errors()
        report = pacer.report({"test": "cluster"})
    finally:
        pacer.stop()
    pacer.controller.ledger.check_complete()
    assert report["spark"]["master"].startswith("local-cluster")
    for query_id in ("lr2", "cm2"):
        q = report["queries"][query_id]
        assert q["datasets_in"] == q["datasets_processed"] == 8, q
        assert q["rows_in"] == q["rows_processed"] > 0, q
