"""``pacer-gen`` and what every pacer source shares: thin streaming sources whose end offsets the driver's
Controller decides (``pacer-files`` is :mod:`pacer_spark.sources.files_source`).

Offsets are dataset indices (``{"index": n}``: datasets ``0 .. n-1`` are consumed).
``latestOffset(start, limit)`` asks the driver over the loopback RPC which end
offset to return (``start`` means "no batch now"); when the driver cannot be
reached, the reader admits everything available and warns once, so a stream never
stalls and never drops data. ``read(partition)`` rebuilds rows from the seed and
offsets (``pacer-gen``) or from the files named in the partition (``pacer-files``).
A reader that gives up waiting for an answer admits what is available when it gives up (``pacer-gen``: read
again then, so what arrived during the wait is in that batch, not in a second one), and for the client's
``retry_after`` (:class:`~pacer_spark.sources.rpc.ControllerClient`) asks no more: each batch with new data it
plans meanwhile is one more admission of its own, which the driver accounts from Spark's offset log.
Datasets the Controller shed inside an admitted offset range are named in its reply and recorded in
the batch's end offset (``{"index": n, "shed": [[lo, hi], ...]}``, half-open ranges), which Spark writes
to its offset log before the batch runs: ``partitions(start, end)`` skips exactly those, so a batch
Spark replays from its offset log after a crash skips the same rows its first attempt skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pacer_spark.compat import SupportsTriggerAvailableNow
from pacer_spark.gen_plan import GEN_FORMAT, GenPlan
from pacer_spark.options import OPT_QUERY, WIRING_OPTIONS
from pacer_spark.reader_offsets import offset_with_shed, shed_in
from pacer_spark.sources.rpc import ControllerClient, ControllerUnavailable

log = logging.getLogger("pacer_spark.sources.gen")


#: Options of every pacer source (the wiring :meth:`pacer_spark.PacerSession.read_stream` fills in).
_WIRING = WIRING_OPTIONS
GEN_OPTIONS = frozenset({"stream", "traffic", "rate", "duration", "seed", "start", "period", "numpartitions",
                         "partitions"})
_HINTS = {
    "rowspersecond": "pacer-gen's mean rate is option rate (rows/s); its shape is option traffic",
    "maxfilespertrigger": "the Controller decides how many files a batch takes; cap it with the query's max_rows/"
                          "max_bytes, or read Spark's own source through format('pacer'), which keeps this limit",
}


def check_options(source: str, options: Iterable[str], known: frozenset[str],
                  prefixes: tuple[str, ...] = ()) -> None:
    """Refuse an option the source would silently ignore, naming it and what to do.

    :raises ValueError: for every unknown option (case-insensitive, as Spark's options are).
    """
    wiring = {k.lower() for k in _WIRING}
    unknown = sorted(k for k in options
                     if k.lower() not in known | wiring and not k.lower().startswith(prefixes))
    if not unknown:
        return
    hints = "; ".join(f"{k}: {_HINTS[k.lower()]}" for k in unknown if k.lower() in _HINTS)
    raise ValueError(
        f"{source} does not honour option(s) {', '.join(repr(k) for k in unknown)}; it understands "
        f"{', '.join(sorted(known | set(p + '*' for p in prefixes)))}. "
        + (hints + ". " if hints else "")
        + "For Spark's own sources and all their options, read spark.readStream.format('pacer')"
        ".option('pacer.source', 'csv'|'json'|'parquet'|'kafka'|...)"
    )



class AdmissionAgent:
    """The reader's proxy to the driver's Controller, with the "admit all available" fallback."""

    def __init__(self, options: Mapping[str, str], source: str) -> None:
        self.source = source
        self.query_id = options.get(OPT_QUERY, "")
        self._warned = False
        self._last_rtt_s: float | None = None
        self._client = ControllerClient.from_options(options)  # the authkey file's path, or a key set by hand

    @property
    def wired(self) -> bool:
        """Whether the reader was given a driver to ask (the ``pacer.*`` options of ``read_stream``)."""
        return self._client is not None

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request to the driver (``query`` filled in).

        :raises ControllerUnavailable: when the driver cannot be reached (or the reader is not wired to one).
        :raises RuntimeError: when the driver answers with an error.
        """
        if self._client is None:
            raise ControllerUnavailable("the reader has no pacer session to ask (no pacer.* options)")
        reply = self._client.call({**request, "query": self.query_id})
        if "error" in reply:
            raise RuntimeError(f"pacer admission for query {self.query_id!r} failed: {reply['error']}")
        return reply

    def next_offset(self, start: Mapping[str, Any], available_end: int, new: Sequence[Mapping[str, Any]] = (),
                    until: int | None = None, *, fallback: Callable[[], int] | None = None) -> dict[str, Any]:
        """The end offset of the batch starting at offset ``start`` (``start`` itself: no batch now), with the
        datasets the Controller shed inside it recorded (:func:`offset_with_shed`), so a replay skips them too.

        :param fallback: one past the newest dataset available, read when the driver did not answer (default:
            ``available_end``, as it was when the reader asked); see :meth:`end_offset`.
        """
        begin = int(start["index"])
        end, shed = self._end_and_shed(begin, available_end, new, until, fallback)
        if end == begin:
            return dict(start)  # the very same offset: Spark sees no new data (a changed key would make a batch)
        return offset_with_shed(end, (i for i in shed if begin <= i < end))

    def end_offset(self, start: int, available_end: int, new: Sequence[Mapping[str, Any]] = (),
                   until: int | None = None, *, fallback: Callable[[], int] | None = None) -> int:
        """The end offset for a batch starting at ``start`` (what it shed: :meth:`next_offset`).

        :param available_end: one past the newest dataset available when the reader asks (the driver admits
            nothing past it).
        :param fallback: one past the newest dataset available, read when the driver did not answer: the answer
            then (default ``available_end``). A reader gives up only after its timeout; what arrived meanwhile
            goes into this admission of its own, instead of into a second one during its back-off.
        :param new: datasets the driver has not been told about yet (``pacer-files``).
        :param until: under ``trigger(availableNow=True)``, one past the last dataset of the run: the driver
            admits nothing beyond it and, where its strategy would wait, drains what it holds (no more data comes).
        :raises RuntimeError: when the driver answers with an error (a strategy failed without fallback).
        """
        return self._end_and_shed(start, available_end, new, until, fallback)[0]

    def _end_and_shed(self, start: int, available_end: int, new: Sequence[Mapping[str, Any]],
                      until: int | None, fallback: Callable[[], int] | None = None) -> tuple[int, list[int]]:
        if self._client is None:
            return available_end, []
        request = {"op": "latest", "query": self.query_id, "start": start, "new": list(new), "rtt": self._last_rtt_s,
                   "until": until, "available": available_end}
        t0 = time.perf_counter()
        try:
            reply = self._client.call(request)
        except ControllerUnavailable as exc:
            if not self._warned:
                self._warned = True
                log.warning(
                    "%s source of query %r: %s; admitting every available dataset until it answers again",
                    self.source, self.query_id, exc,
                )
            return (available_end if fallback is None else max(start, fallback())), []
        self._last_rtt_s = time.perf_counter() - t0
        if "error" in reply:
            raise RuntimeError(f"pacer admission for query {self.query_id!r} failed: {reply['error']}")
        end = int(reply["end"])
        end = max(start, min(end, available_end)) if reply.get("bounded", True) else max(start, end)
        return end, [int(i) for i in reply.get("shed", ())]

    def close(self) -> None:
        """Drop the connection."""
        if self._client is not None:
            self._client.close()


# --------------------------------------------------------------------------- pacer-gen


def available_until(available_end: int, target: int | None) -> int:
    """What a reader may offer: everything available, or under availableNow no more than its ``target``."""
    return available_end if target is None else min(available_end, target)


@dataclass
class GenPartition(InputPartition):
    """Datasets ``(index, rows, event_start)`` of one stream to rebuild on an executor."""

    stream: str
    seed: int
    period: float
    items: tuple[tuple[int, int, float], ...]


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """Split ``items`` into at most ``parts`` contiguous, nearly equal, non-empty slices."""
    parts = max(1, min(parts, len(items)))
    size, extra = divmod(len(items), parts)
    out: list[list[Any]] = []
    pos = 0
    for i in range(parts):
        n = size + (1 if i < extra else 0)
        out.append(list(items[pos : pos + n]))
        pos += n
    return [p for p in out if p]


def _utc(table: Any) -> Any:
    """Mark naive timestamps (epoch-based) as UTC: Spark's TIMESTAMP arrives as ``timestamp[us, tz=UTC]``."""
    import pyarrow as pa

    fields = [
        pa.field(f.name, pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(f.type) and f.type.tz is None else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


class GenStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reader of ``pacer-gen``: datasets arrive on the wall clock per the traffic schedule."""

    def __init__(self, options: Mapping[str, str]) -> None:
        check_options(GEN_FORMAT, options.keys(), GEN_OPTIONS, ("traffic.",))
        self.plan = GenPlan.from_options(options)
        self.agent = AdmissionAgent(options, GEN_FORMAT)
        self.target: int | None = None  # availableNow: one past the last dataset this run reads

    def initialOffset(self) -> dict[str, int]:
        """The first dataset."""
        return {"index": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        """``trigger(availableNow=True)``: read what has arrived by now, in the Controller's batches, then stop.

        :raises ValueError: when no dataset has arrived yet (``start`` is now or later): the run would read
            nothing and end without a word.
        """
        now = time.time()
        self.target = self.plan.available_end(now)
        if self.target == 0:
            raise ValueError(
                f"pacer-gen: trigger(availableNow=True) reads the datasets that have arrived by the first trigger, "
                f"and none has (the traffic starts at option start={self.plan.start:.0f}, "
                f"{self.plan.start - now:+.0f} s from now); set start in the past (e.g. time.time() - 60) to read that "
                f"stretch of traffic")

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        """Ask the driver how far the next micro-batch reaches (when it does not answer in time: every dataset
        arrived by the moment the reader gives up)."""
        begin = int(start["index"])

        def available() -> int:
            return max(begin, available_until(self.plan.available_end(time.time()), self.target))

        return self.agent.next_offset(start, available(), until=self.target, fallback=available)

    def reportLatestOffset(self) -> dict[str, int]:
        """What has arrived so far (``query.lastProgress``'s ``latestOffset``: the backlog is the gap)."""
        return {"index": self.plan.available_end(time.time())}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """Split datasets ``[start, end)`` over the configured number of partitions (those the Controller shed,
        recorded in ``end``, left out: a replay of the batch leaves out the same)."""
        arrivals = self.plan.arrivals()
        shed = shed_in(end)
        items = [
            (i, arrivals[i].rows, self.plan.start + arrivals[i].time - self.plan.period)
            for i in range(int(start["index"]), int(end["index"]))
            if i not in shed
        ]
        return [GenPartition(self.plan.stream, self.plan.seed, self.plan.period, tuple(p))
                for p in split(items, self.plan.partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Rebuild the partition's rows from the seed and the dataset indices."""
        from pacer_workloads import generate_arrow

        assert isinstance(partition, GenPartition)
        for index, rows, event_start in partition.items:
            if rows <= 0:
                continue
            table = generate_arrow(
                partition.stream, rows, seed=partition.seed, index=index, start_time=event_start,
                duration=partition.period,
            )
            yield from _utc(table).to_batches()

    def stop(self) -> None:
        """Close the RPC connection."""
        self.agent.close()


class PacerGenDataSource(DataSource):
    """``spark.readStream.format("pacer-gen")``: deterministic Linear Road / Cluster Monitoring traffic.

    Options: ``stream`` (``linear_road``/``cluster_monitoring``), ``traffic`` (a pattern of
    :data:`pacer_workloads.TRAFFIC_PATTERNS`), ``rate`` (mean rows/s), ``traffic.<param>``,
    ``duration`` (s), ``period`` (s per dataset), ``seed``, ``start`` (epoch s the traffic starts;
    set it for a restart to see the same schedule), ``numPartitions``; plus the ``pacer.*`` options
    that :meth:`pacer_spark.PacerSession.read_stream` fills in. Any other option is refused by name.

    Datasets arrive on the wall clock from ``start`` on, so ``trigger(availableNow=True)`` reads what
    has arrived when the query starts, in the Controller's batches; with nothing arrived (the default
    ``start`` is now) the query fails saying so. Set ``start`` in the past to replay a stretch of traffic.
    """

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return GEN_FORMAT

    def schema(self) -> str:
        """The stream's schema (DDL)."""
        from pacer_workloads import spark_schema_ddl

        return spark_schema_ddl(self.options.get("stream", "linear_road"))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A :class:`GenStreamReader`."""
        return GenStreamReader(self.options)
