"""Shared fixture: ``results/reproduce.py`` (the simulated evidence script) as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "results" / "reproduce.py"


@pytest.fixture(scope="session")
def reproduce() -> ModuleType:
    """The evidence script as a module (skips when pacer_sim cannot run it)."""
    pytest.importorskip("pacer_sim", reason="pacer_sim is not installed")
    spec = importlib.util.spec_from_file_location("pacer_dstream_results_reproduce", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
