"""Generate the documentation site's reference pages from the code, then (with ``--build``) build the site.

Usage: ``python scripts/gen_docs.py [--build]`` (``nox -s docs`` runs it with ``--build``: MkDocs ``--strict``).

Pages written under ``docs/reference/`` (not kept in git: they are rebuilt from the code every time, so none can go
stale):

- ``strategies.md``: every installed strategy, from ``pacer strategies --json``;
- ``options.md``: ``attach()``'s keywords and their ``spark.pacer.*`` confs, from :class:`pacer_spark.PacerConfig`;
- ``hooks.md``: every hook specification with its signature and docstring, from :mod:`pacer.hookspecs`;
- ``errors.md``: every error pacer raises, found by reading the source of every package (each ``raise`` of a
  pacer exception, with its message), so none is missed;
- ``results.md``: the newest ``pacer bench`` results in ``bench-results/``, each figure once, with its plots.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
OUT = DOCS / "reference"
SOURCES = [*sorted(ROOT.glob("packages/*/src")), *sorted(ROOT.glob("strategies/*/src")), ROOT / "conformance/src",
           *sorted(ROOT.glob("integrations/*/src"))]
RESULTS = ROOT / "bench-results"


def markdown(text: str) -> str:
    """Docstring markup as Markdown: ``literal`` -> `literal`, :role:`~a.b` -> `b`."""
    text = re.sub(r":\w+:`~?([^`]*?)`", lambda m: f"`{m.group(1).split('.')[-1]}`", text)
    return re.sub(r"``(.+?)``", r"`\1`", text)


def strategies_page() -> str:
    """Every installed strategy: what it decides, its package, parameters and summary."""
    out = subprocess.run([sys.executable, "-m", "pacer.cli", "strategies", "--json"], check=True,
                         capture_output=True, text=True)
    rows = ["| strategy | decides | package | parameters (defaults) | summary |", "|---|---|---|---|---|"]
    details = []
    for s in json.loads(out.stdout):
        params = ", ".join(f"`{p['name']}`" for p in s["params"]) or "—"
        rows.append(f"| [`{s['name']}`](#{s['name']}) | {', '.join(s['provides'])} | {s['package']} {s['version']} "
                    f"| {params} | {s['summary']} |")
        lines = [f"### {s['name']}", "", s["summary"], ""]
        if s["params"]:
            lines += ["| parameter | default | what |", "|---|---|---|"]
            lines += [f"| `{p['name']}` | `{p['default']!r}` | {p['doc']} |" for p in s["params"]]
        details.append("\n".join(lines))
    return ("# Strategies\n\nGenerated from `pacer strategies --json`: every strategy installed where the site was "
            "built. Choose one per decision: `attach(spark, admission=..., scheduler=..., placement=..., scale=...)` "
            "or `pacer run --admission ...`; parameters with `admission_params={...}` or "
            "`--param admission.NAME=VALUE`.\n\n" + "\n".join(rows) + "\n\n## Parameters\n\n"
            + "\n\n".join(details) + "\n")


def options_page() -> str:
    """``attach()``'s keywords, their confs and defaults, and what each holds (PacerConfig's docstring)."""
    from pacer_spark.config import CONF_PREFIX, PacerConfig

    doc = inspect.getdoc(PacerConfig) or ""
    said: dict[str, str] = {}
    for name, text in re.findall(r":ivar (\w+): (.*?)(?=\n:ivar |\n:raises |\Z)", doc, re.S):
        said[name] = markdown(" ".join(text.split()))
    rows = ["| keyword | conf | default | what |", "|---|---|---|---|"]
    for f in fields(PacerConfig):
        if f.name == "admission_source":
            continue
        source = f.metadata.get("conf")
        conf = f"`{CONF_PREFIX}{source.key}`" if source is not None and source.key else ""
        default = "—" if f.default is MISSING or f.default is None else f"`{f.default!r}`"
        rows.append(f"| `{f.name}` | {conf} | {default} | {said.get(f.name, '')} |")
    return ("# Options\n\nGenerated from `pacer_spark.PacerConfig`: the keywords of `pacer_spark.attach(spark, ...)`; "
            "each one left out is read from the session's conf beside it, then defaulted.\n\n" + "\n".join(rows) + "\n")


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


def _exception_names() -> set[str]:
    """Names of the exception classes pacer defines (classes deriving from an Error or Exception)."""
    names: set[str] = set()
    for src in SOURCES:
        for path in src.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and any(
                        isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception", "Refused", "Violation"))
                                                     or b.id in names) for b in node.bases):
                    names.add(node.name)
    return names


def _message(call: ast.Call) -> str:
    """The message of ``raise X(message, ...)``: an f-string's placeholders as ``{...}``."""
    if not call.args:
        return ""
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    if isinstance(first, ast.JoinedStr):
        out = []
        for value in first.values:
            if isinstance(value, ast.Constant):
                out.append(str(value.value))
            else:
                out.append("{" + ast.unparse(value.value if isinstance(value, ast.FormattedValue) else value) + "}")
        return "".join(out)
    return "{" + ast.unparse(first) + "}"


def errors_page() -> str:
    """Every ``raise`` of a pacer exception (and of ``ValueError``/``TypeError`` with a message) in the packages."""
    ours = _exception_names()
    by_class: dict[str, list[tuple[str, str]]] = {}
    for src in SOURCES:
        for path in sorted(src.rglob("*.py")):
            module = ".".join(path.relative_to(src).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Raise) or not isinstance(node.exc, ast.Call):
                    continue
                func = node.exc.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name not in ours and name not in ("ValueError", "TypeError", "RuntimeError"):
                    continue
                message = " ".join(_message(node.exc).split())
                if message:
                    by_class.setdefault(name, []).append((module, message))
    parts = ["# Troubleshooting: every error pacer raises", "",
             "Generated by reading every pacer package's source: each `raise` of one of pacer's own exceptions, and of "
             "`ValueError`, `TypeError` and `RuntimeError` with a message, grouped by exception, with the module it "
             "comes from. `{...}` stands for what the message fills in (a name, a value, the fix). Each message says "
             "what went wrong and what to do; search this page for the words you saw.", ""]
    for name in sorted(by_class, key=lambda n: (n in ("ValueError", "TypeError", "RuntimeError"), n)):
        parts += [f"## `{name}`", "", "| where | message |", "|---|---|"]
        for module, message in sorted(set(by_class[name])):
            text = message.replace("|", "\\|").replace("\n", " ")
            parts.append(f"| `{module}` | {text} |")
        parts.append("")
    return "\n".join(parts) + "\n"


def results_page() -> str:
    """The newest bench results, each once, with their plots copied beside the page."""
    parts = ["# Results", "",
             "Generated from the newest `pacer bench` runs in `bench-results/`. Each figure lives here once, with the "
             "command, date and machine it came from; every other page links here. Figures marked *simulated* come "
             "from pacer-sim; the others from real Spark on the machine named.", ""]
    images = OUT / "results"
    if images.exists():
        shutil.rmtree(images)
    for meta_path in sorted(RESULTS.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        folder = meta_path.parent
        if meta.get("grid"):  # device-sweep --grid: its section was written beside its results
            section = folder / "readme-section.md"
            if section.exists():
                text = re.sub(r"^#+ ", "## ", section.read_text(), count=1)  # a scenario of its own, as the others
                parts += [re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", text).strip(), ""]
            continue
        md_path = folder / f"{meta['scenario']}.md"
        if not md_path.exists():
            continue
        text = md_path.read_text().split("\n", 3)[-1]
        cut = text.find("<!-- readme:end -->")
        if cut >= 0:
            text = text[:cut]
        text = re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + 1) + " ", text, flags=re.M)
        text = re.sub(r"\[([^\]]+)\]\((?!https?:)[^)]*\)", r"\1", text)  # links into the repository: their text
        label = " (simulated)" if meta["runtime"] == "sim" else " (Kafka)" if meta.get("source") == "kafka" else ""
        reps = f" · {meta['repeat']} repetitions" if meta.get("repeat", 1) > 1 else ""
        parts += [f"## {meta['scenario']}{label}: `{folder.name}`", "",
                  f"{meta['date']} · {meta['machine']} · runtime `{meta['runtime']}`"
                  f"{' · quick' if meta.get('quick') else ''}{reps}", "",
                  *(f"**Stale**: {note}." for note in meta.get("notes") or () if note.startswith("superseded")),
                  "", text.strip(), ""]
        pngs = sorted(folder.glob("*.png"))[:4]
        if pngs:
            target = images / folder.name
            target.mkdir(parents=True, exist_ok=True)
            for png in pngs:
                shutil.copy(png, target / png.name)
                parts += [f"![{png.stem}](results/{folder.name}/{png.name})", ""]
    return "\n".join(parts) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", action="store_true", help="then build the site with mkdocs build --strict")
    parser.add_argument("--site", default=str(ROOT / "site"), help="where --build writes the site")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, page in (("strategies", strategies_page), ("options", options_page), ("hooks", hooks_page),
                       ("errors", errors_page), ("results", results_page)):
        (OUT / f"{name}.md").write_text(page())
    print(f"wrote {OUT.relative_to(ROOT)}/: strategies, options, hooks, errors, results")
    if args.build:
        env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's end-of-life banner: it is not about this site
        return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", args.site],
                              cwd=ROOT, check=False, env=env).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
