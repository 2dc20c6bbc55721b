"""``python -m pacer_bench.scaling_spark``'s pure parts: the wave, what a count of executors serves, the sink's
figures and the goal lines; and the committed measurement judged again from its JSON (no Spark: the measurement
is run by hand, ``bench-results/scaling-spark/README.md``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pacer_bench.scaling_spark import (
    Wave,
    capacity,
    core_s,
    executors_over_time,
    judge,
    main,
    markdown,
    needed,
    parse_config,
    sink_figures,
)

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "bench-results" / "scaling-spark"


def test_the_wave_is_a_trough_a_rise_the_peak_a_fall_and_the_trough() -> None:
    wave = Wave(80, 450, 270)
    assert wave.phases() == {"rise": 30.0, "peak": 90.0, "fall": 150.0, "trough": 180.0}
    rates = wave.schedule()
    assert len(rates) == 270
    assert set(rates[:30]) == {80} and set(rates[90:150]) == {450} and set(rates[180:]) == {80}
    assert rates[30:90] == sorted(rates[30:90]) and rates[150:180] == sorted(rates[150:180], reverse=True)
    assert rates[59] < 265 < rates[60]  # the raised cosine's middle
    # 120 s at the trough, 60 s at the peak, the two ramps' 90 s at the middle on average
    assert abs(sum(rates) - (120 * 80 + 60 * 450 + 90 * 265)) <= 20
    assert Wave(100, 500, 90).phases()["rise"] == 10.0


def test_what_a_count_of_executors_serves_and_what_the_wave_needs() -> None:
    # 4 ms a row: one core serves 250 rows/s, 150 within a 10 s deadline whose batches have a 2 s fixed part
    assert capacity(1, wait_ms=4.0, deadline_s=10.0) == pytest.approx(150.0)
    assert capacity(3, wait_ms=4.0, deadline_s=10.0, fixed_part_s=0.0) == pytest.approx(750.0)
    assert [needed(r, wait_ms=4.0, deadline_s=10.0) for r in (0, 80, 150, 151, 300, 450)] == [1, 1, 1, 2, 2, 3]


def test_configurations_are_attach_keywords() -> None:
    assert parse_config("deadline", 5, 1) == {"scale": "deadline", "executors": (1, 5), "initial_executors": 1}
    assert parse_config("fixed-3", 5, 1) == {"scale": "fixed", "executors": (3, 3), "initial_executors": 3}
    for bad in ("fixed-0", "fixed-6", "fixed", "dynamic"):
        with pytest.raises(ValueError):
            parse_config(bad, 5, 1)


def test_the_sink_figures_count_late_duplicated_missing_and_unknown_records() -> None:
    t0 = 1000.0
    batches = [{"done": t0 + 5.0, "keys": [0, 1, 2], "ts": [t0 + 0.1, t0 + 0.5, t0 + 1.2]},
               {"done": t0 + 13.0, "keys": [3, 1, 9], "ts": [t0 + 2.5, t0 + 0.5, t0 + 2.9]}]
    figures = sink_figures(batches, produced=5, t0=t0, deadline_s=10.0, duration_s=3)
    assert (figures["rows"], figures["distinct"], figures["duplicates"], figures["unknown"]) == (6, 5, 1, 1)
    assert figures["missing"] == 1  # key 4 never came (9 is none of the produced)
    # second 0: keys 0, 1 (4.9 s, 4.5 s); second 1: key 2 (3.8 s); second 2: keys 3, 9 (10.5 s, 10.1 s: late)
    assert figures["per_second"] == [[2, 0, 4.9], [1, 0, 3.8], [2, 2, 10.5]]
    assert figures["latency_max_s"] == 10.5


def test_executors_over_time_and_their_core_seconds_come_from_sparks_spans() -> None:
    spans = [{"id": "0", "cores": 1, "added": 90.0, "removed": None},
             {"id": "1", "cores": 1, "added": 90.0, "removed": 101.0},
             {"id": "2", "cores": 1, "added": 130.0, "removed": 170.0}]
    assert executors_over_time(spans, 100.0, 200.0) == [[0.0, 2], [1.0, 1], [30.0, 2], [70.0, 1]]
    assert core_s(spans, 100.0, 200.0) == pytest.approx(100.0 + 1.0 + 40.0)


def test_executors_asked_together_are_one_change_and_a_scale_up_before_the_rise_is_in_time() -> None:
    doc = _doc()
    scaled = doc["runs"][0]
    # Spark's 4 at attach, pacer keeps 1 (removed 0.2 s apart), asks 3 in the trough: they register 0.4 s apart at
    # 3 s, and two go 0.3 s apart at 15 s (after the fall)
    scaled["attach"]["initial_executors"] = 1
    scaled["spans"] = [_span(0, 900.0), _span(1, 900.0, 1000.5), _span(2, 900.0, 1000.7), _span(3, 900.0, 1000.6),
                       _span(4, 1003.0), _span(5, 1003.4, 1015.3), _span(6, 1003.2, 1015.0)]
    scaled["scaling"]["changes"] = [{"at": 11.0, "from": 1, "to": 4, "reason": "deadlines need 4"}]
    rows, goals = judge(doc)
    row = rows[0]
    assert row["executors"] == [[0.0, 4], [0.5, 1], [3.0, 4], [15.0, 2]]
    assert row["removed_after_peak"] == {"t": 15.0, "from": 4, "to": 2}
    assert row["added_after_rise_s"] == pytest.approx(3.0 - row["rise_s"]) and row["added_after_rise_s"] < 0
    assert goals[1].startswith("GOAL adds executors within one start-up + one deadline of the rise: met")
    assert "before the rise" in goals[1]


def _run(config: str, spans: list[dict[str, Any]], late_seconds: int, *, changes: list[dict[str, Any]] | None = None,
         scale: str = "fixed") -> dict[str, Any]:
    """A raw record of 10 rows a second for 20 s from t0 = 1000, ``late_seconds`` of them all late."""
    per_second = [[10, 10 if s < late_seconds else 0, 1.0] for s in range(20)]
    return {"config": config, "attach": {"scale": scale}, "produced": {"t0": 1000.0, "count": 200},
            "sink": {"per_second": per_second, "missing": 0, "duplicates": 0, "unknown": 0, "latency_p99_s": 2.0,
                     "latency_max_s": 12.0},
            "spans": spans, "cost": {"allocated_core_s": 1.0}, "anchor": 990.0,
            "scaling": {"changes": changes or [], "startup_s": 8.0}}


def _span(i: int, added: float, removed: float | None = None) -> dict[str, Any]:
    return {"id": str(i), "cores": 1, "added": added, "removed": removed}


def _doc() -> dict[str, Any]:
    wave = Wave(100, 500, 20)
    model = {"wait_ms": 4.0, "deadline_s": 10.0, "fixed_part_s": 1.0}
    schedule = wave.schedule()
    traffic = {"low": 100, "high": 500, "duration_s": 20, **model, "phases": wave.phases(), "schedule": schedule,
               "needed": [needed(r, **model) for r in schedule]}
    fixed = [_run(f"fixed-{k}", [_span(i, 900.0) for i in range(k)], late) for k, late in ((2, 4), (3, 0), (4, 0))]
    # the deadline scaler: 1 executor, a second asked at 1005 (5 s after t0) and running at 1010, a third at 1012,
    # one removed at 1025 (the fall begins at 11.7 s)
    spans = [_span(0, 900.0), _span(1, 1010.0), _span(2, 1012.0, 1025.0)]
    changes = [{"at": 15.0, "from": 1, "to": 3, "reason": "deadlines need 3"},
               {"at": 34.0, "from": 3, "to": 2, "reason": "deadlines need 2"}]
    scaled = _run("deadline", spans, 0, changes=changes, scale="deadline")
    return {"workers": 4, "traffic": traffic, "runs": [scaled, *fixed],
            "machine": {"when": "now", "machine": "here", "pyspark": "4"}}


def test_the_goal_lines_judge_the_deadline_scaler_against_the_cheapest_fixed_count() -> None:
    doc = _doc()
    rows, goals = judge(doc)
    by = {r["config"]: r for r in rows}
    assert by["fixed-2"]["late_share"] == pytest.approx(0.2) and by["fixed-3"]["late_share"] == 0.0
    window = 20 + 10  # the traffic and one deadline
    assert by["fixed-3"]["allocated_core_s"] == pytest.approx(3 * window)
    # the deadline scaler: 30 s of one, 20 of a second, 13 of a third
    assert by["deadline"]["allocated_core_s"] == pytest.approx(30 + 20 + 13)
    assert by["deadline"]["x_cheapest_fixed"] == pytest.approx(round(63 / 90, 3))
    # the rise: 1 executor serves 200 rows/s; the schedule's first second above it
    rise = next(s for s, r in enumerate(doc["traffic"]["schedule"]) if r > 200)
    assert by["deadline"]["rise_s"] == rise and by["deadline"]["held_at_rise"] == 1
    assert by["deadline"]["added_after_rise_s"] == pytest.approx(10.0 - rise)
    assert by["deadline"]["asked_after_rise_s"] == pytest.approx(5.0 - rise)
    assert by["deadline"]["removed_after_peak"] == {"t": 25.0, "from": 3, "to": 2}
    assert goals[0].startswith("PREMISE the load needs >= 3 executors at its peak and 1-2 at its trough: met")
    assert "fixed-2 20.00 % late" in goals[0]
    assert [g.split(": ")[1].split(" ")[0] for g in goals[1:]] == ["met"] * 5, goals
    assert "63.0 / 90.0 core-s of fixed-3 = 0.7" in goals[4]


def test_the_goal_lines_say_what_is_not_met() -> None:
    doc = _doc()
    scaled = doc["runs"][0]
    scaled["spans"] = [_span(0, 900.0), _span(1, 1030.0)]  # the second executor long after the rise, none removed
    scaled["sink"]["per_second"][5][1] = 10  # 5 % late
    scaled["sink"]["duplicates"] = 1
    _, goals = judge(doc)
    assert [g.split(": ")[1].split(" ")[0] for g in goals[1:]] == ["NOT", "not", "NOT", "met", "NOT"], goals
    assert "5.00 %, 10 of 200" in goals[3]


def test_a_failed_configuration_is_named_not_judged() -> None:
    doc = _doc()
    doc["runs"][0] = {"config": "deadline", "attach": {"scale": "deadline"}, "error": "Py4JError: boom"}
    rows, goals = judge(doc)
    assert rows[0]["judged"] is False and "Py4JError: boom" in goals[-1]
    assert "| deadline | failed: Py4JError: boom |" in markdown(doc)


def test_the_committed_measurement_is_what_rejudging_its_json_gives(tmp_path: Path) -> None:
    if not (RESULTS / "scaling-spark.json").exists():
        pytest.skip("no committed measurement")
    shutil.copy(RESULTS / "scaling-spark.json", tmp_path / "scaling-spark.json")
    assert main(["--out", str(tmp_path), "--rejudge"]) == 0
    assert (tmp_path / "scaling-spark.md").read_text() == (RESULTS / "scaling-spark.md").read_text()
    doc = json.loads((RESULTS / "scaling-spark.json").read_text())
    assert {r["config"] for r in doc["runs"]} >= {"deadline"}
