"""pacer-core's own layout rules: the runtime contract imports nothing of pacer, and the Controller is composed.

Import cycles, upward imports and the JVM boundary are checked for every distribution by the repository's
``tests/test_layout.py``; the 450-line guide is for reading, not a test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pacer
from pacer import Controller
from pacer.clock import ManualClock
from pacer.plugins import get_plugin_manager

PACKAGE = Path(pacer.__file__).parent


def _imports_of(path: Path, *, type_only: bool = False) -> set[str]:
    """Every module name ``path`` imports at run time, anywhere in it (inside functions too; the type-only imports
    under ``if TYPE_CHECKING:`` as well with ``type_only``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in [*node.body, *node.orelse] if type_only else node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def _pacer_imports_of(path: Path, *, type_only: bool = False) -> set[str]:
    return {name for name in _imports_of(path, type_only=type_only) if name.split(".")[0] == "pacer"}


def test_the_runtime_contract_is_a_leaf() -> None:
    assert not _pacer_imports_of(PACKAGE / "runtime_api.py")


def test_the_runtime_contract_closes_no_circle_through_its_type_hints() -> None:
    """The Controller, the plugin manager and the hook specifications import the contract: its type hints may
    name only pacer modules that import nothing of pacer themselves, type-only imports included."""
    named = _pacer_imports_of(PACKAGE / "runtime_api.py", type_only=True)
    assert named == {"pacer.engine_profile"}  # a new one: check it is a leaf, then add it here
    for name in named:
        path = PACKAGE.joinpath(*name.split(".")[1:]).with_suffix(".py")
        assert not _pacer_imports_of(path, type_only=True), name


def test_the_controller_is_composed_not_a_mixin_stack() -> None:
    assert Controller.__bases__ == (object,)


def test_the_controller_still_answers_for_its_parts() -> None:
    pm = get_plugin_manager(entry_points=False)
    c = Controller(clock=ManualClock(), cores=2, scheduler="fair", plugin_manager=pm, timer=None)
    assert c.pm is pm and c.scheduler == "fair" and not c.fallback
    c.fallback = True  # a switch the decisions read, wherever it is kept
    assert c.fallback and c.context(None, "scheduling").chosen == "fair"
