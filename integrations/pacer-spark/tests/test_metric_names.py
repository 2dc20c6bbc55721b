"""pacer's progress metrics are named one way, Spark's (camelCase, as Kafka's ``avgOffsetsBehindLatest``), prefixed
``pacer``: the driver's (:data:`METRICS`) and the JVM source's own (:data:`SOURCE_METRICS`, read from the Java code
that puts them), and no page names one of the dotted names they had before 0.2 but the changelog."""

from __future__ import annotations

import re
from pathlib import Path

from pacer_spark.driver.advice import METRICS as ADVICE_METRICS
from pacer_spark.driver.protocol.progress_metrics import METRICS, SOURCE_METRICS
from pacer_spark.driver.scaling import METRICS as SCALING_METRICS

PACER_SPARK = Path(__file__).resolve().parents[1]
ROOT = PACER_SPARK.parents[1]
JAVA = PACER_SPARK / "jvm" / "src" / "main" / "java" / "io" / "pacer" / "spark"
NAME = re.compile(r"^pacer[A-Z][A-Za-z]*$")
#: The dotted names of 0.1 (source metrics), each and the camelCase name that replaced it.
OLD_NAMES = {"pacer.query": "pacerQuery", "pacer.pendingSnapshots": "pacerPendingSnapshots",
             "pacer.observedSnapshots": "pacerObservedSnapshots", "pacer.fallback": "pacerFallback",
             "pacer.fallbacks": "pacerFallbacks", "pacer.failedOpen": "pacerFailedOpen",
             "pacer.unanswered": "pacerUnanswered", "pacer.sourceTimeMs": "pacerSourceTimeMs",
             "pacer.sourceTimeFetches": "pacerSourceTimeFetches"}


def _java_puts() -> set[str]:
    """Every name the JVM source puts into a batch's metrics (``metrics.put("NAME", ...)``)."""
    return {name for path in JAVA.glob("*.java")
            for name in re.findall(r'\bmetrics\.put\("([^"]+)"', path.read_text())}


def test_every_progress_metric_is_pacer_camel_case() -> None:
    names = set(METRICS) | set(SOURCE_METRICS) | set(ADVICE_METRICS) | set(SCALING_METRICS) | _java_puts()
    assert names and not [n for n in names if not NAME.match(n)]


def test_the_jvm_source_puts_the_documented_metrics() -> None:
    """The source's own metrics are :data:`SOURCE_METRICS`; ``pacerReason`` it sets on a fail-open batch."""
    assert _java_puts() == set(SOURCE_METRICS) | {"pacerReason"}
    assert set(OLD_NAMES.values()) == set(SOURCE_METRICS)


def test_no_page_names_a_dotted_metric_but_the_changelog() -> None:
    """A dotted name is left only where it is an option or a conf of the same spelling (``pacer.query`` is the
    source option naming the query, ``spark.pacer.fallback`` a conf): the metrics' sentences name the new ones."""
    pages = [PACER_SPARK / "README.md", PACER_SPARK / "jvm" / "README.md", ROOT / "docs" / "monitoring.md"]
    metric_only = [old for old in OLD_NAMES if old not in ("pacer.query", "pacer.fallback")]
    for page in pages:
        if page.exists():
            text = page.read_text()
            found = [old for old in metric_only if re.search(re.escape(old) + r"\b", text)]
            assert not found, (page, found)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert all(f"`{old}`" in changelog for old in OLD_NAMES), "the changelog's upgrade note names every old name"
