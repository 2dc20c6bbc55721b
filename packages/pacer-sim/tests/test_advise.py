"""``pacer advise``: a recording replayed with its own costs says what pacing would do.

The recording here is written by :class:`pacer.observed.Recorder` from a simulated run's batches (the Spark side,
observe mode writing the same file from Spark's batches, is pacer-spark's ``test_observe_spark.py``): the replay
of a run on the engine that ran it must give its figures back, and the paced replay must trade batches for latency
as the strategy says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer import Dataset, MicroBatch, QueryRun, RunConfig
from pacer.cli import main
from pacer.engine_profile import fit_batches
from pacer.observed import Recorder, read
from pacer_sim import SIM_RUNTIME
from pacer_sim.advise import AdviseConfig, advise, render
from pacer_sim.calibrated import tasks_of
from pacer_workloads import make_query


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two and a half minutes of LR1 on wave traffic (300 rows/s on average) under Spark's default trigger, on 2 cores."""
    run = RunConfig((QueryRun("lr1", query_id="q", traffic="wave", rate=300.0, admission="asap", deadline=10.0),),
                    duration=150.0, cores=2)
    result = SIM_RUNTIME.run(run)
    path = tmp_path_factory.mktemp("observed") / "q.jsonl"
    recorded = Recorder(path, {"query": "q", "cores": 2, "partitions": 2, "options": {"pacer.deadline": "10s"}})
    assert recorded.record(result.controller.reports("q")) == result.report["queries"]["q"]["batches"] == 150
    return path


def test_the_replay_gives_the_observed_run_back_and_pacing_takes_fewer_larger_batches(recording: Path) -> None:
    advice = advise(read(recording), AdviseConfig(deadline_s=10.0, max_executors=4))
    replay, paced = advice["replay"], advice["paced"]
    assert advice["observed"]["batches"] == 150 and replay["batches"] == 150
    assert replay["within_bounds"], replay
    assert abs(replay["busy_ratio"] - 1.0) <= 0.20 and replay["late_points"] == 0.0
    assert paced["late_pct"] <= 1.0 and paced["batches_ratio"] < 0.5 and paced["busy_ratio"] < 1.0
    assert advice["fewest_executors"] == 1 and advice["executors"][0]["late_pct"] <= 1.0
    assert advice["runtime"] == "sim" and "simulator's" in render(advice)
    low, high = paced["busy_core_s_range"]  # the recorded batches' spread of per-byte cost, +-2 standard errors
    assert low < paced["busy_core_s"] < high and "pin their per-byte cost to +-2 standard errors" in render(advice)


def test_a_source_that_measures_rows_smaller_is_replayed_at_the_same_cost(recording: Path, tmp_path: Path) -> None:
    """A csv file's line is a fifth of the simulator's row: the replay costs each row what the recording says it
    cost, not its bytes at the simulator's size (the fitted profile's bytes were taken as the simulator's, and the
    replay of observe-check's own recording counted 1.34x its busy core-s)."""
    lines = recording.read_text().splitlines()
    smaller = [lines[0]] + [json.dumps({**doc, "bytes": doc["bytes"] // 5})
                            for doc in map(json.loads, lines[1:])]
    path = tmp_path / "csv.jsonl"
    path.write_text("\n".join(smaller) + "\n")
    plain = advise(read(recording), AdviseConfig(deadline_s=10.0, max_executors=1))
    advice = advise(read(path), AdviseConfig(deadline_s=10.0, max_executors=1))
    assert advice["replay"]["busy_core_s"] == pytest.approx(plain["replay"]["busy_core_s"], rel=0.02)
    assert advice["replay"]["within_bounds"], advice["replay"]


def test_a_query_whose_batches_ran_one_task_each_costs_more_per_batch_paced(recording: Path, tmp_path: Path) -> None:
    """A file source read one file (one task) per batch as observed; paced, a batch takes several files and runs a
    task per partition: the replay as observed costs what it did, the paced one each batch's second task more (a
    fit blind to tasks predicted paced csv batches at 0.47x what Spark measured)."""
    lines = recording.read_text().splitlines()
    one_task = [lines[0]] + [json.dumps({**doc, "tasks": 1}) for doc in map(json.loads, lines[1:])]
    path = tmp_path / "one-task.jsonl"
    path.write_text("\n".join(one_task) + "\n")
    two = advise(read(recording), AdviseConfig(deadline_s=10.0, max_executors=1))
    one = advise(read(path), AdviseConfig(deadline_s=10.0, max_executors=1))
    assert all(json.loads(line)["tasks"] == 2 for line in lines[1:]), "the simulator records its batches' tasks"
    assert one["replay"]["busy_core_s"] == pytest.approx(two["replay"]["busy_core_s"], rel=0.01)
    fitted = {name: fit_batches(read(p).cost_points(), runtime="spark", workload=None, partitions=2, slots=2)
              for name, p in (("one", path), ("two", recording))}
    spec = make_query("lr1", query_id="q", partitions=2)
    for datasets, one_task, two_tasks in ((1, 1, 2), (9, 2, 2)):  # a task per dataset up to the partitions
        batch = MicroBatch("b", "q", 1, tuple(Dataset(f"d{i}", 0.0, 100, 10) for i in range(datasets)), 0.0)
        assert (tasks_of(fitted["one"], spec, batch), tasks_of(fitted["two"], spec, batch)) == (one_task, two_tasks)
    # each paced batch of two datasets or more runs one task's fixed part more (the first, ramping up, take one)
    per_task = fitted["one"].task_core_s
    assert per_task is not None and fitted["two"].task_core_s == pytest.approx(per_task / 2, rel=1e-6)
    extra = one["paced"]["busy_core_s"] - two["paced"]["busy_core_s"]
    assert (one["paced"]["batches"] - 3) * per_task <= extra <= (one["paced"]["batches"] + 1) * per_task, extra


def test_a_deadline_out_of_reach_says_so(recording: Path) -> None:
    """A deadline under what one batch costs: no executor count meets it, and every count tried is listed."""
    advice = advise(read(recording), AdviseConfig(deadline_s=0.05, max_executors=2))
    assert advice["fewest_executors"] is None and [e["executors"] for e in advice["executors"]] == [1, 2]
    assert "out of reach" in render(advice)


def test_the_command_reads_the_query_s_deadline_and_refuses_what_it_cannot_use(
        recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "advice.json"
    assert main(["advise", str(recording), "--max-executors", "2", "--out", str(out)]) == 0
    assert "fewest executors meeting the deadline: 1 x 1 cores" in capsys.readouterr().out
    assert json.loads(out.read_text())["deadline_s"] == 10.0
    assert main(["advise", str(recording), "--deadline", "soon"]) == 2
    assert "pacer advise: error: --deadline expects a duration" in capsys.readouterr().err
    flat = tmp_path / "flat.jsonl"
    Recorder(flat, {"query": "q"}).record([])
    assert main(["advise", str(flat), "--deadline", "5s"]) == 2
    assert "holds no batch: observe the query longer" in capsys.readouterr().err
    assert main(["advise", str(recording), "--max-executors", "0"]) == 2
