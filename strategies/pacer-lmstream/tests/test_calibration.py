"""``initial_rows``: the calibration rows Eq. 10 starts from (file format, validation, effect on InfPT)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer import Controller, Devices, Operator, OperatorDAG, QuerySpec, get_plugin_manager
from pacer.clock import ManualClock
from pacer_lmstream import LMStreamState, Sample
from pacer_lmstream.calibration import SCHEMA, CalibrationError, load_rows, write_rows
from pacer_lmstream.plugin import PARAMS

DEFAULTS = {p.name: p.default for p in PARAMS}

#: lr1 at 256 KB/s as ``pacer calibrate`` measured it (simulated): below 128 KB per partition every
#: GPU-capable operator runs on the GPU (faster, lower MaxLat), above it everything on the CPU.
LR1_ROWS = [
    Sample(142_913.0, 4.56, 37_500.0),
    Sample(142_913.0, 4.56, 75_000.0),
    Sample(117_169.0, 4.42, 150_000.0),
    Sample(117_169.0, 4.42, 300_000.0),
    Sample(117_169.0, 4.42, 600_000.0),
]


def _spec(slide: float = 5.0) -> QuerySpec:
    dag = OperatorDAG.chain(Operator("scan", "scan"), Operator("agg", "aggregate"), Operator("sink", "sink"))
    return QuerySpec("q", dag, window_range=30.0, window_slide=slide, partitions=2)


def _state(rows_file: Path | str, **params: object) -> LMStreamState:
    return LMStreamState(_spec(), {**DEFAULTS, "async_regression": False, "initial_rows": str(rows_file), **params})


def test_rows_round_trip_through_the_file(tmp_path: Path) -> None:
    path = write_rows(LR1_ROWS, tmp_path / "sub" / "rows.json", workload="lr1", rate_rows_per_s=3992.9)
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["workload"] == "lr1" and len(doc["rows"]) == 5
    assert load_rows(path) == LR1_ROWS


def test_the_rows_move_the_inflection_point_to_the_fastest_points_of_the_sweep(tmp_path: Path) -> None:
    rows = write_rows(LR1_ROWS, tmp_path / "rows.json")
    state = _state(rows)
    # Eq. 10 at (max throughput, SlideTime 5 s) lies among the GPU rows (37.5-75 KB), below Part = 128 KB
    assert 37_500.0 <= state.inflection <= 75_000.0
    without = LMStreamState(_spec(), {**DEFAULTS, "async_regression": False, "inflection_profile": "none"})
    assert without.inflection == 150_000.0


def test_the_fit_never_leaves_the_swept_range(tmp_path: Path) -> None:
    # throughput rises with InfPT and the target is the maximum: unclamped, Eq. 10 would extrapolate upwards
    rising = [Sample(100.0 * k, 1.0 + 0.1 * k, 10_000.0 * k) for k in (1, 2, 3)]
    state = _state(write_rows(rising, tmp_path / "rows.json"), regression_ridge=0.0)
    assert state.inflection == pytest.approx(30_000.0)
    assert (state.regressor.min_bytes, state.regressor.max_bytes) == (10_000.0, 30_000.0)


def test_the_rows_are_the_first_of_the_regression_window(tmp_path: Path) -> None:
    state = _state(write_rows(LR1_ROWS, tmp_path / "rows.json"), regression_window=6)
    assert list(state.regressor.samples) == LR1_ROWS and state.regressor.fits == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        (json.dumps({"schema": "pacer.report/1", "rows": []}), "is not a calibration file"),
        (json.dumps({"schema": SCHEMA, "rows": [{"inflection_bytes": 1, "throughput_bytes_per_s": 1, "latency_s": 1}]}),
         "has 1 rows; Eq. 10 needs at least 3"),
        (json.dumps({"schema": SCHEMA, "rows": [{"inflection_bytes": 1, "throughput_bytes_per_s": 1}] * 3}),
         "row 0 has no 'latency_s'"),
        (json.dumps({"schema": SCHEMA, "rows": [{"inflection_bytes": "big", "throughput_bytes_per_s": 1,
                                                 "latency_s": 1}] * 3}), "must be a finite number"),
        (json.dumps({"schema": SCHEMA, "rows": [{"inflection_bytes": -1, "throughput_bytes_per_s": 1,
                                                 "latency_s": 1}] * 3}), "> 0"),
        (json.dumps({"schema": SCHEMA, "rows": [1, 2, 3]}), "row 0 must be an object"),
    ],
)
def test_malformed_files_are_refused_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "rows.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=message) as info:
        _state(path)
    assert str(path) in str(info.value)


def test_a_missing_file_is_refused_at_add_query_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    pm = get_plugin_manager(allowed=["lmstream"])
    c = Controller(clock=ManualClock(), cores=2, devices=Devices(cpu_cores=2, gpus=1), plugin_manager=pm, timer=None)
    with pytest.raises(ValueError, match="does not exist") as info:
        c.add_query(_spec(), admission="asap", placement="lmstream", placement_params={"initial_rows": str(missing)})
    assert str(missing) in str(info.value) and "pacer calibrate" in str(info.value)
