"""Which installed strategies a suite runs over."""

from __future__ import annotations

import os

from pacer import get_plugin_manager

SELECT_ENV = "PACER_CONFORMANCE_STRATEGIES"


def installed(decision: str) -> list[str]:
    """Names of installed strategies providing ``decision``, narrowed by ``PACER_CONFORMANCE_STRATEGIES``."""
    names = sorted({s.name for s in get_plugin_manager().strategies() if decision in s.provides})
    raw = os.environ.get(SELECT_ENV)
    if raw:
        wanted = {n.strip() for n in raw.split(",") if n.strip()}
        names = [n for n in names if n in wanted]
    return names
