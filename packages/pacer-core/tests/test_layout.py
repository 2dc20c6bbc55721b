"""pacer-core's layout (issue 19): modules of at most 450 lines, no import cycles, a Controller by composition."""

from __future__ import annotations

import ast
from pathlib import Path

import pacer
from pacer import Controller
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager

PACKAGE = Path(pacer.__file__).parent
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        out[".".join(parts).removesuffix(".__init__")] = path
    return out


def _runtime_imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The pacer modules ``path`` imports when it is imported: module level, not under ``TYPE_CHECKING``."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
                found.update(submodules)
                if len(submodules) < len(node.names):
                    found.add(node.module)

    visit(ast.parse(path.read_text()).body)
    return {name for name in found if name in modules}


def test_no_module_is_over_450_lines() -> None:
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_import_cycles() -> None:
    modules = _modules()
    graph = {name: _runtime_imports(path, modules) - {name} for name, path in modules.items()}
    done: set[str] = set()

    def walk(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import cycle: " + " -> ".join([*trail[trail.index(name):], name]))
        if name in done:
            return
        for dep in sorted(graph[name]):
            walk(dep, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        walk(name, [])


def test_the_runtime_contract_is_a_leaf() -> None:
    modules = _modules()
    assert _runtime_imports(modules["pacer.runtime_api"], modules) == set()


def test_the_controller_is_composed_not_a_mixin_stack() -> None:
    assert Controller.__bases__ == (object,)


def test_the_controller_still_answers_for_its_parts() -> None:
    pm = get_plugin_manager(entry_points=False)
    c = Controller(clock=ManualClock(), cores=2, scheduler="fair", plugin_manager=pm, timer=None)
    assert c.pm is pm and c.scheduler == "fair" and not c.fallback
    c.fallback = True  # a switch the decisions read, wherever it is kept
    assert c.fallback and c.context(None, "scheduling").chosen == "fair"
