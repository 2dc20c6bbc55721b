"""One reading of every setting: :func:`pacer_spark.attach`'s keywords, the ``spark.pacer.*`` confs and a
``format("pacer")`` source's ``pacer.*`` options take durations in Spark's wording, read option names whatever their
case (as Spark does), and refuse a bad value naming the setting, the value and what it takes. attach's signature
lists exactly :class:`~pacer_spark.config.PacerConfig`'s keywords. No Spark is started: a stand-in session answers
the reads of its confs, and attach's Spark-bound steps are stubbed."""

from __future__ import annotations

import inspect
import re
from types import SimpleNamespace
from typing import Any

import pytest

import pacer_spark
from pacer.plugins import UnknownStrategyError
from pacer_spark import runtime
from pacer_spark.config import CONF_PREFIX, KEYWORDS, PacerConfig
from pacer_spark.driver.protocol.state import check_options
from pacer_spark.gen_plan import GenPlan
from pacer_spark.jvm import executor_requests

#: Spark's own wording of durations (its confs and a trigger's interval) and pacer's short forms, in seconds.
SPARK_WORDING = {"10s": 10.0, "10 seconds": 10.0, "500 milliseconds": 0.5, "500ms": 0.5, "1 minute": 60.0,
                 "2min": 120.0, "1h": 3600.0, "1 hour": 3600.0, "7d": 604800.0}


def session(**confs: str) -> Any:
    """A stand-in SparkSession holding ``confs`` (full names, ``spark.pacer.*``), as from_spark reads one."""
    return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: confs.get(key, default)),
                           sparkContext=SimpleNamespace(getConf=lambda: SimpleNamespace(getAll=lambda: confs.items())))


def from_conf(key: str, value: str) -> PacerConfig:
    return PacerConfig.from_spark(session(**{CONF_PREFIX + key: value}))


@pytest.fixture
def attached(monkeypatch: pytest.MonkeyPatch) -> list[PacerConfig]:
    """attach() without Spark: the session check passes, and the PacerSession it would build records its config."""
    built: list[PacerConfig] = []
    monkeypatch.setattr(runtime, "require_classic", lambda spark: None)
    # the stand-in keeps its session alive and is stopped, as a real one would be: attach registers it by the
    # session's id, which a collected stand-in session could hand to the next one
    monkeypatch.setattr(runtime, "PacerSession",
                        lambda spark, config: built.append(config) or SimpleNamespace(spark=spark, closed=True))
    return built


def test_attach_has_exactly_pacer_configs_keywords_typed_and_documented() -> None:
    signature = inspect.signature(pacer_spark.attach)
    spark, *keywords = signature.parameters.values()
    assert spark.name == "spark" and spark.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert tuple(p.name for p in keywords) == KEYWORDS  # in PacerConfig's order; no **options to hide them behind
    assert set(KEYWORDS) == {f for f in PacerConfig.__dataclass_fields__} - {"admission_source"}
    for parameter in keywords:
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None, parameter
        assert parameter.annotation is not inspect.Parameter.empty, parameter
        assert f":param {parameter.name}:" in (pacer_spark.attach.__doc__ or ""), parameter.name
    with pytest.raises(TypeError, match="unexpected keyword argument 'scale_evry'"):
        pacer_spark.attach(session(), scale_evry="5s")  # type: ignore[call-arg]


@pytest.mark.parametrize("wording", SPARK_WORDING)
def test_a_duration_in_sparks_wording_reads_the_same_through_attach_the_conf_and_a_source_option(
        wording: str, attached: list[PacerConfig]) -> None:
    seconds = SPARK_WORDING[wording]
    pacer_spark.attach(session(), scale_every=wording, gate_timeout=wording, deadline=wording, admission="asap")
    config = attached[-1]
    assert (config.scale_every, config.gate_timeout, config.deadline) == (seconds, seconds, seconds)
    assert type(config.scale_every) is float  # kept as seconds, not as the string given
    for key, name in (("scale.every", "scale_every"), ("gate.timeout", "gate_timeout"), ("deadline", "deadline"),
                      ("decide.timeout", "decide_timeout")):
        assert getattr(from_conf(key, wording), name) == seconds
    assert check_options({"pacer.deadline": wording, "pacer.arrival.maxAge": wording}) == {
        "pacer.deadline": wording, "pacer.arrival.maxAge": wording}
    if seconds <= 60:  # pacer-gen's traffic (a longer one takes long to plan)
        assert GenPlan.from_options({"duration": wording, "period": wording, "rate": "1"}).duration == seconds


def test_the_settings_the_docs_show_read() -> None:
    """``spark.pacer.scale.every=5s`` and ``spark.pacer.gate.timeout=60s`` (docs/deploying.md) once failed with
    "could not convert string to float"."""
    config = PacerConfig.from_spark(session(**{"spark.pacer.scale.every": "5s", "spark.pacer.gate.timeout": "60s"}))
    assert (config.scale_every, config.gate_timeout) == (5.0, 60.0)


def test_source_option_names_are_read_whatever_their_case() -> None:
    """The JVM hands a source its options lowercased (Spark's CaseInsensitiveStringMap): ``pacer.arrival.maxage`` is
    ``pacer.arrival.maxAge``."""
    for spelled in ("pacer.arrival.maxAge", "pacer.arrival.maxage", "PACER.ARRIVAL.MAXAGE"):
        assert check_options({spelled: "1 hour"}) == {"pacer.arrival.maxAge": "1 hour"}
    assert check_options({"pacer.observe.adviseevery": "5 minutes", "Pacer.Deadline": "10s"}) == {
        "pacer.observe.adviseEvery": "5 minutes", "pacer.deadline": "10s"}
    with pytest.raises(ValueError, match=r"^unknown option\(s\) pacer.arival; format\('pacer'\) reads .*"
                                         r"pacer.arrival.maxAge"):
        check_options({"pacer.arival": "observed"})


@pytest.mark.parametrize("option", ["pacer.deadline", "pacer.arrival.maxAge"])
@pytest.mark.parametrize("value", ["soon", "0", "-1s", "5 mi"])
def test_a_bad_duration_option_is_refused_naming_the_option_and_the_value(option: str, value: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(option)} ") as refused:
        check_options({option.lower(): value})
    assert repr(value) in str(refused.value)


#: A bad value of each kind of setting, as a conf (after ``spark.pacer.``) and as attach's keyword, and the words
#: its error gives for what the setting takes.
BAD_SETTINGS = [
    ("fallback", "fallback", "yes", "expects true or false"),
    ("scale.recommendOnly", "scale_recommend_only", "maybe", "expects true or false"),
    ("cores", "cores", "two", "expects a whole number >= 1"),
    ("gpus", "gpus", "-1", "expects a whole number >= 0"),
    ("gate.concurrency", "concurrency", "0", "expects a whole number >= 1"),
    ("scale.initial", "initial_executors", "1.5", "expects a whole number >= 0"),
    ("overload", "overload", "drop", "must be one of keep, shed"),
    ("scale.executors", "executors", "a:b", "are MIN:MAX (e.g. 1:8) or one count"),
    ("scale.every", "scale_every", "5 mi", "expects a duration such as 10s, 500ms"),
    ("gate.timeout", "gate_timeout", "soon", "expects a duration such as 10s, 500ms"),
]


@pytest.mark.parametrize(("key", "keyword", "value", "allowed"), BAD_SETTINGS)
def test_a_bad_setting_is_refused_naming_the_setting_the_value_and_what_it_takes(
        key: str, keyword: str, value: str, allowed: str) -> None:
    for setting, build in ((CONF_PREFIX + key, lambda: from_conf(key, value)),
                           (keyword, lambda: PacerConfig.from_spark(session(), **{keyword: value}))):
        with pytest.raises(ValueError) as refused:
            build()
        message = str(refused.value)
        assert message.startswith(f"{setting} ") and allowed in message and repr(value) in message, message


def test_good_settings_of_every_kind_read_as_spark_reads_them() -> None:
    confs = {"fallback": "FALSE", "scale.recommendOnly": " true ", "cores": "4", "gpus": "0",
             "gate.concurrency": "2", "overload": "Shed"}
    config = PacerConfig.from_spark(session(**{CONF_PREFIX + k: v for k, v in confs.items()}))
    assert (config.fallback, config.scale_recommend_only, config.cores, config.gpus, config.concurrency,
            config.overload) == (False, True, 4, 0, 2, "shed")
    keyword = PacerConfig.from_spark(session(), fallback="false", cores=3, concurrency="2", checkpoint_root="/tmp/x")
    assert (keyword.fallback, keyword.cores, keyword.concurrency, keyword.checkpoint_root) == (False, 3, 2, "/tmp/x")
    assert PacerConfig.from_spark(session(**{CONF_PREFIX + "fallback": "false"}), fallback=True).fallback is True


def test_a_config_built_by_hand_is_checked_as_attach_checks_it() -> None:
    with pytest.raises(ValueError, match=r"^overload must be one of keep, shed, got 'drop'$"):
        PacerConfig(overload="drop")
    with pytest.raises(ValueError, match=r"^concurrency expects a whole number >= 1, got 0$"):
        PacerConfig(concurrency=0)
    assert PacerConfig(scale_every="1 minute").scale_every == 60.0  # type: ignore[arg-type]


@pytest.mark.parametrize(("keyword", "conf", "decision"), [("admission", "admission", "admission"),
                                                           ("scheduler", "scheduler", "scheduling"),
                                                           ("placement", "placement", "placement")])
def test_an_unknown_strategy_is_refused_naming_the_setting_and_the_installed_ones(
        keyword: str, conf: str, decision: str, attached: list[PacerConfig]) -> None:
    with pytest.raises(UnknownStrategyError) as refused:
        pacer_spark.attach(session(), **{keyword: "nope"})
    message = str(refused.value)
    assert message.startswith(f"{keyword}=... (conf {CONF_PREFIX}{conf}): unknown {decision} strategy 'nope'"), message
    assert "nstalled" in message  # the strategies it could be
    with pytest.raises(UnknownStrategyError, match=rf"^{keyword}=\.\.\. \(conf {re.escape(CONF_PREFIX + conf)}\)"):
        pacer_spark.attach(session(**{CONF_PREFIX + conf: "nope"}))
    assert not attached


def test_the_readme_lists_attachs_keywords_and_quotes_its_error() -> None:
    from pathlib import Path

    readme = " ".join((Path(__file__).resolve().parents[1] / "README.md").read_text().split())
    listed = re.search(r"`attach\(spark, \*, (.*?)\)` \(keyword-only", readme)
    assert listed is not None and tuple(listed.group(1).split(", ")) == KEYWORDS
    quoted = re.search(r"naming the setting, the value and what it takes \(`(.*?)`\)", readme)
    assert quoted is not None
    with pytest.raises(ValueError) as refused:
        from_conf("fallback", "yes")
    assert str(refused.value) == quoted.group(1)


def test_spark_dynamic_takes_its_bounds_from_spark_s_dynamic_allocation() -> None:
    """``scale="spark-dynamic"`` hands the executors to Spark: with no ``executors`` its bounds are
    ``spark.dynamicAllocation.min/maxExecutors`` (the Deploying page's example; it was refused, asking for bounds);
    a pacer scaler still needs its own."""
    assert PacerConfig(scale="spark-dynamic").executors is None
    with pytest.raises(ValueError, match="scale='deadline' changes the executors: give their bounds"):
        PacerConfig(scale="deadline")
    confs = {"spark.dynamicAllocation.minExecutors": "2", "spark.dynamicAllocation.maxExecutors": "6"}
    assert runtime._allocation_bounds(session(**confs)) == (2, 6)
    assert runtime._allocation_bounds(session()) == (1, executor_requests.NO_MAX_EXECUTORS)
