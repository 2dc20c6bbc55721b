from __future__ import annotations

import inspect
import json
from collections.abc import Sequence
from pathlib import Path

import pluggy
import pytest

from pacer import StrategyInfo, UnknownStrategyError, get_plugin_manager, hookimpl, hookspecs
from pacer.cli import main

BASELINES = {"static", "asap", "pid", "min-rows", "fifo", "fair", "cpu-only", "gpu-only", "static-preference",
             "fixed", "spark-dynamic", "dstream-ratio", "scheduled"}


def test_baselines_are_registered_by_default_and_trylast() -> None:
    pm = get_plugin_manager(entry_points=False)
    assert {s.name for s in pm.strategies()} == BASELINES
    assert all(s.package == "pacer-core" and s.version for s in pm.strategies())
    for impl in pm.hook.pacer_admit.get_hookimpls():
        assert impl.trylast


def test_unknown_strategy_lists_what_is_installed() -> None:
    pm = get_plugin_manager(entry_points=False)
    with pytest.raises(UnknownStrategyError, match=r"unknown admission strategy 'zstrem'.*asap \(pacer-core\).*static"):
        pm.find("zstrem", "admission")
    with pytest.raises(UnknownStrategyError, match="provides only \\['scheduling'\\]"):
        pm.find("fifo", "admission")


class _Duplicate:
    @hookimpl
    def pacer_strategies(self) -> Sequence[StrategyInfo]:
        return [StrategyInfo("asap", frozenset({"admission"}), package="pacer-other")]


def test_ambiguous_strategy_says_how_to_resolve_it() -> None:
    pm = get_plugin_manager(entry_points=False)
    pm.register(_Duplicate(), name="dup")
    with pytest.raises(
        UnknownStrategyError, match="ambiguous admission strategy 'asap'.*pacer-core, pacer-other.*PACER_PLUGINS"
    ):
        pm.find("asap", "admission")


class _Misspelt:
    @hookimpl
    def pacer_admitt(self) -> None:  # a typo of pacer_admit
        return None


def test_misspelt_hook_fails_loudly_on_check_pending() -> None:
    pm = get_plugin_manager(entry_points=False)
    pm.register(_Misspelt(), name="typo")
    with pytest.raises(pluggy.PluginValidationError, match="pacer_admitt"):
        pm.check_pending()


def test_pacer_plugins_env_restricts_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACER_PLUGINS", "")
    pm = get_plugin_manager()
    assert {s.name for s in pm.strategies()} == BASELINES


def test_unknown_param_lists_the_known_ones() -> None:
    info = get_plugin_manager(entry_points=False).find("static", "admission")
    assert info.resolve_params({"interval": "5"}) == {"interval": 5.0}
    with pytest.raises(ValueError, match="no parameter 'intervall'.*interval"):
        info.resolve_params({"intervall": 5})


def test_strategies_json_lists_the_baselines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strategies", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert BASELINES <= {s["name"] for s in listed}
    for entry in listed:
        assert {"name", "provides", "package", "version"} <= set(entry)


def _hookspecs() -> list[str]:
    return [name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("pacer_")]


@pytest.mark.parametrize("name", _hookspecs())
def test_every_hook_is_documented_and_tested(name: str) -> None:
    """datasette-style meta-test: each hook documents every argument and has a test_hook_<name>."""
    spec = getattr(hookspecs, name)
    doc = inspect.getdoc(spec) or ""
    for arg in inspect.signature(spec).parameters:
        assert f":param {arg}:" in doc, f"{name} does not document {arg}"
    assert ":return:" in doc or "-> None" in str(inspect.signature(spec)), f"{name} does not document its return"
    assert "versionadded" in doc
    tests = "".join(p.read_text() for p in Path(__file__).parent.glob("test_*.py"))
    assert f"def test_hook_{name}" in tests, f"no test_hook_{name}"


def test_a_broken_entry_point_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from pacer.plugins import PluginLoadError

    broken = importlib.metadata.EntryPoint("ghost", "pacer_no_such_module.plugin", "pacer")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken])
    with pytest.raises(PluginLoadError, match=r"pacer plugin 'ghost' \(pacer_no_such_module.plugin\).*failed to load.*PACER_PLUGINS"):
        get_plugin_manager()


def test_feedback_and_catalogue_go_through_the_plugin_manager_so_wrappers_see_them() -> None:
    from collections.abc import Generator

    from pacer import Controller, Dataset, Operator, OperatorDAG, QuerySpec, hookimpl
    from pacer.clock import ManualClock

    seen: list[str] = []

    class Wrapper:
        @hookimpl(wrapper=True)
        def pacer_batch_completed(self, ctx: object, report: object) -> Generator[None, object, object]:
            seen.append("feedback")
            return (yield)

        @hookimpl(wrapper=True)
        def pacer_strategies(self) -> Generator[None, object, object]:
            seen.append("catalogue")
            return (yield)

    pm = get_plugin_manager(entry_points=False)
    pm.register(Wrapper(), name="wrapper")
    assert {s.name for s in pm.strategies()} >= {"asap", "fifo"}
    clock = ManualClock()
    c = Controller(clock=clock, cores=1, plugin_manager=pm, timer=None)
    c.add_query(QuerySpec(id="q", dag=OperatorDAG.chain(Operator("scan#0", "scan"), Operator("sink#1", "sink"))))
    c.arrive("q", Dataset("d", 0.0, 1, 1))
    batch = c.poll("q")
    assert batch is not None
    c.start(batch.id)
    c.complete(batch.id)
    assert "catalogue" in seen and "feedback" in seen


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", float("inf"), float("nan"), 1e400])
def test_a_non_finite_parameter_is_refused_naming_it(value: object) -> None:
    """``pacer.param.admission.initial_interval=inf`` raised OverflowError deep in a decision (every batch then
    failed open); it is refused where the parameters are resolved, naming the parameter."""
    from pacer.strategy import Param

    with pytest.raises(ValueError, match="parameter 'initial_interval' must be a finite number"):
        Param("initial_interval", 1.0, "seconds").coerce(value)
    assert Param("cap", float("inf"), "no cap by default").coerce("inf") == float("inf")
    with pytest.raises(ValueError, match="parameter 'n' expects int"):
        Param("n", 2, "count").coerce("inf")


@pytest.mark.parametrize("value", ["flase", "yes", "1", "on", ""])
def test_a_boolean_parameter_reads_as_spark_reads_a_boolean(value: str) -> None:
    """``pacer.param.admission.partial=flase`` was read as false (every word but 1/true/yes/on was): a boolean
    parameter takes ``true``/``false`` as Spark's confs do (:func:`pacer.durations.parse_boolean`, the one reader of
    ``spark.pacer.fallback`` too), anything else refused naming the parameter."""
    from pacer.strategy import Param

    partial = Param("partial", True, "admit a prefix")
    assert [partial.coerce(v) for v in ("false", " TRUE ", "False", False)] == [False, True, False, False]
    with pytest.raises(ValueError, match=r"parameter 'partial' \(default True\) expects true or false, got"):
        partial.coerce(value)


def test_a_parameter_is_found_whatever_the_case_of_its_name_as_spark_hands_options_over() -> None:
    """The JVM lowercases a source's options (``pacer.param.admission.maxRows`` reaches the driver as ``maxrows``):
    a parameter is found whatever the case of the name given, and two that differ only in case are refused."""
    from pacer.strategy import Param, StrategyInfo

    info = StrategyInfo("budget", frozenset({"admission"}), params=(Param("maxRows", 10, "rows"),))
    assert info.resolve_params({"maxrows": "7"}) == {"maxRows": 7} == info.resolve_params({"MAXROWS": 7})
    with pytest.raises(ValueError,
                       match=r"strategy 'budget' has no parameter 'rows'; its parameters are \['maxRows'\]"):
        info.resolve_params({"rows": 1})
    with pytest.raises(ValueError, match="parameter names must differ in more than case"):
        StrategyInfo("twins", frozenset({"admission"}), params=(Param("maxRows", 1, "a"), Param("maxrows", 1, "b")))
