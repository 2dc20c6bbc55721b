"""The user's own query on ``format("pacer")``, paced by the session's Controller (its protocol room).

Real local Spark, Spark's own file sources and sinks; the job in ``wordcount_app.py`` runs in a
process of its own so that it can be killed with SIGKILL like a crashed driver.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

APP = Path(__file__).with_name("wordcount_app.py")
WORDS = ("spark", "pacer", "batch", "stream", "latency")
ROWS_PER_FILE = 40
BASE = datetime(2026, 1, 1)


def put_file(folder: Path, index: int, fmt: str) -> None:
    """File ``index``: ROWS_PER_FILE rows, event times rising 2 s per file; moved in whole, as a producer should."""
    import pandas as pd

    rows = [(BASE + timedelta(seconds=2 * index + 0.05 * j), WORDS[(index + j) % len(WORDS)])
            for j in range(ROWS_PER_FILE)]
    staging = folder.parent / f".staging-{index}.{fmt}"
    if fmt == "csv":
        staging.write_text("ts,word\n" + "".join(f"{ts:%Y-%m-%d %H:%M:%S.%f},{w}\n" for ts, w in rows))
    elif fmt == "json":
        staging.write_text("".join(json.dumps({"ts": f"{ts:%Y-%m-%dT%H:%M:%S.%f}", "word": w}) + "\n" for ts, w in rows))
    else:
        times = pd.to_datetime([ts for ts, _ in rows], utc=True)  # UTC-adjusted: Spark's TIMESTAMP, not _NTZ
        pd.DataFrame({"ts": times, "word": [w for _, w in rows]}).to_parquet(staging, coerce_timestamps="us")
    os.replace(staging, folder / f"part-{index:04d}.{fmt}")


def launch(tmp: Path, source: str, inbox: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    """The user's job in its own process group (SIGKILL takes its JVM too)."""
    log = (tmp / f"{out.name}-{len(list(tmp.glob(out.name + '-*.log')))}.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # every installed strategy, zstream too
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.Popen([sys.executable, str(APP), "--source", source, "--input", str(inbox), "--out", str(out),
                             *extra], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def commits(out: Path) -> int:
    """Batches the job committed (its checkpoint's commit log)."""
    folder = out / "checkpoint" / "commits"
    return len([p for p in folder.iterdir() if p.name.isdigit()]) if folder.is_dir() else 0


def results(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    """The sink's rows, sorted: (window start, word, count)."""
    frame = spark.read.parquet(str(out / "data"))
    return sorted(tuple(r) for r in frame.select("start", "word", "count").collect())


#: Why the default run keeps one case of the kill-and-restart below: the csv-foreachBatch case, and SIGKILL restarts
#: into parquet sinks in test_paced_faults.py (csv, 500 files held) and pacer-kafka's test_paced_kafka.py.
KILLED_ELSEWHERE = "the csv-foreachBatch case and the parquet-sink SIGKILL restarts of test_paced_faults/_kafka prove it"


def logs(tmp: Path) -> str:
    return "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted(tmp.glob("*.log")))


@pytest.mark.parametrize(
    ("source", "foreach_batch"),
    [pytest.param("csv", False, marks=pytest.mark.full(reason=KILLED_ELSEWHERE)),
     pytest.param("json", False, marks=pytest.mark.full(reason=KILLED_ELSEWHERE)),
     pytest.param("parquet", False, marks=pytest.mark.full(reason=KILLED_ELSEWHERE)),
     ("csv", True)],
    ids=["csv", "json", "parquet", "csv-foreachBatch"],
)
def test_a_paced_word_count_killed_and_restarted_equals_plain_spark(
    spark: Any, tmp_path: Path, source: str, foreach_batch: bool
) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    out = tmp_path / "paced"
    sink = ["--foreach-batch"] if foreach_batch else []
    for i in range(6):
        put_file(inbox, i, source)
    job = launch(tmp_path, source, inbox, out, *sink)
    written = 6
    try:
        limit = time.monotonic() + 240
        while commits(out) < 2:  # files keep arriving while it runs; kill it mid-stream
            assert job.poll() is None, f"the paced job exited early:\n{logs(tmp_path)}"
            assert time.monotonic() < limit, f"no two batches committed in 240 s:\n{logs(tmp_path)}"
            if written < 30:
                put_file(inbox, written, source)
                written += 1
            time.sleep(0.5)
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    for i in range(written, 36):
        put_file(inbox, i, source)

    restart = launch(tmp_path, source, inbox, out, "--available-now", *sink)
    assert restart.wait(timeout=300) == 0, f"the restarted job failed:\n{logs(tmp_path)}"

    plain = (_app().word_counts(spark, source, str(inbox), plain=True).writeStream.format("parquet")
             .option("path", str(tmp_path / "plain" / "data"))
             .option("checkpointLocation", str(tmp_path / "plain" / "checkpoint"))
             .outputMode("append").trigger(availableNow=True).start())
    plain.awaitTermination()

    expected = results(spark, tmp_path / "plain")
    assert len(expected) >= 20  # windows closed by the watermark: the comparison is not vacuous
    assert results(spark, out) == expected, logs(tmp_path)
    said = [line for p in tmp_path.glob("*.log") for line in p.read_text(errors="replace").splitlines()]
    paced = json.loads(next(line for line in said if line.startswith("pacer: "))[len("pacer: "):])["wordcount"]
    assert paced["decisions"] > 0 and paced["error"] is None  # the Controller decided, not the JVM's fallback


def _app() -> Any:
    """``wordcount_app`` imported from its path (the tests folder is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("wordcount_app", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
