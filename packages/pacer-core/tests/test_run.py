"""pacer.run: one description of a run (files, seeds, ids), runtimes through the ``pacer_runtimes`` hook, ``pacer run``."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from pacer import (
    Controller,
    Dataset,
    Operator,
    OperatorDAG,
    QueryRun,
    QuerySpec,
    RunConfig,
    RunResult,
    Runtime,
    UnknownRuntimeError,
    durations,
    get_plugin_manager,
    hookimpl,
)
from pacer.cli import UsageError, main
from pacer.cli.run_command import seconds_flag, split_strategy_params
from pacer.clock import ManualClock
from pacer.durations import parse_duration
from pacer.event_loop import EventLoop
from pacer.plugins import PluginManager
from pacer.report import build_report

CONFIG = RunConfig(
    (QueryRun("lr2", traffic="wave", rate=1500.0, traffic_params={"period": 30.0}, admission="static",
              admission_params={"interval": 5.0}, deadline=10.0),
     QueryRun("lr2", placement="gpu-only", max_rows=2000),
     QueryRun("cm2", query_id="lr2-2")),
    scheduler="edf", duration=60.0, seed=11, cores=4, gpus=1, overload="shed", fallback=True,
    options={"sim": {"noise": 0.05, "resource_loss": [[10.0, 20.0, 0.25]]}},
)


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_run_saves_and_loads_exactly(tmp_path: Path, suffix: str) -> None:
    path = CONFIG.save(tmp_path / "sub" / f"run{suffix}")
    assert RunConfig.load(path) == CONFIG
    assert RunConfig.load(path).as_dict() == CONFIG.as_dict()


def test_a_report_with_config_run_repeats_its_run(tmp_path: Path) -> None:
    report = {"schema": "pacer.report/1", "config": {"run": CONFIG.as_dict(), "seed": 11}}
    (tmp_path / "r.json").write_text(json.dumps(report))
    assert RunConfig.load(tmp_path / "r.json") == CONFIG
    (tmp_path / "old.json").write_text(json.dumps({"schema": "pacer.report/1", "config": {}}))
    with pytest.raises(ValueError, match="no config.run"):
        RunConfig.load(tmp_path / "old.json")


def test_query_seeds_and_ids_follow_one_rule() -> None:
    assert [CONFIG.query_seed(i) for i in range(3)] == [11, 12, 13]
    assert CONFIG.query_ids() == ["lr2", "lr2-2", "lr2-2-2"]


def test_bad_configurations_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown run setting\\(s\\) \\['sed'\\]"):
        RunConfig.from_dict({"queries": [{"workload": "lr2"}], "sed": 1})
    with pytest.raises(ValueError, match="queries\\[0\\]: unknown setting\\(s\\) \\['rat'\\]"):
        RunConfig.from_dict({"queries": [{"workload": "lr2", "rat": 5}]})
    with pytest.raises(ValueError, match="at least one query"):
        RunConfig(())
    with pytest.raises(ValueError, match="overload must be one of"):
        RunConfig((QueryRun("lr2"),), overload="drop")
    with pytest.raises(ValueError, match="deadline must be > 0"):
        QueryRun("lr2", deadline=0.0)
    (tmp_path / "bad.toml").write_text("queries = [")
    with pytest.raises(ValueError, match="is not valid toml"):
        RunConfig.load(tmp_path / "bad.toml")
    with pytest.raises(ValueError, match="cannot read run configuration"):
        RunConfig.load(tmp_path / "missing.json")


def test_durations_and_parameters_parse_once_for_every_command() -> None:
    assert parse_duration("500ms") == 0.5 and parse_duration("1.5min") == 90.0 and parse_duration("2") == 2.0
    # as Spark writes a trigger's interval (Trigger.ProcessingTime("1 minute")) and its confs ("1d")
    assert parse_duration("1 minute") == 60.0 and parse_duration("5 minutes") == 300.0
    assert parse_duration("500 milliseconds") == 0.5 and parse_duration("2 hours") == 7200.0
    assert parse_duration("1d") == 86400.0
    with pytest.raises(ValueError, match="cannot read a duration from '5 mi'"):
        parse_duration("5 mi")
    assert seconds_flag("--deadline", "10s") == 10.0 and seconds_flag("--deadline", None) is None
    with pytest.raises(UsageError, match="--deadline expects a duration such as 10s, 500ms"):
        seconds_flag("--deadline", "soon")
    with pytest.raises(UsageError, match="--interval must be > 0 seconds"):
        seconds_flag("--interval", "-3s")
    assert split_strategy_params(["admission.rho=0.5", "scheduler.spread=2", "scale.headroom=0.2"]) == {
        "admission": {"rho": "0.5"}, "placement": {}, "scheduler": {"spread": "2"}, "scale": {"headroom": "0.2"}}
    with pytest.raises(UsageError, match="--param expects KEY=VALUE"):
        split_strategy_params(["rho"])


def test_every_flag_of_every_installed_command_that_takes_seconds_reads_spark_s_wording() -> None:
    """Each ``pacer`` subcommand's flag that takes a time (``--duration``, ``--timeout``, ``--period``, ...) reads
    :func:`pacer.durations.flag_seconds`: ``pacer produce --duration 1m`` and ``pacer kafka up --timeout "2
    minutes"`` as ``pacer run --duration`` does (they took plain seconds only)."""
    from pacer.cli.program import build_parser
    from pacer.plugins import get_plugin_manager

    parser, _ = build_parser(get_plugin_manager())
    timed = re.compile(r"duration|timeout|interval|period|every|drain|startup|hold|wait$")
    seen, wrong = [], []

    def walk(p: argparse.ArgumentParser, where: str) -> None:
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{where} {name}")
            elif action.option_strings and timed.search(action.dest) and action.type not in (None, int):
                seen.append(f"{where} {action.option_strings[0]}")
                if action.type is not durations.flag_seconds:
                    wrong.append(f"{where} {action.option_strings[0]}")

    walk(parser, "pacer")
    assert not wrong, wrong
    assert {"pacer produce --duration", "pacer kafka up --timeout", "pacer cluster down --timeout",
            "pacer calibrate --duration", "pacer run --duration"} <= set(seen), seen


def test_one_duration_parser_for_flags_confs_and_options() -> None:
    """pacer.durations.parse_seconds takes what the flags and pacer-spark's confs and options take, names the option
    in its errors, and is what pacer.run.parse_duration and the flags' seconds_flag read with."""
    import pacer.run

    assert pacer.run.parse_duration is parse_duration
    assert durations.parse_seconds("1.5 seconds") == 1.5 and durations.parse_seconds(4) == 4.0
    assert durations.parse_seconds(None, "spark.pacer.deadline") is None
    assert durations.parse_seconds("0s") == 0.0  # only a caller that asks for positive refuses 0
    with pytest.raises(ValueError, match="cannot read a duration from 'soon'; write e.g. 10s, 500ms"):
        durations.parse_seconds("soon")
    with pytest.raises(ValueError, match="spark.pacer.deadline expects a duration such as 10s, 500ms.*got 'soon'"):
        durations.parse_seconds("soon", "spark.pacer.deadline")
    with pytest.raises(ValueError, match="--interval must be > 0 seconds, got '0'"):
        durations.parse_seconds("0", "--interval", positive=True)
    with pytest.raises(UsageError, match="--deadline expects a duration such as"):
        seconds_flag("--deadline", "inf")


class TickRuntime:
    """A small real runtime: every query gets one 100-byte dataset per second; a batch takes 0.1 s per dataset."""

    name = "tick"
    summary = "one dataset per second, 0.1 s per dataset"
    capabilities = frozenset({"deterministic", "multi-query"})
    defaults: ClassVar[dict[str, float]] = {"duration": 5.0}

    def configure(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--tick-bytes", type=int, default=100, help="bytes per dataset")

    def from_args(self, args: argparse.Namespace, config: RunConfig, plugin_manager: PluginManager) -> RunConfig:
        if config.options_for(self.name).get("tick_bytes", 100) < 0:
            raise UsageError("--tick-bytes must be >= 0")
        return config

    def run(self, config: RunConfig, *, plugin_manager: PluginManager | None = None) -> RunResult:
        clock = ManualClock()
        controller = Controller(clock=clock, cores=config.cores or 1, scheduler=config.scheduler,
                                plugin_manager=plugin_manager, timer=None, overload=config.overload)
        dag = OperatorDAG.chain(Operator("scan#0", "scan"), Operator("sink#1", "sink", cpu_only=True))
        loop = EventLoop(controller)
        nbytes = int(config.options_for(self.name).get("tick_bytes", 100))
        for qid, q in zip(config.query_ids(), config.queries, strict=True):
            controller.add_query(QuerySpec(qid, dag, deadline=q.deadline), admission=q.admission,
                                 admission_params=q.admission_params)
            for i in range(int(config.duration)):
                loop.push(float(i), 0, ("arrive", qid, Dataset(f"{qid}-{i}", float(i), nbytes, 1)))

        def step(t: float, _: int, event: Any) -> bool:
            clock.now = t
            if isinstance(event, str):
                batch = loop.poll(event, t)
                if batch is not None:
                    controller.start(batch.id)
                    loop.push(t + 0.1 * len(batch.datasets), 0, ("done", batch.id, None))
                return False
            kind, key, dataset = event
            if kind == "arrive":
                controller.arrive(key, dataset)
                loop.poll_soon(key, t)
            else:
                query_id = controller.batch(key).query_id
                controller.complete(key)
                loop.poll_soon(query_id, t)
            return False

        loop.run(config.duration * 10, step)
        report = build_report(runtime=self.name, config={"run": config.as_dict()}, controller=controller,
                              start=0.0, end=max(clock.now, config.duration))
        return RunResult(report=report, controller=controller, notes=["tick: done"])


class TickPlugin:
    @hookimpl
    def pacer_runtimes(self) -> Sequence[Runtime]:
        return [TickRuntime()]


def _with_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    import pacer.cli.program

    def plugin_manager(**kwargs: Any) -> PluginManager:
        pm = get_plugin_manager(entry_points=False)
        pm.register(TickPlugin())
        return pm

    monkeypatch.setattr(pacer.cli.program, "get_plugin_manager", plugin_manager)


def test_hook_pacer_runtimes() -> None:
    pm = get_plugin_manager(entry_points=False)
    pm.register(TickPlugin())
    runtime = pm.find_runtime("tick")
    assert isinstance(runtime, Runtime) and set(pm.runtimes()) == {"tick"}
    result = runtime.run(RunConfig((QueryRun("any", admission="asap"),), duration=5.0), plugin_manager=pm)
    assert result.report["queries"]["any"]["datasets_processed"] == 5
    result.controller.ledger.check_complete()
    with pytest.raises(UnknownRuntimeError, match="unknown runtime 'spark'.*pip install ./integrations/pacer-spark"
                                                  ".*Installed "
                                                  "runtimes: tick"):
        pm.find_runtime("spark")
    pm.register(TickPlugin())
    with pytest.raises(UnknownRuntimeError, match="'tick' is provided twice"):
        pm.runtimes()


def test_pacer_run_takes_the_runtime_and_writes_the_same_report_twice(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    _with_tick(monkeypatch)
    argv = ["run", "--runtime", "tick", "--workload", "a", "b", "--admission", "static", "--interval", "2s",
            "--tick-bytes", "7", "--save-config", str(tmp_path / "run.toml")]
    assert main([*argv, "--report", str(tmp_path / "1.json")]) == 0
    assert main([*argv, "--report", str(tmp_path / "2.json")]) == 0
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()
    report = json.loads((tmp_path / "1.json").read_text())
    assert report["queries"]["b"]["bytes_in"] == 35 and report["queries"]["a"]["batches"] >= 2
    saved = RunConfig.load(tmp_path / "run.toml")
    assert saved.options == {"tick": {"tick_bytes": 7}} and saved.queries[0].admission_params == {"interval": "2.0"}
    assert "tick: done" in capsys.readouterr().out
    assert main(["run", "--runtime", "tick", "--config", str(tmp_path / "run.toml"), "--tick-bytes", "7",
                 "--report", str(tmp_path / "3.json")]) == 0
    assert (tmp_path / "3.json").read_bytes() == (tmp_path / "1.json").read_bytes()


def test_pacer_run_refuses_bad_flags_before_running(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _with_tick(monkeypatch)
    assert main(["run", "--runtime", "nowhere", "--workload", "a"]) == 2
    assert "unknown runtime 'nowhere'" in capsys.readouterr().err
    assert main(["run", "--runtime", "tick", "--workload", "a", "--interval", "2s"]) == 2
    assert "interval-based admission" in capsys.readouterr().err
    assert main(["run", "--runtime", "tick", "--workload", "a", "--tick-bytes", "-1"]) == 2
    assert "--tick-bytes must be >= 0" in capsys.readouterr().err
    assert main(["run", "--runtime", "tick"]) == 2
    assert "give --workload" in capsys.readouterr().err
