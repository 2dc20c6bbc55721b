"""The engine profile: fitted from measured batches, read back, and taken as a query's prior."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from pacer import Controller
from pacer.engine_profile import CostPoint, EngineProfile, EngineProfileError, fit_profile, load
from pacer.service_time import PROBE_GROWTH, ServiceTimeModel
from pacer_workloads import make_query

MB = 1e6


def _points() -> list[CostPoint]:
    """Tiny batches of 0.5 s (0.2 core-s), large ones of 0.5 s + 1 s/MB on 2 slots (0.2 core-s + 2 core-s/MB)."""
    tiny = [CostPoint("tiny", 20, 1_000, t, 0.2) for t in (0.49, 0.5, 0.52)]
    large = [CostPoint("large", 20_000 * k, int(k * MB), 0.5 + 1.0 * k, 0.2 + 2.0 * k) for k in (1, 2, 4)]
    return tiny + large


def test_fixed_costs_come_from_tiny_batches_and_per_byte_costs_from_large_ones_beyond_them() -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2, no_data_s=0.3,
                          no_data_core_s=0.1)
    assert profile.fixed_s == 0.5 and profile.fixed_core_s == 0.2
    assert profile.engine_s_per_byte * MB == pytest.approx(1.0, abs=2e-5)
    assert profile.core_s_per_byte * MB == pytest.approx(2.0) and profile.core_s_per_row == pytest.approx(1e-4)
    assert profile.no_data_s == 0.3 and profile.no_data_core_s == 0.1 and profile.largest_bytes == 4 * MB
    assert profile.wall_s == pytest.approx(0.4)  # 0.5 s less 0.2 core-s on 2 slots


def test_the_per_byte_part_runs_in_task_waves() -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=4, slots=2)
    one_mb = profile.engine_s(MB) - profile.fixed_s
    assert profile.engine_s(MB, slots=4) - profile.fixed_s == pytest.approx(one_mb / 2)  # 1 wave, not 2
    assert profile.engine_s(MB, slots=3) - profile.fixed_s == pytest.approx(one_mb)  # still 2 waves
    assert profile.engine_s(MB, slots=1) - profile.fixed_s == pytest.approx(2 * one_mb)  # 4 waves


def test_a_profile_needs_tiny_and_larger_batches() -> None:
    with pytest.raises(EngineProfileError, match="0 tiny and 3 large"):
        fit_profile([p for p in _points() if p.kind == "large"], runtime="spark", workload=None, partitions=2, slots=2)
    same = [CostPoint("tiny", 20, MB, 0.5, 0.2), CostPoint("large", 20, MB, 0.5, 0.2)]
    with pytest.raises(EngineProfileError, match="no larger than the tiny ones"):
        fit_profile(same, runtime="spark", workload=None, partitions=2, slots=2)


def test_a_profile_file_reads_back_and_a_bad_one_is_refused_naming_it(tmp_path: Path) -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2, executor_startup_s=4.0)
    assert load(profile.write(tmp_path / "p.json")) == profile
    with pytest.raises(EngineProfileError, match="does not exist; write one with `pacer calibrate --runtime spark"):
        load(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text(json.dumps({"schema": "pacer.report/1"}))
    with pytest.raises(EngineProfileError, match=r"other.json' is not a pacer.engine-profile/1 document"):
        load(tmp_path / "other.json")
    doc = profile.as_dict() | {"fixed_s": -1.0}
    (tmp_path / "negative.json").write_text(json.dumps(doc))
    with pytest.raises(EngineProfileError, match="negative.json': fixed_s must be a finite number >= 0"):
        load(tmp_path / "negative.json")


def test_a_prior_predicts_from_the_first_batch_and_fades_as_the_query_measures_its_own() -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2)
    model = ServiceTimeModel(warmup=0)
    model.slots = 2.0
    model.take_prior(profile)
    assert model.ready and model.observations == 0 and not model.proportional
    assert model.predict_raw(2 * MB) == pytest.approx(profile.engine_s(2 * MB), rel=1e-6)
    assert model.probe_limit_bytes == pytest.approx(PROBE_GROWTH * 4 * MB)  # probes beyond the calibrated sizes
    for _ in range(100):  # this query's batches cost twice the calibration's
        model.observe(MB, 2 * profile.engine_s(MB))
        model.observe(2 * MB, 2 * profile.engine_s(2 * MB))
    assert model.predict_raw(2 * MB) == pytest.approx(2 * profile.engine_s(2 * MB), rel=0.02)
    with pytest.raises(ValueError, match="before the model fits any batch"):
        model.take_prior(profile)


def test_a_prior_is_taken_after_warm_up_batches_not_after_a_fitted_one() -> None:
    """A paced source may learn how it measures a row only after its first (warm-up) batch ran: the prior is still
    taken then, and the warm-up's size counts as measured."""
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2)
    model = ServiceTimeModel(warmup=1)
    model.slots = 2.0
    model.observe(10 * MB, 9.0)  # the warm-up batch: 5 MB a slot, larger than the calibration's 2
    model.take_prior(profile)
    assert model.ready and model.observations == 0
    assert model.probe_limit_bytes == pytest.approx(PROBE_GROWTH * 10 * MB)
    model.observe(MB, 1.0)
    with pytest.raises(ValueError, match="before the model fits any batch"):
        model.take_prior(profile)


def test_a_prior_survives_a_checkpoint() -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2)
    model = ServiceTimeModel(warmup=0)
    model.take_prior(profile)
    restored = ServiceTimeModel(warmup=0)
    restored.restore(json.loads(json.dumps(model.state())))
    assert restored.ready and restored.prior_batches == model.prior_batches
    assert restored.predict(MB) == model.predict(MB)


def test_the_controller_gives_a_query_its_workload_s_profile_and_refuses_another_s() -> None:
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2)
    controller = Controller(clock=lambda: 0.0, cores=2)
    controller.add_query(make_query("lr2", deadline=10.0), admission="zstream", engine_profile=profile)
    view = controller.query("lr2")
    assert view.engine_profile is profile and view.service_time["prior_batches"] > 0
    with pytest.raises(ValueError, match="measured on 'lr2': calibrate this query"):
        controller.add_query(make_query("cm1", deadline=10.0), engine_profile=profile)
    anyone = EngineProfile(runtime="spark", workload=None, partitions=2, slots=2, fixed_s=0.5, fixed_core_s=0.2,
                           engine_s_per_byte=1e-6, core_s_per_byte=2e-6, core_s_per_row=1e-4, largest_bytes=int(MB))
    controller.add_query(make_query("cm1", deadline=10.0), engine_profile=anyone)
    assert math.isclose(controller.query("cm1").service_time["fixed_ms"], 500.0)
    own = replace(make_query("lr2", query_id="mine", deadline=10.0), workload="")  # a user's query: no workload
    controller.add_query(own, engine_profile=profile)
    assert controller.query("mine").engine_profile is profile


def test_a_profile_is_read_in_another_source_s_bytes_per_row_with_the_same_costs_per_row() -> None:
    """pacer-gen calibrates at 50 bytes a row (``_points``); a Kafka query's records are 244: the same rows cost
    the same, so the per-byte costs fall and the largest batch measured grows by 244/50."""
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2)
    assert profile.bytes_per_row == pytest.approx(50.0)
    kafka = profile.in_bytes_of(244.0)
    assert kafka.bytes_per_row == pytest.approx(244.0) and kafka.largest_bytes == round(4 * MB * 244 / 50)
    for rows in (1_000, 80_000):
        assert kafka.core_s(rows * 244.0) == pytest.approx(profile.core_s(rows * 50.0))
        assert kafka.engine_s(rows * 244.0) == pytest.approx(profile.engine_s(rows * 50.0))
    assert kafka.in_bytes_of(244.0) == kafka and profile.in_bytes_of(math.nan) is profile
    assert replace(profile, points=()).in_bytes_of(244.0).largest_bytes == profile.largest_bytes


def test_the_profile_records_what_the_simulator_reads_and_why_a_figure_was_not_measured(tmp_path: Path) -> None:
    """Each task's share of the fixed part is measured from the tiny batches (0.2 core-s over 2 tasks of a 0.5 s
    batch: 20 %); executor warm-up and state reload are None with the reason, and the file keeps all of it."""
    why = {"executor_warmup_s": "local[2]: no executor added", "state_reload_s": "local[2]: no executor removed"}
    profile = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2, not_measured=why)
    assert profile.fixed_task_share == pytest.approx(0.2)
    assert profile.executor_warmup_s is None and profile.state_reload_s is None
    again = load(profile.write(tmp_path / "p.json"))
    assert again == profile and again.not_measured == why
    assert "each task 20% of the fixed part" in profile.describe() and "state reload not measured" in profile.describe()
    measured = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2, executor_warmup_s=1.2,
                           state_reload_s=0.4)
    assert (measured.executor_warmup_s, measured.state_reload_s) == (1.2, 0.4)
    assert "executor warm-up 1.20 s" in measured.describe()


def test_a_profile_written_before_the_task_share_was_recorded_derives_it(tmp_path: Path) -> None:
    doc = fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2).as_dict()
    for key in ("fixed_task_share", "executor_warmup_s", "state_reload_s", "not_measured"):
        del doc[key]
    (tmp_path / "old.json").write_text(json.dumps(doc))
    old = load(tmp_path / "old.json")
    assert old.fixed_task_share == pytest.approx(0.2) and old.not_measured == {}
    with pytest.raises(EngineProfileError, match="fixed_task_share"):
        replace(old, fixed_task_share=1.5)


def test_a_querys_first_batch_is_measured_apart_as_its_excess_over_the_model() -> None:
    """Each calibration step's first batch (a new query: its plan compiled, its state stores opened) is left out of
    the fit and kept as its excess over what its size costs (medians): 1.2 s and 0.5 core-s more here."""
    first = [CostPoint("first", 20_000, int(MB), 0.5 + 1.0 + 1.2, 0.2 + 2.0 + 0.5),
             CostPoint("first", 40_000, int(2 * MB), 0.5 + 2.0 + 1.0, 0.2 + 4.0 + 0.6),
             CostPoint("first", 40_000, int(2 * MB), 0.5 + 2.0 + 1.4, 0.2 + 4.0 + 0.4)]
    profile = fit_profile([*_points(), *first], runtime="spark", workload="lr2", partitions=2, slots=2)
    assert profile.fixed_s == 0.5 and profile.core_s_per_byte * MB == pytest.approx(2.0)  # the fit ignores them
    assert profile.first_batch_s == pytest.approx(1.2, abs=1e-4)
    assert profile.first_batch_core_s == pytest.approx(0.5, abs=1e-4)
    assert "a query's first batch 1200 ms more" in profile.describe()
    assert fit_profile(_points(), runtime="spark", workload="lr2", partitions=2, slots=2).first_batch_s is None


def test_where_tasks_were_counted_the_fixed_part_is_each_task_s() -> None:
    """A file source's batch runs a task per file up to the partitions: batches of one dataset ran one task, of two
    or more two; the fit gives each task's fixed core-seconds and the tasks a dataset ran, exactly (one line over
    the batches would put the second task's fixed part in the per-byte cost)."""
    from pacer.engine_profile import fit_batches

    shape = [(1, 1, 100_000), (2, 2, 150_000), (1, 1, 300_000), (2, 3, 200_000), (1, 1, 50_000), (2, 2, 400_000)]
    points = [CostPoint("batch", n // 100, n, 0.3, 0.02 * tasks + 1e-7 * n, tasks, datasets)
              for tasks, datasets, n in shape]
    profile = fit_batches(points, runtime="spark", workload=None, partitions=2, slots=2)
    assert profile.task_core_s == pytest.approx(0.02) and profile.core_s_per_byte == pytest.approx(1e-7)
    assert profile.batch_core_s == pytest.approx(0.0, abs=1e-12)
    assert profile.core_s_per_row == pytest.approx(1e-5) and profile.tasks_per_dataset == 1.0
    assert profile.fixed_core_s == pytest.approx(0.02 * 1.5)  # the median batch's tasks
    assert profile.core_s_per_byte_se == pytest.approx(0.0, abs=1e-15)  # exact points pin it down
    noisy = [replace(p, busy_core_s=(p.busy_core_s or 0.0) + (0.004 if i % 2 else -0.004)) for i, p in
             enumerate(points)]
    spread = fit_batches(noisy, runtime="spark", workload=None, partitions=2, slots=2).core_s_per_byte_se
    x = np.array([[p.tasks, p.bytes] for p in noisy], dtype=float)  # the textbook's: sigma^2 (X'X)^-1
    y = np.array([p.busy_core_s for p in noisy])
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    sigma2 = float(((y - x @ coef) ** 2).sum()) / (len(y) - 2)
    assert spread == pytest.approx(math.sqrt(sigma2 * np.linalg.inv(x.T @ x)[1, 1]))
    # a Kafka batch costs about the same with one topic partition's data as with two: the part per batch is fitted
    kafka = [CostPoint("batch", n // 100, n, 0.3, 0.17 + 1e-8 * n, tasks, 1)
             for tasks, _, n in shape]
    per_batch = fit_batches(kafka, runtime="spark", workload=None, partitions=2, slots=2)
    assert per_batch.batch_core_s == pytest.approx(0.17) and per_batch.task_core_s == pytest.approx(0.0, abs=1e-12)
    assert per_batch.core_s_per_byte == pytest.approx(1e-8)
    uncounted = fit_batches([CostPoint(*p[:5]) for p in (dataclasses.astuple(q) for q in points)], runtime="spark",
                            workload=None, partitions=2, slots=2)
    assert uncounted.task_core_s is None and uncounted.tasks_per_dataset is None


def test_a_running_query_s_batches_give_its_fixed_and_per_byte_cost_as_one_fitted_line() -> None:
    """``fit_batches`` (observe mode): intercept and slope both fitted, exact on exact points (through the median of
    the smallest batches, the intercept would carry their per-byte cost: 0.6 s, not 0.5); the first batch's excess
    kept apart; one size only, or one batch, is refused."""
    from pacer.engine_profile import fit_batches

    sizes = (100_000, 200_000, 300_000, 400_000, 500_000, 600_000)
    points = [CostPoint("batch", n // 100, n, 0.5 + 1e-6 * n, 0.2 + 2e-6 * n) for n in sizes]
    points.insert(0, CostPoint("first", 1000, 100_000, 3.0, 1.0))
    profile = fit_batches(points, runtime="spark", workload=None, partitions=2, slots=2)
    assert profile.fixed_s == pytest.approx(0.5) and profile.engine_s_per_byte == pytest.approx(1e-6)
    assert profile.fixed_core_s == pytest.approx(0.2) and profile.core_s_per_byte == pytest.approx(2e-6)
    assert profile.core_s_per_row == pytest.approx(2e-4) and profile.first_batch_s == pytest.approx(2.4)
    assert profile.fixed_task_share == pytest.approx(0.2 / (2 * 0.5)) and profile.rms_s == pytest.approx(0.0)
    # its per-byte costs are in the recorded source's bytes: 100 a row, so a source of 400-byte rows pays a quarter
    assert profile.bytes_per_row == pytest.approx(100.0)
    assert profile.in_bytes_of(400.0).core_s_per_byte == pytest.approx(0.5e-6)
    with pytest.raises(EngineProfileError, match="at least two sizes"):
        fit_batches([CostPoint("batch", 10, 640, 0.5, 0.2)] * 3, runtime="spark", workload=None, partitions=2,
                    slots=2)
