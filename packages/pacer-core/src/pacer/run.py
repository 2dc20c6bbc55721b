"""One description of a run for every runtime, the CLI, the bench and the conformance suite, and the datasets a
run's arrivals are (:func:`arrival_dataset`). The description itself (:class:`RunConfig`, :class:`QueryRun`), the
:class:`Runtime` protocol and :class:`RunResult` live in the leaf module :mod:`pacer.runtime_api` and are
re-exported here.

A :class:`RunConfig` says what runs: its queries (workload, traffic and its parameters, rate,
deadline, strategies and their parameters, read caps), the scheduler, the duration of the traffic,
the seed, the resources (cores, GPUs, partitions per batch), the overload policy and whether a
raising strategy falls back to its baseline. What only one runtime understands (the simulator's
cost model, Spark's master) goes under ``options[<runtime name>]``.

**Seeds.** Query ``i`` of a run (0-based, in the order of :attr:`RunConfig.queries`) draws its
traffic from the seed ``seed + i`` (:meth:`RunConfig.query_seed`) on every runtime, so one
configuration is the same traffic on the simulator and on Spark. Runtimes seed anything else they
randomise (the simulator's processing-time noise) from ``seed`` itself.

**Query ids.** A query's id is its ``query_id``, else its workload; a repeated id gets ``-2``,
``-3``, ... in order (:meth:`RunConfig.query_ids`).

A configuration is saved to and loaded from TOML or JSON (:meth:`RunConfig.save`,
:meth:`RunConfig.load`), so that a run can be repeated exactly; a ``pacer.report/1`` file whose
``config.run`` holds one loads too. A runtime is any object with the :class:`Runtime` shape,
registered through the ``pacer_runtimes`` hook.
"""

from __future__ import annotations

from typing import Protocol

from pacer.durations import parse_duration as parse_duration  # re-exported: durations live in pacer.durations
from pacer.model import Dataset
from pacer.runtime_api import OVERLOAD_CHOICES as OVERLOAD_CHOICES  # re-exported: the run contract lives there
from pacer.runtime_api import RUN_SCHEMA as RUN_SCHEMA
from pacer.runtime_api import QueryRun as QueryRun
from pacer.runtime_api import RunConfig as RunConfig
from pacer.runtime_api import RunResult as RunResult
from pacer.runtime_api import Runtime as Runtime
from pacer.runtime_api import to_toml as to_toml

# ---------------------------------------------------------------------- arrivals


class Arrival(Protocol):
    """One scheduled arrival of a traffic pattern (``pacer_workloads.Arrival``)."""

    @property
    def index(self) -> int: ...

    @property
    def time(self) -> float: ...

    @property
    def rows(self) -> int: ...


def arrival_dataset(query_id: str, arrival: Arrival, bytes_per_row: float, *, start: float = 0.0) -> Dataset:
    """The dataset an arrival of query ``query_id`` is, on every runtime.

    Its id is ``{query_id}-{index}``, its arrival ``start + arrival.time`` (``start``: the runtime's
    clock when the traffic began, 0 on the simulator), its bytes ``rows x bytes_per_row`` rounded,
    and its handle the arrival's index (the source offset on Spark).
    """
    return Dataset(f"{query_id}-{arrival.index}", start + arrival.time, round(arrival.rows * bytes_per_row),
                   arrival.rows, handle=arrival.index)
