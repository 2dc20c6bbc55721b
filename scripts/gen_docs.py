"""Generate the documentation site's reference pages from the code, then (with ``--build``) build the site.

Usage: ``python scripts/gen_docs.py [--check] [--build]`` (``nox -s docs`` runs it with ``--build``: MkDocs
``--strict``; ``--check`` writes nothing and fails when a committed page is not what the code generates now).

Pages written under ``docs/reference/``, kept in git so that ``docs/`` reads in the repository as on the site
(``tests/test_docs.py`` runs ``--check``: after changing what a page is made from, run this script and commit):

- ``strategies.md``: every installed strategy, from ``pacer strategies --json``;
- ``options.md``: every ``spark.pacer.*`` setting and ``attach()`` keyword (type, default, when it is read), from
  the fields of :class:`pacer_spark.PacerConfig` and their ``conf`` metadata, and the per-query ``pacer.*`` options;
- ``api.md``: ``attach``, ``PacerSession`` and ``session_builder``, from their signatures and docstrings;
- ``hooks.md``: every hook specification with its signature and docstring, from :mod:`pacer.hookspecs`;
- ``errors.md``: every error pacer raises, found by reading the source of every package (each ``raise`` of a
  pacer exception, with its message), so none is missed;
- ``results.md``: the newest ``pacer bench`` results in ``bench-results/``, each figure once, with the command that
  produced it and its plots (copied beside the page).

Hand-written pages under ``docs/`` may hold a section of another file (a package README, the changelog) between
``<!-- include: PATH[:SECTION] -->`` and ``<!-- end include -->``: the text between is that file's (its section
between ``[start:SECTION]`` and ``[end:SECTION]`` markers), refreshed by this script, so the page reads whole in the
repository and says where the text lives. ``--check`` lets the changelog's copy lag (:data:`LAGGING`).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import MISSING, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
OUT = DOCS / "reference"
SOURCES = [*sorted(ROOT.glob("packages/*/src")), *sorted(ROOT.glob("strategies/*/src")), ROOT / "conformance/src",
           *sorted(ROOT.glob("integrations/*/src"))]
RESULTS = ROOT / "bench-results"
#: Pages ``--check`` lets lag: the changelog's copy changes with nearly every commit (each adds an entry); it is
#: refreshed whenever this script writes the pages (``nox -s docs``), and ``--check`` says when it lags.
LAGGING = {DOCS / "changelog.md"}
INCLUDE = re.compile(r"(<!-- include: (\S+?)(?::([\w-]+))? -->\n)(.*?)(<!-- end include -->)", re.S)


def markdown(text: str) -> str:
    """Docstring markup as Markdown: ``literal`` -> `literal`, :role:`~a.b` -> `b`."""
    text = re.sub(r":\w+:`~?([^`]*?)`", lambda m: f"`{m.group(1).split('.')[-1]}`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def cell(text: object) -> str:
    """``text`` as one Markdown table cell: its pipes escaped, its lines joined."""
    return " ".join(str(text).split()).replace("|", "\\|")


def strategies_page() -> str:
    """Every installed strategy: what it decides, its package, parameters and summary."""
    out = subprocess.run([sys.executable, "-m", "pacer.cli", "strategies", "--json"], check=True,
                         capture_output=True, text=True)
    rows = ["| strategy | decides | package | parameters (defaults) | summary |", "|---|---|---|---|---|"]
    details = []
    for s in json.loads(out.stdout):
        params = ", ".join(f"`{p['name']}`" for p in s["params"]) or "—"
        rows.append(f"| [`{s['name']}`](#{s['name']}) | {', '.join(s['provides'])} | {s['package']} {s['version']} "
                    f"| {params} | {cell(s['summary'])} |")
        lines = [f"### {s['name']}", "", s["summary"], ""]
        if s["params"]:
            lines += ["| parameter | default | what |", "|---|---|---|"]
            for p in s["params"]:
                default = f"`{p['default']!r}`"
                lines.append(f"| `{p['name']}` | {cell(default)} | {cell(p['doc'])} |")
        details.append("\n".join(lines))
    return ("# Strategies\n\nGenerated from `pacer strategies --json`: every strategy installed where the site was "
            "built. Choose one per decision: `attach(spark, admission=..., scheduler=..., placement=..., scale=...)` "
            "or `pacer run --admission ...`; parameters with `admission_params={...}` or "
            "`--param admission.NAME=VALUE`.\n\n" + "\n".join(rows) + "\n\n## Parameters\n\n"
            + "\n\n".join(details) + "\n")


#: What each per-query option of ``format("pacer")`` does (the names come from the code: ``KNOWN_OPTIONS``).
QUERY_OPTIONS = {
    "pacer.source": "the source to wrap, as `format()` names it: csv, json, parquet, text, orc, kafka, rate, ...",
    "pacer.query": "the query's name in pacer's report (default: the query's `queryName`)",
    "pacer.deadline": "this query's latency target (`5s`, `500ms`, `2min`); overrides `attach`'s `deadline`",
    "pacer.admission": "this query's admission strategy; overrides `attach`'s `admission`",
    "pacer.placement": "this query's placement strategy; overrides `attach`'s `placement`",
    "pacer.overload": "`keep` only (a `format(\"pacer\")` query reads every offset: `shed` is refused)",
    "pacer.arrival": "how arrivals are dated: `source` (the data's own time: Kafka timestamps, file mtimes, rate's "
                     "timestamp) or `observed` (when pacer first saw it)",
    "pacer.arrival.maxAge": "a source time older than the query's start by more than this is dated when pacer saw "
                            "it (default 7 days)",
    "pacer.engineProfile": "an engine profile file (`pacer calibrate --runtime spark`) the query's cost model starts "
                           "from",
    "pacer.observe": "a file: record what Spark does, pace nothing (`pacer advise` reads it)",
    "pacer.observe.adviseEvery": "with `pacer.observe`: how often the driver advises (default `5 minutes`; `0`: never)",
    "pacer.param.<admission|placement>.<name>": "a parameter of this query's strategy",
}


def _takes(reader: object) -> str:
    """What a field's reader takes, from its docstring's first sentence (a closure's from the function making it,
    with the values it was made with)."""
    import pacer_spark.config as config

    outer = getattr(config, getattr(reader, "__qualname__", "").split(".<locals>")[0], reader)
    text = (inspect.getdoc(outer) or "").split("\n\n")[0]
    text = " ".join(text.split(" -> ")[0].split()).rstrip(".")
    code = getattr(reader, "__code__", None)
    for name, value in zip(code.co_freevars if code else (), getattr(reader, "__closure__", None) or (), strict=False):
        shown = ", ".join(value.cell_contents) if isinstance(value.cell_contents, tuple) else value.cell_contents
        text = text.replace(f"``{name}``", str(shown))
    if text.startswith("A duration"):
        from pacer_spark.config import DURATION_EXAMPLES
        text = f"A duration > 0 ({DURATION_EXAMPLES})"
    return markdown(text)


def options_page() -> str:
    """Every ``spark.pacer.*`` setting and ``attach()`` keyword, from PacerConfig's fields and their ``conf``
    metadata (type, default, what a value may be, what it holds), and the per-query ``pacer.*`` options."""
    from pacer_spark.config import CONF_PREFIX, PacerConfig
    from pacer_spark.driver.protocol.state import KNOWN_OPTIONS
    from pacer_spark.runtime import attach

    doc = inspect.getdoc(PacerConfig) or ""
    said: dict[str, str] = {}
    for name, text in re.findall(r":ivar (\w+): (.*?)(?=\n:ivar |\n:raises |\Z)", doc, re.S):
        said[name] = markdown(" ".join(text.split()))
    keywords = inspect.signature(attach).parameters
    rows = ["| keyword of `attach()` | session conf | type | default | a value is | read | what |",
            "|---|---|---|---|---|---|---|"]
    for f in fields(PacerConfig):
        source = f.metadata.get("conf")
        if f.name not in keywords and source is None:
            continue  # not a setting (how the admission was chosen)
        key = getattr(source, "key", "")
        conf = f"`{CONF_PREFIX}{key}`" if key else "— (keyword only)"
        if f.default is not MISSING:
            default = "—" if f.default is None else f"`{f.default!r}`"
        else:
            default = "empty" if f.default_factory is not MISSING else "—"
        reader = getattr(source, "reader", None)
        takes = _takes(reader) if reader is not None else "a mapping of parameter names to values"
        rows.append(f"| `{f.name}` | {cell(conf)} | `{cell(f.type)}` | {cell(default)} | {cell(takes)} "
                    f"| at `attach()` | {cell(said.get(f.name, ''))} |")
    options = sorted(KNOWN_OPTIONS | {"pacer.source", "pacer.param.<admission|placement>.<name>"})
    query_rows = ["| option | read | what |", "|---|---|---|"]
    query_rows += [f"| `{cell(name)}` | at the query's start | {cell(QUERY_OPTIONS.get(name, ''))} |"
                   for name in options]
    return ("# Settings and options\n\nGenerated from the fields of `pacer_spark.PacerConfig` and their `conf` "
            "metadata, and from the options the driver accepts (`KNOWN_OPTIONS`).\n\n"
            "## Session settings: `attach()` keywords and `spark.pacer.*` confs\n\n"
            "Every setting is **read once, at `attach()`**: a keyword given wins; one left out (or None) is read from "
            "the session's conf beside it (`spark.conf.set(...)` before `attach`, `--conf` of spark-submit, or "
            "`session_builder(conf={...})`), then defaulted. Changing a conf after `attach()` changes nothing until "
            "the next `attach()` (a new session, or after `pacer.stop()`). Strategy parameters: "
            "`spark.pacer.param.<decision>.<name>` (one conf each) or the `*_params` keyword (a mapping). A value "
            "that is not what the setting takes fails `attach()`, naming the setting.\n\n"
            + "\n".join(rows) + "\n\n## Per-query options of `format(\"pacer\")`\n\n"
            "Read **when the query starts** (each `readStream.format(\"pacer\")...load()` with `.option(...)`); they "
            "override the session's settings for that query. An unknown `pacer.*` option fails the query, naming "
            "those there are. Every other option goes to the wrapped source untouched.\n\n"
            + "\n".join(query_rows) + "\n")


def _docstring(obj: object) -> str:
    """A docstring as Markdown: its text, then its ``:param:``, ``:ivar:`` and ``:raises:`` fields as lists."""
    doc = inspect.getdoc(obj) or ""
    body, _, tail = doc.partition("\n:")
    tail = (":" + tail) if tail else ""
    parts = [markdown(body).replace(">>> ", "")]
    items = re.findall(r":(param|ivar|raises|return)\s*([\w.]*)\s*:\s*(.*?)(?=\n:(?:param|ivar|raises|return)|\Z)",
                       tail, re.S)
    label = {"param": "Parameter", "ivar": "Attribute", "raises": "Raises", "return": "Returns"}
    if items:
        parts.append("\n".join(f"- **{label[kind]}**{f' `{name}`' if name else ''}: {markdown(' '.join(t.split()))}"
                               for kind, name, t in items))
    return "\n\n".join(p for p in parts if p.strip())


def _signature(name: str, fn: object) -> str:
    """``name(...)`` with one parameter a line: its annotation as written, its default as Python writes it."""
    params = []
    star = False
    for p in inspect.signature(fn).parameters.values():  # type: ignore[arg-type]
        if p.kind is p.KEYWORD_ONLY and not star:
            params.append("*")
            star = True
        text = p.name if p.kind is not p.VAR_KEYWORD else f"**{p.name}"
        if p.annotation is not p.empty:
            text += f": {p.annotation if isinstance(p.annotation, str) else inspect.formatannotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        params.append(text)
    if len(", ".join(params)) + len(name) < 100:
        return f"```python\n{name}({', '.join(params)})\n```"
    return f"```python\n{name}(\n" + "".join(f"    {p},\n" for p in params) + ")\n```"


def api_page() -> str:
    """``attach``, ``session_builder`` and ``PacerSession`` (its public methods), from their docstrings."""
    import pacer_spark

    parts = ["# API reference", "",
             "Generated from the signatures and docstrings of `pacer_spark`'s entry points. Every keyword of "
             "`attach` is a setting: [Settings and options](options.md) gives each one's type, conf and default.", ""]
    for name in ("session_builder", "attach"):
        fn = getattr(pacer_spark, name)
        parts += [f"## `pacer_spark.{name}`", "", _signature(name, fn), "", _docstring(fn), ""]
    cls = pacer_spark.PacerSession
    parts += ["## `pacer_spark.PacerSession`", "", _docstring(cls), ""]
    for name, member in inspect.getmembers(cls):
        if name.startswith("_"):
            continue
        if isinstance(member, property):
            parts += [f"### `PacerSession.{name}` (property)", "", _docstring(member.fget), ""]
        elif inspect.isfunction(member):
            parts += [f"### `PacerSession.{name}`", "", _signature(name, member), "", _docstring(member), ""]
    return "\n".join(parts).rstrip() + "\n"


def hooks_page() -> str:
    """Every hook specification: its signature and docstring."""
    import pacer.hookspecs as specs

    parts = []
    for name, fn in inspect.getmembers(specs, inspect.isfunction):
        if not name.startswith("pacer_"):
            continue
        firstresult = getattr(fn, "pacer_spec", {}).get("firstresult", False)
        signature = str(inspect.signature(fn)).replace("'", "")
        parts.append(f"## `{name}`\n\n```python\n{name}{signature}\n```\n\n"
                     f"{'`firstresult`: the first non-None answer wins.' if firstresult else 'Every implementation is called.'}"
                     f"\n\n```text\n{inspect.getdoc(fn)}\n```\n")
    module = inspect.getdoc(specs) or ""
    return f"# Hooks\n\nGenerated from `pacer.hookspecs`.\n\n```text\n{module}\n```\n\n" + "\n".join(parts)


class _Sources:
    """Every pacer module's syntax tree, with what the errors page resolves a message through: the module-level
    string constants and the functions, by name."""

    def __init__(self) -> None:
        self.modules: list[tuple[str, ast.Module]] = []
        self.constants: dict[str, ast.expr] = {}
        self.functions: dict[str, list[ast.FunctionDef]] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for src in SOURCES:
            for path in sorted(src.rglob("*.py")):
                tree = ast.parse(path.read_text())
                self.modules.append((".".join(path.relative_to(src).with_suffix("").parts), tree))
                for node in tree.body:
                    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                        self.constants.setdefault(node.targets[0].id, node.value)
                    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                        self.constants.setdefault(node.target.id, node.value)
                    elif isinstance(node, ast.ClassDef):
                        self.classes.setdefault(node.name, node)
                for node in ast.walk(tree):
                    if isinstance(node, ast.FunctionDef):
                        self.functions.setdefault(node.name, []).append(node)

    def exception_names(self) -> set[str]:
        """Names of the exception classes pacer defines (classes deriving from an Error or Exception)."""
        names: set[str] = set()
        for _, tree in self.modules:
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception", "Refused", "Violation"))
                                                     or b.id in names) for b in node.bases):
                    names.add(node.name)
        return names

    def messages(self, expr: ast.expr, scope: ast.AST | None, depth: int = 0) -> list[str]:
        """What ``expr`` (a message) reads as: one text per way it can come out; a value only known when it is
        raised as ``{...}``; ``[]`` for a message that is another error's, raised again (``str(exc)``)."""
        if depth > 4:
            return ["{" + ast.unparse(expr) + "}"]
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, ast.JoinedStr):
            pieces: list[list[str]] = []
            for value in expr.values:
                if isinstance(value, ast.Constant):
                    pieces.append([str(value.value)])
                else:
                    inner = value.value if isinstance(value, ast.FormattedValue) else value
                    pieces.append(self._inline(inner, scope, depth))
            return ["".join(p) for p in itertools.islice(itertools.product(*pieces), 4)]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left, right = self.messages(expr.left, scope, depth + 1), self.messages(expr.right, scope, depth + 1)
            return [a + b for a, b in itertools.islice(itertools.product(left, right), 4)]
        if isinstance(expr, ast.IfExp):
            return self.messages(expr.body, scope, depth + 1) + self.messages(expr.orelse, scope, depth + 1)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Name) and func.id == "str" and len(expr.args) == 1 \
                    and isinstance(expr.args[0], ast.Name):
                return []  # another error's message, raised again: listed where it is raised first
            if isinstance(func, ast.Attribute) and func.attr == "format":
                return self.messages(func.value, scope, depth + 1)
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            found = self._returns(name, depth)
            if found:
                return found
        if isinstance(expr, ast.Name):
            value = self._assigned(expr.id, scope)
            if value is not None:
                return self.messages(value, scope, depth + 1)
        return ["{" + ast.unparse(expr) + "}"]

    def _inline(self, expr: ast.expr, scope: ast.AST | None, depth: int) -> list[str]:
        """A placeholder of an f-string: a module's string constant or a helper's one text, else ``{...}``."""
        if isinstance(expr, ast.Name) and expr.id.isupper() and expr.id in self.constants:
            value = self.constants[expr.id]
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return [value.value]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            found = self._returns(expr.func.id, depth)
            if len(found) == 1:
                return found
        return ["{" + ast.unparse(expr) + "}"]

    def _returns(self, name: str, depth: int) -> list[str]:
        """The texts a pacer function of that name (a single one) returns, None left out."""
        defs = self.functions.get(name, [])
        if len(defs) != 1:
            return []
        texts: list[str] = []
        for node in ast.walk(defs[0]):
            if isinstance(node, ast.Return) and node.value is not None \
                    and not (isinstance(node.value, ast.Constant) and node.value.value is None):
                if isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.IfExp, ast.Name)):
                    texts += self.messages(node.value, defs[0], depth + 1)
        return [t for t in texts if t.strip() and not re.fullmatch(r"\{[^{}]*\}", t)]

    def _assigned(self, name: str, scope: ast.AST | None) -> ast.expr | None:
        """The value last assigned to ``name`` in ``scope`` (a function), else a module constant of that name."""
        value = None
        if scope is not None:
            for node in ast.walk(scope):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                    value = node.value
                elif isinstance(node, ast.NamedExpr) and node.target.id == name:
                    value = node.value
        if value is None and name in self.constants:
            value = self.constants[name]
        return value

    def raised(self, call: ast.Call, scope: ast.AST | None) -> list[str]:
        """The messages of ``raise X(...)``: X's own ``__init__`` composing it from its arguments where it does."""
        if not call.args:
            return []
        name = call.func.id if isinstance(call.func, ast.Name) else ""
        cls = self.classes.get(name)
        init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None) if cls \
            else None
        template = None
        if init is not None:
            for node in ast.walk(init):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr == "__init__" and node.args and isinstance(node.args[0], ast.JoinedStr):
                    template = node.args[0]
        if template is None or init is None:
            return self.messages(call.args[0], scope)
        params = [a.arg for a in init.args.args[1:]]
        given = dict(zip(params, call.args, strict=False))
        out = []
        for value in template.values:
            if isinstance(value, ast.Constant):
                out.append(str(value.value))
            elif isinstance(value.value, ast.Name) and value.value.id in given:
                out.append(self.messages(given[value.value.id], scope)[0] if self.messages(given[value.value.id],
                                                                                            scope) else "{...}")
            else:
                out.append("{" + ast.unparse(value.value) + "}")
        return ["".join(out)]


def _functions_around(tree: ast.Module) -> Iterator[tuple[ast.Raise, ast.AST | None]]:
    """Every ``raise`` of ``tree`` with the function around it (None at module level)."""
    def visit(node: ast.AST, scope: ast.AST | None) -> Iterator[tuple[ast.Raise, ast.AST | None]]:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            if isinstance(child, ast.Raise):
                yield child, scope
            yield from visit(child, inner)
    yield from visit(tree, None)


def errors_page() -> str:
    """Every ``raise`` of a pacer exception (and of ``ValueError``/``TypeError`` with a message) in the packages."""
    sources = _Sources()
    ours = sources.exception_names()
    by_class: dict[str, list[tuple[str, str]]] = {}
    for module, tree in sources.modules:
        for node, scope in _functions_around(tree):
            if not isinstance(node.exc, ast.Call):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name not in ours and name not in ("ValueError", "TypeError", "RuntimeError"):
                continue
            for message in sources.raised(node.exc, scope):
                message = " ".join(message.split())
                if message and not re.fullmatch(r"\{[^{}]*\}", message):
                    by_class.setdefault(name, []).append((module, message))
    parts = ["# Troubleshooting: every error pacer raises", "",
             "Generated by reading every pacer package's source: each `raise` of one of pacer's own exceptions, and of "
             "`ValueError`, `TypeError` and `RuntimeError` with a message, grouped by exception, with the module it "
             "comes from. A message built by a helper or from a constant is shown as that helper or constant writes "
             "it; `{...}` stands for what is known only when it is raised (a name, a value, a path). An error raised "
             "again under another class keeps its message and is listed where it is first raised. Each message says "
             "what went wrong and what to do; search this page for the words you saw. By symptom: "
             "[Troubleshooting](../troubleshooting.md).", ""]
    for name in sorted(by_class, key=lambda n: (n in ("ValueError", "TypeError", "RuntimeError"), n)):
        parts += [f"## `{name}`", "", "| where | message |", "|---|---|"]
        for module, message in sorted(set(by_class[name])):
            parts.append(f"| `{module}` | {cell(message)} |")
        parts.append("")
    return "\n".join(parts) + "\n"


def upgrade_notes_page() -> str:
    """Per version, the changelog's entries an upgrade must heed: those marked **Breaking** or (upgrade note)."""
    text = (ROOT / "CHANGELOG.md").read_text()
    parts = ["# Upgrade notes", "",
             "Generated from `CHANGELOG.md`: per version, every entry marked **Breaking** or *upgrade note*, whole. "
             "How to upgrade (stop the queries, install, attach and start them again from their checkpoints): "
             "[Operations](../operations.md#upgrading-pacer). Everything else that changed: the "
             "[Changelog](../changelog.md).", ""]
    for version, body in re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", text, re.S | re.M):
        entries = [e.strip() for e in re.split(r"\n(?=- )", body) if e.startswith("- ")]
        notes = [e for e in entries if re.search(r"\*\*Breaking|[Bb]reaking\*\*|upgrade note", e)]
        parts += [f"## Upgrading to {version}", ""]
        parts += [*notes, ""] if notes else ["Nothing to heed: no entry is marked breaking.", ""]
    return "\n".join(parts).rstrip() + "\n"


def _commands(text: str) -> Iterator[str]:
    """The shell commands a Markdown text shows: each line of a fenced block (continuations joined) and each code
    span, whitespace collapsed."""
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, re.S):
        for command in re.sub(r"\\\n\s*", " ", block).splitlines():
            yield " ".join(re.split(r"\s#\s", f"{command} ")[0].split())
    for span in re.findall(r"(?<!`)`([^`]+)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.S)):
        yield " ".join(span.split())


COMMAND = re.compile(r"^([A-Z_]+=(\"[^\"]*\"|\S+) )*(pacer |python -m |bash )")
_TEXTS: dict[Path, str] = {}


def _command_for(folder: Path) -> str | None:
    """The command that wrote ``folder``, as a README or the folder's own text shows it: one naming the folder as
    its ``--out``/``--dir``/``--json``/``--report`` or its script, else the first command the folder's README shows."""
    name = re.escape(folder.name)
    writes = re.compile(r"(--out|--dir|--json|--report)[ =](\S*/)?" + name + r"(/\S*)?( |$)|bench-results/" + name
                        + r"/\S+\.sh")
    own = sorted(folder.glob("*.md"))
    readmes = [ROOT / "README.md", *sorted(ROOT.glob("*/*/README.md")), *sorted(DOCS.glob("*.md"))]
    for path in [*own, *readmes]:
        if path not in _TEXTS:
            _TEXTS[path] = path.read_text()
        for command in _commands(_TEXTS[path]):
            if COMMAND.match(command) and writes.search(command):
                return command
    if (folder / "run.sh").exists():
        return f"bash bench-results/{folder.name}/run.sh"
    readme = folder / "README.md"
    if readme.exists():  # the first command it shows that runs something (a broker or a producer only sets up)
        shown = [c for c in _commands(readme.read_text()) if COMMAND.match(c) and " " in c.strip()]
        setup = re.compile(r"^pacer (kafka|produce|cluster) ")
        return next((c for c in shown if not setup.match(c)), shown[0] if shown else None)
    return None


def _rebuilt(folder: Path, meta: dict) -> str:
    """``pacer bench``'s command line as far as ``meta.json`` records it."""
    flags = [f"pacer bench {meta['scenario']} --runtime {meta.get('requested_runtime') or meta['runtime']}"]
    if meta.get("source") == "kafka":
        flags.append("--source kafka")
    if meta.get("quick"):
        flags.append("--quick")
    if meta.get("repeat", 1) > 1:
        flags.append(f"--repeat {meta['repeat']}")
    if meta.get("vary_seed"):
        flags.append("--vary-seed")
    if meta.get("seed", 7) != 7:
        flags.append(f"--seed {meta['seed']}")
    if meta.get("rate_scale", 1.0) != 1.0:
        flags.append(f"--rate-scale {meta['rate_scale']:g}")
    if meta.get("overload", "keep") != "keep":
        flags.append(f"--overload {meta['overload']}")
    if "spark://" in meta.get("machine", ""):
        flags.append("--master spark://HOST:PORT")
    flags.append(f"--out bench-results/{folder.name}")
    return " ".join(flags)


def _command_lines(folder: Path, meta: dict | None) -> list[str]:
    found = _command_for(folder)
    if found is not None:
        return [f"Command: `{found}`", ""]
    if meta is not None:
        return [f"Command, as `meta.json` records it: `{_rebuilt(folder, meta)}` (it does not record `--duration`, "
                "`--deadline`, `--static`, `--traffic`, `--workload`, `--executors` or `--config`: the configurations "
                f"run were {', '.join(meta.get('configs') or ['the scenario’s'])})", ""]
    return []


def _flat(text: str, shift: int) -> str:
    """A bench folder's Markdown inside the page: headings ``shift`` levels down, links into the repository their
    text."""
    pieces = re.split(r"(^```.*?^```)", text, flags=re.S | re.M)  # code blocks (a shell's # comments) stay as they are
    for i in range(0, len(pieces), 2):
        piece = re.sub(r"^(#+) ", lambda m: "#" * min(6, len(m.group(1)) + shift) + " ", pieces[i], flags=re.M)
        pieces[i] = re.sub(r"(?<!!)\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", piece)
    return "".join(pieces).strip()


#: Bench outputs without a ``pacer bench`` scenario's ``meta.json`` that other pages point to, by folder: the title
#: of their section and the command that wrote them (where no README in the repository shows it).
EXTRA = {
    "demo-2026-11-29": ("`pacer demo`: Spark's default trigger, Spark's trigger at 10 s, pacer at 10 s",
                        "pacer demo --out bench-results/demo-2026-11-29"),
    "format-pacer-overhead": ("Overhead: `format(\"pacer\")` against Spark's csv source",
                              "python -m pacer_spark.run.overhead --files 200 --rows 10000 --repeat 3 "
                              "--json bench-results/format-pacer-overhead/overhead.json"),
    "kafka-overhead": ("Overhead: `format(\"pacer\")` against Spark's Kafka source",
                       "python -m pacer_kafka.overhead --records 1000000 --repeat 3 "
                       "--json bench-results/kafka-overhead/overhead.json"),
    "kafka-restart-live-topic": ("Restarts on a live Kafka topic", None),
    "kafka-zstream-vs-asap-180s": ("Kafka: zStream against Spark's default trigger, 180 s", None),
    "no-data-batches": ("Spark's no-data batches", None),
    "engine-profile": ("Engine profile: what a batch costs this Spark", None),
    "observe-check": ("Observe, then advise: csv files", None),
    "observe-check-kafka": ("Observe, then advise: Kafka", None),
    "fidelity-scaling": ("Simulator fidelity when executors scale", None),
    "scaling-spark": ("Executor scaling on Spark", None),
    "scaling-lock": ("Executor scaling off the driver's lock", None),
    "pacer-run-lr2-wave-spark": ("`pacer run`: LR2 wave, zStream 10 s against Spark's default trigger", None),
}


def _overhead(folder: Path) -> str:
    """An overhead run's JSON as a table: each side's runs and the ratio of the medians."""
    data = json.loads((folder / "overhead.json").read_text())
    setup = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in data.items()
                      if not isinstance(v, (dict, list)) and k not in ("ratio",) and not k.endswith("_s"))
    rows = ["| side | runs (s) | median s |", "|---|---|---:|"]
    medians = data.get("median_s") or {}
    for side, runs in data["runs"].items():
        seconds = sorted(r["seconds"] for r in runs)
        median = medians.get(side, seconds[len(seconds) // 2])
        label = "plain Spark" if side == "plain" else 'format("pacer")'
        rows.append(f"| {label} | "
                    f"{', '.join(f'{s:.1f}' for s in seconds)} | {median:.1f} |")
    return (f"{setup}.\n\n" + "\n".join(rows) + f"\n\n`format(\"pacer\")` ÷ plain: **{data['ratio']:.2f}** (medians; "
            "below 1 is within the runs' spread, not a speed-up).")


def results_page() -> tuple[str, dict[str, bytes]]:
    """The newest bench results, each once, with the command that wrote them, and their plots (by path under
    ``docs/reference/``, to be written beside the page)."""
    parts = ["# Results", "",
             "Generated from the `pacer bench` runs and the other measurements in `bench-results/`. Each figure "
             "lives here once, with the command, date and machine it came from; every other page links here. "
             "Figures marked *simulated* come from pacer-sim; the others from real Spark on the machine named. "
             "Costs are named by their measure: **busy core-s** (core-seconds the query's tasks executed: what a "
             "shared cluster pays), **engine s** (Spark's batch durations summed), **allocated core-s** (executors "
             "held): a ratio of one is not a ratio of another.", ""]
    images: dict[str, bytes] = {}
    for meta_path in sorted(RESULTS.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        folder = meta_path.parent
        if meta.get("grid"):  # device-sweep --grid: its section was written beside its results
            section = folder / "readme-section.md"
            if section.exists():
                text = re.sub(r"^#+ ", "## ", section.read_text(), count=1)  # a scenario of its own, as the others
                text = re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", text).strip()
                title, _, rest = text.partition("\n")
                rest = re.sub(r"^#{1,2} ", "### ", rest, flags=re.M)  # its own sections, under its title
                command = [] if any(COMMAND.match(c) for c in _commands(text)) else _command_lines(folder, meta)
                parts += [title, "", *command, rest.strip(), ""]
            continue
        md_path = folder / f"{meta['scenario']}.md"
        if not md_path.exists():
            continue
        text = md_path.read_text().split("\n", 3)[-1]
        cut = text.find("<!-- readme:end -->")
        if cut >= 0:
            text = text[:cut]
        label = " (simulated)" if meta["runtime"] == "sim" else " (Kafka)" if meta.get("source") == "kafka" else ""
        reps = f" · {meta['repeat']} repetitions" if meta.get("repeat", 1) > 1 else ""
        parts += [f"## {meta['scenario']}{label}: `{folder.name}`", "",
                  f"{meta['date']} · {meta['machine']} · runtime `{meta['runtime']}`"
                  f"{' · quick' if meta.get('quick') else ''}{reps}", "",
                  *_command_lines(folder, meta),
                  *(f"**Stale**: {note}." for note in meta.get("notes") or () if note.startswith("superseded")),
                  "", _flat(text, 1), ""]
        parts += _plots(folder, images)
    for name, (title, command) in EXTRA.items():
        folder = RESULTS / name
        if not folder.is_dir():
            continue
        parts += [f"## {title}: `{name}`", ""]
        parts += [f"Command: `{command}`", ""] if command else _command_lines(folder, None)
        if (folder / "overhead.json").exists() and not (folder / "README.md").exists():
            parts += [_overhead(folder), ""]
        else:
            source = next((folder / n for n in ("README.md", "demo.md", f"{name}.md", "scaling-lock.md")
                           if (folder / n).exists()), None)
            if source is not None:
                parts += [_flat(source.read_text().split("\n", 1)[-1], 1), ""]
        parts += _plots(folder, images)
    return "\n".join(parts) + "\n", images


def _plots(folder: Path, images: dict[str, bytes]) -> list[str]:
    lines = []
    for png in sorted(folder.glob("*.png"))[:4]:
        images[f"results/{folder.name}/{png.name}"] = png.read_bytes()
        lines += [f"![{png.stem}](results/{folder.name}/{png.name})", ""]
    return lines


def _section(path: str, section: str | None) -> str:
    text = (ROOT / path).read_text()
    if section:
        match = re.search(rf"<!-- --8<-- \[start:{re.escape(section)}\] -->\n(.*?)<!-- --8<-- \[end:"
                          rf"{re.escape(section)}\] -->", text, re.S)
        if match is None:
            raise SystemExit(f"{path} has no section {section!r} ([start:{section}] ... [end:{section}] markers)")
        text = match.group(1)
    return text.strip() + "\n"


def included(page: str) -> str:
    """``page`` with the text of each of its includes refreshed from the file it names."""
    return INCLUDE.sub(lambda m: m.group(1) + _section(m.group(2), m.group(3)) + m.group(5), page)


def generated() -> dict[Path, str | bytes]:
    """Every page (and plot) this script writes, by path, as the code makes it now."""
    pages: dict[Path, str | bytes] = {}
    for name, page in (("strategies", strategies_page), ("options", options_page), ("api", api_page),
                       ("hooks", hooks_page), ("errors", errors_page),
                       ("upgrade-notes", upgrade_notes_page)):
        pages[OUT / f"{name}.md"] = page()
    results, images = results_page()
    pages[OUT / "results.md"] = results
    for rel, data in images.items():
        pages[OUT / rel] = data
    for path in sorted(DOCS.glob("*.md")):
        text = path.read_text()
        if INCLUDE.search(text):
            pages[path] = included(text)
    return pages


def stale(pages: dict[Path, str | bytes]) -> list[str]:
    """The paths whose committed content is not what ``pages`` holds, and plots no page shows any more."""
    out = []
    for path, content in pages.items():
        if path in LAGGING:
            continue
        now = path.read_bytes() if path.exists() else None
        if now != (content.encode() if isinstance(content, str) else content):
            out.append(str(path.relative_to(ROOT)))
    for path in (OUT / "results").rglob("*.png") if (OUT / "results").exists() else ():
        if path not in pages:
            out.append(f"{path.relative_to(ROOT)} (no page shows it)")
    return sorted(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="write nothing; fail when a page is not fresh (with "
                        "--build: build the site from the committed pages when they are)")
    parser.add_argument("--build", action="store_true", help="then build the site with mkdocs build --strict")
    parser.add_argument("--site", default=str(ROOT / "site"), help="where --build writes the site")
    args = parser.parse_args()
    pages = generated()
    if args.check:
        old = stale(pages)
        if old:
            print("stale, run python scripts/gen_docs.py and commit:\n  " + "\n  ".join(old), file=sys.stderr)
            return 1
        lagging = [str(p.relative_to(ROOT)) for p in LAGGING if p.read_text() != pages.get(p, p.read_text())]
        print(f"{len(pages)} generated pages and plots are fresh"
              + (f" ({', '.join(lagging)} lags its source: refreshed when this script runs)" if lagging else ""))
        return _build(args.site) if args.build else 0
    for path in stale(pages):
        if path.endswith("(no page shows it)"):
            (ROOT / path.split(" (")[0]).unlink()
    for path, content in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            if not path.exists() or path.read_bytes() != content:
                path.write_bytes(content)
        elif not path.exists() or path.read_text() != content:
            path.write_text(content)
    print(f"wrote {OUT.relative_to(ROOT)}/ (strategies, options, api, hooks, errors, results) and the includes of "
          "docs/*.md")
    return _build(args.site) if args.build else 0


def _build(site: str) -> int:
    """``mkdocs build --strict`` into ``site``. MkDocs' and Material's own notices (Material's end of life in 2027)
    are printed as they come: the docs README section of the root README says what that one means."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", site], cwd=ROOT,
                          check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
