"""Observe mode on real Spark: ``.option("pacer.observe", PATH)`` lets Spark admit as it would without pacer and
records the query's arrivals and batch costs, which ``pacer advise`` replays.

The query's strategy here never admits (``Holding``; only the Controller's catch-up would move data once it is past
its 60 s deadline): under a processing-time trigger, with no caller waiting, every row is written within the 30 s the
test waits only because observing admits at every trigger what the source may read (its own ``maxFilesPerTrigger``
still applies, as in plain Spark), with no gate between the batches.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path
from typing import Any

import pytest

from pacer.observed import read
from pacer_sim.advise import AdviseConfig, advise
from pacer_spark.driver.advice import METRICS as ADVICE_METRICS

pytestmark = pytest.mark.spark

_spec = importlib.util.spec_from_file_location("_faults_helpers", Path(__file__).with_name("test_paced_faults.py"))
assert _spec is not None and _spec.loader is not None
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)

#: Rows of each file written, one file every half second: batches of several sizes, so the recorded batches tell a
#: batch's fixed cost from its per-row cost.
SIZES = (20, 2000, 50, 4000, 100, 2500, 40, 1000)


def _put(folder: Path, k: int, rows: int) -> None:
    """File ``k``: ids ``k x 100 000`` on, moved into ``folder`` whole."""
    staging = folder.parent / f".part-{k}.csv"
    staging.write_text("".join(f"{k * 100_000 + j},w{j % 7}\n" for j in range(rows)))
    os.replace(staging, folder / f"part-{k:05d}.csv")


def test_an_observed_query_reads_as_without_pacer_and_its_recording_is_advice(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """... and while it runs, the driver's advice (every second here) reaches its report and its progress (the same
    figures feed its metrics-system gauges: ``test_metrics_system.py`` scrapes them)."""
    monkeypatch.delenv("PACER_PLUGINS")  # the advice replays zStream, pacer-zstream's
    handle = _helpers.attach_holding(spark, tmp_path, _helpers.Holding("test-hold-observe", None))
    src, out, recording = tmp_path / "in", tmp_path / "out", tmp_path / "observed" / "q.jsonl"
    src.mkdir()
    try:
        frame = _helpers.paced_csv(spark, src, "60s", **{"pacer.observe": str(recording),
                                                         "pacer.observe.adviseEvery": "1s"})
        query = (frame.writeStream.format("parquet").option("path", str(out / "data"))
                 .option("checkpointLocation", str(out / "checkpoint")).queryName("observed")
                 .trigger(processingTime="500 milliseconds").start())
        for index, rows in enumerate(SIZES):
            _put(src, index, rows)
            time.sleep(0.5)
        total = sum(SIZES)
        deadline = time.monotonic() + 30
        while len(_helpers.written_ids(spark, out)) < total and time.monotonic() < deadline:
            time.sleep(0.5)
        written = _helpers.written_ids(spark, out)
        assert len(written) == len(set(written)) == total, handle.paced.summary()
        deadline = time.monotonic() + 60
        while handle.paced.summary()["observed"]["advice"]["latest"] is None and time.monotonic() < deadline:
            time.sleep(0.5)
        advice = handle.paced.summary()["observed"]["advice"]
        assert advice["error"] is None and advice["latest"]["observed"]["batches"] >= 2, advice
        _put(src, len(SIZES), 300)  # a batch admitted once the advice is in: its progress carries the figures
        total += 300
        while len(_helpers.written_ids(spark, out)) < total and time.monotonic() < deadline:
            time.sleep(0.5)
        metrics = [p["sources"][0]["metrics"] for p in query.recentProgress if p["numInputRows"] > 0][-1]
        assert set(ADVICE_METRICS) <= set(metrics) and float(metrics["pacerAdviceReplayBusyRatio"]) > 0, metrics
        summary = handle.paced.summary()["observed"]
        assert summary["failed_open"] == 0 and summary["error"] is None, summary
        assert summary["observed"] == str(recording) == handle.report()["spark"]["paced"]["observed"]["observed"]
        query.stop()
        observation = read(recording)
        assert observation.header["query"] == "observed" and observation.header["cores"] == 2
        assert observation.header["options"]["pacer.deadline"] == "60s"
        assert "pacer.observe" not in observation.header["options"]
        recorded = [b for b in observation.batches if b.rows]
        assert sum(n for b in recorded for _, n in b.arrivals) == sum(b.rows for b in recorded) == total
        assert all(b.busy_core_s is not None and b.busy_core_s > 0 for b in recorded)
        assert max(b.completed_at - t for b in recorded for t, _ in b.arrivals) < 30.0  # read as it came
        assert len(recorded) == len([p for p in query.recentProgress if p["numInputRows"] > 0])
        advice = advise(observation, AdviseConfig(deadline_s=10.0, admission="asap", max_executors=2))  # core only here
        assert advice["observed"]["batches"] == len(recorded) and advice["replay"]["batches"] > 0
    finally:
        for active in spark.streams.active:
            active.stop()
        handle.stop()

