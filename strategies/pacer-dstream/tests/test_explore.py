"""``exploration=budgeted`` (issue 20): when dStream tries an entry never measured or re-measures a stale one.

Each test runs the same sequence under ``exploration=paper`` (or with the gate switched off) and shows the gate is
what changes the plan."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pacer import (
    BatchReport,
    Dataset,
    Device,
    Devices,
    MicroBatch,
    Operator,
    OperatorDAG,
    OperatorMetric,
    Placement,
    QuerySpec,
)
from pacer_dstream import DStreamState, Monitor
from pacer_dstream.explore import ExplorationBudget, plan_cost
from pacer_dstream.plugin import PARAMS

GPU = Devices(cpu_cores=2, gpus=1)
#: lr1's shape: a join with no GPU exec takes the bulk of the batch; the operators around it are cheap
JOINED = OperatorDAG.chain(
    Operator("scan", "scan"), Operator("filter", "filter"), Operator("join", "join", cpu_only=True),
    Operator("sink", "sink"),
)
#: lr3's shape: almost all the work can move to the GPU
CHAIN = OperatorDAG.chain(
    Operator("scan", "scan"), Operator("filter", "filter"), Operator("agg", "aggregate"), Operator("sink", "sink")
)


def _state(dag: OperatorDAG, **given: object) -> DStreamState:
    params = {p.name: p.default for p in PARAMS}
    params.update(given)
    return DStreamState(QuerySpec("q", dag, window_range=30.0, window_slide=5.0, partitions=2), params)


def _run(state: DStreamState, dag: OperatorDAG, seq: int, nbytes: int,
         cost: Mapping[str, Mapping[str, float]]) -> dict[str, Device]:
    """Place a batch of ``nbytes``, report every operator's time as ``cost[op][device]`` per MB of the batch."""
    batch = MicroBatch(f"q#{seq}", "q", seq, (Dataset(f"d{seq}", 0.0, nbytes, 1),), 0.0)
    placed = dict(state.place(batch, dag, GPU).devices)
    mb = nbytes / 1e6
    metrics = tuple(OperatorMetric(op, d, cost[op][d] * mb, nbytes) for op, d in placed.items())
    state.completed(BatchReport(batch.id, "q", seq, 0.0, 0.0, 1.0, nbytes, 1, (), 0.0, 0.0,
                                placement=Placement(placed, "dstream"), operator_metrics=metrics,
                                engine_s=sum(m.time_s for m in metrics)), dag, 2)
    return placed


def _uses_gpu(placed: Mapping[str, Device]) -> bool:
    return "gpu" in placed.values()


def test_untried_gpu_is_not_explored_when_the_operators_it_could_take_are_a_small_share() -> None:
    """lr1 under overload (issue 20's worst cell): exploring the GPU for the cheap operators around a CPU-only join
    slowed one early batch and every batch after it grew (1.294x cpu-only). What the GPU could save there is at
    most those operators' CPU time, 5 % of the batch: below ``explore_share``, not tried."""
    cost = {"scan": {"cpu": 0.02, "gpu": 0.05}, "filter": {"cpu": 0.03, "gpu": 0.06},
            "join": {"cpu": 0.9, "gpu": 0.9}, "sink": {"cpu": 0.01}}
    budgeted = _state(JOINED, prior_inflection_bytes=0.0)
    paper = _state(JOINED, prior_inflection_bytes=0.0, exploration="paper")
    for seq in (1, 2, 3, 4):
        assert not _uses_gpu(_run(budgeted, JOINED, seq, 2_000_000, cost))
    assert "gain share 0.05 < 0.25" in budgeted.place(
        MicroBatch("q#5", "q", 5, (Dataset("d5", 0.0, 2_000_000, 1),), 0.0), JOINED, GPU).note
    assert [_uses_gpu(_run(paper, JOINED, seq, 2_000_000, cost)) for seq in (1, 2)] == [False, True]


def test_untried_device_is_explored_only_on_a_batch_near_the_smallest_measured() -> None:
    """A batch that has grown far past the smallest measured one makes an exploring batch expensive, and under asap
    a slow batch grows every later one: the untried device waits for a small batch (``explore_growth``)."""
    cost = {"scan": {"cpu": 0.2, "gpu": 0.1}, "filter": {"cpu": 2.0, "gpu": 0.2},
            "agg": {"cpu": 3.0, "gpu": 0.3}, "sink": {"cpu": 0.1}}
    grown, ungated = _state(CHAIN), _state(CHAIN, explore_growth=0.0)
    for state in (grown, ungated):
        assert not _uses_gpu(_run(state, CHAIN, 1, 200_000, cost))  # below the prior: the CPU first
    assert not _uses_gpu(_run(grown, CHAIN, 2, 600_000, cost))  # 3x the smallest: held
    assert _uses_gpu(_run(ungated, CHAIN, 2, 600_000, cost))
    assert _uses_gpu(_run(grown, CHAIN, 3, 240_000, cost))  # a small batch again: tried


def test_a_first_batch_past_the_prior_inflection_point_starts_on_the_gpu() -> None:
    """Nothing is measured before the first batch; the paper's ties put it on the CPU. Overloaded from the start,
    that one batch on the slower device delayed every later one (lr3 at 3x the CPU's capacity: +2.5 points of
    misses over gpu-only). A batch of ``prior_inflection_bytes`` per partition or more starts on the GPU."""
    cost = {"scan": {"cpu": 0.2, "gpu": 0.1}, "filter": {"cpu": 2.0, "gpu": 0.2},
            "agg": {"cpu": 3.0, "gpu": 0.3}, "sink": {"cpu": 0.1}}
    assert _run(_state(CHAIN), CHAIN, 1, 2_000_000, cost)["filter"] == "gpu"
    assert _run(_state(CHAIN), CHAIN, 1, 200_000, cost)["filter"] == "cpu"  # 100 KB per partition: the CPU
    assert _run(_state(CHAIN, prior_inflection_bytes=0.0), CHAIN, 1, 2_000_000, cost)["filter"] == "cpu"


def test_a_stale_estimate_is_re_measured_within_the_budget() -> None:
    """The GPU measured once on a small batch, where its fixed cost dominated, looks far too expensive scaled by
    size to a batch 20x larger (the scaled estimate); re-measured once at its optimistic bound it is cheaper and the
    plan keeps it. With no budget the plan never learns it."""
    small, large = 200_000, 4_000_000

    def cost_of(nbytes: int) -> dict[str, dict[str, float]]:  # seconds per MB: the GPU's fixed 0.3 s spread
        gpu_agg = (0.3 + 0.1 * nbytes / 1e6) / (nbytes / 1e6)
        return {"scan": {"cpu": 0.2, "gpu": 0.1}, "filter": {"cpu": 0.5, "gpu": 0.5},
                "agg": {"cpu": 1.0, "gpu": gpu_agg}, "sink": {"cpu": 0.1}}

    budgeted = _state(CHAIN, prior_inflection_bytes=0.0, explore_budget=0.1)
    none = _state(CHAIN, prior_inflection_bytes=0.0, explore_budget=0.0)
    on_gpu: dict[str, list[bool]] = {}
    for name, state in (("budgeted", budgeted), ("none", none)):
        _run(state, CHAIN, 1, small, cost_of(small))  # all CPU
        assert _run(state, CHAIN, 2, small, cost_of(small))["agg"] == "gpu"  # the GPU tried: 1.6 s per MB
        # larger batches: the CPU (1.0 s per MB) looks cheaper than the GPU scaled by size (1.6 s per MB)
        on_gpu[name] = [_run(state, CHAIN, seq, large, cost_of(large))["agg"] == "gpu" for seq in range(3, 12)]
    assert not on_gpu["none"][-1] and not any(on_gpu["none"])
    assert on_gpu["budgeted"][-1] and not on_gpu["budgeted"][0]  # re-measured once the budget allowed: 0.175 s/MB
    assert budgeted.budget.spent_s <= 0.1 * budgeted.budget.engine_s


def test_the_scaled_line_needs_two_buckets_of_clearly_different_sizes() -> None:
    """Two buckets of nearly the same size turn per-batch noise into a slope (lr3 at 3x: a GPU estimate 2.3x its
    cost at 40 MB from buckets at 27.9 and 28.6 MB). The line takes a bucket at most half the nearest's size."""
    m = Monitor()
    kw = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}
    for index, nbytes, seconds in ((10, 1_000_000, 1.0), (27, 27_900_000, 10.0), (28, 28_600_000, 10.7)):
        table = m.table(index)
        table.count_batch(nbytes)
        table.update("agg", "gpu", seconds, nbytes, [], **kw)
    # the line through 1 MB and 28.6 MB, not through 27.9 and 28.6 (1 s per MB: 21.1 s at 40 MB)
    assert m.scaled(40, "agg", "gpu", 40_000_000) == pytest.approx(10.7 + 9.7 / 27.6 * 11.4)


def test_plan_cost_counts_operators_and_crossings_as_the_mapper_does() -> None:
    state = _state(CHAIN)
    compiled = state.compiled(CHAIN)
    cpu, gpu, trans, sink = [1.0, 2.0, 3.0, 0.5], [0.5, 0.2, 0.3, float("inf")], [0.1] * 4, [0.1] * 4
    assert plan_cost(compiled, ["gpu", "gpu", "cpu", "cpu"], cpu, gpu, trans, sink) == pytest.approx(
        0.5 + 0.1 + 0.2 + 3.0 + 0.1 + 0.5)  # source fed from the host, one crossing into agg
    with pytest.raises(ValueError, match="explore_share"):
        ExplorationBudget(1.5, 0.02)
    with pytest.raises(ValueError, match="exploration"):
        _state(CHAIN, exploration="always")
