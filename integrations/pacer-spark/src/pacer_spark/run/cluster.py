"""A Spark standalone cluster on loopback, run from the installed PySpark: one Master and N Workers.

``start_cluster(dir)`` starts Spark's own ``org.apache.spark.deploy.master.Master`` and ``workers`` ×
``org.apache.spark.deploy.worker.Worker`` (``cores`` and ``memory`` each) through PySpark's ``bin/spark-class``,
every daemon bound to 127.0.0.1 and in a process group of its own (the executors a Worker launches join its
group), their output in ``master.log`` / ``worker-N.log`` and their pids in ``master.pid`` / ``worker-N.pid``;
it returns once the master's JSON page (``/json/``) lists every worker ``ALIVE``. ``stop_cluster(dir)`` sends
SIGTERM to each group (workers first, then the master), SIGKILL after a timeout, and returns only when no
process of those groups is left: no Worker, no executor, no Python worker, no Master.

A failed start raises :class:`ClusterError` whose first line is the root cause read from the logs, and whose
second says where they are; whatever was started is stopped.

Every cluster runs with ``spark.authenticate``: a fresh secret per start, in ``conf/spark-defaults.conf`` (mode
0600, which the daemons read; never on a command line, where any local user would see it). An application that
does not present it cannot register with the master; :meth:`ClusterInfo.app_conf` gives the two confs an
application needs, ``spark-submit --properties-file DIR/conf/spark-defaults.conf`` does the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pacer.infra.daemons import free_port, process_alive

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
STATE_FILE = "cluster.json"
#: The daemons' (and the applications') Spark properties, in the cluster's private conf folder.
DEFAULTS_FILE = "spark-defaults.conf"
#: Seconds ``start_cluster`` waits for the master and every worker before giving up.
DEFAULT_START_TIMEOUT_S = 120.0
#: Seconds ``stop_cluster`` waits after SIGTERM before SIGKILL.
DEFAULT_STOP_TIMEOUT_S = 20.0
#: The Master's and each Worker's own JVM heap (Spark's scripts default to 1 GiB; the daemons need far less).
DEFAULT_DAEMON_HEAP = "256m"
#: Memory a Worker offers to executors (each executor asks ``spark.executor.memory``, 1g by default).
DEFAULT_WORKER_MEMORY = "1g"


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped; the first line is the cause, then where the logs are."""


@dataclass(frozen=True)
class ClusterInfo:
    """A running standalone cluster started by :func:`start_cluster`.

    :param directory: its folder (logs, pids, the workers' work and local folders, ``cluster.json``).
    :param master_port: the master's RPC port on 127.0.0.1 (the ``spark://`` URL's).
    :param webui_port: the master's web UI port on 127.0.0.1 (its JSON state at ``/json/``).
    :param master_pid: the Master JVM's process id (and process group).
    :param worker_pids: each Worker JVM's process id (and process group), in start order.
    :param cores: cores each worker offers.
    :param memory: memory each worker offers to executors.
    :param spark_version: the PySpark release the daemons run.
    """

    directory: str
    master_port: int
    webui_port: int
    master_pid: int
    worker_pids: tuple[int, ...]
    cores: int
    memory: str
    spark_version: str

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:PORT``, the value of ``--master`` / ``SparkSession.builder.master``."""
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        """The master's web UI."""
        return f"http://{HOST}:{self.webui_port}"

    @property
    def properties_file(self) -> Path:
        """The daemons' ``spark-defaults.conf``: ``spark.authenticate`` and the cluster's secret (mode 0600)."""
        return Path(self.directory) / "conf" / DEFAULTS_FILE

    def app_conf(self) -> dict[str, str]:
        """The confs an application of this cluster needs: ``spark.authenticate`` and the cluster's secret."""
        conf = {}
        for line in self.properties_file.read_text(encoding="utf-8").splitlines():
            key, _, value = line.strip().partition(" ")
            if key.startswith("spark.authenticate"):
                conf[key] = value.strip()
        return conf

    @property
    def logs(self) -> list[Path]:
        """The master's log, then each worker's."""
        folder = Path(self.directory)
        return [folder / "master.log", *(folder / f"worker-{i}.log" for i in range(len(self.worker_pids)))]


def spark_home() -> Path:
    """The Spark the daemons run: ``$SPARK_HOME`` when it has ``bin/spark-class``, else the installed PySpark."""
    home = os.environ.get("SPARK_HOME", "").strip()
    if home and (Path(home) / "bin" / "spark-class").is_file():
        return Path(home)
    import pyspark

    folder = Path(pyspark.__file__).resolve().parent
    if not (folder / "bin" / "spark-class").is_file() or not (folder / "jars").is_dir():
        raise ClusterError(f"PySpark at {folder} has no bin/spark-class or jars/: reinstall pyspark (pip install "
                           "--force-reinstall pyspark) or set SPARK_HOME to a Spark distribution")
    return folder


def group_members(pgid: int) -> list[int]:
    """Live processes (not zombies) whose process group is ``pgid``: a daemon and everything it launched."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return sorted(members)


def _cmdline(pid: int) -> list[str]:
    try:
        return [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return []


def _runs(pid: int, java_class: str) -> bool:
    """True when ``pid`` is a live JVM running ``java_class`` (False for a recycled pid)."""
    return process_alive(pid) and java_class in _cmdline(pid)


def executor_pids(info: ClusterInfo) -> dict[str, int]:
    """The executor JVMs the cluster's workers run now: ``{executor id: pid}`` (from their ``--executor-id``)."""
    found: dict[str, int] = {}
    for worker in info.worker_pids:
        for pid in group_members(worker):
            args = _cmdline(pid)
            if EXECUTOR_CLASS in args and "--executor-id" in args:
                found[args[args.index("--executor-id") + 1]] = pid
    return found


def master_state(info: ClusterInfo, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """The master's state as its web UI serves it at ``/json/`` (workers, apps, cores)."""
    with urllib.request.urlopen(f"{info.webui_url}/json/", timeout=timeout_s) as response:
        state: dict[str, Any] = json.loads(response.read().decode())
    return state


def running_cluster(directory: str | os.PathLike[str]) -> ClusterInfo | None:
    """The cluster started in ``directory`` if its master still runs, else None."""
    try:
        state = json.loads((Path(directory) / STATE_FILE).read_text(encoding="utf-8"))
        info = ClusterInfo(**{**state, "worker_pids": tuple(state["worker_pids"])})
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return info if _runs(info.master_pid, MASTER_CLASS) else None


def root_cause(log_text: str) -> str:
    """The one line of a Spark daemon's log that says why it failed (the first exception or ERROR record)."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    exception = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b(?::.*)?$")
    for i, line in enumerate(lines):
        if line.startswith("Exception in thread"):
            return re.sub(r'^Exception in thread "[^"]*" ', "", line)
        if exception.match(line):
            return line
        if line.startswith("Error occurred during initialization of VM") and i + 1 < len(lines):
            return f"{line}: {lines[i + 1]}"
    errors = [line for line in lines if re.search(r"\b(ERROR|FATAL)\b", line)]
    return errors[0] if errors else (lines[-1] if lines else "(the log is empty)")


def _write_secret(conf: Path) -> None:
    """A fresh secret in ``conf``'s ``spark-defaults.conf``, readable by its owner alone (written before it is
    opened to anyone: the file is created 0600)."""
    path = conf / DEFAULTS_FILE
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(f"spark.authenticate true\nspark.authenticate.secret {secrets.token_hex(32)}\n")


def _environment(folder: Path, heap: str) -> dict[str, str]:
    """The daemons' environment: loopback only, no REST server, small heaps, a private conf folder of their own
    holding only the authentication secret."""
    conf = folder / "conf"
    conf.mkdir(mode=0o700, exist_ok=True)
    conf.chmod(0o700)
    _write_secret(conf)
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_CONF_DIR": str(conf),  # no spark-env.sh / spark-defaults.conf from elsewhere
        "SPARK_LOCAL_IP": HOST,  # the daemons' web UIs bind 127.0.0.1, not every interface
        "SPARK_LOCAL_HOSTNAME": HOST,
        "SPARK_DAEMON_MEMORY": heap,
        # C1 only: the daemons start in less CPU time; REST submission off (its fixed port 6066 would clash)
        "SPARK_DAEMON_JAVA_OPTS": " ".join(filter(None, [
            "-XX:TieredStopAtLevel=1", "-Dspark.master.rest.enabled=false", "-Dspark.ui.reverseProxy=false",
            env.get("SPARK_DAEMON_JAVA_OPTS", "")])),
    })
    env.pop("SPARK_MASTER_HOST", None)
    return env


def _spawn(folder: Path, name: str, args: list[str], env: dict[str, str]) -> int:
    """Start ``spark-class ARGS`` in a new session (its own process group), output to ``NAME.log``; its pid."""
    log = folder / f"{name}.log"
    with open(log, "ab") as out:
        process = subprocess.Popen([str(Path(env["SPARK_HOME"]) / "bin" / "spark-class"), *args], stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder, env=env,
                                   start_new_session=True)
    (folder / f"{name}.pid").write_text(f"{process.pid}\n", encoding="utf-8")
    return process.pid  # spark-class execs the JVM: this pid becomes the Master's or Worker's


def start_cluster(directory: str | os.PathLike[str], *, workers: int = 2, cores: int = 1,
                  memory: str = DEFAULT_WORKER_MEMORY, heap: str = DEFAULT_DAEMON_HEAP,
                  timeout_s: float = DEFAULT_START_TIMEOUT_S) -> ClusterInfo:
    """Start a Master and ``workers`` Workers on 127.0.0.1 with their files in ``directory``; return when all are up.

    :param cores: cores each worker offers (``--cores``).
    :param memory: memory each worker offers to executors (``--memory``, e.g. ``1g``).
    :param heap: each daemon's own ``-Xmx`` (``SPARK_DAEMON_MEMORY``).
    :param timeout_s: how long to wait for every worker to register with the master.
    :raises ClusterError: a cluster already runs there, no Java, bad sizes, or a daemon failed or did not register.
    """
    import pyspark

    if workers < 1 or cores < 1:
        raise ClusterError(f"a cluster needs at least one worker with one core (got workers={workers}, cores={cores})")
    if not re.fullmatch(r"\d+[kmgt]?", memory.lower()) or not re.fullmatch(r"\d+[kmgt]?", heap.lower()):
        raise ClusterError(f"memory sizes look like 512m or 1g (got memory={memory!r}, heap={heap!r})")
    folder = Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    existing = running_cluster(folder)
    if existing is not None:
        raise ClusterError(f"a cluster already runs in {folder} (master {existing.master_url}, pid "
                           f"{existing.master_pid}); stop it with `pacer cluster down --dir {folder}`")
    java_home = os.environ.get("JAVA_HOME", "").strip()
    if not (java_home and (Path(java_home) / "bin" / "java").is_file()) and shutil.which("java") is None:
        raise ClusterError("no `java` found (JAVA_HOME is not set and none is on PATH): Spark's master and workers "
                           "need a Java runtime 17 or newer; install one, e.g. `apt-get install "
                           "openjdk-17-jre-headless`, or set JAVA_HOME")
    stop_cluster(folder)  # what a master that died left behind (its workers, their executors)
    for stale in folder.glob("*.log"):
        stale.unlink()
    env = _environment(folder, heap)
    port, webui = free_port(), free_port()
    while webui == port:
        webui = free_port()
    master = _spawn(folder, "master", [MASTER_CLASS, "--host", HOST, "--port", str(port), "--webui-port", str(webui)],
                    env)
    try:  # the ports it really bound: Spark moves on to the next one when another process took the chosen port
        port, webui = _master_ports(folder / "master.log", master, timeout_s)
    except BaseException:
        stop_cluster(folder)
        raise
    pids = []
    for i in range(workers):
        work, local = folder / f"work-{i}", folder / f"local-{i}"
        local.mkdir(exist_ok=True)
        worker_env = {**env, "SPARK_LOCAL_DIRS": str(local)}
        pids.append(_spawn(folder, f"worker-{i}", [
            WORKER_CLASS, "--host", HOST, "--port", "0", "--webui-port", "0", "--cores", str(cores), "--memory",
            memory, "--work-dir", str(work), f"spark://{HOST}:{port}"], worker_env))
    info = ClusterInfo(str(folder), port, webui, master, tuple(pids), cores, memory, str(pyspark.__version__))
    (folder / STATE_FILE).write_text(json.dumps(asdict(info), indent=1) + "\n", encoding="utf-8")
    try:
        _wait_until_ready(info, timeout_s)
    except BaseException:
        stop_cluster(folder)
        raise
    return info


_MASTER_URL = re.compile(r"Starting Spark master at spark://[^:\s]+:(\d+)")
_MASTER_UI = re.compile(r"MasterWebUI: .*started at http://[^:\s]+:(\d+)")


def _master_ports(log: Path, pid: int, timeout_s: float) -> tuple[int, int]:
    """The RPC and web UI ports the master bound, read from its log once it says so (it may have moved past a port
    another process took between :func:`free_port` and its start)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        rpc, ui = _MASTER_URL.search(text), _MASTER_UI.search(text)
        if rpc and ui:
            return int(rpc.group(1)), int(ui.group(1))
        if not process_alive(pid):
            raise ClusterError(f"{root_cause(text)}\nthe master (pid {pid}) exited while starting; its log is {log}")
        if time.monotonic() > deadline:
            raise ClusterError(f"the master did not say which ports it bound within {timeout_s:g} s; its log is {log}")
        time.sleep(0.1)


def _wait_until_ready(info: ClusterInfo, timeout_s: float) -> None:
    """Poll the master's ``/json/`` until every worker is ALIVE, a daemon dies, or the time is up."""
    deadline = time.monotonic() + timeout_s
    names = ["the master", *(f"worker {i}" for i in range(len(info.worker_pids)))]
    alive = 0
    while True:
        for name, pid, log in zip(names, (info.master_pid, *info.worker_pids), info.logs, strict=True):
            if not process_alive(pid):
                text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
                raise ClusterError(f"{root_cause(text)}\n{name} (pid {pid}) exited while starting; its log is {log}")
        with contextlib.suppress(OSError, ValueError):
            state = master_state(info, timeout_s=2.0)
            alive = sum(1 for w in state.get("workers", ()) if w.get("state") == "ALIVE")
            if alive >= len(info.worker_pids):
                return
        if time.monotonic() > deadline:
            raise ClusterError(f"{alive} of {len(info.worker_pids)} workers registered with {info.master_url} within "
                               f"{timeout_s:g} s\nthe cluster was stopped; the logs are in {info.directory}")
        time.sleep(0.25)


def _pids_on_record(folder: Path) -> list[int]:
    """Workers' pids first (their executors go with them), the master's last, from the pid files."""
    recorded = []
    for path in [*sorted(folder.glob("worker-*.pid")), folder / "master.pid"]:
        with contextlib.suppress(OSError, ValueError):
            recorded.append(int(path.read_text(encoding="utf-8").strip()))
    return recorded


def _is_ours(pid: int) -> bool:
    """Whether ``pid`` still leads a Spark daemon's group (not a recycled pid of something else)."""
    members = group_members(pid)
    return bool(members) and any(any(c in _cmdline(m) for c in (MASTER_CLASS, WORKER_CLASS, EXECUTOR_CLASS))
                                 for m in members)


def stop_cluster(directory: str | os.PathLike[str], *, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> list[int]:
    """Stop everything started in ``directory``: each daemon's whole process group, SIGTERM then SIGKILL.

    :return: the pids that were running (workers, their executors and Python workers, the master).
    :raises ClusterError: a process survived SIGKILL or may not be signalled.
    """
    folder = Path(directory)
    stopped: list[int] = []
    for group in _pids_on_record(folder):
        if not _is_ours(group):
            continue
        stopped += group_members(group)
        for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(group, sig)
            except ProcessLookupError:
                break
            except PermissionError as exc:
                raise ClusterError(f"may not signal the process group {group}: {exc}") from exc
            end = time.monotonic() + wait_s
            while group_members(group) and time.monotonic() < end:
                process_alive(group)  # reaps the daemon when it is our own child
                time.sleep(0.1)
            if not group_members(group):
                break
        left = group_members(group)
        if left:
            raise ClusterError(f"processes {left} of the cluster in {folder} still run after SIGKILL")
    for path in [*folder.glob("*.pid"), folder / STATE_FILE]:
        path.unlink(missing_ok=True)
    return stopped


def executor_id() -> str:
    """In a Python worker on a cluster (a UDF's, a ``mapInPandas``'): the ``--executor-id`` of the executor JVM it
    descends from (``?`` outside an executor)."""
    pid = os.getpid()
    for _ in range(8):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"--executor-id" in args:
                return args[args.index(b"--executor-id") + 1].decode()
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return "?"


__all__ = [
    "ClusterError",
    "ClusterInfo",
    "executor_id",
    "executor_pids",
    "master_state",
    "running_cluster",
    "spark_home",
    "start_cluster",
    "stop_cluster",
]
