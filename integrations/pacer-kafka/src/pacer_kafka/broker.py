"""A single-node Apache Kafka broker in KRaft mode, on loopback, run from Kafka's own jars.

``start_broker(dir)`` writes ``server.properties`` (one node that is both broker and controller,
listeners on 127.0.0.1 only), formats the storage with Kafka's ``StorageTool``, starts
``java -cp … kafka.Kafka server.properties`` in the background (its output in ``broker.log``,
its pid in ``broker.pid``) and returns once a Kafka client gets the cluster's metadata from it.
``stop_broker(dir)`` sends SIGTERM (Kafka shuts down cleanly), then SIGKILL after a timeout.

A failed start raises :class:`BrokerError` whose first line is the root cause read from the
log, and whose second says where the whole log is.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from pacer.infra.daemons import free_port, process_alive
from pacer_kafka.distribution import find_java, kafka_classpath, kafka_version

HOST = "127.0.0.1"
LOG_FILE = "broker.log"
PID_FILE = "broker.pid"
STATE_FILE = "broker.json"
PROPERTIES_FILE = "server.properties"
LOG4J_FILE = "log4j2.properties"
DATA_DIR = "data"
#: Seconds ``start_broker`` waits for the broker to answer before giving up.
DEFAULT_START_TIMEOUT_S = 120.0
#: Seconds ``stop_broker`` waits after SIGTERM before SIGKILL.
DEFAULT_STOP_TIMEOUT_S = 30.0
#: Environment variable with extra JVM options for the broker and StorageTool (like Kafka's KAFKA_OPTS).
JVM_OPTS_ENV = "PACER_KAFKA_JVM_OPTS"
#: The broker JVM's maximum heap (Kafka's scripts use 1 GiB; a test broker needs far less).
DEFAULT_HEAP = "512m"

_LOG4J = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
"""


class BrokerError(RuntimeError):
    """The broker could not be started or stopped; the first line is the cause, then where its log is."""


@dataclass(frozen=True)
class BrokerInfo:
    """A running broker started by :func:`start_broker`.

    :param directory: its folder (properties, data, log, pid).
    :param port: the client (PLAINTEXT) listener on 127.0.0.1.
    :param controller_port: the KRaft controller listener on 127.0.0.1.
    :param pid: the broker JVM's process id.
    :param kafka_version: the Kafka release it runs.
    """

    directory: str
    port: int
    controller_port: int
    pid: int
    kafka_version: str

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT``, the value of a client's ``bootstrap.servers``."""
        return f"{HOST}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The broker's log file."""
        return Path(self.directory) / LOG_FILE


def port_is_free(port: int) -> bool:
    """True when a listener could bind 127.0.0.1:``port`` now.

    With ``SO_REUSEADDR``, as the broker's own listener binds (Java sets it on Linux): connections of a
    broker just stopped linger in TIME_WAIT on its port for a minute and do not keep a new broker from
    listening there, so ``pacer kafka up --port P`` right after ``down`` must not be refused for them.
    A socket listening on the port still makes the bind fail.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def _is_kafka_process(pid: int) -> bool:
    """True unless we can see that ``pid`` is something other than a Kafka JVM (a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"kafka.Kafka" in cmdline


def running_broker(directory: str | os.PathLike[str]) -> BrokerInfo | None:
    """The broker started in ``directory`` if its process is still alive, else None."""
    folder = Path(directory)
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        pid = int((folder / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if not process_alive(pid) or not _is_kafka_process(pid):
        return None
    return BrokerInfo(str(folder), int(state["port"]), int(state["controller_port"]), pid, str(state["kafka_version"]))


def root_cause(log_text: str) -> str:
    """The one line of a Kafka (or JVM) log that says why it failed.

    The first exception after the first ERROR/FATAL record (Kafka logs "Exiting Kafka due to fatal
    exception" and then the exception); else that record's message; else the first line that looks
    like an exception or a JVM error; else the last line.
    """
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    exception = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b(?::.*)?$|^Error[: ].*")
    record = re.compile(r"^\[[^\]]+\] (ERROR|FATAL) (?P<message>.*?)(?: \([\w.$]+\))?$")
    for i, line in enumerate(lines):
        match = record.match(line)
        if match:
            for following in lines[i + 1 :]:
                if record.match(following) or following.startswith("["):
                    break
                if exception.match(following):
                    return following
            return match.group("message")
    for i, line in enumerate(lines):
        if line.startswith("Exception in thread"):
            return re.sub(r'^Exception in thread "[^"]*" ', "", line)
        if exception.match(line):
            if line.startswith("Error occurred during initialization of VM") and i + 1 < len(lines):
                return f"{line}: {lines[i + 1]}"  # the JVM's reason is on the next line
            return line
    return lines[-1] if lines else "(the log is empty)"


def _cluster_id(data_dir: Path) -> str:
    """The cluster id already formatted into ``data_dir``, or a new one (Kafka's base64url UUID form)."""
    meta = data_dir / "meta.properties"
    if meta.is_file():
        for line in meta.read_text(encoding="utf-8").splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid avoids these: they read as options
            return text


def server_properties(*, port: int, controller_port: int, data_dir: Path) -> str:
    """``server.properties`` of a combined broker+controller node on 127.0.0.1, replication factor 1."""
    settings = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _jvm(java: str, classpath: list[Path], folder: Path, heap: str | None) -> list[str]:
    # C1 alone (no C2 warm-up) starts the broker sooner on few cores (measured: README); a later
    # -XX:TieredStopAtLevel=4 in $PACER_KAFKA_JVM_OPTS restores C2.
    command = [java, "-XX:TieredStopAtLevel=1"]
    command += [f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"] if heap else ["-XX:+UseSerialGC"]
    command += shlex.split(os.environ.get(JVM_OPTS_ENV, ""))
    return [*command, "-Djava.awt.headless=true", f"-Dlog4j2.configurationFile={folder / LOG4J_FILE}",
            f"-Dkafka.logs.dir={folder}", "-cp", os.pathsep.join(str(p) for p in classpath)]


def _failure(cause: str, what: str, log: Path) -> BrokerError:
    return BrokerError(f"{cause}\n{what}; the full log is {log}")


def start_broker(directory: str | os.PathLike[str], *, port: int | None = None, version: str | None = None,
                 heap: str | None = DEFAULT_HEAP, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> BrokerInfo:
    """Start a single-node KRaft broker on 127.0.0.1 with its files in ``directory``; return when it answers.

    :param port: the client port (default: a free one).
    :param version: the Kafka release (default :func:`pacer_kafka.distribution.kafka_version`).
    :param heap: the JVM's ``-Xmx`` (None: the JVM's default).
    :param timeout_s: how long to wait for the broker to answer a metadata request.
    :raises BrokerError: a broker already runs there, the port is taken, formatting or start failed.
    :raises KafkaSetupError: no ``java``, or Kafka's jars cannot be fetched.
    """
    folder = Path(directory).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    existing = running_broker(folder)
    if existing is not None:
        raise BrokerError(f"a broker already runs in {folder} (pid {existing.pid}, bootstrap.servers="
                          f"{existing.bootstrap_servers}); stop it with `pacer kafka down --dir {folder}`")
    if port is not None and not (0 < port < 65536):
        raise BrokerError(f"port {port} is not a TCP port (1-65535)")
    if port is not None and not port_is_free(port):
        raise BrokerError(f"port {port} on {HOST} is already in use; pick another with --port, or leave --port out "
                          "to get a free one")
    java = find_java()
    release = kafka_version(version)
    classpath = kafka_classpath(release)
    client_port = port if port is not None else free_port()
    controller_port = free_port()
    while controller_port == client_port:
        controller_port = free_port()
    data_dir = folder / DATA_DIR
    (folder / LOG4J_FILE).write_text(_LOG4J, encoding="utf-8")
    properties = folder / PROPERTIES_FILE
    properties.write_text(server_properties(port=client_port, controller_port=controller_port, data_dir=data_dir),
                          encoding="utf-8")
    log = folder / LOG_FILE
    _format_storage(java, classpath, folder, properties, _cluster_id(data_dir), log)
    with open(log, "ab") as out:
        process = subprocess.Popen([*_jvm(java, classpath, folder, heap), "kafka.Kafka", str(properties)],
                                   stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                                   start_new_session=True)
    (folder / PID_FILE).write_text(f"{process.pid}\n", encoding="utf-8")
    info = BrokerInfo(str(folder), client_port, controller_port, process.pid, release)
    state = {k: v for k, v in asdict(info).items() if k != "pid"}
    (folder / STATE_FILE).write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    _wait_until_ready(info, process, timeout_s)
    return info


def _format_storage(java: str, classpath: list[Path], folder: Path, properties: Path, cluster_id: str,
                    log: Path) -> None:
    command = [*_jvm(java, classpath, folder, None), "kafka.tools.StorageTool", "format", "-t", cluster_id,
               "-c", str(properties), "--ignore-formatted"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False, cwd=folder,
                          stdin=subprocess.DEVNULL)
    output = proc.stdout + proc.stderr
    log.write_text(f"$ kafka.tools.StorageTool format (exit {proc.returncode})\n{output}", encoding="utf-8")
    if proc.returncode != 0:
        raise _failure(root_cause(output), f"formatting the storage with Kafka's StorageTool failed (exit "
                       f"{proc.returncode})", log)


def _wait_until_ready(info: BrokerInfo, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Poll the broker with a real metadata request until it answers, dies, or the time is up."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from pacer_kafka.clients import client_config

    admin = AdminClient(client_config(info.bootstrap_servers, **{"reconnect.backoff.max.ms": 250}))
    deadline = time.monotonic() + timeout_s
    while True:
        code = process.poll()
        if code is not None:
            _forget(Path(info.directory))
            text = info.log_path.read_text(encoding="utf-8", errors="replace")
            raise _failure(root_cause(text.split("kafka.tools.StorageTool", 1)[-1].split("\n", 1)[-1]),
                           f"the Kafka broker exited with code {code} while starting", info.log_path)
        try:
            metadata = admin.list_topics(timeout=1.0)
            if metadata.brokers:
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            stop_broker(info.directory)
            raise _failure(f"the broker did not answer on {info.bootstrap_servers} within {timeout_s:g} s",
                           "it was stopped", info.log_path)
        time.sleep(0.2)


def _forget(folder: Path) -> None:
    for name in (PID_FILE, STATE_FILE):
        (folder / name).unlink(missing_ok=True)


def stop_broker(directory: str | os.PathLike[str], *, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> int | None:
    """Stop the broker started in ``directory``: SIGTERM, then SIGKILL after ``timeout_s``.

    :return: the pid stopped, or None when none was running there.
    :raises BrokerError: the process survived SIGKILL (should not happen) or may not be signalled.
    """
    folder = Path(directory)
    try:
        pid = int((folder / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    if not process_alive(pid) or not _is_kafka_process(pid):
        _forget(folder)
        return None
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 10.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        except PermissionError as exc:
            raise BrokerError(f"may not signal the broker (pid {pid}): {exc}") from exc
        deadline = time.monotonic() + wait_s
        while process_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not process_alive(pid):
            break
    if process_alive(pid):
        raise BrokerError(f"the broker (pid {pid}) is still running after SIGKILL")
    _forget(folder)
    return pid
