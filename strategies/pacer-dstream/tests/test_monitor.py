"""Index table, cost table and Eqs. 1-3 (dStream Fig. 4)."""

from __future__ import annotations

import pytest

from pacer_dstream import CostTable, Monitor, bucket_index, ema, transition_cost


@pytest.mark.parametrize(
    ("size", "index"),
    [(0, 0), (99_999, 0), (129_000, 1), (185_000, 1), (999_999, 9), (1_000_000, 10), (1_999_999, 10), (2_500_000, 11),
     (16_000_000, 25)],
)
def test_index_table_buckets(size: int, index: int) -> None:
    assert bucket_index(size) == index


def test_bucket_geometry_is_configurable() -> None:
    assert bucket_index(450, small=100, threshold=400, large=50) == 5
    assert Monitor(small=10.0, threshold=100.0, large=100.0).index(250.0) == 11
    with pytest.raises(ValueError):
        bucket_index(1, small=0)


def test_figure_4_exact_values() -> None:
    """T_exec(5,j-1) = 14.3, θ(5,j) = 20, β = 0.5 -> T_exec(5,j) = 17.15; T_trans = 0.8 -> T(5,j) = 17.95."""
    assert ema(14.3, 20.0, 0.5) == pytest.approx(17.15)
    # T_init + Size/BW = 0.8 with Size(5,j) = 330 (the paper gives neither T_init nor BW)
    assert transition_cost(330.0, t_init=0.14, bandwidth=500.0) == pytest.approx(0.8)
    table = CostTable()
    kw = {"beta": 0.5, "t_init": 0.14, "bandwidth": 500.0}
    table.update("join#5", "cpu", 14.3, 250.0, ["cpu"], **kw)  # batch j-1: T_exec(5,j-1) = 14.3
    entry = table.update("join#5", "cpu", 20.0, 330.0, ["gpu"], **kw)  # operator 4 on the GPU, 5 on the CPU
    assert entry.t_exec == pytest.approx(17.15)
    assert entry.t_trans == pytest.approx(0.8)
    assert entry.total == pytest.approx(17.95)
    assert entry.theta == 20.0 and entry.observations == 2
    assert table.sizes["join#5"] == 330.0


def test_same_device_means_no_transition_and_sources_come_from_the_host() -> None:
    table = CostTable()
    kw = {"beta": 0.5, "t_init": 0.1, "bandwidth": 100.0}
    assert table.update("f", "gpu", 1.0, 50.0, ["gpu"], **kw).t_trans == 0.0
    assert table.update("scan", "gpu", 1.0, 50.0, [], **kw).t_trans == pytest.approx(0.6)
    assert table.update("scan2", "cpu", 1.0, 50.0, [], **kw).t_trans == 0.0
    # a join with one input on each device: one transition carrying half the bytes
    assert table.update("j", "gpu", 1.0, 100.0, ["cpu", "gpu"], **kw).t_trans == pytest.approx(0.6)


def test_nearest_bucket_lookup() -> None:
    m = Monitor()
    kw = {"beta": 0.5, "t_init": 0.0, "bandwidth": 1.0}
    m.table(2).update("a", "gpu", 2.0, 1.0, [], **kw)
    m.table(7).update("a", "gpu", 7.0, 1.0, [], **kw)
    assert m.nearest_entry(4, "a", "gpu").t_exec == 2.0  # type: ignore[union-attr]
    assert m.nearest_entry(5, "a", "gpu").t_exec == 7.0  # type: ignore[union-attr]
    assert m.nearest_entry(5, "a", "cpu") is None
