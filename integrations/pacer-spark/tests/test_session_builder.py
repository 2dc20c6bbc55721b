"""``pacer_spark.session_builder`` changes nothing silently: it leaves the master to spark-submit, PYSPARK_SUBMIT_ARGS,
spark-defaults.conf or the user's conf where one names it (``local[2]`` only where none does), sets
``spark.sql.shuffle.partitions`` only when asked, never replaces a conf the user gave, and names what it sets, and
why, in one log line. No Spark is started: the builder's options are read before ``getOrCreate``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import pacer_spark
from pacer_spark.session import DEFAULT_MASTER


@pytest.fixture(autouse=True)
def no_master_outside(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An environment that names no master (a folder for spark-defaults.conf, empty)."""
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--conf spark.driver.memory=1g pyspark-shell")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    return tmp_path


def built(caplog: pytest.LogCaptureFixture, *args: Any, **kwargs: Any) -> tuple[dict[str, str], str]:
    """The builder's options and the line it logged."""
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="pacer_spark.session"):
        options = dict(pacer_spark.session_builder(*args, **kwargs)._options)
    (line,) = [r.getMessage() for r in caplog.records if r.name == "pacer_spark.session"]
    return options, line


def test_with_no_master_anywhere_it_runs_local_2_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    options, line = built(caplog)
    assert options["spark.master"] == DEFAULT_MASTER == "local[2]"
    assert options["spark.scheduler.mode"] == "FAIR" and "spark.sql.shuffle.partitions" not in options
    assert line.startswith("pacer_spark.session_builder sets spark.scheduler.mode=FAIR (")
    assert "spark.master=local[2] (no master given" in line and "shuffle" not in line
    assert f"spark.scheduler.allocation.file={options['spark.scheduler.allocation.file']} (" in line


def test_a_master_named_outside_is_not_overridden(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
                                                  no_master_outside: Path) -> None:
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master spark://h:7077 pyspark-shell")
    options, line = built(caplog)
    assert "spark.master" not in options and "spark.master" not in line  # the launcher's --master holds
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    (no_master_outside / "spark-defaults.conf").write_text("# defaults\nspark.master   yarn\n")
    assert "spark.master" not in built(caplog)[0]
    (no_master_outside / "spark-defaults.conf").unlink()
    assert built(caplog, conf={"spark.master": "local[3]"})[0]["spark.master"] == "local[3]"
    assert built(caplog, "local[1]")[0]["spark.master"] == "local[1]"  # the caller's own


def test_shuffle_partitions_are_set_only_when_asked_and_never_over_the_users(
        caplog: pytest.LogCaptureFixture) -> None:
    options, line = built(caplog, shuffle_partitions=2)
    assert options["spark.sql.shuffle.partitions"] == "2" and "spark.sql.shuffle.partitions=2 (" in line
    options, line = built(caplog, shuffle_partitions=2, conf={"spark.sql.shuffle.partitions": "8",
                                                               "spark.scheduler.mode": "FIFO"})
    assert options["spark.sql.shuffle.partitions"] == "8" and options["spark.scheduler.mode"] == "FIFO"
    assert "shuffle" not in line and "spark.scheduler.mode" not in line  # only what pacer set is named
