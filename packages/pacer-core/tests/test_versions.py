"""Versions that agree: ``pacer --version``, the distributions' versions, the changelog and the hooks' "added in"."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import pacer
from pacer.cli import program

ROOT = Path(__file__).resolve().parents[3]
PYPROJECTS = sorted(p for pattern in ("packages/*/pyproject.toml", "strategies/*/pyproject.toml",
                                      "integrations/*/pyproject.toml", "conformance/pyproject.toml")
                    for p in ROOT.glob(pattern))


def _minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()  # type: ignore[union-attr]
    return int(major), int(minor)


def test_pacer_version_prints_core_and_every_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert program.main(["--version"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"pacer {pacer.__version__}"
    listed = dict(line.split() for line in lines[1:])
    assert listed["pacer-core"] == pacer.__version__
    assert listed == program.installed_distributions()
    assert "pacer-workspace" not in listed


def test_pacer_version_needs_no_plugin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin that fails to load does not hide the versions (the first thing to ask when one does)."""
    def broken() -> None:
        raise AssertionError("plugins loaded for --version")

    monkeypatch.setattr(program, "get_plugin_manager", broken)
    assert program.main(["-v", "--version"]) == 0
    assert capsys.readouterr().out.startswith(f"pacer {pacer.__version__}\n")


def test_every_distribution_shares_pacer_core_version() -> None:
    """The changelog's rule: all pacer distributions share one version while they live in this repository."""
    versions = {p.parent.name: tomllib.loads(p.read_text())["project"]["version"] for p in PYPROJECTS}
    assert len(versions) >= 10, versions
    assert set(versions.values()) == {pacer.__version__}, versions


def test_changelog_and_added_in_notes_agree_with_the_version() -> None:
    """The changelog's newest section is the installed version, or the next one marked unreleased; every hook's
    ``versionadded`` names a section of the changelog no later than that one."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    sections = re.findall(r"^## (\d+\.\d+\.\d+)( \(unreleased\))?$", changelog, re.M)
    assert sections, "CHANGELOG.md has no '## X.Y.Z' section"
    top, unreleased = sections[0]
    released = [v for v, mark in sections if not mark]
    assert pacer.__version__ == (released[0] if unreleased else top), (pacer.__version__, sections)
    assert not unreleased or _minor(top) > _minor(pacer.__version__)
    known = {_minor(v) for v, _ in sections}
    hookspecs = (ROOT / "packages/pacer-core/src/pacer/hookspecs.py").read_text()
    added = re.findall(r"versionadded:: (\d+\.\d+)", hookspecs)
    assert added
    for version in added:
        assert _minor(version) in known and _minor(version) <= _minor(top), (version, sections)
