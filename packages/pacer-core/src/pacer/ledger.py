"""The exactly-once ledger: every arrived dataset is admitted once and processed once."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class LedgerViolation(RuntimeError):
    """A dataset was lost, duplicated or processed out of its life cycle."""


class _Stage(Enum):
    ARRIVED = 1
    ADMITTED = 2
    PROCESSED = 3
    SHED = 4


class ExactlyOnceLedger:
    """Tracks each dataset (per query) through arrived -> admitted -> processed.

    Shedding (an explicit overload policy) is a terminal state of its own and is
    counted, so a shed dataset is accounted for, never silently lost.
    """

    def __init__(self) -> None:
        self._stage: dict[tuple[str, str], _Stage] = {}
        self.counts: dict[str, dict[str, int]] = {}

    def _count(self, query_id: str, key: str, n: int = 1) -> None:
        per = self.counts.setdefault(query_id, {"arrived": 0, "admitted": 0, "processed": 0, "shed": 0})
        per[key] += n

    def arrived(self, query_id: str, dataset_id: str) -> None:
        """Record an arrival; a second arrival of the same id is a duplicate."""
        key = (query_id, dataset_id)
        if key in self._stage:
            raise LedgerViolation(
                f"dataset {dataset_id!r} of query {query_id!r} arrived twice; "
                "the source must give each dataset a unique id"
            )
        self._stage[key] = _Stage.ARRIVED
        self._count(query_id, "arrived")

    def _move(self, query_id: str, dataset_ids: Iterable[str], frm: _Stage, to: _Stage, verb: str) -> None:
        for dataset_id in dataset_ids:
            key = (query_id, dataset_id)
            stage = self._stage.get(key)
            if stage is not frm:
                was = "never arrived" if stage is None else f"is {stage.name.lower()}"
                raise LedgerViolation(f"dataset {dataset_id!r} of query {query_id!r} {verb} but it {was}")
            self._stage[key] = to
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
        for dataset_id in dataset_ids:
            if self._stage.get((query_id, dataset_id)) is not _Stage.ARRIVED:
                raise LedgerViolation(f"dataset {dataset_id!r} of query {query_id!r} was withdrawn but is not waiting")
            del self._stage[(query_id, dataset_id)]
            self._count(query_id, "arrived", -1)

    def outstanding(self, query_id: str | None = None) -> list[tuple[str, str]]:
        """Datasets not yet processed or shed."""
        return [
            key
            for key, stage in self._stage.items()
            if stage in (_Stage.ARRIVED, _Stage.ADMITTED) and (query_id is None or key[0] == query_id)
        ]

    def check_complete(self) -> None:
        """Raise unless every arrived dataset was processed (or explicitly shed)."""
        left = self.outstanding()
        if left:
            sample = ", ".join(f"{q}/{d}" for q, d in left[:5])
            raise LedgerViolation(f"{len(left)} datasets arrived but were never processed: {sample}")
