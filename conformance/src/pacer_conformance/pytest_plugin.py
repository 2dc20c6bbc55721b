"""pytest plugin (``pytest11`` entry point): parametrises the suites over installed strategies.

A suite class sets ``decision`` (``admission``, ``scheduling``, ``placement``, ``scaling``);
its tests take a ``strategy`` argument. A subclass may pin ``strategies``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from pacer_conformance.selection import installed

#: Argument names of the runtime suite, parametrised over installed strategies of that decision.
DECISION_ARGS = {
    "admission_strategy": "admission",
    "scheduling_strategy": "scheduling",
    "placement_strategy": "placement",
}


def _param(argname: str, names: list[str], decision: str, metafunc: pytest.Metafunc) -> None:
    if names:
        metafunc.parametrize(argname, names)
    else:
        metafunc.parametrize(argname, [pytest.param(None, marks=pytest.mark.skip(reason=f"no {decision} strategy installed"))])


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrise ``strategy`` (decision suites) and ``<decision>_strategy`` (runtime suite) over installed strategies."""
    for argname, decision in DECISION_ARGS.items():
        if argname in metafunc.fixturenames:
            _param(argname, installed(decision), decision, metafunc)
    cls: Any = metafunc.cls
    if cls is None or "strategy" not in metafunc.fixturenames or not hasattr(cls, "decision"):
        return
    names = list(getattr(cls, "strategies", None) or installed(cls.decision))
    _param("strategy", names, cls.decision, metafunc)


#: Names the installed runtime the end-to-end suite runs on (default ``sim``).
RUNTIME_ENV = "PACER_CONFORMANCE_RUNTIME"


@pytest.fixture
def conformance_runtime() -> Any:
    """The runtime the end-to-end suite runs on: the installed runtime ``PACER_CONFORMANCE_RUNTIME`` names
    (default ``sim``), found through the ``pacer_runtimes`` hook. A runtime package may override this fixture.

    :raises pacer.UnknownRuntimeError: when that runtime is not installed (the message says what to install).
    """
    from pacer import get_plugin_manager

    return get_plugin_manager().find_runtime(os.environ.get(RUNTIME_ENV, "sim"))
