"""The end offset of a ``pacer-gen``/``pacer-files`` batch: ``{"index": end}``, and the datasets it shed.

The driver answers a reader with the batch's end and the offsets it shed (an overload policy dropped them); the reader
writes both into the offset Spark logs, so a replay from the offset log reads exactly the same datasets again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def offset_with_shed(end: int, shed: Iterable[int]) -> dict[str, Any]:
    """The offset ``{"index": end}``, with ``"shed": [[lo, hi], ...]`` (half-open ranges) when datasets were shed."""
    ranges: list[list[int]] = []
    for i in sorted(set(shed)):
        if ranges and ranges[-1][1] == i:
            ranges[-1][1] = i + 1
        else:
            ranges.append([i, i + 1])
    return {"index": end, "shed": ranges} if ranges else {"index": end}


def shed_in(offset: Mapping[str, Any]) -> frozenset[int]:
    """The datasets a batch ending at ``offset`` shed (recorded by :func:`offset_with_shed`): never read."""
    return frozenset(i for lo, hi in offset.get("shed", ()) for i in range(int(lo), int(hi)))


__all__ = ["offset_with_shed", "shed_in"]
