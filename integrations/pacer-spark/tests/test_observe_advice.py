"""Observe mode's live advice (:mod:`pacer_spark.driver.advice`): the driver replays the recording on the simulator
every ``pacer.observe.adviseEvery``, on one worker thread, and says why when it cannot.

The recording is written by :class:`pacer.observed.Recorder` from a simulated run's batches; the Spark side (the
figures in a real observed query's progress and report) is ``test_observe_spark.py``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from pacer import QueryRun, RunConfig
from pacer.observed import Recorder
from pacer_sim import SIM_RUNTIME
from pacer_spark.driver.advice import METRICS, Advisor
from pacer_spark.driver.protocol.state import advise_every, check_options


class StepClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two minutes of LR1 on wave traffic under Spark's default trigger, on 2 cores."""
    run = RunConfig((QueryRun("lr1", query_id="q", traffic="wave", rate=300.0, admission="asap", deadline=10.0),),
                    duration=120.0, cores=2)
    result = SIM_RUNTIME.run(run)
    path = tmp_path_factory.mktemp("observed") / "q.jsonl"
    Recorder(path, {"query": "q", "cores": 2, "partitions": 2}).record(result.controller.reports("q"))
    return path


def test_the_advice_comes_when_due_on_one_worker_and_fills_every_figure(
        recording: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pacer_sim.advise

    monkeypatch.delenv("PACER_PLUGINS")  # zStream, pacer-zstream's: this package's tests load the baselines only
    clock = StepClock()
    advisor = Advisor(recording, deadline_s=10.0, admission="zstream", every_s=60.0, clock=clock)
    assert advisor.metrics() == {} and advisor.summary()["latest"] is None
    assert not advisor.poll()  # not due before a minute
    release = threading.Event()
    real = pacer_sim.advise.advise

    def held(*args: Any, **kwargs: Any) -> Any:
        release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(pacer_sim.advise, "advise", held)
    clock.now = 60.0
    assert advisor.poll() and advisor.running  # the next is due at 120 s
    clock.now = 130.0
    assert not advisor.poll(), "a replay still running is never started twice"
    release.set()
    advisor.wait(60)
    assert advisor.error is None and advisor.latest is not None
    figures = advisor.metrics()
    assert set(figures) == set(METRICS) and all(figures[k] for k in METRICS)
    assert float(figures["pacerAdvicePacedBatchesRatio"]) < 0.5 and figures["pacerAdviceFewestExecutors"] == "1"
    summary = advisor.summary()
    assert summary["latest"]["replay"]["within_bounds"] and summary["advised_at"] is not None
    assert advisor.poll()  # due since 120 s: the next at 190 s
    advisor.wait(60)
    clock.now = 150.0
    assert not advisor.poll()


def _due(path: Path, *, deadline_s: float | None = 10.0, admission: str = "zstream") -> Advisor:
    """An advisor whose first advice is due."""
    clock = StepClock()
    advisor = Advisor(path, deadline_s=deadline_s, admission=admission, every_s=1.0, clock=clock)
    clock.now = 1.0
    return advisor


def test_without_a_deadline_pacer_sim_or_a_recording_it_says_why(recording: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    no_deadline = _due(recording, deadline_s=None)
    assert not no_deadline.poll() and "set pacer.deadline (or attach's deadline) to the latency target" in \
        str(no_deadline.error)
    missing = _due(tmp_path / "none.jsonl")
    assert missing.poll()  # the worker reads it, off the driver's thread
    missing.wait(60)
    assert missing.latest is None and str(missing.error).startswith("no advice yet: cannot read the recording")
    monkeypatch.setitem(sys.modules, "pacer_sim.advise", None)  # pacer-sim not installed on the driver
    without_sim = _due(recording)
    assert without_sim.poll()
    without_sim.wait(60)
    assert without_sim.latest is None and "pip install ./packages/pacer-sim" in str(without_sim.error)
    assert f"pacer advise {recording}" in str(without_sim.error)


def test_an_unknown_admission_is_no_advice_not_a_failed_query(recording: Path) -> None:
    advisor = _due(recording, admission="no-such-strategy")
    assert advisor.poll()
    advisor.wait(60)
    assert advisor.latest is None and str(advisor.error).startswith("no advice: unknown admission strategy")
    assert str(advisor.error).endswith("set pacer.admission to the strategy to advise for")
    assert "no-such-strategy" in str(advisor.error)


def test_advise_every_reads_as_a_duration_and_refuses_what_is_not_one() -> None:
    assert advise_every({}) == 300.0 and advise_every({"pacer.observe.adviseEvery": "30s"}) == 30.0
    assert advise_every({"pacer.observe.adviseEvery": "0"}) == 0.0
    assert check_options({"PACER.OBSERVE.ADVISEEVERY": "2 minutes"}) == {"pacer.observe.adviseEvery": "2 minutes"}
    assert advise_every({"pacer.observe.adviseEvery": "2 minutes"}) == 120.0
    with pytest.raises(ValueError, match=r"pacer.observe.adviseEvery expects a duration .* got 'soon'"):
        check_options({"pacer.observe.adviseEvery": "soon"})
    with pytest.raises(ValueError, match="got '-5s'"):
        check_options({"pacer.observe.adviseEvery": "-5s"})
