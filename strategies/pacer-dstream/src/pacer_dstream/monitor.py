"""dStream's Monitor module: the index table, the cost tables and the cost estimation (Eqs. 1-3).

- Index table: a batch of ``size`` bytes maps to a bucket; below ``threshold`` (1000 KB) the
  buckets are ``small`` (100 KB) wide, above it ``large`` (1000 KB) wide. Each bucket owns one
  cost table, so batches of similar size share their history (185 KB and 129 KB: bucket 1).
- Cost table: per operator instance and device, the latest execution time θ(i,j), the EMA
  estimate T_exec(i,j) and the final cost T(i,j); per operator instance the data size Size(i,j).

T(i,j)      = T_exec(i,j) + T_trans(i,j)                                   (Eq. 1)
T_exec(i,j) = β × T_exec(i,j-1) + (1 - β) × θ(i,j)                         (Eq. 2)
T_trans(i,j)= T_init + Size(i,j) / BW  if Dev(i-1,j) ≠ Dev(i,j), else 0     (Eq. 3)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from pacer.model import Device

KB = 1_000


def bucket_index(size: float, *, small: float = 100 * KB, threshold: float = 1_000 * KB, large: float = 1_000 * KB) -> int:
    """The index-table bucket of a batch of ``size`` bytes.

    >>> bucket_index(185_000), bucket_index(129_000), bucket_index(1_000_000), bucket_index(2_500_000)
    (1, 1, 10, 11)
    """
    if small <= 0 or large <= 0 or threshold < 0:
        raise ValueError("bucket widths must be > 0 and the threshold >= 0")
    if size < threshold:
        return int(size // small)
    return math.ceil(threshold / small) + int((size - threshold) // large)


def transition_cost(size: float, *, t_init: float, bandwidth: float) -> float:
    """Eq. 3 when the devices differ: ``t_init + size / bandwidth`` seconds."""
    return t_init + size / bandwidth


def input_transfer(size: float, upstream: Iterable[Device], device: Device, *, t_init: float, bandwidth: float) -> float:
    """Eq. 3 over an operator's inputs: one transition per input on another device, each carrying an equal share.

    :param upstream: the devices its inputs came from (none: a source, fed from the host, ``"cpu"``).
    """
    inputs = list(upstream) or ["cpu"]
    share = size / len(inputs)
    return sum(transition_cost(share, t_init=t_init, bandwidth=bandwidth) for d in inputs if d != device)


def ema(previous: float | None, observed: float, beta: float) -> float:
    """Eq. 2; the first observation of an entry starts the average."""
    return observed if previous is None else beta * previous + (1.0 - beta) * observed


@dataclass(slots=True)
class CostEntry:
    """One (operator instance, device) row of a cost table."""

    t_exec: float
    theta: float
    total: float
    t_trans: float = 0.0
    observations: int = 1


@dataclass
class CostTable:
    """The cost table of one index-table bucket."""

    entries: dict[tuple[str, Device], CostEntry] = field(default_factory=dict)
    sizes: dict[str, float] = field(default_factory=dict)
    batches: int = 0
    mean_bytes: float = 0.0  # mean size of the batches folded in: where this bucket's estimates were measured

    def count_batch(self, nbytes: float) -> None:
        """One more batch of ``nbytes`` folded into this table."""
        self.batches += 1
        self.mean_bytes += (nbytes - self.mean_bytes) / self.batches

    def get(self, op_id: str, device: Device) -> CostEntry | None:
        """The entry for ``op_id`` on ``device``, None when it never ran there in this bucket."""
        return self.entries.get((op_id, device))

    def update(
        self,
        op_id: str,
        device: Device,
        theta: float,
        size: float,
        upstream: Iterable[Device],
        *,
        beta: float,
        t_init: float,
        bandwidth: float,
    ) -> CostEntry:
        """Record one execution of ``op_id`` on ``device`` (Fig. 4, steps 2-4).

        :param theta: θ(i,j), the measured execution time in seconds, without any transfer (Eq. 3 is added here).
        :param size: Size(i,j), bytes the operator processed.
        :param upstream: the devices its inputs came from in this batch (the host, ``"cpu"``,
            for a source); each input on another device costs one transition, carrying an
            equal share of ``size``.
        :return: the updated entry with T_exec(i,j), T_trans(i,j) and T(i,j).
        """
        t_trans = input_transfer(size, upstream, device, t_init=t_init, bandwidth=bandwidth)
        old = self.entries.get((op_id, device))
        t_exec = ema(old.t_exec if old else None, theta, beta)
        entry = CostEntry(
            t_exec=t_exec,
            theta=theta,
            total=t_exec + t_trans,
            t_trans=t_trans,
            observations=(old.observations + 1) if old else 1,
        )
        self.entries[(op_id, device)] = entry
        self.sizes[op_id] = size
        return entry


@dataclass
class Monitor:
    """The index table: bucket index -> cost table, with the bucket geometry."""

    small: float = 100 * KB
    threshold: float = 1_000 * KB
    large: float = 1_000 * KB
    tables: dict[int, CostTable] = field(default_factory=dict)

    def index(self, size: float) -> int:
        """Bucket of a batch of ``size`` bytes."""
        return bucket_index(size, small=self.small, threshold=self.threshold, large=self.large)

    def table(self, index: int) -> CostTable:
        """The cost table of bucket ``index``, created empty on first use."""
        table = self.tables.get(index)
        if table is None:
            table = self.tables[index] = CostTable()
        return table

    def nearest_entry(self, index: int, op_id: str, device: Device) -> CostEntry | None:
        """The entry of the nearest *other* bucket that has one (ties: the smaller bucket)."""
        best: tuple[int, int] | None = None
        for other, table in self.tables.items():
            if other == index or (op_id, device) not in table.entries:
                continue
            key = (abs(other - index), other)
            if best is None or key < best:
                best = key
        return self.tables[best[1]].entries[(op_id, device)] if best is not None else None

    def lower_bound(self, index: int, op_id: str, device: Device, size: float) -> float | None:
        """A lower bound on T_exec of ``op_id`` on ``device`` for a batch of ``size`` bytes in bucket ``index``,
        from the buckets below it that measured it; None when none did.

        An operator does not get cheaper as its batch grows, so the nearest smaller bucket's estimate bounds it.
        With two smaller buckets, the line through their estimates (over their mean batch sizes), extended to
        ``size``, bounds it too when the cost is convex in the size (affine, or superlinear like a join); the
        larger of the two is taken.
        """
        below = sorted(
            (other for other, table in self.tables.items() if other < index and (op_id, device) in table.entries),
            reverse=True,
        )
        if not below:
            return None
        near = self.tables[below[0]]
        bound = near.entries[(op_id, device)].t_exec
        if len(below) > 1:
            far = self.tables[below[1]]
            run = near.mean_bytes - far.mean_bytes
            if run > 0 and size > near.mean_bytes:
                slope = (bound - far.entries[(op_id, device)].t_exec) / run
                bound = max(bound, bound + slope * (size - near.mean_bytes))
        return bound

    def growth_exponent(self, device: Device, *, spread: float = 2.0) -> float | None:
        """How ``device``'s costs grow with the batch's size, pooled over its operators: the median over every
        operator measured on it in two buckets at least ``spread`` times apart in size of
        ``ln(T_large / T_small) / ln(S_large / S_small)`` (1: proportional to the size; below 1: a fixed part, as a
        GPU's launches; above 1: superlinear, as a join), clamped to [0, 2]; None when no operator has two such
        buckets."""
        exponents: list[float] = []
        ops = {op for table in self.tables.values() for op, dev in table.entries if dev == device}
        for op_id in ops:
            measured = sorted((t for t in self.tables.values() if (op_id, device) in t.entries and t.mean_bytes > 0),
                              key=lambda t: t.mean_bytes, reverse=True)
            if len(measured) < 2:
                continue
            near = measured[0]
            far = next((t for t in measured[1:] if t.mean_bytes <= near.mean_bytes / spread), None)
            if far is None:
                continue
            t_near, t_far = near.entries[(op_id, device)].t_exec, far.entries[(op_id, device)].t_exec
            if t_near > 0 and t_far > 0:
                exponents.append(math.log(t_near / t_far) / math.log(near.mean_bytes / far.mean_bytes))
        if not exponents:
            return None
        exponents.sort()
        middle = len(exponents) // 2
        median = exponents[middle] if len(exponents) % 2 else (exponents[middle - 1] + exponents[middle]) / 2
        return min(2.0, max(0.0, median))

    def scaled(self, index: int, op_id: str, device: Device, size: float, *, spread: float = 2.0,
               exponent: float = 1.0) -> float | None:
        """T_exec of ``op_id`` on ``device`` for a batch of ``size`` bytes in bucket ``index``, normalised by size
        from the buckets below it that measured it; None when none did (``cold_start=scaled``).

        The line through the nearest smaller bucket and the nearest one whose batches were at most ``1/spread`` of
        its size (exact for an affine cost; two buckets of nearly the same size would turn per-batch noise into a
        slope); without such a bucket, the nearest's estimate grown by ``(size / its batches' size) ** exponent``
        (``exponent`` 1, per byte: exact for a cost proportional to the size, an upper bound for an affine one;
        ``growth=pooled`` passes :meth:`growth_exponent`). Never below the nearest's estimate.
        """
        below = sorted(
            (other for other, table in self.tables.items() if other < index and (op_id, device) in table.entries),
            reverse=True,
        )
        if not below:
            return None
        near = self.tables[below[0]]
        t_exec = near.entries[(op_id, device)].t_exec
        if near.mean_bytes <= 0 or size <= near.mean_bytes:
            return t_exec
        for other in below[1:]:
            far = self.tables[other]
            if 0 < far.mean_bytes <= near.mean_bytes / spread:
                slope = (t_exec - far.entries[(op_id, device)].t_exec) / (near.mean_bytes - far.mean_bytes)
                return max(t_exec, t_exec + slope * (size - near.mean_bytes))
        return float(t_exec * (size / near.mean_bytes) ** exponent)

    def lower_bound_entry(self, index: int, op_id: str, device: Device) -> CostEntry | None:
        """The entry of the largest *smaller* bucket that has one: a lower bound when costs grow with size."""
        best: int | None = None
        for other, table in self.tables.items():
            if other < index and (best is None or other > best) and (op_id, device) in table.entries:
                best = other
        return self.tables[best].entries[(op_id, device)] if best is not None else None

    def nearest_table(self, index: int, op_id: str, device: Device, *, above: bool) -> CostTable | None:
        """The table of the nearest bucket below (``above=False``) or above ``index`` that measured ``op_id`` on
        ``device``; None when none did."""
        best: int | None = None
        for other, table in self.tables.items():
            if (other > index if above else other < index) and (op_id, device) in table.entries:
                if best is None or (other < best if above else other > best):
                    best = other
        return self.tables[best] if best is not None else None
