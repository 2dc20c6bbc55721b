"""What attach() chooses when the user leaves a choice out, and what it refuses: executor scaling where the session
cannot scale (refused with what to do, before anything starts; the cluster itself: test_cluster_standalone.py's
scale phase), and the admission a stated deadline gets."""

from __future__ import annotations

import logging
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_scale_deadline_in_local_mode_is_refused_naming_the_cluster_it_needs(spark: Any,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import pacer_spark

    pytest.importorskip("pacer_scaler")
    monkeypatch.setenv("PACER_PLUGINS", "pacer-scaler")
    with pytest.raises(pacer_spark.ScalingRefused,
                       match=r"^scale='deadline' changes the application's executors, which needs a cluster manager "
                             r"\(standalone, YARN, Kubernetes\); this session runs local\[2\]: start a cluster "
                             r"\(`pacer cluster up"):
        pacer_spark.attach(spark, scale="deadline", executors=(1, 3), paced=False)
    with pytest.raises(pacer_spark.ScalingRefused, match=r"^scale='spark-dynamic' changes the application's"):
        pacer_spark.attach(spark, scale="spark-dynamic", executors=(1, 3), paced=False)
    # nothing was left attached: a plain attach works right after
    pacer_spark.attach(spark, paced=False).stop()


def test_a_scale_without_bounds_and_an_unknown_scaler_are_refused(spark: Any) -> None:
    import pacer_spark
    from pacer import UnknownStrategyError

    with pytest.raises(ValueError, match=r"scale='deadline' changes the executors: give their bounds, "
                                         r"executors=\(min, max\) \(conf spark.pacer.scale.executors=MIN:MAX\)"):
        pacer_spark.attach(spark, scale="deadline", paced=False)
    with pytest.raises(UnknownStrategyError, match=r"unknown scaling strategy 'nope'.*Installed scaling strategies"):
        pacer_spark.attach(spark, scale="nope", executors="1:2", paced=False)


def test_a_stated_deadline_with_no_admission_named_is_paced_by_zstream(spark: Any, monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """``attach(spark, deadline="5s")`` paces: zStream where installed, else asap with a warning naming the package;
    without a deadline, Spark's default trigger; a named admission is kept."""
    import pacer_spark

    monkeypatch.setenv("PACER_PLUGINS", "pacer-zstream")
    pytest.importorskip("pacer_zstream")
    session = pacer_spark.attach(spark, deadline="5s", paced=False)
    try:
        assert (session.config.admission, session.config.admission_source) == ("zstream", "deadline default")
    finally:
        session.stop()
    session = pacer_spark.attach(spark, paced=False)
    try:
        assert (session.config.admission, session.config.admission_source) == ("asap", "default")
    finally:
        session.stop()
    session = pacer_spark.attach(spark, deadline="5s", admission="static", paced=False)
    try:
        assert (session.config.admission, session.config.admission_source) == ("static", "given")
    finally:
        session.stop()
    monkeypatch.setenv("PACER_PLUGINS", "")  # baselines only: zStream is not installed
    with caplog.at_level(logging.WARNING, logger="pacer_spark"):
        session = pacer_spark.attach(spark, deadline="5s", paced=False)
    try:
        assert (session.config.admission, session.config.admission_source) == \
            ("asap", "default (zstream not installed)")
        # the reason pacer run prints too (pacer.plugins.PluginManager.default_admission), and how to name one here
        assert "'zstream' (pacer's default for a deadline) is not installed, so Spark's default trigger (asap) runs: " \
               "pip install ./strategies/pacer-zstream from the checkout, or name one (admission=..., " \
               "spark.pacer.admission)" in caplog.text, caplog.text
    finally:
        session.stop()
