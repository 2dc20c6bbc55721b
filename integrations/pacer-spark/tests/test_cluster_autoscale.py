"""``pacer bench autoscale`` on a real standalone cluster (``spark_cluster``: ``pacer cluster up``, two 1-core
workers), as a user runs it: fixed at peak holds both executors; Spark's dynamic allocation (``spark-dynamic``, its
session started with it on, pacer asking nothing) and pacer's deadline scaler start there and move between one and
two; the same generated wave into each. Every row of each run processed, the executors over time and what they held
in the report. A process of its own: the suite's session is ``local[2]``, and one process holds one SparkContext.
Measured on 2 cores: about 3 minutes (three sessions: Spark's dynamic allocation needs one of its own).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

DEPLOYING = Path(__file__).resolve().parents[3] / "docs" / "deploying.md"

#: Seconds of traffic per configuration: enough for the scaler to measure batches and decide at its 5 s pace (a
#: scale-down waits for its hold, longer than this run: the decommission test below scales down).
DURATION_S = 15


def test_bench_autoscale_runs_fixed_at_peak_and_the_deadline_scaler_on_the_cluster(spark_cluster: Any,
                                                                                    tmp_path: Path) -> None:
    pytest.importorskip("pacer_scaler")
    out = tmp_path / "autoscale"
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}
    env["SPARK_CONF_DIR"] = str(Path(spark_cluster.directory) / "conf")  # the cluster's secret
    env["PYSPARK_PYTHON"] = sys.executable
    command = [str(Path(sys.executable).with_name("pacer")), "bench", "autoscale", "--runtime", "spark", "--master",
               spark_cluster.master_url, "--quick", "--duration", str(DURATION_S), "--executors", "1:2",
               "--no-warm-up-stream", "--out", str(out)]  # what is asserted needs no warm stream
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, env=env)
    assert done.returncode == 0, f"pacer bench autoscale failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert "ran on the simulator" not in done.stderr, done.stderr  # a standalone master gives it executors
    doc = json.loads((out / "autoscale.json").read_text())
    assert [r["config"] for r in doc["analysis"]] == ["fixed at peak", "spark-dynamic", "deadline"]
    runs = {run["tags"]["name"]: run["report"] for run in doc["runs"]}
    # the goal line says what the runs measured: the deadline run's late share and its core-s over fixed at peak's
    (goal,) = [line for line in doc["goals"] if line.startswith("GOAL wave / 1 query, standalone cluster")]
    late = runs["deadline"]["queries"]["lr2"]["deadline_miss_ratio_rows"]
    ratio = runs["deadline"]["cost"]["allocated_core_s"] / runs["fixed at peak"]["cost"]["allocated_core_s"]
    assert goal.endswith(f"(late {late:.2%}, {ratio:.3f}× peak)"), (goal, late, ratio)
    assert (" MET " in goal) == (late <= 0.01 and ratio < 1.0), goal
    for name, report in runs.items():
        query = report["queries"]["lr2"]
        assert report["config"]["master"] == spark_cluster.master_url, name
        assert report["config"]["run"]["options"]["spark"]["warm_up_stream"] is False, name  # the flag reached Spark
        assert query["rows_processed"] == query["rows_in"] > 0, (name, query)  # every row, once
        timeline = report["scaling"]["executors"]
        assert timeline and all(1 <= held <= 2 for _, _, held in timeline), (name, timeline)
        if name != "spark-dynamic":  # pacer asked for both at the start (Spark's allocation starts its own way)
            assert timeline[0][2] == 2, (name, timeline)
    # fixed at peak never changes them, and held both for the run: what the deadline scaler is measured against
    assert runs["fixed at peak"]["scaling"]["changes"] == []
    peak = runs["fixed at peak"]
    assert peak["cost"]["allocated_core_s"] >= 2 * 0.9 * DURATION_S, peak["cost"]
    # spark-dynamic: Spark's allocation decided, pacer only watched (asked for and removed nothing; a change Spark
    # made is reported as Spark's: in 15 s it makes none, its idle timeout being longer than the run)
    dynamic = runs["spark-dynamic"]["scaling"]
    assert dynamic["enacted_by"] == "Spark's dynamic allocation" and dynamic["removals"] == [], dynamic
    assert {c["reason"] for c in dynamic["changes"]} <= {"Spark's dynamic allocation"}, dynamic["changes"]
    deadline = runs["deadline"]["scaling"]
    assert deadline["enacted_by"] == "pacer" and deadline["refused"] == [] and deadline["ungranted"] == []
    # the deadline scaler was asked on its own clock and answered (a decision is kept even where nothing changed;
    # the change it makes, and why, is the decommission test's below, whose run is long enough to scale down)
    assert deadline["recommended"] is not None and 1 <= deadline["wanted"] <= 2, deadline
    # docs/deploying.md's reading of the report, each line as shown, on the deadline scaler's run
    (shown,) = re.findall(r"^```python\n(.*?)^```", DEPLOYING.read_text(), re.S | re.M)
    reads = [line.split("#")[0].strip() for line in shown.splitlines() if line.startswith("report[")]
    assert len(reads) == 3 and all(eval(read, {"report": runs["deadline"]}) is not None for read in reads), reads
    assert "executors_wave-1-query-standalone-cluster" in {p.stem.removeprefix("autoscale-") for p in
                                                            out.glob("*.png")}



def test_the_deadline_scaler_decommissions_where_the_session_decommissions(spark_cluster: Any,
                                                                          tmp_path: Path) -> None:
    """With ``spark.decommission.enabled`` on, a scale-down decommissions the executor (it takes no new task,
    finishes its running ones and exits) instead of killing it; every row still processed once."""
    conf = tmp_path / "conf"
    conf.mkdir(mode=0o700)
    defaults = (Path(spark_cluster.directory) / "conf" / "spark-defaults.conf").read_text()
    (conf / "spark-defaults.conf").write_text(defaults + "\nspark.decommission.enabled true\n")
    (conf / "spark-defaults.conf").chmod(0o600)
    report_path = tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}
    env["SPARK_CONF_DIR"] = str(conf)
    env["PYSPARK_PYTHON"] = sys.executable
    command = [str(Path(sys.executable).with_name("pacer")), "run", "--runtime", "spark", "--master",
               spark_cluster.master_url, "--workload", "lr2", "--rate", "2000", "--deadline", "10s", "--admission",
               "zstream", "--duration", "45", "--scale", "deadline", "--executors", "1:2", "--initial-executors", "2",
               "--param", "scale.down_hold_s=10", "--report", str(report_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, f"pacer run failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    report = json.loads(report_path.read_text())
    scaling = report["scaling"]
    # 2000 rows/s of LR2 need well under one executor: it scaled down once, by decommissioning, between batches
    assert [(c["from"], c["to"]) for c in scaling["changes"]] == [(2, 1)], scaling["changes"]
    assert scaling["changes"][0]["reason"].startswith("deadlines need"), scaling["changes"]  # why, from its batches
    assert [(len(r["executors"]), r["how"], r["between_batches"]) for r in scaling["removals"]] == \
        [(1, "decommissioned", True)], scaling["removals"]
    assert scaling["executors"][-1][1] == 1 and scaling["refused"] == [], scaling
    query = report["queries"]["lr2"]
    assert query["rows_processed"] == query["rows_in"] > 0
