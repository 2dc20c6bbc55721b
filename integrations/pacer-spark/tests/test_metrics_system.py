"""pacer's figures in Spark's metrics system: a paced query on a session whose driver serves the Prometheus servlet
(configuration only), scraped over HTTP on loopback (``metrics_app.py``, a process of its own: the suite's session
has its UI off)."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pacer_spark.driver.advice import METRICS as ADVICE_METRICS
from pacer_spark.driver.scaling import METRICS as SCALING_METRICS

pytestmark = pytest.mark.spark

APP = Path(__file__).with_name("metrics_app.py")


def test_a_paced_querys_gauges_and_counters_reach_the_prometheus_servlet(tmp_path: Path) -> None:
    # the page's session as shown; its UI on a free port, on loopback, the console's progress bar off: given the way
    # spark-submit gives confs, under the caller's own
    confs = {"spark.ui.port": "0", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
             "spark.ui.showConsoleProgress": "false"}
    submit = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell").removesuffix("pyspark-shell")
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": submit + "".join(f"--conf {k}={v} " for k, v in confs.items())
           + "pyspark-shell"}
    done = subprocess.run([sys.executable, str(APP), str(tmp_path / "ck")], capture_output=True, text=True,
                          timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    scraped = json.loads(done.stdout.strip().splitlines()[-1])
    series: dict[str, float] = {}
    for line in scraped["lines"]:
        found = re.match(r"metrics_\w+?_driver_pacer_paced_metrics_(\w+)\{type=\"(gauges|counters)\"\} (\S+)$", line)
        if found:
            series[found.group(1)] = float(found.group(3))
    assert series["deadlineMs_Value"] == 60_000.0, series
    assert float(scraped["oldest_held_age_ms"]) >= 0  # docs/monitoring.md's progress metric, read as the page does
    assert series["batchRows_Value"] > 0 and series["batchDatasets_Value"] >= 1
    assert series["previousBatchTriggerMs_Value"] > 0 and series["previousBatchRowsLate_Value"] == 0
    # one admission counted per batch Spark ran (the scrape came after the 4th, before the query stopped)
    assert scraped["batches"] <= series["batches_Count"] <= scraped["batches"] + 1, (scraped["batches"], series)
    assert series["rowsLate_Count"] == 0 and series["failOpenBatches_Count"] == 0
    for name in ("oldestHeldAgeMs_Value", "rowsHeld_Value", "datasetsHeld_Value", "predictedBatchMs_Value",
                 "previousBatchBusyCoreSeconds_Value", "catchUpBatches_Count", "readCapBatches_Count"):
        assert name in series, sorted(series)
    # observe mode's advice has its gauges on every query's source: none for a query paced, not observed
    advice = {name: value for name, value in series.items() if name.startswith("advice") and name.endswith("_Value")}
    assert sorted(advice) == sorted(f"{m[5].lower()}{m[6:]}_Value" for m in ADVICE_METRICS), sorted(series)
    assert all(math.isnan(value) for value in advice.values()), advice
    # the executors' gauges too: none where pacer does not scale them (local mode)
    scaling = {f"{m[5].lower()}{m[6:]}_Value" for m in SCALING_METRICS}
    assert scaling <= set(series) and all(math.isnan(series[name]) for name in scaling), sorted(series)
