"""The README's tables of pacer's figures in Spark's progress are :data:`METRICS`, observe mode's advice's and the
executors', name for name and word for word: a metric added, renamed or reworded in the code and not in the docs
(or the other way round) fails here."""

from __future__ import annotations

import re
from pathlib import Path

from pacer_spark.driver.advice import METRICS as ADVICE_METRICS
from pacer_spark.driver.protocol.progress_metrics import METRICS, SOURCE_METRICS
from pacer_spark.driver.scaling import METRICS as SCALING_METRICS

README = Path(__file__).resolve().parent.parent / "README.md"
ROW = re.compile(r"^\| `(pacer[A-Z][A-Za-z]+)` \| (.+?) \|$")


def test_the_readme_s_progress_metrics_table_is_the_code_s() -> None:
    documented = {m.group(1): m.group(2) for line in README.read_text().splitlines() if (m := ROW.match(line))}
    assert documented == {**METRICS, **SOURCE_METRICS, **ADVICE_METRICS, **SCALING_METRICS}


def test_the_metrics_source_exports_every_gauge_the_driver_sends() -> None:
    """The JVM source's gauges (fixed when it registers) are the driver's figures, advice's and executors' ones."""
    java = (README.parent / "jvm" / "src" / "main" / "java" / "io" / "pacer" / "spark" / "PacerMetricsSource.java")
    block = java.read_text().split("GAUGES = {", 1)[1].split("};", 1)[0]
    gauges = set(re.findall(r'"(pacer[A-Za-z]+)"', block))
    numeric = {name for name in METRICS if name not in ("pacerAdmission", "pacerReason", "pacerSourcePart")}
    assert gauges == numeric | set(ADVICE_METRICS) | set(SCALING_METRICS)
