"""A :class:`~pacer_spark.runtime.PacerSession`'s configuration: one frozen dataclass, and the ``spark.pacer.*`` confs.

Every :func:`~pacer_spark.attach` keyword is a field of :class:`PacerConfig`; :meth:`PacerConfig.from_spark`
builds one from those keywords, reading each one left out from the session's ``spark.pacer.*`` confs
(see the field's ``conf`` below), then the field's default. Every duration, conf or keyword, is read by pacer's one
duration parser (:func:`~pacer_spark.options.parse_seconds`: ``"60s"``, ``"500ms"``, ``"2min"``, ``"60"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from pyspark.sql import SparkSession

from pacer.durations import EXAMPLES as DURATION_EXAMPLES
from pacer.engine_profile import EngineProfile, EngineProfileError
from pacer.engine_profile import load as load_engine_profile
from pacer.plugins import PluginManager
from pacer.runtime_api import executor_bounds
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


def _as_given(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Conf:
    """Where a :class:`PacerConfig` field comes from when :func:`~pacer_spark.attach` leaves it out.

    :ivar read: the field's value from the session (None: not set there, the field's default applies).
    :ivar given: whether a keyword's value counts as given (else the conf is read).
    :ivar parse: applied to a given keyword's value.
    :ivar key: the conf's name after ``spark.pacer.`` (for the documentation).
    :ivar duration: the field holds a duration in seconds, > 0: :class:`PacerConfig` reads it with ``parse`` however
        it was built (a config built by hand is checked as one built from keywords).
    """

    read: Callable[[SparkSession], Any]
    given: Callable[[Any], bool] = _is_set
    parse: Callable[[Any], Any] = _as_given
    key: str = ""
    duration: bool = False


def _conf(key: str, parse: Callable[[str], Any] = str, given: Callable[[Any], bool] = _is_set,
          parse_given: Callable[[Any], Any] = _as_given) -> dict[str, _Conf]:
    """Field metadata: the field reads ``spark.pacer.<key>`` (parsed with ``parse``) when left out."""

    def read(spark: SparkSession) -> Any:
        value = conf(spark, key)
        return None if value is None else parse(value)

    return {"conf": _Conf(read, given, parse_given, key)}


def _seconds(option: str) -> Callable[[Any], float | None]:
    """A duration given for ``option`` (a conf or a keyword) -> seconds, None staying None, read by
    :func:`~pacer_spark.options.parse_seconds` as every pacer duration is.

    A value that is no finite duration, or is not > 0 (no deadline, timeout or period of pacer's means anything at
    0 or below), raises a ``ValueError`` naming ``option``, the value and what to write instead.
    """

    def parse(value: Any) -> float | None:
        seconds = parse_seconds(value, option)
        if seconds is not None and not seconds > 0:
            raise ValueError(f"{option} must be > 0 seconds, got {value!r}; write a duration such as "
                             f"{DURATION_EXAMPLES}, or leave it out for its default")
        return seconds

    return parse


def _no_conf(spark: SparkSession) -> None:
    """The session's value of a keyword that has no ``spark.pacer.*`` conf: none (the field's default applies)."""
    return None


def _duration_conf(key: str, keyword: str) -> dict[str, _Conf]:
    """Field metadata of a duration > 0 in seconds: the conf ``spark.pacer.<key>`` (none for ``key=""``) or the
    :func:`~pacer_spark.attach` ``keyword``, each ``"10s"``, ``"500ms"``, ``"2min"`` or a number of seconds, read
    by :func:`_seconds` naming where it was given; None counts as left out."""
    read = _conf(key, _seconds(CONF_PREFIX + key))["conf"].read if key else _no_conf
    return {"conf": _Conf(read, _not_none, _seconds(keyword), key, duration=True)}


#: The admission a stated deadline gets when none is named: zStream forms a batch when its predicted completion
#: reaches the deadline, taking the data that still meets it (the fewest, largest batches that keep the target).
DEADLINE_ADMISSION = "zstream"


def _engine_profile(setting: str) -> Callable[[Any], EngineProfile]:
    """An engine profile as given: an :class:`~pacer.engine_profile.EngineProfile`, or the path of its file (a file
    that cannot be read as one raises, naming ``setting``, the file and what to do)."""

    def parse(value: Any) -> EngineProfile:
        if isinstance(value, EngineProfile):
            return value
        try:
            return load_engine_profile(str(value))
        except EngineProfileError as exc:
            raise ValueError(f"{setting}: {exc}") from None

    return parse


def _params(decision: str) -> dict[str, _Conf]:
    """Field metadata: the strategy parameters ``spark.pacer.param.<decision>.<name>``."""
    return {"conf": _Conf(lambda spark: conf_params(spark, decision), key=f"param.{decision}.<name>")}


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
    :raises ValueError: for a duration (deadline, timeout, ``scale_every``) that is not a finite number of seconds
        > 0, or a concurrency < 1.
    """

    admission: str = field(default="asap", metadata=_conf("admission"))
    admission_source: str = "given"
    scheduler: str = field(default="fifo", metadata=_conf("scheduler"))
    placement: str = field(default="cpu-only", metadata=_conf("placement"))
    deadline: float | None = field(default=None, metadata=_duration_conf("deadline", "deadline"))
    fallback: bool = field(default=True, metadata=_conf("fallback", lambda v: v.lower() == "true", _not_none))
    admission_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("admission"))
    scheduler_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("scheduler"))
    placement_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("placement"))
    cores: int | None = field(default=None, metadata=_conf("cores", int))
    gpus: int | None = field(default=None, metadata=_conf("gpus", int, _not_none))
    concurrency: int = field(default=1, metadata=_conf("gate.concurrency", int))
    gate_timeout: float = field(default=60.0, metadata=_duration_conf("gate.timeout", "gate_timeout"))
    decide_timeout: float | None = field(default=None, metadata=_duration_conf("decide.timeout", "decide_timeout"))
    operator_metrics: bool = True
    plugin_manager: PluginManager | None = None
    checkpoint_root: str | None = None
    overload: str = field(default="keep", metadata=_conf("overload"))
    paced: bool = True
    progress_timeout: float = field(default=DEFAULT_PROGRESS_TIMEOUT_S,
                                    metadata=_duration_conf("", "progress_timeout"))
    scale: str = field(default="fixed", metadata=_conf("scale"))
    scale_params: Mapping[str, Any] = field(default_factory=_empty, metadata=_params("scale"))
    executors: tuple[int, int] | None = field(default=None, metadata=_conf("scale.executors", executor_bounds,
                                                                         _not_none, executor_bounds))
    initial_executors: int | None = field(default=None, metadata=_conf("scale.initial", int, _not_none))
    scale_every: float = field(default=5.0, metadata=_duration_conf("scale.every", "scale_every"))
    scale_recommend_only: bool = field(default=False, metadata=_conf("scale.recommendOnly",
                                                                     lambda v: v.lower() == "true", _not_none))
    engine_profile: EngineProfile | None = field(default=None, metadata=_conf(
        "engineProfile", _engine_profile(CONF_PREFIX + "engineProfile"), _not_none, _engine_profile("engine_profile")))

    def __post_init__(self) -> None:
        for name in ("admission_params", "scheduler_params", "placement_params", "scale_params"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        for f in fields(self):  # every duration, however given: seconds > 0 (a bad one raises naming the keyword)
            source: _Conf | None = f.metadata.get("conf")
            if source is not None and source.duration:
                object.__setattr__(self, f.name, source.parse(getattr(self, f.name)))
        if self.concurrency < 1:
            raise ValueError(f"gate concurrency must be >= 1, got {self.concurrency}")
        if self.scale != "fixed" and self.executors is None:
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
        :raises ValueError: for a malformed conf or keyword (naming it), a duration <= 0 or a concurrency < 1.
        """
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {', '.join(map(repr, unknown))}; "
                            f"pacer_spark.attach takes {', '.join(known)}")
        values: dict[str, Any] = {}
        for name, f in known.items():
            source: _Conf | None = f.metadata.get("conf")
            value = options.get(name)
            if source is None:
                if name in options:
                    values[name] = value
            elif source.given(value):
                values[name] = source.parse(value)
            elif (read := source.read(spark)) is not None:
                values[name] = read
        if "admission" not in values:
            stated = values.get("deadline") is not None
            values["admission"] = DEADLINE_ADMISSION if stated else "asap"
            values["admission_source"] = "deadline default" if stated else "default"
        return cls(**values)

    def strategies(self) -> dict[str, str]:
        """Decision -> the strategy it names: ``admission``, ``scheduling``, ``placement``, ``scaling``."""
        return {"admission": self.admission, "scheduling": self.scheduler, "placement": self.placement,
                "scaling": self.scale}


__all__ = ["CONF_PREFIX", "DEADLINE_ADMISSION", "PacerConfig", "conf", "conf_params"]
