"""Regenerate the README's generated sections: the strategy table (from ``pacer strategies --json``)
and the results section (from the latest ``pacer bench`` outputs under ``bench-results/``).

Usage: ``python scripts/gen_readme.py`` (rewrites README.md in place; ``--check`` fails when stale).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "bench-results"


def strategy_table() -> str:
    out = subprocess.run([sys.executable, "-m", "pacer.cli", "strategies", "--json"], check=True, capture_output=True, text=True)
    rows = ["| strategy | decides | package | parameters (defaults) | summary |", "|---|---|---|---|---|"]
    for s in json.loads(out.stdout):
        params = ", ".join(f"`{p['name']}`={p['default']!r}" for p in s["params"]) or "—"
        rows.append(f"| `{s['name']}` | {', '.join(s['provides'])} | {s['package']} {s['version']} | {params} | {s['summary']} |")
    return "\n".join(rows)


def results_section() -> str:
    if not RESULTS.exists():
        return "No bench results yet: run `pacer bench SCENARIO --out bench-results/` and regenerate."
    parts = []
    for meta_path in sorted(RESULTS.glob("*/meta.json")):
        meta = json.loads(meta_path.read_text())
        if meta.get("grid"):  # device-sweep --grid: a section written by hand beside its results
            parts.append((meta_path.parent / "readme-section.md").read_text().strip() + "\n")
            continue
        md_path = meta_path.parent / f"{meta['scenario']}.md"
        table = md_path.read_text().split("\n", 3)[-1]
        cut = table.find("<!-- readme:end -->")  # long results keep only their summary here, and link the rest
        more = ""
        if cut >= 0:
            table = table[:cut]
            more = f"\n\nEvery configuration: [{md_path.relative_to(ROOT)}]({md_path.relative_to(ROOT)})\n"
        label = " (simulated)" if meta["runtime"] == "sim" else " (Kafka)" if meta.get("source") == "kafka" else ""
        reps = f" · {meta['repeat']} repetitions" if meta.get("repeat", 1) > 1 else ""
        parts.append(
            f"### {meta['scenario']}{label}\n\n{meta['date']} · {meta['machine']} · runtime `{meta['runtime']}`"
            f"{' · quick' if meta.get('quick') else ''}{reps}\n\n{table.strip()}\n{more}"
        )
    return "\n".join(parts) or "No bench results yet."


def replace_block(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md lacks the <!-- {name}:start/end --> markers")
    return pattern.sub(lambda m: m.group(1) + body.strip() + "\n" + m.group(2), text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md is out of date")
    args = parser.parse_args()
    text = README.read_text()
    new = replace_block(text, "strategies", strategy_table())
    new = replace_block(new, "results", results_section())
    if args.check:
        return 0 if new == text else 1
    README.write_text(new)
    print(f"README.md regenerated on {platform.node() or 'this machine'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
