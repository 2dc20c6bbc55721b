"""The ``pacer.report/1`` document as types: what ``PacerSession.report()``, ``Simulation.run`` and ``pacer run``'s
``--report`` give.

:class:`Report` is the document itself, a ``dict`` (``report["queries"]["q"]["latency_ms"]["p99"]`` and
``json.dump(report, f)`` work as before) with typed views: :attr:`Report.version`, :attr:`Report.queries`,
:meth:`Report.query`, :meth:`Report.to_json`, :meth:`Report.as_dict`. The ``TypedDict`` classes name its keys for a
type checker (``report.typed()``), and :mod:`pacer.report` says what each figure means.

Versioning: ``schema`` is ``"pacer.report/<version>"``. Within a version keys are only ever added (a reader ignores
the ones it does not know); a key removed or a meaning changed makes a new version. :data:`SCHEMA_VERSION` is the
version this pacer writes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict, cast

#: The report format's name, before its version.
SCHEMA_NAME = "pacer.report"
#: The version of the format this pacer writes (``schema`` = ``pacer.report/1``).
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"


class LatencyMs(TypedDict):
    """A query's latency from its data's arrival to its batch's end, milliseconds."""

    avg: float
    p50: float
    p95: float
    p99: float
    max: float


class SeriesRow(TypedDict, total=False):
    """One interval of a query's ``series`` (``t``, ``max_latency_ms`` and ``batch_bytes`` always; more figures)."""

    t: float
    max_latency_ms: float
    batch_bytes: float


class QueryCost(TypedDict, total=False):
    """What a query's batches cost: ``busy_core_s`` (core-seconds its tasks executed; None: not measured),
    ``trigger_s``, ``gate_wait_s``, ``engine_s`` (seconds), ``cpu_core_s``, ``failed_core_s``, ``no_data``."""

    busy_core_s: float | None
    busy_batches: int
    cpu_core_s: float | None
    failed_core_s: float | None
    no_data: dict[str, Any]
    trigger_s: float
    gate_wait_s: float
    engine_s: float
    engine_share: float
    batches_per_min: float


class QueryOverload(TypedDict, total=False):
    """When no batch size could serve a query's load within its deadline."""

    overloaded_s: float
    episodes: int
    shed: int
    periods: list[dict[str, float]]


class QueryReport(TypedDict, total=False):
    """One query of a report (``report["queries"][query_id]``); :data:`pacer.report.REQUIRED_QUERY_KEYS` are always
    there."""

    workload: str | None
    admission: str
    placement: str
    latency_ms: LatencyMs
    latency_quantiles_ms: list[float]
    processing_ms: dict[str, float]
    throughput_rows_per_s: float
    throughput_bytes_per_s: float
    processing_throughput_bytes_per_s: float
    batches: int
    datasets_in: int
    datasets_processed: int
    datasets_shed: int
    datasets_pending: int
    rows_in: int
    rows_processed: int
    bytes_in: int
    bytes_processed: int
    deadline_ms: float
    deadline_miss_ratio: float
    deadline_miss_ratio_rows: float
    deadline_miss_ratio_datasets: float
    miss_rows: int
    miss_datasets: int
    cost: QueryCost
    overload: QueryOverload
    arrival: str
    catch_up_s: float
    catch_up_rows: int
    catch_up_episodes: int
    service_time: Any
    gpu_operator_ratio: float
    strategy_fallbacks: Any
    series: list[SeriesRow]
    series_interval_s: float


class Overhead(TypedDict, total=False):
    """pacer's own cost (:func:`pacer.report.overhead_summary`; Spark's session adds its RPC figures)."""

    measured: bool
    admission_polls: int
    admission_poll_us_p99: float | None
    admission_poll_us_avg: float | None
    per_batch_ms_avg: float | None
    per_batch_share_of_processing: float | None


class ReportDocument(TypedDict, total=False):
    """A whole ``pacer.report/1`` document. ``schema``, ``runtime``, ``config``, ``overhead`` and ``queries`` are always
    there; a runtime adds its own parts (Spark: ``spark``, and ``scaling`` where pacer scales executors; ``pacer run``
    on Kafka: ``kafka``; an interrupted run: ``interrupted``; the simulator: ``simulated``, ``events``, ``drained``)."""

    schema: str
    runtime: str
    config: dict[str, Any]
    duration_s: float
    scheduler: str
    cores: int
    overhead: Overhead
    queries: dict[str, QueryReport]
    cost: dict[str, float | None]
    spark: dict[str, Any]
    scaling: dict[str, Any]
    kafka: dict[str, Any]
    interrupted: bool
    machine: Any
    simulated: bool
    events: int
    drained: bool


def schema_version(schema: object) -> int:
    """The version of a ``pacer.report/<version>`` schema string.

    :raises ValueError: ``schema`` names another format, or no whole version."""
    name, _, version = str(schema).rpartition("/")
    if name != SCHEMA_NAME or not version.isdigit():
        raise ValueError(f"not a {SCHEMA_NAME}/<version> schema: {schema!r}")
    return int(version)


class Report(dict[str, Any]):
    """A ``pacer.report/1`` document: a plain ``dict`` to every existing reader, with typed views.

    Made from the document (``Report(document)``) or read from JSON (:meth:`from_json`, :meth:`load`).
    """

    @property
    def schema(self) -> str:
        """``"pacer.report/1"``."""
        return str(self["schema"])

    @property
    def version(self) -> int:
        """The format's version (1: :data:`SCHEMA_VERSION`)."""
        return schema_version(self.get("schema"))

    @property
    def runtime(self) -> str:
        """``"spark"`` or ``"sim"``."""
        return str(self["runtime"])

    @property
    def queries(self) -> dict[str, QueryReport]:
        """Every query's part, by query id."""
        return cast(dict[str, QueryReport], self["queries"])

    def query(self, query_id: str) -> QueryReport:
        """One query's part.

        :raises KeyError: naming the queries the report has."""
        try:
            return self.queries[query_id]
        except KeyError:
            raise KeyError(f"no query {query_id!r} in this report; it has {sorted(self.queries)}") from None

    def typed(self) -> ReportDocument:
        """The document as a :class:`ReportDocument`, for a type checker (the same object)."""
        return cast(ReportDocument, self)

    def as_dict(self) -> dict[str, Any]:
        """A plain ``dict`` copy, its nested parts copied too (JSON's types only)."""
        return cast(dict[str, Any], json.loads(json.dumps(self)))

    def to_json(self, *, indent: int | None = 2) -> str:
        """The document as JSON, keys sorted (as ``pacer run --report`` writes it, with ``indent=2``)."""
        return json.dumps(self, indent=indent, sort_keys=True) + ("\n" if indent is not None else "")

    @classmethod
    def from_json(cls, text: str) -> Report:
        """Read a report's JSON.

        :raises ValueError: the JSON is not a ``pacer.report`` document, or of a later version than this pacer's."""
        data = json.loads(text)
        if not isinstance(data, Mapping):
            raise ValueError(f"not a {SCHEMA_NAME} document: a JSON {type(data).__name__}")
        version = schema_version(data.get("schema"))
        if version > SCHEMA_VERSION:
            raise ValueError(f"a {SCHEMA_NAME}/{version} report, newer than this pacer reads "
                             f"({SCHEMA}): upgrade pacer-core")
        return cls(data)

    @classmethod
    def load(cls, path: str | Path) -> Report:
        """Read a report file (``pacer run --report``'s)."""
        return cls.from_json(Path(path).read_text())


__all__ = ["SCHEMA", "SCHEMA_NAME", "SCHEMA_VERSION", "LatencyMs", "Overhead", "QueryCost", "QueryOverload",
           "QueryReport", "Report", "ReportDocument", "SeriesRow", "schema_version"]
