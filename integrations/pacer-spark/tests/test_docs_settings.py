"""Every setting the docs show, set as shown, is accepted and takes effect, page by page: the ``spark.pacer.*`` confs
(``spark.pacer.KEY=VALUE``), :func:`pacer_spark.attach`'s keywords in the Python blocks, and the ``pacer.*`` options of
``format("pacer")`` queries (no Spark needed: the confs are read from a stand-in session as Spark hands them over)."""

from __future__ import annotations

import ast
import dataclasses
import re
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pacer_spark.config import CONF_PREFIX, PacerConfig
from pacer_spark.driver.protocol.state import check_options

ROOT = Path(__file__).resolve().parents[3]
#: The pages a user reads (the generated references and the changelog quote settings, wrong ones included)
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *ROOT.glob("integrations/*/README.md"),
                *ROOT.glob("strategies/*/README.md"), *ROOT.glob("packages/*/README.md")])
PAGES = [p for p in PAGES if p.name != "changelog.md"]
CONF = re.compile(r"spark\.pacer\.([A-Za-z][\w.]*)=([^\s,`'\")]+)")
OPTION = re.compile(r"\.option\(\s*\"(pacer\.[\w.]+)\",\s*\"([^\"]*)\"\s*\)")
#: The JVM's own options (the source wrapped, the query's name), not the driver's
JVM_OPTIONS = {"pacer.source"}


def _session(confs: dict[str, str]) -> Any:
    """A stand-in SparkSession holding ``confs`` as its session and context confs."""
    return SimpleNamespace(conf=SimpleNamespace(get=lambda key, default=None: confs.get(key, default)),
                           sparkContext=SimpleNamespace(getConf=lambda: SimpleNamespace(getAll=lambda: confs.items())))


def _python_blocks(text: str) -> list[str]:
    """The page's Python blocks, dedented (a block in a list item is indented)."""
    return [textwrap.dedent(b) for b in re.findall(r"^\s*```python\n(.*?)^\s*```", text, re.S | re.M)]


def _fields() -> dict[str, dataclasses.Field[Any]]:
    return {f.name: f for f in dataclasses.fields(PacerConfig)}


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_pages_show_settings_for_this_test_to_check() -> None:
    shown = [p for p in PAGES if CONF.search(p.read_text()) or OPTION.search(p.read_text())]
    assert {"docs/deploying.md", "docs/quickstart.md", "README.md"} <= {_name(p) for p in shown}


@pytest.mark.parametrize("page", [p for p in PAGES if CONF.search(p.read_text())], ids=_name)
def test_every_conf_shown_is_accepted_and_takes_effect(page: Path) -> None:
    shown = dict(CONF.findall(page.read_text()))
    config = PacerConfig.from_spark(_session({CONF_PREFIX + key: value for key, value in shown.items()}))
    by_key = {f.metadata["conf"].key: f for f in _fields().values() if "conf" in f.metadata}
    for key, value in shown.items():
        if key.startswith("param."):
            _, decision, name = key.split(".", 2)
            assert getattr(config, f"{decision}_params")[name] == value, (page, key)
            continue
        held = getattr(config, by_key[key].name)
        assert held == _as_shown(value, held), f"{_name(page)}: spark.pacer.{key}={value} read as {held!r}"


def _as_shown(value: str, like: Any) -> Any:
    """``value`` as text reads, read independently of the code under test, in the type of ``like``: seconds for a
    duration, ``MIN:MAX`` as a pair, ``true``/``false``, a whole number."""
    if isinstance(like, bool):
        return value.lower() == "true"
    if isinstance(like, float):
        number, unit = re.fullmatch(r"([\d.]+)\s*([a-z]*)", value.lower()).groups()  # type: ignore[union-attr]
        return float(number) * {"": 1, "ms": 1e-3, "s": 1, "min": 60, "m": 60, "h": 3600}[unit]
    if isinstance(like, int):
        return int(value)
    if isinstance(like, tuple):
        return tuple(int(v) for v in value.split(":"))
    return value


def _attach_calls(page: Path) -> list[dict[str, Any]]:
    """The literal keywords of every ``attach(...)`` call in the page's Python blocks."""
    calls = []
    for block in _python_blocks(page.read_text()):
        tree = ast.parse(re.sub(r"^\s*\.\.\.\s*$", "pass", block, flags=re.M))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "attach":
                keywords = {}
                for keyword in node.keywords:
                    try:
                        keywords[keyword.arg] = ast.literal_eval(keyword.value)
                    except ValueError:  # a name of the user's (a plugin manager, a profile object)
                        continue
                calls.append(keywords)
    return calls


@pytest.mark.parametrize("page", [p for p in PAGES if _attach_calls(p)], ids=_name)
def test_every_attach_keyword_shown_is_accepted_and_takes_effect(page: Path) -> None:
    fields = _fields()
    for keywords in _attach_calls(page):
        config = PacerConfig.from_spark(_session({}), **keywords)
        for name, value in keywords.items():
            field = fields[name]
            default = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
            assert getattr(config, name) != default or value == default, f"{_name(page)}: {name}={value!r}"


def _options(page: Path) -> dict[str, str]:
    return {k: v for k, v in OPTION.findall(page.read_text()) if k not in JVM_OPTIONS}


@pytest.mark.parametrize("page", [p for p in PAGES if _options(p)], ids=_name)
def test_every_source_option_shown_is_accepted(page: Path) -> None:
    assert check_options(_options(page)) == _options(page), _name(page)
