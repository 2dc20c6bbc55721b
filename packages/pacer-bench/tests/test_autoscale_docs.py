"""The autoscale commands pacer-bench's README documents, read as a user copies them: every one parses with pacer's
own command line; the simulated ones name autoscale's groups and wrote the committed results they point at; the
standalone cluster's gives the application the cluster's secret (``SPARK_CONF_DIR`` at the folder ``pacer cluster
up --dir`` wrote it to) and reads the master's URL from that same cluster."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from pacer.cli.program import build_parser
from pacer.plugins import get_plugin_manager
from pacer_bench.autoscale import QUERY_SETS, TRAFFICS

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "packages" / "pacer-bench" / "README.md"
#: What a ``$(...)`` of the documented commands stands for when they are parsed (a master's URL).
SUBSTITUTED = "spark://127.0.0.1:7077"


def commands() -> list[tuple[dict[str, str], list[str], str]]:
    """Each documented command of the README's autoscale section: its environment assignments, its words (each
    ``$(...)`` as :data:`SUBSTITUTED`) and the text of its ``$(...)`` substitutions."""
    section = README.read_text().split("\n## autoscale\n", 1)[1].split("\n## ", 1)[0]
    out = []
    for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if not line.strip():
                continue
            words = shlex.split(line)
            env = {}
            while "=" in words[0] and not words[0].startswith("-"):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            inner = " ".join(w[2:-1] for w in words if w.startswith("$("))
            out.append((env, [SUBSTITUTED if w.startswith("$(") else w for w in words], inner))
    return out


def test_every_documented_autoscale_command_parses_and_says_where_its_results_and_secret_come_from() -> None:
    parser, known = build_parser(get_plugin_manager())
    documented = commands()
    assert len(documented) >= 5, documented
    groups = {f"{traffic} / {queries}" for traffic in TRAFFICS for queries in QUERY_SETS}
    cluster_dir = None
    for env, words, inner in documented:
        assert words[0] == "pacer", words
        if words[1] not in known:
            pytest.skip(f"`pacer {words[1]}` is not installed here (pacer-spark)")
        args = parser.parse_args(words[1:])  # a documented option the parser refuses exits here (SystemExit)
        if words[1] == "cluster":
            cluster_dir = cluster_dir or args.dir
            assert args.dir == cluster_dir, words  # up, status and down: the same cluster
            continue
        assert args.scenario == "autoscale", words
        if args.runtime == "sim":
            assert args.config and set(args.config) <= groups, args.config
            meta = json.loads((ROOT / args.out / "meta.json").read_text())  # the committed results it wrote
            assert (meta["scenario"], meta["repeat"], meta["vary_seed"]) == ("autoscale", args.repeat, args.vary_seed)
            assert {label.rsplit(" / ", 1)[0] for label in meta["configs"]} == set(args.config)
            assert (ROOT / args.out / "autoscale.json").is_file()  # the raw figures, committed
        else:
            assert cluster_dir is not None and args.master == SUBSTITUTED, words
            assert env["SPARK_CONF_DIR"] == f"{cluster_dir}/conf", env  # where `pacer cluster up` wrote the secret
            assert inner.startswith(f"pacer cluster status --dir {cluster_dir}"), inner
    assert cluster_dir is not None
