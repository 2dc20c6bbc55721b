"""docs/your-query.md run as shown, in the order a user meets it, on the suite's session (the page's
``getOrCreate()`` returns it): the word count paced to its 5 s target on a CSV folder, written to Parquet, and its
report's late share printed; then the page's observed query recorded and ``pacer advise`` run on the recording, as
the page's command reads. The page's ``/data/...`` folders are this test's, and its ``...`` (the rest of a job) is
what a user's test does there: rows written, then ``query.processAllAvailable()``."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

PAGE = Path(__file__).resolve().parents[3] / "docs" / "your-query.md"
#: Rows per file of the word count's input, two files.
ROWS = 300


def _blocks(language: str) -> list[str]:
    """The page's fenced blocks in ``language`` ("" for those that name none)."""
    return [body for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(), re.S | re.M)
            if lang == language]


def _write_words(folder: Path, name: str, rows: int = ROWS, age_s: float = 0.0) -> int:
    """A CSV file of ``rows`` rows, five words in turn, all stamped ``age_s`` seconds ago (header ``ts,word``),
    moved into ``folder`` whole; its row count."""
    stamp = datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=age_s)
    staging = folder.parent / f".{name}"
    staging.write_text("ts,word\n" + "".join(f"{stamp:%Y-%m-%d %H:%M:%S.%f},w{i % 5}\n" for i in range(rows)))
    os.replace(staging, folder / name)
    return rows


def _counts(spark: Any, folder: Path) -> dict[str, int]:
    """The word counts the query committed to ``folder`` (its Parquet sink's log names the files): word -> count."""
    if not (folder / "_spark_metadata").is_dir() or not any(folder.glob("*.parquet")):
        return {}
    return {row["word"]: row["count"] for row in spark.read.parquet(str(folder)).collect()}


def test_the_your_query_page_runs_as_shown(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PACER_PLUGINS", raising=False)  # the page's default admission is pacer-zstream's
    paced, observed = _blocks("python")
    data = tmp_path / "data"
    (data / "in").mkdir(parents=True)
    # a minute-old file, then one stamped now: the watermark (10 s behind the newest row) closes the old window
    written = _write_words(data / "in", "part-0.csv", age_s=60)
    rest_of_job = "\nwritten += _write_words(data / 'in', 'part-1.csv')\nquery.processAllAvailable()\n"
    assert paced.count("\n...\n") == 1 and paced.count("/data/") == 3
    namespace: dict[str, Any] = {"_write_words": _write_words, "data": data, "written": written}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(paced.replace("/data/", f"{data}/").replace("\n...\n", rest_of_job), str(PAGE), "exec"),
                 namespace)
        assert namespace["spark"] is spark and namespace["pacer"].closed
        late_share = float(printed.getvalue().strip().splitlines()[-1])  # the page's print: the share of rows late
        assert 0.0 <= late_share <= 1.0, printed.getvalue()
        query = namespace["query"]
        assert sum(p["numInputRows"] for p in query.recentProgress) == namespace["written"] == 2 * ROWS
        waited = time.monotonic() + 60  # the closed window is written by the batch after the watermark moved
        while not _counts(spark, data / "out") and time.monotonic() < waited and query.isActive:
            time.sleep(0.5)
        # the minute-old file's window, each of its five words counted once: the page's sink holds it exactly
        assert _counts(spark, data / "out") == {f"w{i}": ROWS // 5 for i in range(5)}, query.exception()
    finally:
        for name in ("query", "pacer"):
            if name in namespace:
                namespace[name].stop()  # a failed block leaves nothing running for the next test

    # Observe first: the page's observed frame, on the same session with pacer attached as the page's first block
    pacer = namespace["pacer_spark"].attach(spark, deadline="5s")
    recording = data / "observed" / "wordcount.jsonl"
    try:
        exec(compile(observed.replace("/data/", f"{data}/"), str(PAGE), "exec"), namespace)
        query = (namespace["counts"].writeStream.format("noop").queryName("observed_wordcount")
                 .option("checkpointLocation", str(data / "ckpt-observed")).start())
        for k, rows in enumerate((50, 1000, 200, 3000), start=2):  # batches of several sizes: advise fits a cost
            _write_words(data / "in", f"part-{k}.csv", rows=rows)
            query.processAllAvailable()
        query.stop()
    finally:
        pacer.stop()
    assert len(recording.read_text().splitlines()) >= 4
    (advise,) = [line for block in _blocks("") for line in block.splitlines() if line.startswith("pacer advise")]
    done = subprocess.run([sys.executable, "-m", "pacer.cli", *advise.replace("/data/", f"{data}/").split()[1:]],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    # its answer as the page describes it: the replay as observed, paced with zStream at 5 s, the fewest executors
    assert done.stdout.startswith("deadline 5 s, zstream; costs from "), done.stdout
    assert re.search(r"^replayed as observed .* batches .*^paced \(zstream\) .* batches", done.stdout, re.S | re.M)
    assert re.search(r"^(fewest executors meeting the deadline: \d+ x|no executor count up to 8 )", done.stdout,
                     re.M), done.stdout
