"""latency-target's source registry (pacer_bench.traffic_sources): a source another package registers is found, adds its
own flags, runs every configuration on the runtime it names, and pacer-bench imports none of them."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from pacer import Runtime
from pacer.cli import main
from pacer.plugins import PluginManager, get_plugin_manager
from pacer_bench import runner, traffic_sources
from pacer_bench.runner import ScenarioError, resolve_configs, run_scenario


class FakeSource:
    """A source that runs on the simulator and records what the bench asked of it."""

    name = "fake"
    runtime = "sim"
    help = "a test source"
    summary = ", from a fake source"
    warm_up_message = "warming up the fake source"

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def configure(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument("--fake-endpoint", metavar="URL", help="where the fake source reads")

    @contextmanager
    def _open(self, options: Mapping[str, Any]) -> Iterator[str]:
        self.calls.append(("open", dict(options)))
        yield f"handle:{options.get('fake_endpoint')}"
        self.calls.append(("close", None))

    def open(self, options: Mapping[str, Any]) -> Any:
        return self._open(options)

    def warm_up(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any) -> None:
        self.calls.append(("warm_up", (config.label, runtime.name, handle)))

    def run_one(self, config: Any, pm: PluginManager, runtime: Runtime, run_options: Mapping[str, Any],
                handle: Any, *, repetition: int) -> tuple[dict[str, Any], bool]:
        self.calls.append(("run_one", (config.label, repetition, handle)))
        return runner._run_one(config, pm, runtime, run_options)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeSource:
    source = FakeSource()
    monkeypatch.setattr(traffic_sources, "load_sources", lambda *, warn=True: {"fake": source})
    return source


TARGET = {"source": "fake", "deadlines": [10.0], "traffics": ["binary"], "workloads": ["lr2"],
          "configs": ["asap", "static 10s"]}


def test_a_registered_source_runs_every_configuration_on_its_runtime(fake: FakeSource, tmp_path: Path) -> None:
    runtime, configs, _ = resolve_configs("latency-target", runtime="spark", quick=True, duration=20.0, seed=7,
                                          plugin_manager=get_plugin_manager(), target=TARGET)
    assert runtime == "sim" and [c.tags["name"] for c in configs] == ["asap", "static 10s"]
    paths = run_scenario("latency-target", out=tmp_path, quick=True, duration=20.0, progress=False, target=TARGET,
                         source_options={"fake_endpoint": "x://1"})
    kinds = [kind for kind, _ in fake.calls]
    assert kinds == ["open", "warm_up", "run_one", "run_one", "close"]
    assert fake.calls[0] == ("open", {"fake_endpoint": "x://1"})
    assert all(args[-1] == "handle:x://1" for kind, args in fake.calls if kind in ("warm_up", "run_one"))
    meta = json.loads(paths["meta"].read_text())
    assert meta["source"] == "fake" and meta["runtime"] == "sim"
    assert "from a fake source" in paths["md"].read_text()


def test_an_unknown_source_is_a_scenario_error_listing_the_installed(fake: FakeSource) -> None:
    with pytest.raises(ScenarioError, match=r"unknown --source 'nope'.*Installed sources: gen, fake"):
        resolve_configs("latency-target", runtime="sim", quick=True, duration=None, seed=7,
                        plugin_manager=get_plugin_manager(), target={**TARGET, "source": "nope"})


def test_an_unknown_runtime_is_a_scenario_error_naming_the_installed(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"--runtime nowhere: unknown runtime 'nowhere'.*Installed runtimes"):
        resolve_configs("trigger-sweep", runtime="nowhere", quick=True, duration=None, seed=7,
                        plugin_manager=get_plugin_manager())


def test_a_source_flag_without_its_source_is_a_usage_error(fake: FakeSource, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "latency-target", "--fake-endpoint", "x://1", "--out", str(tmp_path / "o")]) == 2
    assert "--fake-endpoint applies to --source fake; add --source fake" in capsys.readouterr().err
    assert fake.calls == []


def test_the_installed_sources_are_found_without_importing_them_here() -> None:
    assert traffic_sources.GENERATED not in traffic_sources.source_names()
    assert set(traffic_sources.source_names()) == set(traffic_sources.load_sources())


def test_pacer_bench_passes_the_source_its_own_flags(fake: FakeSource, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "latency-target", "--source", "fake", "--fake-endpoint", "x://2", "--quick", "--duration", "20",
            "--traffic", "binary", "--workload", "lr2", "--config", "asap", "--deadline", "10s", "--out",
            str(tmp_path / "o")]
    assert main(argv) == 0
    assert fake.calls[0] == ("open", {"fake_endpoint": "x://2"})
    assert [args[0] for kind, args in fake.calls if kind == "run_one"] == ["lr2 binary / asap"]
    assert "--source {gen,fake}" in _help(capsys)


def _help(capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["bench", "--help"])
    return capsys.readouterr().out
