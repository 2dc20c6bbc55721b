"""A new user's first steps, run as the README and docs/quickstart.md write them (``scripts/new_user_check.sh``): clone
this repository, a virtual environment, the README's install line, the quick start's Python block saved and run
exactly as shown (the quick start's only test). Its last line is pacer's report of the paced query. It needs what a
new user's machine needs: Python, a JDK and PyPI (pip's cache serves what CI's own install fetched)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark  # the quick start starts Spark, in the new environment's own process

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts/new_user_check.sh"


def test_a_new_user_clones_installs_and_runs_the_quick_start_as_written(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists():
        pytest.fail(f"{ROOT} is not a git checkout: the check clones it as a new user clones pacer")
    # a new user's shell: none of this suite's settings, and not its virtual environment
    venv_bin = str(Path(sys.prefix) / "bin")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYSPARK_", "PACER_", "SPARK_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    done = subprocess.run(["bash", str(SCRIPT), str(ROOT), str(tmp_path / "work")], capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report, timing = done.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"\d+ batches, [\d.]+% of rows later than 5 s, p99 latency [\d.]+ s, [\d.]+ busy core-s",
                        report), done.stdout[-2000:]
    assert int(report.split()[0]) >= 2, report  # paced: batches formed, not one
    assert re.match(r"install: \d+ s; quick start: \d+ s; in all: \d+ s", timing), timing
    print(timing)  # what the closing notes quote
