"""A :class:`~pacer_spark.runtime.PacerSession`'s configuration: one frozen dataclass, and the ``spark.pacer.*`` confs.

Every :func:`~pacer_spark.attach` keyword is a field of :class:`PacerConfig`; :meth:`PacerConfig.from_spark`
builds one from those keywords, reading each one left out from the session's ``spark.pacer.*`` confs
(see the field's ``conf`` below), then the field's default. Every value, conf or keyword, is read by its field's
reader, which refuses a bad one naming the setting, the value and what it takes: a duration by pacer's one duration
parser (:func:`~pacer_spark.options.parse_seconds`: ``"60s"``, ``"500ms"``, ``"2min"``, ``"60"``, Spark's
``"1 minute"``), a boolean as Spark reads one (``true``/``false``), a count as a whole number, ``overload`` as one of
its choices.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from pyspark.sql import SparkSession

from pacer.durations import EXAMPLES as DURATION_EXAMPLES
from pacer.durations import parse_boolean
from pacer.engine_profile import EngineProfile, EngineProfileError
from pacer.engine_profile import load as load_engine_profile
from pacer.plugins import PluginManager
from pacer.runtime_api import (
    DEADLINE_ADMISSION,
    DEFAULT_ADMISSION,
    DEFAULT_OVERLOAD,
    OVERLOAD_CHOICES,
    default_admission,
    executor_bounds,
)
from pacer_spark.options import parse_seconds

#: Seconds a sink-done batch waits for its progress event before it is completed without one.
DEFAULT_PROGRESS_TIMEOUT_S = 10.0

#: The prefix of every pacer conf of a SparkSession.
CONF_PREFIX = "spark.pacer."

#: Spark's conf switching its no-data batches, read when a query starts. pacer keeps Spark's default (on) and counts
#: them in each query's ``cost.no_data`` (pacer-spark's README, "Spark's no-data batches", says why).
NO_DATA_BATCHES_CONF = "spark.sql.streaming.noDataMicroBatches.enabled"


def no_data_batches_enabled(spark: SparkSession) -> bool:
    """Whether a query started on ``spark`` now runs Spark's no-data batches (its session conf; Spark's default: on)."""
    return str(spark.conf.get(NO_DATA_BATCHES_CONF, "true")).strip().lower() != "false"


def _is_set(value: Any) -> bool:
    """An :func:`~pacer_spark.attach` keyword counts as given when truthy (0, "" and {} read the conf)."""
    return bool(value)


def _not_none(value: Any) -> bool:
    """A keyword whose falsy values mean something (``fallback=False``, ``gpus=0``) counts as given unless None."""
    return value is not None


#: A setting's reader: ``(value, setting)`` -> the value the field holds; ``setting`` is where the value was given
#: (the keyword, or the conf ``spark.pacer.<key>``), which an error names with the value and what is allowed.
Reader = Callable[[Any, str], Any]


def _object(value: Any, setting: str) -> Any:
    """A value taken as given (a plugin manager)."""
    return value


def _text(value: Any, setting: str) -> Any:
    """A strategy's name, as given (attach checks it against the installed strategies, naming the setting)."""
    return value if value is None else str(value)


def _whole(low: int) -> Reader:
    """A whole number >= ``low`` (an int, or its digits as a string) -> an int."""

    def read(value: Any, setting: str) -> int:
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            number = int(str(value).strip()) if isinstance(value, str) else int(value)
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or number < low:
            raise ValueError(f"{setting} expects a whole number >= {low}, got {value!r}")
        return number

    return read


def _choice(*allowed: str) -> Reader:
    """One of ``allowed`` (any case) -> its lower-case spelling."""

    def read(value: Any, setting: str) -> str:
        word = str(value).strip().lower()
        if word not in allowed:
            raise ValueError(f"{setting} must be one of {', '.join(allowed)}, got {value!r}")
        return word

    return read


def _bounds(value: Any, setting: str) -> tuple[int, int]:
    """``"MIN:MAX"``, one count or a ``(min, max)`` pair -> ``(min, max)`` (:func:`~pacer.runtime_api.executor_bounds`,
    naming ``setting``)."""
    return executor_bounds(value, setting=setting)


def _seconds(value: Any, setting: str) -> float | None:
    """A duration given for ``setting`` (a conf or a keyword) -> seconds, None staying None, read by
    :func:`~pacer_spark.options.parse_seconds` as every pacer duration is (Spark's wording too: ``"1 minute"``).

    A value that is no finite duration, or is not > 0 (no deadline, timeout or period of pacer's means anything at
    0 or below), raises a ``ValueError`` naming ``setting``, the value and what to write instead.
    """
    seconds = parse_seconds(value, setting)
    if seconds is not None and not seconds > 0:
        raise ValueError(f"{setting} must be > 0 seconds, got {value!r}; write a duration such as "
                         f"{DURATION_EXAMPLES}, or leave it out for its default")
    return seconds


def _engine_profile(value: Any, setting: str) -> EngineProfile:
    """An engine profile as given: an :class:`~pacer.engine_profile.EngineProfile`, or the path of its file (a file
    that cannot be read as one raises, naming ``setting``, the file and what to do)."""
    if isinstance(value, EngineProfile):
        return value
    try:
        return load_engine_profile(str(value))
    except EngineProfileError as exc:
        raise ValueError(f"{setting}: {exc}") from None


def _path(value: Any, setting: str) -> str:
    """A folder's path (a string or a path) -> a string."""
    try:
        return os.fspath(value) if isinstance(value, str) else str(os.fspath(value))
    except TypeError:
        raise ValueError(f"{setting} expects a folder's path, got {value!r}") from None


@dataclass(frozen=True)
class _Conf:
    """Where a :class:`PacerConfig` field comes from when :func:`~pacer_spark.attach` leaves it out, and how a value
    of it is read, however given.

    :ivar key: the conf's name after ``spark.pacer.`` ("": the field has no conf, only its keyword).
    :ivar reader: reads a value given for the field (the conf's string, a keyword's value, a value a config was built
        with by hand), naming where it was given in an error: :class:`PacerConfig` applies it to every field that has
        one, so a config built by hand is checked as one built from keywords.
    :ivar given: whether a keyword's value counts as given (else the conf is read).
    """

    key: str
    reader: Reader = _text
    given: Callable[[Any], bool] = _not_none

    def read(self, spark: SparkSession) -> Any:
        """The field's value from the session's conf (None: not set there, the field's default applies)."""
        if not self.key:
            return None
        value = conf(spark, self.key)
        return None if value is None else self.reader(value, CONF_PREFIX + self.key)


def _conf(key: str, reader: Reader = _text, given: Callable[[Any], bool] = _not_none) -> dict[str, _Conf]:
    """Field metadata: the field reads ``spark.pacer.<key>`` (none for ``key=""``) with ``reader`` when left out."""
    return {"conf": _Conf(key, reader, given)}


def _mapping(value: Any, setting: str) -> Mapping[str, Any]:
    """Strategy parameters: a mapping of their names to values."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{setting} expects a mapping of parameter names to values, got {value!r}")
    return value


@dataclass(frozen=True)
class _ParamsConf(_Conf):
    """The strategy parameters of one decision: the confs ``spark.pacer.param.<decision>.<name>``."""

    decision: str = ""

    def read(self, spark: SparkSession) -> Any:
        return conf_params(spark, self.decision)


def _params(decision: str) -> dict[str, _Conf]:
    """Field metadata: the strategy parameters ``spark.pacer.param.<decision>.<name>``."""
    return {"conf": _ParamsConf(f"param.{decision}.<name>", _mapping, _is_set, decision)}


def conf(spark: SparkSession, key: str, default: str | None = None) -> str | None:
    """The conf ``spark.pacer.<key>`` of ``spark`` (``default`` when it is not set or empty)."""
    value = spark.conf.get(CONF_PREFIX + key, None)
    return default if value in (None, "") else str(value)


def conf_params(spark: SparkSession, decision: str) -> dict[str, str]:
    """The strategy parameters ``spark.pacer.param.<decision>.<name>`` of ``spark``'s context, by name."""
    prefix = f"{CONF_PREFIX}param.{decision}."
    try:
        items = spark.sparkContext.getConf().getAll()
    except Exception:  # pragma: no cover
        items = []
    return {k[len(prefix):]: v for k, v in items if k.startswith(prefix)}


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class PacerConfig:
    """Everything a :class:`~pacer_spark.runtime.PacerSession` is built with (:func:`~pacer_spark.attach`'s keywords).

    :ivar admission: the default admission strategy of a registered query (conf ``admission``); left out, it is
        :data:`DEADLINE_ADMISSION` where a deadline is stated (pacer meets it with the fewest batches), else
        ``asap`` (Spark's default trigger).
    :ivar admission_source: how :attr:`admission` was chosen: ``given`` (a keyword or conf), ``deadline default``
        or ``default``.
    :ivar scheduler: the scheduling strategy (conf ``scheduler``).
    :ivar placement: the default placement strategy of a registered query (conf ``placement``).
    :ivar deadline: seconds (``"10s"`` given to :meth:`from_spark` is parsed); None: each window's slide
        (conf ``deadline``).
    :ivar fallback: a raising strategy falls back to its baseline (conf ``fallback``).
    :ivar admission_params: default admission parameters (confs ``param.admission.<name>``); likewise
        ``scheduler_params`` and ``placement_params``.
    :ivar cores: the cores the Controller plans for; None: Spark's default parallelism (conf ``cores``).
    :ivar gpus: the GPUs it plans for; None: 1 with RAPIDS loaded, else 0 (conf ``gpus``).
    :ivar concurrency: batches of an ordered schedule (FIFO/EDF) running at once (conf ``gate.concurrency``).
    :ivar gate_timeout: seconds a batch waits for its turn at most (conf ``gate.timeout``; ``"60s"`` is parsed).
    :ivar decide_timeout: seconds a ``format("pacer")`` source waits for the driver's answer at most
        (conf ``decide.timeout``; None: the gate's timeout + 30 s, since an answer waits for its turn).
        Past it the source admits what is pending without an answer, as plain Spark would, and reports
        that admission with its next request, so the accounting stays exact.
    :ivar operator_metrics: read per-operator metrics from each batch's executed plan.
    :ivar plugin_manager: where strategies come from; None: every installed plugin.
    :ivar checkpoint_root: where queries keep checkpoints and manifests; None: a temporary folder.
    :ivar overload: ``keep`` or ``shed`` (conf ``overload``).
    :ivar paced: pace every ``format("pacer")`` query of the session (builds and loads the JVM source).
    :ivar progress_timeout: seconds after a sink's end when a batch without a progress event is completed.
    :ivar scale: the scaling strategy: ``fixed`` (the default: the executors stay), ``deadline`` (pacer-scaler),
        ``spark-dynamic`` (Spark's dynamic allocation); conf ``scale``, its parameters ``param.scale.<name>``.
    :ivar executors: ``(min, max)`` executors a scaler may hold (``"1:3"`` as a conf, ``scale.executors``).
    :ivar initial_executors: executors at the start (conf ``scale.initial``; None: those Spark runs at attach, within
        the bounds: a restart with a backlog keeps them until the strategy decides).
    :ivar scale_every: seconds between scaling decisions (conf ``scale.every``; ``"5s"`` is parsed).
    :ivar scale_recommend_only: ask the scaling strategy and report what it would hold, enacting nothing (conf
        ``scale.recommendOnly``): a first step, beside Spark's dynamic allocation or fixed executors.
    :ivar engine_profile: what this engine measured the session's queries to cost (``pacer calibrate --runtime
        spark``; conf ``engineProfile``, the file's path): each query of its workload starts its service-time model
        from it, and the scaler reads it until the query measured its own costs.
    :raises ValueError: for a value its field does not take (a duration that is not a finite number of seconds > 0,
        a boolean that is not one, a count that is no whole number in range, an overload that is neither ``keep`` nor
        ``shed``), naming the field, the value and what it takes.
    """

    admission: str = field(default=DEFAULT_ADMISSION, metadata=_conf("admission", given=_is_set))
    admission_source: str = "given"
    scheduler: str = field(default="fifo", metadata=_conf("scheduler", given=_is_set))
    placement: str = field(default="cpu-only", metadata=_conf("placement", given=_is_set))
    deadline: float | None = field(default=None, metadata=_conf("deadline", _seconds))
    fallback: bool = field(default=True, metadata=_conf("fallback", parse_boolean))
    admission_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("admission"))
    scheduler_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("scheduler"))
    placement_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("placement"))
    cores: int | None = field(default=None, metadata=_conf("cores", _whole(1), _is_set))
    gpus: int | None = field(default=None, metadata=_conf("gpus", _whole(0)))
    concurrency: int = field(default=1, metadata=_conf("gate.concurrency", _whole(1), _is_set))
    gate_timeout: float = field(default=60.0, metadata=_conf("gate.timeout", _seconds))
    decide_timeout: float | None = field(default=None, metadata=_conf("decide.timeout", _seconds))
    operator_metrics: bool = field(default=True, metadata=_conf("", parse_boolean))
    plugin_manager: PluginManager | None = field(default=None, metadata=_conf("", _object))
    checkpoint_root: str | None = field(default=None, metadata=_conf("", _path))
    overload: str = field(default=DEFAULT_OVERLOAD, metadata=_conf("overload", _choice(*OVERLOAD_CHOICES), _is_set))
    paced: bool = field(default=True, metadata=_conf("", parse_boolean))
    progress_timeout: float = field(default=DEFAULT_PROGRESS_TIMEOUT_S, metadata=_conf("", _seconds))
    scale: str = field(default="fixed", metadata=_conf("scale", given=_is_set))
    scale_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("scale"))
    executors: tuple[int, int] | None = field(default=None, metadata=_conf("scale.executors", _bounds))
    initial_executors: int | None = field(default=None, metadata=_conf("scale.initial", _whole(0)))
    scale_every: float = field(default=5.0, metadata=_conf("scale.every", _seconds))
    scale_recommend_only: bool = field(default=False, metadata=_conf("scale.recommendOnly", parse_boolean))
    engine_profile: EngineProfile | None = field(default=None, metadata=_conf("engineProfile", _engine_profile))

    def __post_init__(self) -> None:
        for f in fields(self):  # every value, however given, read as its keyword's (a bad one raises naming it)
            source: _Conf | None = f.metadata.get("conf")
            value = getattr(self, f.name)
            if source is not None and value is not None:
                object.__setattr__(self, f.name, source.reader(value, f.name))
        for name in ("admission_params", "scheduler_params", "placement_params", "scale_params"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        if self.scale not in ("fixed", "spark-dynamic") and self.executors is None:  # spark-dynamic: Spark's bounds
            raise ValueError(f"scale={self.scale!r} changes the executors: give their bounds, executors=(min, max) "
                             "(conf spark.pacer.scale.executors=MIN:MAX)")
        if self.executors is not None:
            executor_bounds(self.executors, self.initial_executors, setting="spark.pacer.scale.executors")

    @property
    def decide_timeout_s(self) -> float:
        """:attr:`decide_timeout`, or the gate's timeout + 30 s when unset (an answer waits for its turn)."""
        return self.decide_timeout if self.decide_timeout is not None else self.gate_timeout + 30.0

    @classmethod
    def from_spark(cls, spark: SparkSession, **options: Any) -> PacerConfig:
        """The configuration of ``options`` (:func:`~pacer_spark.attach`'s keywords), each one left out (None)
        read from ``spark``'s ``spark.pacer.*`` confs, then defaulted.

        :raises TypeError: for a keyword that is not a field.
        :raises ValueError: for a malformed conf or keyword, naming it, its value and what it takes.
        """
        known = {f.name: f for f in fields(cls) if f.name in KEYWORDS}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                            f"pacer_spark.attach takes {', '.join(known)}")
        values: dict[str, Any] = {}
        for name, f in known.items():
            source: _Conf = f.metadata["conf"]
            value = options.get(name)
            if source.given(value):
                values[name] = source.reader(value, name)
            elif (read := source.read(spark)) is not None:
                values[name] = read
        if "admission" not in values:
            stated = values.get("deadline") is not None
            values["admission"] = default_admission(stated)
            values["admission_source"] = "deadline default" if stated else "default"
        return cls(**values)

    def strategies(self) -> dict[str, str]:
        """Decision -> the strategy it names: ``admission``, ``scheduling``, ``placement``, ``scaling``."""
        return {"admission": self.admission, "scheduling": self.scheduler, "placement": self.placement,
                "scaling": self.scale}


#: :func:`~pacer_spark.attach`'s keywords: every field of :class:`PacerConfig` but how its admission was chosen, in
#: order (attach's signature lists exactly these).
KEYWORDS = tuple(f.name for f in fields(PacerConfig) if "conf" in f.metadata)


def setting_names(keyword: str) -> str:
    """How a user gives a :class:`PacerConfig` field: ``"scale=... (conf spark.pacer.scale)"``, for errors."""
    source: _Conf | None = next((f.metadata.get("conf") for f in fields(PacerConfig) if f.name == keyword), None)
    if source is None or not source.key:
        return f"{keyword}=..."
    return f"{keyword}=... (conf {CONF_PREFIX}{source.key})"


__all__ = ["CONF_PREFIX", "DEADLINE_ADMISSION", "KEYWORDS", "PacerConfig", "conf", "conf_params", "setting_names"]
