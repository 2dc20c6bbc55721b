"""Every duration flag of ``pacer run`` and ``pacer bench`` reads pacer's one duration parser, Spark's wording too
(``"1 minute"``, ``500ms``), and a bad one is a usage error naming the flag, the value and what to write."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacer.cli import main


def test_run_flags_take_durations_in_sparks_wording(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert main(["run", "--runtime", "sim", "--workload", "lr2", "--duration", "1 minute", "--monitor-interval",
                 "500ms", "--report", str(report)]) == 0
    run = json.loads(report.read_text())["config"]["run"]
    assert (run["duration"], run["monitor_interval"]) == (60.0, 0.5)


@pytest.mark.parametrize("argv", [["run", "--runtime", "sim", "--workload", "lr2", "--duration", "soon"],
                                  ["run", "--runtime", "sim", "--workload", "lr2", "--monitor-interval", "soon"],
                                  ["bench", "frequency", "--out", "unused", "--duration", "soon"]])
def test_a_bad_duration_flag_is_a_usage_error_naming_the_flag(argv: list[str],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    flag = argv[argv.index("soon") - 1]
    with pytest.raises(SystemExit) as refused:  # argparse's usage error
        main(argv)
    assert refused.value.code == 2
    assert f"argument {flag}: expects a duration such as 10s, 500ms, 2m or plain seconds, got 'soon'" in \
        capsys.readouterr().err
