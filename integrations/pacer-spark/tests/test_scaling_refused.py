"""pacer's executor scaling where the session cannot scale: refused at attach() with what to do, before anything
starts (the cluster itself: test_cluster_standalone.py's scale phase)."""

from __future__ import annotations

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
