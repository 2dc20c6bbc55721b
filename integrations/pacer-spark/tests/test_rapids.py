"""On a GPU with the RAPIDS Accelerator: placement is enacted per operator type (``nox -s rapids``).

Skipped, with the reason, unless ``PACER_RAPIDS_JARS`` names the rapids-4-spark jar(s) and ``nvidia-smi -L``
finds a GPU. It needs a SparkSession of its own with the plugin loaded, so run it alone (``-m gpu``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.gpu]


def _jars() -> list[str]:
    return [j for j in os.environ.get("PACER_RAPIDS_JARS", "").split(",") if j]


@pytest.fixture(scope="module")
def gpu_spark() -> Iterator[Any]:
    """A session with the RAPIDS plugin, or a skip saying what is missing."""
    jars = _jars()
    if not jars:
        pytest.skip("PACER_RAPIDS_JARS is unset: point it at the rapids-4-spark jar(s) from Maven Central")
    missing = [j for j in jars if not Path(j).is_file()]
    if missing:
        pytest.skip(f"RAPIDS jar(s) not found: {missing}")
    if shutil.which("nvidia-smi") is None or subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                                            check=False).returncode != 0:
        pytest.skip("no GPU visible (nvidia-smi -L failed)")
    from pyspark.sql import SparkSession

    if SparkSession.getActiveSession() is not None:
        pytest.skip("a SparkSession without RAPIDS already runs in this process; run the GPU tests alone (-m gpu)")
    import pacer_spark

    session = (
        pacer_spark.session_builder("local[2]", "pacer-spark-rapids-tests", shuffle_partitions=2, rapids_jars=jars)
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_gpu_placement_is_enacted_through_rapids(gpu_spark: Any, tmp_path: Path) -> None:
    import pacer_spark
    from pacer_spark.jvm import stream_query
    pacer = pacer_spark.attach(gpu_spark, admission="asap", scheduler="fifo", placement="gpu-only",
                               checkpoint_root=str(tmp_path))
    try:
        pacer.run_workload("lr2", rate=1000, duration=6)
        assert pacer.await_drained(180), pacer.errors()
        report = pacer.report({"test": "rapids"})
        root = stream_query.executed_plan(pacer.sources["lr2"].handle, metrics=False)
    finally:
        pacer.stop()
    spark_info = report["spark"]
    assert spark_info["rapids_loaded"] is True
    assert spark_info["placement_enactment"]["enacted"] == spark_info["placement_enactment"]["batches"] > 0
    assert report["queries"]["lr2"]["datasets_processed"] == 6
    assert report["queries"]["lr2"]["gpu_operator_ratio"] > 0
    assert root is not None
    names = [node.name for node in root.walk_post()]
    assert any(name.startswith("Gpu") for name in names), names
