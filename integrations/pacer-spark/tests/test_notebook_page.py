"""docs/notebook.md's cells, run as shown, one after the other in one namespace as a notebook's kernel runs them (on
the suite's session: the first cell's ``getOrCreate()`` returns it, as it returns a notebook's own)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

PAGE = Path(__file__).resolve().parents[3] / "docs" / "notebook.md"


def test_the_notebook_pages_cells_run_as_shown(spark: Any) -> None:
    cells = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.S | re.M)
    assert len(cells) == 5
    namespace: dict[str, Any] = {}
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            for number, cell in enumerate(cells, 1):
                exec(compile(cell, f"notebook.md cell {number}", "exec"), namespace)
                if number == 3:  # the cell's last line is what the notebook shows
                    shown = eval(cell.strip().splitlines()[-1], namespace)
                    assert shown[0] in ("deadline", "catch-up", "read cap", "drain") and int(shown[1]) >= 0, shown
    finally:
        for name in ("query", "pacer"):
            if name in namespace:
                namespace[name].stop()  # a failed cell leaves nothing running for the next test
    assert namespace["spark"] is spark
    out = printed.getvalue()
    assert re.search(r"^notebook_events: \d+ batches, [\d.]+% of rows late, p99 [\d.]+ s$", out, re.M), out
    rows = int(re.search(r"\|\s*(\d+)\s*\|", out).group(1))  # type: ignore[union-attr]
    assert rows > 0 and not namespace["query"].isActive and namespace["pacer"].closed
