"""The scenario registry (pacer_bench.scenarios.SCENARIOS): a scenario planted in it runs through the runner and the
command line with no change to either, what it declares it needs of a runtime is what the runner acts on, an unknown
name is refused naming the registered ones, and the runner and the command compare no scenario or runtime name."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from pacer import QueryRun, get_plugin_manager
from pacer.cli import main
from pacer_bench import plugin, runner
from pacer_bench.runner import ScenarioError, resolve_configs, run_scenario
from pacer_bench.runtime_traits import GPU, RUNTIME_TRAITS
from pacer_bench.scenarios import SCENARIOS, Config, Request, Scenario, ScenarioResult, find_scenario, write_tables


def _planted(seen: list[object], **fields: object) -> Scenario:
    """A two-configuration scenario that records the request it was built from and the result it wrote."""
    def build(request: Request) -> list[Config]:
        seen.append(request)
        duration = 10.0 if request.quick else 20.0
        return [Config("asap", (QueryRun("lr2", rate=500.0),), duration=duration, baseline=True),
                Config("static 2s", (QueryRun("lr2", rate=500.0, admission="static",
                                              admission_params={"interval": 2.0}),), duration=duration)]

    def write(out: str | Path, result: ScenarioResult) -> dict[str, Path]:
        seen.append(result)
        return write_tables(out, result)

    return Scenario("planted", "A planted scenario", build, write, **fields)  # type: ignore[arg-type]


def test_a_planted_scenario_runs_through_the_runner_and_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[object] = []
    monkeypatch.setitem(SCENARIOS, "planted", _planted(seen))
    paths = run_scenario("planted", runtime="sim", out=tmp_path / "api", quick=True, progress=False)
    request, result = seen[-2:]
    assert request == Request(quick=True, simulated=True, target={}, source=None)
    assert isinstance(result, ScenarioResult) and result.name == "planted" and result.request == request
    assert [r.label for r in result.runs] == ["asap", "static 2s"]
    meta = json.loads(paths["meta"].read_text())
    assert meta["scenario"] == "planted" and meta["runtime"] == "sim" and meta["configs"] == ["asap", "static 2s"]
    with paths["csv"].open() as fh:
        assert [r["config"] for r in csv.DictReader(fh)] == ["asap", "static 2s"]
    assert "A planted scenario — simulated (pacer-sim), quick version" in paths["md"].read_text()
    assert main(["bench", "planted", "--quick", "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "planted.html").exists() and "| static 2s |" in capsys.readouterr().out


def test_what_a_planted_scenario_needs_of_a_runtime_is_what_the_runner_acts_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    monkeypatch.setitem(SCENARIOS, "planted", _planted(seen, needs={GPU: "weighs GPU placements"}))
    pm = get_plugin_manager()
    actual, _, notes = resolve_configs("planted", runtime="spark", quick=True, duration=None, seed=7, plugin_manager=pm)
    assert actual == "sim" and notes and notes[0].startswith("planted ran on the simulator: ") and "RAPIDS" in notes[0]
    with pytest.raises(ScenarioError, match=r"^planted weighs GPU placements and needs a GPU: --gpus 1"):
        resolve_configs("planted", runtime="sim", quick=True, duration=None, seed=7, plugin_manager=pm, gpus=0)
    with pytest.raises(ScenarioError, match="apply to latency-target"):
        resolve_configs("planted", runtime="sim", quick=True, duration=None, seed=7, plugin_manager=pm,
                        target={"workloads": ["lr2"]})
    monkeypatch.setitem(SCENARIOS, "planted", _planted(seen, narrowed=True))
    resolve_configs("planted", runtime="sim", quick=True, duration=None, seed=7, plugin_manager=pm,
                    target={"workloads": ["lr2"]})
    assert seen[-1] == Request(quick=True, simulated=True, target={"workloads": ["lr2"]}, source=None)


def test_an_unknown_scenario_is_refused_naming_the_registered_ones(tmp_path: Path) -> None:
    known = ", ".join(sorted(SCENARIOS))
    assert "device-sweep, fidelity, frequency, latency-target" in known
    with pytest.raises(ScenarioError, match=f"^unknown scenario 'no-such'; choose from {known}$"):
        find_scenario("no-such")
    with pytest.raises(ScenarioError, match=f"^unknown scenario 'no-such'; choose from {known}$"):
        resolve_configs("no-such", runtime="sim", quick=True, duration=None, seed=7,
                        plugin_manager=get_plugin_manager())
    with pytest.raises(ScenarioError, match="unknown scenario 'no-such'"):
        run_scenario("no-such", out=tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_the_runner_and_the_command_compare_no_scenario_or_runtime_name() -> None:
    names = set(SCENARIOS) | set(RUNTIME_TRAITS)
    for module in (runner, plugin):
        tree = ast.parse(Path(module.__file__ or "").read_text())
        compared = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare)
                    for side in (node.left, *node.comparators)
                    if isinstance(side, ast.Constant) and side.value in names]
        assert compared == [], f"{module.__name__} compares a scenario or runtime name on lines {compared}"


def test_config_picks_multi_query_configurations_by_label_or_family() -> None:
    pm = get_plugin_manager()
    _, configs, _ = resolve_configs("multi-query", runtime="sim", quick=True, duration=None, seed=7, plugin_manager=pm,
                                    target={"configs": ["fifo + static 10s", "zstream"]})
    assert [c.label for c in configs] == ["fifo + static 10s", "edf + zstream", "rdas + zstream"]
    with pytest.raises(ScenarioError, match=r"^--config edf \+ nothing: no multi-query configuration has that label "
                                            r"or family; its labels: 'fifo \+ static 2s'"):
        resolve_configs("multi-query", runtime="sim", quick=True, duration=None, seed=7, plugin_manager=pm,
                        target={"configs": ["edf + nothing"]})


def test_static_intervals_asked_for_replace_the_plan_s_and_0_is_plain_spark_s_default_trigger() -> None:
    from pacer_bench.runtime_traits import on_spark
    from pacer_bench.scenarios import SPARK_DEFAULT, latency_target_configs, latency_target_plan

    target = {"statics": [0.0, 7.0], "deadlines": [10.0], "configs": ["static", "asap"]}
    configs = latency_target_configs(latency_target_plan(Request(quick=True, simulated=False, target=target)))
    assert [c.tags["name"] for c in configs] == ["asap", SPARK_DEFAULT, "static 7s"]
    assert [c.baseline for c in configs] == [False, True, False]  # plain Spark's default is the one to beat
    plain = next(c for c in configs if c.tags["name"] == SPARK_DEFAULT)
    assert on_spark(plain, plain.run_config()).options_for("spark")["trigger"] == "0s"  # Spark's own default
    with pytest.raises(ValueError, match="--static 0 is Spark's own default trigger, which the simulator"):
        latency_target_plan(Request(quick=True, simulated=True, target=target))
    assert main(["bench", "latency-target", "--out", "x", "--static", "-1"]) == 2
