"""Every ``spark.pacer.*`` duration conf and :func:`~pacer_spark.attach` duration keyword is read by pacer's one
duration parser, as Spark reads its own durations (``60s``, ``500ms``, plain seconds), and a value that is no finite
duration > 0 is refused naming the setting, the value and what to write instead. No Spark is started: a stand-in
session answers :meth:`~pacer_spark.config.PacerConfig.from_spark`'s reads of its confs."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from pacer_spark.config import CONF_PREFIX, PacerConfig

#: The duration confs after ``spark.pacer.`` and the PacerConfig field (the attach keyword) each one sets.
DURATION_CONFS = {"gate.timeout": "gate_timeout", "scale.every": "scale_every"}
#: Values that are no duration > 0: not finite, negative, zero, not a number.
BAD = ("inf", "-1", "0", "abc", "nan", "1e999")


def session(**confs: str) -> Any:
    """A stand-in SparkSession holding ``confs`` (keys after ``spark.pacer.``), as from_spark reads one."""
    held = {CONF_PREFIX + key.replace("_", "."): value for key, value in confs.items()}
    return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: held.get(key, default)),
                           sparkContext=SimpleNamespace(getConf=lambda: SimpleNamespace(getAll=lambda: held.items())))


def from_conf(key: str, value: str) -> PacerConfig:
    """The config of a session whose conf ``spark.pacer.<key>`` is ``value``, no keyword given."""
    return PacerConfig.from_spark(session(**{key.replace(".", "_"): value}))


@pytest.mark.parametrize("key", DURATION_CONFS)
def test_a_duration_conf_is_read_as_seconds_with_or_without_a_unit(key: str) -> None:
    name = DURATION_CONFS[key]
    read = {value: getattr(from_conf(key, value), name) for value in ("5s", "500ms", "60", "2min", " 1.5 h ")}
    assert read == {"5s": 5.0, "500ms": 0.5, "60": 60.0, "2min": 120.0, " 1.5 h ": 5400.0}
    assert all(type(seconds) is float for seconds in read.values())


@pytest.mark.parametrize("key", DURATION_CONFS)
@pytest.mark.parametrize("value", BAD)
def test_a_duration_conf_that_is_no_duration_above_zero_is_refused_naming_the_conf(key: str, value: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"{CONF_PREFIX}{key} ")) as refused:
        from_conf(key, value)
    message = str(refused.value)
    assert repr(value) in message and "such as 10s, 500ms" in message  # the value given, and what to write


def test_duration_keywords_given_as_strings_are_parsed_to_seconds() -> None:
    config = PacerConfig.from_spark(session(gate_timeout="90s", scale_every="1s"), gate_timeout="5s",
                                    scale_every="500ms", progress_timeout="2min", decide_timeout="45")
    assert (config.gate_timeout, config.scale_every, config.progress_timeout, config.decide_timeout) == \
        (5.0, 0.5, 120.0, 45.0)  # a keyword given wins over the conf
    assert type(config.gate_timeout) is float and type(config.scale_every) is float


@pytest.mark.parametrize("name", [*DURATION_CONFS.values(), "progress_timeout"])
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -1.0, 0, "-1s", "abc"])
def test_a_duration_keyword_that_is_no_duration_above_zero_is_refused_naming_the_keyword(name: str,
                                                                                        value: Any) -> None:
    with pytest.raises(ValueError, match=rf"^{name} ") as refused:
        PacerConfig.from_spark(session(), **{name: value})
    message = str(refused.value)
    assert f"got {value!r}" in message and "such as 10s, 500ms" in message  # the value given, and what to write


def test_a_config_built_by_hand_checks_its_durations_and_keeps_their_defaults() -> None:
    assert (PacerConfig().gate_timeout, PacerConfig().scale_every, PacerConfig().progress_timeout) == (60.0, 5.0, 10.0)
    for name in (*DURATION_CONFS.values(), "progress_timeout"):
        given: dict[str, Any] = {name: -1.0}
        with pytest.raises(ValueError, match=rf"^{name} must be > 0 seconds, got -1.0; write a duration such as"):
            PacerConfig(**given)


def test_the_durations_the_readme_shows_read_and_fail_as_it_says() -> None:
    """pacer-spark's README: the forms it lists are read, and the error it quotes is the one ``attach`` raises."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    paragraph = readme[readme.index("Every duration above"):]
    paragraph = " ".join(paragraph[:paragraph.index("\n\n")].split())
    forms = re.search(r"one parser: (.*?) or a number of seconds", paragraph)
    assert forms is not None
    assert {f: from_conf("gate.timeout", f).gate_timeout for f in re.findall(r"`([^`]+)`", forms.group(1))} == {
        "60s": 60.0, "500ms": 0.5, "2min": 120.0, "1.5h": 5400.0}
    quoted = re.search(r"naming the setting \(`(.*?)`\)", paragraph)
    assert quoted is not None
    with pytest.raises(ValueError) as refused:
        from_conf("gate.timeout", "inf")
    assert str(refused.value) == quoted.group(1)
