"""The exactly-once ledger: every arrived dataset is admitted once and processed once, in bounded memory.

A query runs for weeks, so the ledger keeps no record per dataset forever. Per query it keeps:

- exact counters (``counts``: arrived, admitted, processed, shed), so ``arrived = processed + shed +
  pending`` holds exactly whatever the run's length;
- every *live* dataset (arrived or admitted, not yet processed or shed): what is buffered or in flight;
- for duplicate detection of finished datasets: the ids ending in a decimal number (``lr2-41``,
  ``run:7``, without leading zeros) as contiguous ranges per prefix (a source numbering its
  datasets in order costs one range), and the last ``recent_ids`` finished ids of any form with their
  stage. A finished id is recognised as long as it is in one of those: numbered ids always (unless a
  prefix fragments into more than ``max_ranges`` ranges, or more than ``max_prefixes`` prefixes are in
  use: then the oldest ranges are dropped), other ids for the last ``recent_ids`` finished ones.
"""

from __future__ import annotations

import bisect
import re
from collections import OrderedDict
from collections.abc import Iterable
from enum import Enum

#: Finished ids of any form remembered per query, by default.
RECENT_IDS = 4096
_NUMBERED = re.compile(r"^(.*?)(0|[1-9]\d*)$")


class LedgerViolation(RuntimeError):
    """A dataset was lost, duplicated or processed out of its life cycle."""


class _Stage(Enum):
    ARRIVED = 1
    ADMITTED = 2
    PROCESSED = 3
    SHED = 4


class _Ranges:
    """Disjoint, non-adjacent closed integer ranges ``[lo, hi]``, at most ``limit`` (the lowest go first)."""

    __slots__ = ("_his", "_los", "limit")

    def __init__(self, limit: int) -> None:
        self._los: list[int] = []
        self._his: list[int] = []
        self.limit = limit

    def __contains__(self, n: int) -> bool:
        i = bisect.bisect_right(self._los, n) - 1
        return i >= 0 and n <= self._his[i]

    def add(self, n: int) -> None:
        """Add ``n`` (not yet in), merging with its neighbours."""
        i = bisect.bisect_right(self._los, n)
        joins_left = i > 0 and self._his[i - 1] == n - 1
        joins_right = i < len(self._los) and self._los[i] == n + 1
        if joins_left and joins_right:
            self._his[i - 1] = self._his.pop(i)
            del self._los[i]
        elif joins_left:
            self._his[i - 1] = n
        elif joins_right:
            self._los[i] = n
        else:
            self._los.insert(i, n)
            self._his.insert(i, n)
            if len(self._los) > self.limit:
                del self._los[0], self._his[0]

    def __len__(self) -> int:
        return len(self._los)


class _QueryLedger:
    """One query's part of the ledger (see the module docstring)."""

    __slots__ = ("live", "max_prefixes", "max_ranges", "ranges", "recent", "recent_ids")

    def __init__(self, recent_ids: int, max_ranges: int, max_prefixes: int) -> None:
        self.live: dict[str, _Stage] = {}
        self.recent: OrderedDict[str, _Stage] = OrderedDict()
        self.ranges: OrderedDict[str, _Ranges] = OrderedDict()
        self.recent_ids = recent_ids
        self.max_ranges = max_ranges
        self.max_prefixes = max_prefixes

    def stage(self, dataset_id: str) -> _Stage | str | None:
        """The dataset's stage; ``"finished"`` for a numbered id known only from its range; None if unknown."""
        stage = self.live.get(dataset_id)
        if stage is None:
            stage = self.recent.get(dataset_id)
        if stage is None:
            m = _NUMBERED.match(dataset_id)
            if m is not None:
                ranges = self.ranges.get(m.group(1))
                if ranges is not None and int(m.group(2)) in ranges:
                    return "finished"
        return stage

    def finish(self, dataset_id: str, stage: _Stage) -> None:
        """Move a live dataset to a terminal stage, remembering its id."""
        del self.live[dataset_id]
        self.recent[dataset_id] = stage
        if len(self.recent) > self.recent_ids:
            self.recent.popitem(last=False)
        m = _NUMBERED.match(dataset_id)
        if m is None:
            return
        prefix = m.group(1)
        ranges = self.ranges.get(prefix)
        if ranges is None:
            ranges = self.ranges[prefix] = _Ranges(self.max_ranges)
            if len(self.ranges) > self.max_prefixes:
                self.ranges.popitem(last=False)
        else:
            self.ranges.move_to_end(prefix)
        ranges.add(int(m.group(2)))


class ExactlyOnceLedger:
    """Tracks each dataset (per query) through arrived -> admitted -> processed, in bounded memory.

    Shedding (an explicit overload policy) is a terminal state of its own and is
    counted, so a shed dataset is accounted for, never silently lost. The counts are exact; duplicate
    detection of finished datasets is exact for numbered ids and covers the last ``recent_ids`` others
    (module docstring).

    :param recent_ids: finished ids of any form remembered per query.
    :param max_ranges: ranges of numbered ids kept per prefix.
    :param max_prefixes: prefixes of numbered ids kept per query.
    """

    def __init__(self, recent_ids: int = RECENT_IDS, max_ranges: int = 1024, max_prefixes: int = 64) -> None:
        if recent_ids < 0 or max_ranges < 1 or max_prefixes < 1:
            raise ValueError("need recent_ids >= 0, max_ranges >= 1 and max_prefixes >= 1")
        self._limits = (recent_ids, max_ranges, max_prefixes)
        self._queries: dict[str, _QueryLedger] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def _ledger(self, query_id: str) -> _QueryLedger:
        ledger = self._queries.get(query_id)
        if ledger is None:
            ledger = self._queries[query_id] = _QueryLedger(*self._limits)
        return ledger

    def _count(self, query_id: str, key: str, n: int = 1) -> None:
        per = self.counts.setdefault(query_id, {"arrived": 0, "admitted": 0, "processed": 0, "shed": 0})
        per[key] += n

    def arrived(self, query_id: str, dataset_id: str) -> None:
        """Record an arrival; a second arrival of the same id is a duplicate."""
        ledger = self._ledger(query_id)
        if ledger.stage(dataset_id) is not None:
            raise LedgerViolation(
                f"dataset {dataset_id!r} of query {query_id!r} arrived twice; "
                "the source must give each dataset a unique id"
            )
        ledger.live[dataset_id] = _Stage.ARRIVED
        self._count(query_id, "arrived")

    def _move(self, query_id: str, dataset_ids: Iterable[str], frm: _Stage, to: _Stage, verb: str) -> None:
        ledger = self._ledger(query_id)
        for dataset_id in dataset_ids:
            stage = ledger.live.get(dataset_id)
            if stage is not frm:
                known = stage or ledger.stage(dataset_id)
                was = ("never arrived" if known is None else "is processed or shed" if isinstance(known, str)
                       else f"is {known.name.lower()}")
                raise LedgerViolation(f"dataset {dataset_id!r} of query {query_id!r} {verb} but it {was}")
            if to in (_Stage.PROCESSED, _Stage.SHED):
                ledger.finish(dataset_id, to)
            else:
                ledger.live[dataset_id] = to
            self._count(query_id, to.name.lower())

    def admitted(self, query_id: str, dataset_ids: Iterable[str]) -> None:
        """Record admission into a micro-batch."""
        self._move(query_id, dataset_ids, _Stage.ARRIVED, _Stage.ADMITTED, "was admitted")

    def processed(self, query_id: str, dataset_ids: Iterable[str]) -> None:
        """Record the completion of the micro-batch holding these datasets."""
        self._move(query_id, dataset_ids, _Stage.ADMITTED, _Stage.PROCESSED, "was reported processed")

    def shed(self, query_id: str, dataset_ids: Iterable[str]) -> None:
        """Record datasets dropped by an explicit overload policy."""
        self._move(query_id, dataset_ids, _Stage.ARRIVED, _Stage.SHED, "was shed")

    def withdrawn(self, query_id: str, dataset_ids: Iterable[str]) -> None:
        """Forget arrived datasets their source takes back to offer again (a restart): as if never arrived."""
        ledger = self._ledger(query_id)
        for dataset_id in dataset_ids:
            if ledger.live.get(dataset_id) is not _Stage.ARRIVED:
                raise LedgerViolation(f"dataset {dataset_id!r} of query {query_id!r} was withdrawn but is not waiting")
            del ledger.live[dataset_id]
            self._count(query_id, "arrived", -1)

    def retracted(self, query_id: str, dataset_ids: Iterable[str]) -> None:
        """Admitted datasets wait again: the runtime never ran the batch that held them."""
        ledger = self._ledger(query_id)
        for dataset_id in dataset_ids:
            if ledger.live.get(dataset_id) is not _Stage.ADMITTED:
                raise LedgerViolation(f"dataset {dataset_id!r} of query {query_id!r} was retracted but is not admitted")
            ledger.live[dataset_id] = _Stage.ARRIVED
            self._count(query_id, "admitted", -1)

    def finished(self, query_id: str, dataset_id: str) -> bool:
        """Whether ``dataset_id`` of ``query_id`` was processed or shed (as far as the bounded memory tells)."""
        ledger = self._queries.get(query_id)
        stage = ledger.stage(dataset_id) if ledger is not None else None
        return stage is not None and stage not in (_Stage.ARRIVED, _Stage.ADMITTED)

    def pending(self, query_id: str) -> int:
        """How many datasets of ``query_id`` arrived and are not yet processed or shed (buffered or in flight)."""
        ledger = self._queries.get(query_id)
        return len(ledger.live) if ledger is not None else 0

    def outstanding(self, query_id: str | None = None) -> list[tuple[str, str]]:
        """Datasets not yet processed or shed, as ``(query id, dataset id)``."""
        return [
            (qid, dataset_id)
            for qid, ledger in self._queries.items()
            if query_id is None or qid == query_id
            for dataset_id in ledger.live
        ]

    def check_balance(self, query_id: str) -> None:
        """Raise unless ``arrived == processed + shed + pending`` and ``admitted == processed + in flight``."""
        per = self.counts.get(query_id, {"arrived": 0, "admitted": 0, "processed": 0, "shed": 0})
        ledger = self._queries.get(query_id)
        live = ledger.live.values() if ledger is not None else ()
        in_flight = sum(1 for stage in live if stage is _Stage.ADMITTED)
        if per["arrived"] != per["processed"] + per["shed"] + self.pending(query_id) or \
                per["admitted"] != per["processed"] + in_flight:
            raise LedgerViolation(f"query {query_id!r}: counts {per} do not balance with {self.pending(query_id)} "
                                  f"pending ({in_flight} in flight)")

    def check_complete(self) -> None:
        """Raise unless every arrived dataset was processed (or explicitly shed)."""
        left = self.outstanding()
        if left:
            sample = ", ".join(f"{q}/{d}" for q, d in left[:5])
            raise LedgerViolation(f"{len(left)} datasets arrived but were never processed: {sample}")
