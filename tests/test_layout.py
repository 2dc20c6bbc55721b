"""The layout of every distribution in this repository, read from the code's imports (no module is imported).

- **No import cycle** between modules of any distribution, imports made inside functions included (importing a
  module inside a function only postpones the cycle); imports under ``if TYPE_CHECKING:`` are type-only, listed
  by :func:`type_only_imports` and not failed.
- **Packages point down only**: a distribution imports only the pacer distributions its ``pyproject.toml`` declares
  (``dependencies`` or an extra, transitively), and what the distributions declare forms no cycle (no mutual
  extras).
- **pacer-spark's rooms point down only**: each module imports only modules of its own room or of rooms on a lower
  floor of :data:`SPARK_FLOORS` (the order pacer-spark's README lists them in).
- **Py4J stays behind the JVM boundary**: PySpark's private handles to the JVM (``_jvm``, ``_jsparkSession``...)
  are read only in the modules of pacer-spark's ``jvm`` room (:data:`JVM_ROOM`).
- **The driver owns the Controller**: outside pacer-spark's ``driver`` room (:data:`DRIVER_ROOM`) no module calls a
  method of a ``controller``, reaches the driver's Controller, or names the driver's lock proof (``Held``, ``Guard``):
  the front ends read and change it only through the books the driver hands them.
- **The driver's parts stay its own**: outside the ``driver`` room no module reaches an attribute of a driver that
  :class:`~pacer_spark.driver.loop.Driver` sets in its ``__init__`` (its Controller, gate, batch completion, lock,
  replay guard...) or a private one: the front ends and the session use the driver's methods
  (:func:`driver_internal_reaches`).
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: PySpark's private attributes that reach into the JVM through Py4J.
PY4J_NAMES = frozenset({"_jvm", "_jsparkSession", "_jsq", "_jsc", "_jdf", "_gateway", "_jconf", "_jreader",
                        "_jwrite", "_jwriter", "_jdsw"})
#: The only room whose modules may read them: pacer-spark's ``jvm`` subpackage.
JVM_ROOM = "pacer_spark.jvm"
#: The only room whose modules may call the Controller or hold the driver's lock proof.
DRIVER_ROOM = "pacer_spark.driver"
#: The driver's lock and its proof: names only its own room uses.
LOCK_NAMES = frozenset({"Held", "Guard"})
#: pacer-spark's rooms, lowest first: the shared top-level modules, ``jvm/``, ``plan/``, ``driver/``, the two front
#: ends (``paced/``, ``sources/``: siblings, neither imports the other), the user's surface (the other top-level
#: modules), ``run/``.
SPARK_FLOORS: tuple[frozenset[str], ...] = (
    frozenset({"shared"}), frozenset({"jvm"}), frozenset({"plan"}), frozenset({"driver"}),
    frozenset({"paced", "sources"}), frozenset({"surface"}), frozenset({"run"}),
)
#: The top-level modules every room may use (the rest of the top level is the user's surface).
SPARK_SHARED = frozenset({"checkpoint", "compat", "config", "connectors", "errors", "gen_plan", "manifest", "options",
                          "reader_offsets", "session_kind"})


@dataclass
class Distribution:
    """One pip-installable member of the repository: its name, the pacer distributions it declares (required or in
    an extra), its modules."""

    name: str
    requires: set[str]
    modules: dict[str, Path] = field(default_factory=dict)


def distributions() -> dict[str, Distribution]:
    """Every member with a ``pyproject.toml`` and a ``src/`` folder, by distribution name."""
    found = {}
    for pyproject in [*sorted(ROOT.glob("*/*/pyproject.toml")), ROOT / "conformance" / "pyproject.toml"]:
        src = pyproject.parent / "src"
        if not src.is_dir():
            continue
        project = tomllib.loads(pyproject.read_text())["project"]
        declared = [*project.get("dependencies", []), *(dep for extra in project.get("optional-dependencies", {}).values()
                                                         for dep in extra)]
        requires = {re.split(r"[\[<>=!~;\s]", dep.strip(), maxsplit=1)[0] for dep in declared}  # the name before extras/versions
        dist = Distribution(project["name"], {r for r in requires if r.startswith("pacer")})
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if ".egg-info" not in str(path):
                dist.modules[".".join(parts).removesuffix(".__init__")] = path
        found[dist.name] = dist
    return found


def _imports(path: Path, module: str, is_package: bool) -> Iterator[tuple[str, bool]]:
    """Every module name ``path`` imports, anywhere in it, with whether the import is type-only."""
    package = module if is_package else module.rpartition(".")[0]

    def absolute(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        return ".".join([*base, *([node.module] if node.module else [])])

    def visit(node: ast.AST, type_only: bool) -> Iterator[tuple[str, bool]]:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                yield from visit(child, True)
            for child in node.orelse:
                yield from visit(child, type_only)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, type_only
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node)
            for alias in node.names:  # a name of ``base`` rather than a module: import_graph keeps ``base``
                yield f"{base}.{alias.name}", type_only
        for inner in ast.iter_child_nodes(node):
            yield from visit(inner, type_only)

    yield from visit(ast.parse(path.read_text()), False)


def import_graph() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """Module -> the repository's modules it imports at run time (anywhere in it), and the type-only imports."""
    dists = distributions()
    modules = {name: path for d in dists.values() for name, path in d.modules.items()}
    graph: dict[str, set[str]] = {}
    type_only: set[tuple[str, str]] = set()
    for name, path in modules.items():
        graph[name] = set()
        for target, only_types in _imports(path, name, path.name == "__init__.py"):
            if target not in modules:
                # `from a import b` where b is a name in a, or `import a.b.c` reaching a module: keep the module part
                target = next((t for t in (target, target.rpartition(".")[0]) if t in modules), "")
            if not target or target == name:
                continue
            if only_types:
                type_only.add((name, target))
            else:
                graph[name].add(target)
    return graph, type_only


def type_only_imports() -> set[tuple[str, str]]:
    """The imports made for type hints alone (under ``if TYPE_CHECKING:``): listed, never failed."""
    return import_graph()[1]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected group of more than one module (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def _owner(dists: dict[str, Distribution]) -> dict[str, str]:
    return {module: d.name for d in dists.values() for module in d.modules}


def _required(dists: dict[str, Distribution], name: str) -> set[str]:
    """``name`` and every pacer distribution it requires, transitively."""
    seen, todo = {name}, [name]
    while todo:
        for dep in dists[todo.pop()].requires:
            if dep in dists and dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def upward_imports() -> set[tuple[str, str]]:
    """(module, distribution) for each import of a distribution its own does not declare."""
    dists = distributions()
    owner = _owner(dists)
    graph, _ = import_graph()
    return {(module, owner[target]) for module, targets in graph.items() for target in targets
            if owner[target] not in _required(dists, owner[module])}


def spark_room(module: str) -> str | None:
    """The room of a pacer-spark module: its subpackage, ``shared`` or ``surface`` for a top-level one; None outside."""
    parts = module.split(".")
    if parts[0] != "pacer_spark":
        return None
    if len(parts) > 1 and any(parts[1] in floor for floor in SPARK_FLOORS):
        return parts[1]
    return "shared" if len(parts) == 2 and parts[1] in SPARK_SHARED else "surface"


def upward_room_imports(graph: dict[str, set[str]] | None = None) -> set[tuple[str, str]]:
    """(module, module) for each pacer-spark import of another room on the same floor or a higher one."""
    graph = import_graph()[0] if graph is None else graph
    floor = {room: i for i, rooms in enumerate(SPARK_FLOORS) for room in rooms}
    found = set()
    for module, targets in graph.items():
        here = spark_room(module)
        for target in targets:
            there = spark_room(target)
            if here and there and there != here and floor[there] >= floor[here]:
                found.add((module, target))
    return found


def py4j_reads() -> dict[str, list[int]]:
    """Module -> the lines where it reads one of :data:`PY4J_NAMES`."""
    found: dict[str, list[int]] = {}
    for d in distributions().values():
        for module, path in d.modules.items():
            lines = [node.lineno for node in ast.walk(ast.parse(path.read_text()))
                     if isinstance(node, ast.Attribute) and node.attr in PY4J_NAMES]
            if lines:
                found[module] = lines
    return found


def controller_reaches(modules: dict[str, Path] | None = None) -> dict[str, list[int]]:
    """pacer-spark module outside :data:`DRIVER_ROOM` -> the lines where it calls a method of a ``controller``
    (``x.controller.arrive(...)``), reads a driver's ``controller`` or names :data:`LOCK_NAMES`."""
    def reaches(node: ast.AST) -> bool:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            while isinstance(owner, ast.Attribute) and owner.attr != "controller":
                owner = owner.value  # x.controller.reconcile.retract(...) calls the Controller too
            return isinstance(owner, ast.Attribute) or (isinstance(owner, ast.Name) and owner.id == "controller")
        if isinstance(node, ast.Attribute) and node.attr == "controller":
            return ast.unparse(node.value).endswith("driver")
        return (isinstance(node, ast.Name) and node.id in LOCK_NAMES) or \
            (isinstance(node, ast.alias) and node.name in LOCK_NAMES)

    return lines_outside_driver(reaches, modules)


def driver_parts(loop: Path | None = None) -> frozenset[str]:
    """The attributes :class:`~pacer_spark.driver.loop.Driver` sets on itself in ``__init__``: its parts."""
    tree = ast.parse((loop or ROOT / "integrations/pacer-spark/src/pacer_spark/driver/loop.py").read_text())
    driver = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Driver")
    init = next(n for n in driver.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return frozenset(t.attr for n in ast.walk(init) if isinstance(n, (ast.Assign, ast.AnnAssign))
                     for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                     if isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self")


def driver_internal_reaches(modules: dict[str, Path] | None = None,
                            parts: frozenset[str] | None = None) -> dict[str, list[int]]:
    """pacer-spark module outside :data:`DRIVER_ROOM` -> the lines where it reaches a part of a driver
    (:func:`driver_parts`: ``self.driver.gate``, ``handle.driver.engine``) or a private attribute of one."""
    named = driver_parts() if parts is None else parts
    return lines_outside_driver(lambda node: isinstance(node, ast.Attribute)
                                and ast.unparse(node.value).split(".")[-1] == "driver"
                                and not ast.unparse(node.value).startswith("pacer_spark.")  # a module path
                                and (node.attr in named or node.attr.startswith("_")), modules)


# -- the checks --------------------------------------------------------------------------------------


def test_no_import_cycle_in_any_distribution_function_level_imports_included() -> None:
    graph, _ = import_graph()
    assert cycles(graph) == []


def test_distributions_import_only_what_they_declare() -> None:
    assert upward_imports() == set()


def test_what_the_distributions_declare_points_one_way() -> None:
    dists = distributions()
    assert cycles({name: d.requires & set(dists) for name, d in dists.items()}) == []


def test_pacer_spark_rooms_import_only_lower_floors() -> None:
    assert upward_room_imports() == set()


def test_the_room_check_sees_a_room_importing_a_higher_one() -> None:
    graph = {"pacer_spark.jvm.stream_query": {"pacer_spark.driver.loop"}, "pacer_spark.driver.protocol.paced":
             {"pacer_spark.sources.gen", "pacer_spark.driver.loop", "pacer_spark.errors"},
             "pacer_spark.run.cli": {"pacer_spark"}}
    assert upward_room_imports(graph) == {("pacer_spark.jvm.stream_query", "pacer_spark.driver.loop"),
                                          ("pacer_spark.driver.protocol.paced", "pacer_spark.sources.gen")}


def test_py4j_is_read_only_behind_the_jvm_boundary() -> None:
    outside = {module: lines for module, lines in py4j_reads().items() if not module.startswith(JVM_ROOM + ".")}
    assert outside == {}, f"Py4J names read outside {JVM_ROOM} (module: lines): {outside}"


def test_only_the_driver_calls_the_controller_or_holds_its_lock() -> None:
    assert controller_reaches() == {}, f"outside {DRIVER_ROOM} (module: lines): {controller_reaches()}"


def lines_outside_driver(hit: Callable[[ast.AST], bool], modules: dict[str, Path] | None = None) \
        -> dict[str, list[int]]:
    """pacer-spark module outside :data:`DRIVER_ROOM` -> the lines of its syntax nodes that ``hit``."""
    if modules is None:
        modules = distributions()["pacer-spark"].modules
    found: dict[str, list[int]] = {}
    for module, path in modules.items():
        if not module.startswith(DRIVER_ROOM + "."):
            lines = sorted({node.lineno for node in ast.walk(ast.parse(path.read_text())) if hit(node)})
            if lines:
                found[module] = lines
    return found


def books_importers(modules: dict[str, Path] | None = None) -> dict[str, list[int]]:
    """pacer-spark module outside :data:`DRIVER_ROOM` -> the lines where it imports the driver's books (what the
    protocol room reads and changes of the Controller under the lock: private to the driver)."""
    return lines_outside_driver(lambda node: isinstance(node, ast.ImportFrom) and (
        node.module == "pacer_spark.driver.books" or (
            node.module == "pacer_spark.driver" and any(a.name == "books" for a in node.names))), modules)


def test_outside_the_driver_no_module_imports_its_books() -> None:
    assert books_importers() == {}, f"outside {DRIVER_ROOM}, step the driver instead: {books_importers()}"


def test_outside_the_driver_no_module_reaches_the_driver_s_parts() -> None:
    assert {"controller", "gate", "engine", "guard", "replay"} <= driver_parts()
    found = driver_internal_reaches()
    assert found == {}, f"outside {DRIVER_ROOM}, use the Driver's methods (module: lines): {found}"


def test_a_planted_reach_into_the_driver_s_parts_is_seen(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def f(self, handle):\n"
                       "    self.driver.gate.warn_once('k', 'm')\n"
                       "    handle.driver._books(None)\n"
                       "    self.driver.warn_once('k', 'm')\n"
                       "    return pacer_spark.driver.gate\n")
    found = driver_internal_reaches({"pacer_spark.paced.planted": planted, "pacer_spark.driver.inside": planted},
                                    frozenset({"gate"}))
    assert found == {"pacer_spark.paced.planted": [2, 3]}  # the driver's methods, and a module path, pass
    importer = tmp_path / "importer.py"
    importer.write_text("from pacer_spark.driver.books import Books\nfrom pacer_spark.driver.loop import Driver\n")
    assert books_importers({"pacer_spark.sources.importer": importer, "pacer_spark.driver.x": importer}) == \
        {"pacer_spark.sources.importer": [1]}


def room_map_gaps(src: Path) -> dict[str, list[str]]:
    """Per subpackage (room) of ``src``: its modules that its ``__init__``'s docstring does not name or whose
    ``__all__`` (where it has one) does not list, and names ``__all__`` lists that are no module of it."""
    gaps: dict[str, list[str]] = {}
    for init in sorted([*src.glob("*/__init__.py"), *src.glob("*/*/__init__.py")]):  # rooms and their subpackages
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree) or ""
        modules = {p.stem for p in init.parent.glob("*.py") if p.stem != "__init__"}
        listed: set[str] | None = None
        for node in tree.body:
            names = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
            if isinstance(node, ast.Assign) and "__all__" in names:
                listed = {e.value for e in getattr(node.value, "elts", []) if isinstance(e, ast.Constant)}
        missing = [f"{m} (not in the docstring)" for m in sorted(modules) if f"``{m}``" not in doc and m not in doc]
        if listed is not None:
            missing += [f"{m} (not in __all__)" for m in sorted(modules - listed)]
            missing += [f"{m} (in __all__, no such module)" for m in sorted(listed - modules)]
        if missing:
            gaps[str(init.parent.relative_to(src))] = missing
    return gaps


def test_each_pacer_spark_room_s_map_names_every_module_it_holds() -> None:
    """A room's ``__init__`` says what each of its modules is for and lists them in ``__all__``: the map a reader
    starts from (it fell behind within days: ``run/__all__`` named a ``demo`` that was gone, so ``import *``
    raised)."""
    assert room_map_gaps(ROOT / "integrations/pacer-spark/src/pacer_spark") == {}


def test_the_room_map_check_sees_a_missing_and_a_stale_module(tmp_path: Path) -> None:
    room = tmp_path / "room"
    room.mkdir()
    (room / "__init__.py").write_text('"""``kept`` is named."""\n__all__ = ["kept", "gone"]\n')
    (room / "kept.py").write_text("")
    (room / "new.py").write_text("")
    assert room_map_gaps(tmp_path) == {"room": ["new (not in the docstring)", "new (not in __all__)",
                                                "gone (in __all__, no such module)"]}


# -- the check itself, on planted code -----------------------------------------------------------------


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("import b\n")
    b.write_text("def later():\n    import a\n")
    graph = {name: {t for t, only in _imports(path, name, False) if not only} for name, path in
             (("a", a), ("b", b))}
    assert cycles(graph) == [["a", "b"]]
    b.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\n")
    graph = {name: {t for t, only in _imports(path, name, False) if not only} for name, path in
             (("a", a), ("b", b))}
    assert cycles(graph) == []


def test_a_planted_py4j_read_and_upward_import_are_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dists = distributions()
    core = dists["pacer-core"]
    planted = tmp_path / "planted.py"
    planted.write_text("import pacer_spark.session\n\ndef f(spark):\n    return spark._jsparkSession\n")
    core.modules["pacer.planted"] = planted
    monkeypatch.setitem(globals(), "distributions", lambda: dists)
    assert py4j_reads()["pacer.planted"] == [4]
    assert ("pacer.planted", "pacer-spark") in upward_imports()


def test_a_planted_controller_call_and_lock_proof_are_seen(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from pacer_spark.driver.locking import Held\n\n"
                       "def f(self, held: Held):\n"
                       "    self.driver.controller.reconcile.retract('b1')\n"
                       "    c = self.driver.controller\n"
                       "    return c\n\n"
                       "def g(books, session):\n"
                       "    books.arrive('q', None)\n"
                       "    return session.controller\n")
    inside = tmp_path / "inside.py"
    inside.write_text(planted.read_text())
    found = controller_reaches({"pacer_spark.paced.planted": planted, "pacer_spark.driver.inside": inside})
    assert found == {"pacer_spark.paced.planted": [1, 3, 4, 5]}  # books and the user's session.controller pass
