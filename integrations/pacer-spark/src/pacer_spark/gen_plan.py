"""pacer-gen's traffic plan: what a ``pacer-gen`` source generates, read the same way by the driver and the reader.

Both sides rebuild one :class:`GenPlan` from the source's options (stream, traffic shape, rate, duration, seed,
start), so the driver knows which datasets have arrived by now without asking the reader.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache

from pacer.durations import parse_seconds
from pacer.model import Dataset
from pacer.run import arrival_dataset
from pacer_workloads import STREAMS, Arrival, bytes_per_row, make_traffic, schedule_arrivals

GEN_FORMAT = "pacer-gen"


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

        :raises ValueError: for an unknown stream, a malformed number or duration (naming the option).
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
            duration=_seconds(options, "duration", "600"),
            seed=int(options.get("seed", "7")),
            start=float(options["start"]) if "start" in options else time.time(),
            period=_seconds(options, "period", "1.0"),
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


def _seconds(options: Mapping[str, str], name: str, default: str) -> float:
    """A pacer-gen duration option (``"10 minutes"``, ``"500ms"``, ``"600"``), > 0, read by pacer's one duration
    parser; a bad one is refused naming the option."""
    return parse_seconds(options.get(name, default), f"pacer-gen option {name}", positive=True) or float(default)


@cache
def _arrivals(
    traffic: str, rate: float, duration: float, seed: int, period: float, params: tuple[tuple[str, str], ...]
) -> tuple[Arrival, ...]:
    pattern = make_traffic(traffic, rate=rate, duration=duration, **dict(params))
    return tuple(schedule_arrivals(pattern, duration=duration, seed=seed, period=period))
