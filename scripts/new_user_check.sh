#!/usr/bin/env bash
# A new user's first steps as the README and docs/quickstart.md write them, timed: clone, a venv, the install line,
# the quick start's Python block saved and run (its last line is pacer's report of the query).
#   bash scripts/new_user_check.sh [REPOSITORY] [WORKDIR]     (PIP_NO_CACHE_DIR=1: PySpark fetched from PyPI)
set -euo pipefail
repo=${1:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
work=${2:-$(mktemp -d /tmp/pacer-new-user.XXXXXX)}
mkdir -p "$work" && cd "$work"
start=$(date +%s)
git clone -q "$repo" pacer && cd pacer
python3 -m venv .venv && . .venv/bin/activate
python -m pip install -q ./packages/pacer-core ./packages/pacer-workloads ./integrations/pacer-spark \
    ./strategies/pacer-zstream
installed=$(date +%s)
python - <<'PY' > quickstart.py
import pathlib
import re

print(re.findall(r"```python\n(.*?)```", pathlib.Path("docs/quickstart.md").read_text(), re.S)[0], end="")
PY
python quickstart.py 2> quickstart.err | tail -n 1
end=$(date +%s)
echo "install: $((installed - start)) s; quick start: $((end - installed)) s; in all: $((end - start)) s ($work)"
