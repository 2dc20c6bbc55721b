"""``cold_start=scaled`` (the default since issue 20): an entry never measured in the batch's bucket is estimated
from the smaller buckets that measured it, normalised by size."""

from __future__ import annotations

import pytest

from pacer import BatchReport, Dataset, Devices, MicroBatch, Operator, OperatorDAG, OperatorMetric, Placement, QuerySpec
from pacer_dstream import DStreamState, Monitor
from pacer_dstream.plugin import PARAMS

KW = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}


def _measure(m: Monitor, index: int, nbytes: float, device: str, seconds: float, op: str = "scan") -> None:
    table = m.table(index)
    table.count_batch(nbytes)
    table.update(op, device, seconds, nbytes, [], **KW)  # type: ignore[arg-type]


def test_one_smaller_bucket_is_scaled_by_size_two_give_the_line() -> None:
    m = Monitor()
    _measure(m, 12, 2_500_000, "cpu", 3.0)  # 1.2 s per MB
    assert m.scaled(30, "scan", "cpu", 15_000_000) == pytest.approx(18.0)  # 6x the bytes: 6x the time
    assert m.lower_bound(30, "scan", "cpu", 15_000_000) == pytest.approx(3.0)  # bound: the small batch's time
    assert m.scaled(12, "scan", "cpu", 2_400_000) is None  # only smaller buckets say anything
    assert m.scaled(30, "scan", "gpu", 15_000_000) is None  # never ran on the GPU: the paper's 0 (explored)
    _measure(m, 20, 10_000_000, "cpu", 10.0)  # with 12's: a line of 7 s per 7.5 MB
    assert m.scaled(30, "scan", "cpu", 15_000_000) == pytest.approx(10.0 + 7.0 / 7.5 * 5)


def test_scaled_prefers_the_device_measured_cheaper_per_byte_when_batches_grow() -> None:
    """Issue 20, lr3 binary at 3x the CPU's capacity: the CPU measured on a 2.5 MB batch, the GPU on a 7.4 MB one,
    then a 14.8 MB batch. As a bound the CPU's small-batch time looked cheaper than the GPU's and the batch ran on
    the CPU (18.5 s where the GPU took ~12 s); scaled by size the GPU is cheaper, as it is."""
    m = Monitor()
    _measure(m, 11, 2_470_000, "cpu", 3.0)
    _measure(m, 16, 7_420_000, "gpu", 5.6)
    size = 14_840_000.0
    assert m.lower_bound(23, "scan", "cpu", size) < m.lower_bound(23, "scan", "gpu", size)  # type: ignore[operator]
    assert m.scaled(23, "scan", "gpu", size) < m.scaled(23, "scan", "cpu", size)  # type: ignore[operator]


def test_growth_exponent_is_the_median_of_the_devices_operators_measured_at_two_sizes() -> None:
    m = Monitor()
    assert m.growth_exponent("gpu") is None  # nothing measured twice: proportional
    _measure(m, 10, 1_000_000, "gpu", 1.0, "scan")
    _measure(m, 40, 4_000_000, "gpu", 2.0, "scan")  # 4x the bytes, 2x the time: exponent 0.5
    _measure(m, 10, 1_000_000, "gpu", 1.0, "agg")
    _measure(m, 80, 8_000_000, "gpu", 8.0, "agg")  # proportional: 1.0
    _measure(m, 12, 1_200_000, "gpu", 1.0, "sort")
    _measure(m, 15, 1_500_000, "gpu", 9.0, "sort")  # 1.25x apart: noise, not a slope (left out)
    assert m.growth_exponent("gpu") == pytest.approx(0.75)
    assert m.growth_exponent("cpu") is None
    # one smaller bucket: grown by the exponent instead of per byte (2 s at 1 MB -> 2 * 4 ** 0.75 at 4 MB)
    _measure(m, 10, 1_000_000, "gpu", 2.0, "filter")
    assert m.scaled(40, "filter", "gpu", 4_000_000, exponent=0.75) == pytest.approx(2.0 * 4**0.75)
    assert m.scaled(40, "filter", "gpu", 4_000_000) == pytest.approx(8.0)  # proportional


#: lr3's shape with affine costs (seconds = fixed + per MB): the GPU's launches make it slower on a 1 MB batch and
#: much faster on large ones, as in pacer-sim's cost model
CHAIN = OperatorDAG.chain(
    Operator("scan", "scan"), Operator("filter", "filter"), Operator("agg", "aggregate"), Operator("sink", "sink")
)
AFFINE = {"scan": {"cpu": (0.0, 0.30), "gpu": (0.30, 0.02)}, "filter": {"cpu": (0.0, 0.15), "gpu": (0.25, 0.015)},
          "agg": {"cpu": (0.0, 0.45), "gpu": (0.6, 0.05)}, "sink": {"cpu": (0.0, 0.05)}}


def _growing(growth: str) -> list[tuple[dict[str, str], float]]:
    """Batches of 1, 1, 3, 6, 12, 24 and 48 MB (a query falling behind under asap): the plan and its seconds."""
    state = DStreamState(QuerySpec("q", CHAIN, window_range=30.0, window_slide=5.0, partitions=2),
                         {**{p.name: p.default for p in PARAMS}, "growth": growth})
    out = []
    for seq, mb in enumerate((1, 1, 3, 6, 12, 24, 48), 1):
        batch = MicroBatch(f"q#{seq}", "q", seq, (Dataset(f"d{seq}", 0.0, int(mb * 1e6), 1),), 0.0)
        placed = dict(state.place(batch, CHAIN, Devices(cpu_cores=2, gpus=1)).devices)
        metrics = tuple(OperatorMetric(op, d, AFFINE[op][d][0] + AFFINE[op][d][1] * mb, batch.bytes)
                        for op, d in placed.items())
        seconds = sum(x.time_s for x in metrics)
        state.completed(BatchReport(batch.id, "q", seq, 0.0, 0.0, 1.0, batch.bytes, 1, (), 0.0, 0.0,
                                    placement=Placement(placed, "dstream"), operator_metrics=metrics,
                                    engine_s=seconds), CHAIN, 2)
        out.append((placed, seconds))
    return out


def test_pooled_growth_moves_operators_measured_once_on_a_small_batch_to_the_gpu() -> None:
    """Issue 20's grid, lr3 at 3x the CPU's capacity (seed 9, 1.062x gpu-only per row): the GPU measured filter
    and agg only on the first 1 MB batch, where its launches were most of their time; per byte, that estimate grows
    to 4x the truth at 48 MB and they stayed on the CPU. The scan, on the GPU at 1 and 3 MB, shows how the GPU's
    costs grow (exponent ~0.33): grown by it, filter and agg move to the GPU from the 6 MB batch on."""
    pooled, proportional = _growing("pooled"), _growing("proportional")
    all_gpu = {"scan": "gpu", "filter": "gpu", "agg": "gpu", "sink": "cpu"}
    assert [p for p, _ in pooled[3:]] == [all_gpu] * 4
    assert [p for p, _ in proportional[3:]] == [{**all_gpu, "filter": "cpu", "agg": "cpu"}] * 4
    assert pooled[:3] == proportional[:3]  # the same until the scan was measured at two sizes
    assert pooled[-1][1] == pytest.approx(0.3 + 0.25 + 0.6 + (0.02 + 0.015 + 0.05 + 0.05) * 48)  # 7.63 s
    assert proportional[-1][1] == pytest.approx(0.3 + (0.02 + 0.15 + 0.45 + 0.05) * 48)  # 32.46 s: 4.3x
