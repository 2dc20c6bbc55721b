"""Source options shared by the driver and the reader process (parsed the same way on both sides).

Durations (``pacer.deadline``, ``pacer.arrival.maxAge``, the ``spark.pacer.*`` duration confs) are read by core's one
duration parser, :func:`pacer.durations.parse_seconds`, importable from here as before.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from pacer.durations import parse_seconds as parse_seconds  # re-exported: pacer_spark reads durations with it
from pacer.model import Dataset
from pacer.run import arrival_dataset
from pacer_workloads import STREAMS, Arrival, bytes_per_row, make_traffic, schedule_arrivals

#: Options every pacer source understands (set by :meth:`pacer_spark.PacerSession.read_stream`).
OPT_QUERY = "pacer.query"
OPT_ADDRESS = "pacer.address"
#: The authkey as hex: only for a client wired by hand (Spark shows options in plans, logs and its UI).
OPT_AUTHKEY = "pacer.authkey"
#: The path of the driver's private authkey file (:attr:`pacer_spark.sources.rpc.ControllerServer.authkey_file`).
OPT_AUTHKEY_FILE = "pacer.authkey.file"
OPT_TIMEOUT = "pacer.timeout"
#: Every wiring option a pacer source accepts besides its own.
WIRING_OPTIONS = frozenset({OPT_QUERY, OPT_ADDRESS, OPT_AUTHKEY, OPT_AUTHKEY_FILE, OPT_TIMEOUT})


def parse_address(value: str) -> tuple[str, int]:
    """``"127.0.0.1:4567"`` -> ``("127.0.0.1", 4567)``."""
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"option {OPT_ADDRESS} must look like HOST:PORT, got {value!r}")
    return host, int(port)


@dataclass(frozen=True)
class GenPlan:
    """Everything ``pacer-gen`` needs to rebuild a dataset from its offset (stateless).

    :param stream: ``linear_road`` or ``cluster_monitoring``.
    :param traffic: the traffic pattern's name; ``rate`` its mean rows/s; ``params`` its overrides.
    :param duration: seconds of traffic; ``period`` seconds per dataset.
    :param seed: the generator's seed.
    :param start: wall-clock epoch seconds at which the traffic starts.
    :param partitions: Spark partitions per micro-batch.
    """

    stream: str
    traffic: str
    rate: float
    duration: float
    seed: int
    start: float
    period: float = 1.0
    partitions: int = 2
    params: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> GenPlan:
        """Parse the source options; ``traffic.<name>`` keys are traffic parameters.

        :raises ValueError: for an unknown stream or a malformed number.
        """
        stream = options.get("stream", "linear_road")
        if stream not in STREAMS:
            raise ValueError(f"pacer-gen: unknown stream {stream!r}; use one of {', '.join(STREAMS)}")
        # as given: the pattern reads its numbers, and a trace its file (pacer_workloads.make_traffic)
        params = tuple(sorted((k[len("traffic."):], str(v)) for k, v in options.items() if k.startswith("traffic.")))
        plan = cls(
            stream=stream,
            traffic=options.get("traffic", "constant"),
            rate=float(options.get("rate", "1000")),
            duration=float(options.get("duration", "600")),
            seed=int(options.get("seed", "7")),
            start=float(options["start"]) if "start" in options else time.time(),
            period=float(options.get("period", "1.0")),
            partitions=max(1, int(options.get("numPartitions", options.get("partitions", "2")))),
            params=params,
        )
        plan.arrivals()  # validate the traffic now, not on the first poll
        return plan

    def arrivals(self) -> tuple[Arrival, ...]:
        """The arrival schedule, relative to :attr:`start`."""
        return _arrivals(self.traffic, self.rate, self.duration, self.seed, self.period, self.params)

    def dataset(self, query_id: str, index: int) -> Dataset | None:
        """Dataset ``index`` of query ``query_id`` (None past the last): :func:`pacer.arrival_dataset` of its
        arrival, at ``start`` + its time, the same dataset the simulator feeds for the same traffic and seed."""
        arrivals = self.arrivals()
        if index >= len(arrivals):
            return None
        return arrival_dataset(query_id, arrivals[index], bytes_per_row(self.stream), start=self.start)

    def available_end(self, now: float) -> int:
        """Offset one past the last dataset that has arrived by wall-clock ``now``."""
        arrivals = self.arrivals()
        lo, hi = 0, len(arrivals)
        while lo < hi:  # arrivals are sorted by time
            mid = (lo + hi) // 2
            if self.start + arrivals[mid].time <= now:
                lo = mid + 1
            else:
                hi = mid
        return lo


@cache
def _arrivals(
    traffic: str, rate: float, duration: float, seed: int, period: float, params: tuple[tuple[str, str], ...]
) -> tuple[Arrival, ...]:
    pattern = make_traffic(traffic, rate=rate, duration=duration, **dict(params))
    return tuple(schedule_arrivals(pattern, duration=duration, seed=seed, period=period))
