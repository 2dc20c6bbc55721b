"""``pacer kafka up|down|status`` on a real broker, and its errors."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from pacer_kafka.broker import BrokerError, process_alive, running_broker, start_broker, stop_broker
from pacer_kafka.clients import cluster_metadata
from pacer_kafka.testing import require_kafka


def last_line(text: str) -> str:
    """The last non-empty line of ``text``."""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


@pytest.mark.jvm  # starts the broker
def test_up_answers_then_down_leaves_nothing_running(workdir: Path, run_pacer: Any) -> None:
    require_kafka()
    up = run_pacer("kafka", "up", "--dir", str(workdir))
    assert up.returncode == 0, up.stderr
    assert last_line(up.stdout).startswith("bootstrap.servers=127.0.0.1:")
    bootstrap = last_line(up.stdout).split("=", 1)[1]
    pid = int((workdir / "broker.pid").read_text())
    try:
        assert process_alive(pid)
        assert [b.host for b in cluster_metadata(bootstrap).brokers.values()] == ["127.0.0.1"]
        status = run_pacer("kafka", "status", "--dir", str(workdir))
        assert (status.returncode, last_line(status.stdout)) == (0, f"bootstrap.servers={bootstrap}")
        again = run_pacer("kafka", "up", "--dir", str(workdir))
        assert again.returncode == 1 and f"a broker already runs in {workdir}" in again.stderr
    finally:
        down = run_pacer("kafka", "down", "--dir", str(workdir))
    assert down.returncode == 0 and f"stopped the broker (pid {pid})" in down.stdout
    assert not process_alive(pid)
    assert not Path(f"/proc/{pid}").exists() or not _is_running(pid)
    with socket.socket() as sock:  # nothing listens on the client port any more
        assert sock.connect_ex(("127.0.0.1", int(bootstrap.rsplit(":", 1)[1]))) != 0
    assert not (workdir / "broker.pid").exists()
    assert run_pacer("kafka", "status", "--dir", str(workdir)).returncode == 1
    assert "no broker was running" in run_pacer("kafka", "down", "--dir", str(workdir)).stdout


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_busy_port_is_refused_before_anything_starts(workdir: Path, run_pacer: Any) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = run_pacer("kafka", "up", "--dir", str(workdir), "--port", str(port))
    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in proc.stderr
    assert not (workdir / "broker.pid").exists()


@pytest.mark.jvm  # starts the broker
def test_failed_start_reports_the_root_cause_first(workdir: Path) -> None:
    require_kafka()
    with pytest.raises(BrokerError) as failure:
        start_broker(workdir, heap="1k")  # a real JVM that refuses to start
    first, second = str(failure.value).splitlines()
    assert first == "Error occurred during initialization of VM: Too small maximum heap"
    assert second.endswith(f"the full log is {workdir.resolve() / 'broker.log'}")
    assert running_broker(workdir) is None and stop_broker(workdir) is None


@pytest.mark.jvm  # starts the broker
def test_storage_of_another_node_is_reported(workdir: Path) -> None:
    require_kafka()
    meta = workdir / "data" / "meta.properties"
    meta.parent.mkdir(parents=True)
    meta.write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=2\n"
                    "directory.id=AAAAAAAAAAAAAAAAAAAAAQ\n")
    with pytest.raises(BrokerError) as failure:
        start_broker(workdir)
    first = str(failure.value).splitlines()[0]
    assert first.startswith("java.lang.RuntimeException: Stored node id 2 doesn't match previous node id 1")


def test_missing_java_names_what_to_install(workdir: Path, run_pacer: Any) -> None:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(Path(shutil.which("python3") or "/usr/bin/python3").parent) + ":/nonexistent"
    if shutil.which("java", path=env["PATH"]):
        pytest.skip("java lives next to python on this machine")
    proc = run_pacer("kafka", "up", "--dir", str(workdir), env=env)
    assert proc.returncode == 1
    assert "no 'java' found" in proc.stderr and "install one, e.g. `apt-get install openjdk-17-jre-headless`" in (
        proc.stderr)


def test_missing_maven_names_what_to_install(workdir: Path, tmp_path: Path, run_pacer: Any) -> None:
    java = shutil.which("java")
    if java is None:
        pytest.skip("no java on this machine")
    env = {k: v for k, v in os.environ.items()}
    env["JAVA_HOME"] = str(Path(os.path.realpath(java)).parent.parent)
    env["PATH"] = "/nonexistent"
    env["PACER_MAVEN_CACHE"] = str(tmp_path / "empty-cache")
    proc = run_pacer("kafka", "up", "--dir", str(workdir), env=env)
    assert proc.returncode == 1
    assert "'mvn' is not on PATH; install Apache Maven" in proc.stderr
