"""Shared fixtures: the ``kafka_broker`` session fixture comes from the ``pacer_kafka.testing`` pytest plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pacer_kafka.broker import BrokerInfo

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


#: The installed ``pacer`` script (``python -m pacer.cli`` would load pacer.cli twice, as __main__ and as itself).
PACER = str(Path(sys.executable).with_name("pacer"))
RunPacer = Callable[..., subprocess.CompletedProcess[str]]


def _run_pacer(*args: str, timeout: float = 300, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real ``pacer`` command line in a child process (a hang fails the test through ``timeout``)."""
    return subprocess.run([PACER, *args], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


@pytest.fixture(scope="session")
def run_pacer() -> RunPacer:
    """``run_pacer("kafka", "up", ...)``: the ``pacer`` command line in a child process."""
    return _run_pacer


def last_line(text: str) -> str:
    """The last non-empty line of ``text``."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class ProducedTopic:
    """A topic ``pacer produce`` filled: lr2 rows, binary traffic (1500 then 500 rows/s), JSON values."""

    bootstrap_servers: str
    topic: str
    records: int
    partitions: int
    stdout: str


@pytest.fixture(scope="session")
def produced_topic(kafka_broker: BrokerInfo, run_pacer: RunPacer) -> ProducedTopic:
    """2 000 Linear Road records written by ``pacer produce`` at a binary traffic pattern into 2 partitions.

    binary, rate 1000, period 2 s: 1.5 x 1000 rows/s for the first second, 0.5 x 1000 for the next (noise=0: the
    exact shape, not Poisson rows around it).
    """
    proc = run_pacer("produce", "--bootstrap-servers", kafka_broker.bootstrap_servers, "--topic", "lr2-binary",
                     "--workload", "lr2", "--traffic", "binary", "--traffic-param", "period=2",
                     "--traffic-param", "noise=0", "--rate", "1000",
                     "--duration", "2", "--seed", "7", "--partitions", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return ProducedTopic(kafka_broker.bootstrap_servers, "lr2-binary", 2000, 2, proc.stdout)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A fresh folder for a broker's files."""
    return tmp_path / "kafka"
