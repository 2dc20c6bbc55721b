"""``inflection_profile``: InfPT_0 from a cost profile (by default the simulator's when a run names none), the
query's own CPU/GPU crossover under it; the paper's 150 KB where asked for or where no profile is known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pacer import Dataset, Devices, MicroBatch, Operator, OperatorDAG, QuerySpec
from pacer_lmstream.plugin import PARAMS
from pacer_lmstream.profile import (
    PAPER_INFLECTION_BYTES,
    crossover_bytes,
    initial_inflection,
    known_profile,
    profile_cost_model,
    query_seconds,
)
from pacer_lmstream.state import LMStreamState
from pacer_sim.costs import CostModel, OperatorCost, default_operators

DAG = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink", cpu_only=True))
SPEC = QuerySpec("q", DAG, window_range=10.0, window_slide=5.0, partitions=2)
QUIET = replace(CostModel(), noise=0.0)


def test_the_crossover_is_where_the_query_costs_the_same_on_both_devices() -> None:
    part = crossover_bytes(QUIET, SPEC)
    assert 1_000 < part < 256e6
    below, above = part * 0.99, part * 1.01
    assert query_seconds(QUIET, SPEC, below, on_gpu=True) > query_seconds(QUIET, SPEC, below, on_gpu=False)
    assert query_seconds(QUIET, SPEC, above, on_gpu=True) < query_seconds(QUIET, SPEC, above, on_gpu=False)


def test_a_gpu_cheaper_per_byte_crosses_over_on_smaller_partitions() -> None:
    slower = dict(default_operators())
    slower["aggregate"] = OperatorCost(0.003, 0.45, 0.060, 0.20, selectivity=0.2)  # GPU per MB 0.20 instead of 0.05
    assert crossover_bytes(QUIET, SPEC) < crossover_bytes(replace(QUIET, operators=slower), SPEC)
    never = {k: OperatorCost(c.cpu_fixed, c.cpu_per_mb, c.gpu_fixed + 1.0, c.cpu_per_mb, c.selectivity)
             for k, c in default_operators().items()}
    assert crossover_bytes(replace(QUIET, operators=never), SPEC) == 256e6  # dearer throughout: the upper clamp


def test_the_state_starts_from_the_profiles_crossover_and_says_so() -> None:
    params = {p.name: p.default for p in PARAMS} | {"inflection_profile": "builtin", "async_regression": False}
    state = LMStreamState(SPEC, params)
    assert state.inflection == pytest.approx(crossover_bytes(profile_cost_model("builtin"), SPEC))
    assert state.inflection != 150_000.0
    batch = MicroBatch("q#1", "q", 1, (Dataset("d", 0.0, 2 * int(state.inflection * 4), 1),), 0.0)
    placement = state.place(batch, DAG, Devices(cpu_cores=2, gpus=1), 2)
    assert "InfPT_0 from builtin" in placement.note
    assert placement.devices["agg"] == "gpu"  # 4x past the crossover


def test_by_default_the_profile_is_the_one_the_simulator_runs_on_when_a_run_names_none() -> None:
    from pacer_sim import BUILTIN_PROFILE, Simulation, build_cost_model

    assert known_profile() == BUILTIN_PROFILE
    unnamed, warning = build_cost_model({}, gpus=1)
    assert warning is None
    assert replace(unnamed, noise=0.0) == profile_cost_model(known_profile())
    assert replace(Simulation().cost_model, noise=0.0) == profile_cost_model(known_profile())
    defaults = {p.name: p.default for p in PARAMS}
    assert (defaults["inflection_profile"], defaults["initial_inflection_bytes"]) == ("auto", 0.0)
    state = LMStreamState(SPEC, defaults)
    assert state.inflection == crossover_bytes(profile_cost_model(BUILTIN_PROFILE), SPEC)
    assert state.inflection_profile == BUILTIN_PROFILE


@pytest.mark.parametrize("letter", [{"inflection_profile": "none"}, {"inflection_profile": ""},
                                    {"inflection_profile": "None"}, {"initial_inflection_bytes": 150_000.0},
                                    {"initial_inflection_bytes": 150_000.0, "inflection_profile": "none"}])
def test_the_paper_s_150_kb_where_asked_for(letter: dict[str, object]) -> None:
    state = LMStreamState(SPEC, {p.name: p.default for p in PARAMS} | letter)
    assert state.inflection == 150_000.0 and state.inflection_profile == ""
    assert initial_inflection(None, {p.name: p.default for p in PARAMS}) == (PAPER_INFLECTION_BYTES, "")  # no query
    batch = MicroBatch("q#1", "q", 1, (Dataset("d", 0.0, 2 * 150_000, 1),), 0.0)
    assert "InfPT_0 from" not in state.place(batch, DAG, Devices(cpu_cores=2, gpus=1), 2).note


def test_a_given_number_is_the_initial_point_and_a_profile_besides_it_is_refused() -> None:
    defaults = {p.name: p.default for p in PARAMS}
    assert initial_inflection(SPEC, defaults | {"initial_inflection_bytes": 2e5}) == (2e5, "")
    with pytest.raises(ValueError, match=r"initial_inflection_bytes=200000 and inflection_profile='builtin' both"):
        initial_inflection(SPEC, defaults | {"initial_inflection_bytes": 2e5, "inflection_profile": "builtin"})
    with pytest.raises(ValueError, match=r"initial_inflection_bytes must be > 0"):
        initial_inflection(SPEC, defaults | {"initial_inflection_bytes": -1.0})


def test_without_pacer_sim_no_profile_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pacer_sim", None)  # import pacer_sim raises ImportError
    assert known_profile() is None
    assert initial_inflection(SPEC, {p.name: p.default for p in PARAMS}) == (PAPER_INFLECTION_BYTES, "")


def test_an_unknown_profile_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"inflection_profile 'no such gpu'.*pacer calibrate --kernels"):
        profile_cost_model("no such gpu")
