"""pacer on a real Spark standalone cluster: Spark's own Master and two 1-core Workers on 127.0.0.1 (``spark_cluster``
in conftest.py, the code of ``pacer cluster up``), executors in JVMs of their own, a real Kafka broker.

One driver program (``cluster_app.py``, a process of its own: the suite's session is ``local[2]``) runs three phases
on the cluster; this module watches it and, in the Kafka phase, kills the executor JVM running a task with SIGKILL:

- Kafka -> ``format("pacer")`` (zStream, 4 s) -> parquet: every record in the output exactly once, after Spark
  re-ran the lost task elsewhere;
- three paced queries under EDF: no two queries' tasks ever overlap in the executors (one batch at a time), and the
  batches that waited together ran earliest deadline first;
- the same under RDAS: every task runs, in an executor, in the FAIR pool the gate gave its batch (``TaskContext``);
- two ``pacer-gen`` queries whose readers run in the executors' Python workers: nothing lost, nothing twice;
- Kafka -> ``format("pacer")`` -> parquet while a scaling strategy removes and adds an executor every 4 s (pacer's
  enactment: ``requestTotalExecutors``, ``killExecutors`` between batches): every record once.

The pacer jar reaches what needs it with no step of the user's: ``attach()`` loads it into the driver, the only JVM
that runs pacer's classes (the executors run the wrapped source's tasks); ``spark.jars`` holds the Kafka connector
only. Measured on 2 cores: about 2.5 minutes for the module, the cluster's start included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

APP = Path(__file__).with_name("cluster_app.py")
#: The driver program's whole run at most (its phases take about 100 s here).
APP_TIMEOUT_S = 420.0


def kill_a_busy_executor(cluster: Any, work: Path) -> dict[str, Any] | None:
    """SIGKILL the executor JVM whose Kafka-phase task is running now, once a first Kafka task completed; the kill."""
    from pacer_spark.run.cluster import executor_pids

    tasks = work / "tasks" / "kafka.jsonl"
    if not tasks.exists() or not tasks.read_text().strip():
        return None
    for marker in (work / "busy").glob("*"):
        if marker.suffix == ".tmp" or time.time() - marker.stat().st_mtime > 0.5:
            continue  # a task that has held its executor a while may be about to end: wait for a fresh one
        pid = executor_pids(cluster).get(marker.name)
        if pid is None:
            continue
        task = json.loads(marker.read_text())
        os.kill(pid, signal.SIGKILL)
        return {"executor": marker.name, "pid": pid, "at": time.time(), **task}
    return None


@pytest.fixture(scope="module")
def cluster_run(spark_cluster: Any, kafka_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The driver program's work folder after it ran every phase on the cluster (one executor killed meanwhile)."""
    pytest.importorskip("pacer_kafka")
    work = tmp_path_factory.mktemp("cluster-run")
    log = work / "app.log"
    command = [sys.executable, str(APP), "--master", spark_cluster.master_url, "--work", str(work),
               "--bootstrap-servers", kafka_broker.bootstrap_servers, "--cluster-dir", spark_cluster.directory]
    started = time.monotonic()
    with open(log, "wb") as out:
        app = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    killed = None
    try:
        while app.poll() is None and time.monotonic() - started < APP_TIMEOUT_S:
            if killed is None and (killed := kill_a_busy_executor(spark_cluster, work)) is not None:
                (work / "killed.json").write_text(json.dumps(killed))
            time.sleep(0.05)
    finally:
        if app.poll() is None:
            app.kill()
            app.wait()
    text = log.read_text(errors="replace")
    assert app.returncode == 0, f"the driver program failed (exit {app.returncode}):\n{text[-4000:]}"
    print(f"cluster driver program: {time.monotonic() - started:.1f} s; {text.count('phase ')} phases")
    yield work


def phase(work: Path, name: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((work / f"{name}.json").read_text())
    return result


def tasks(work: Path, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (work / "tasks" / f"{name}.jsonl").read_text().splitlines()]


def test_kafka_to_parquet_exactly_once_with_an_executor_killed(cluster_run: Path, spark_cluster: Any) -> None:
    result = phase(cluster_run, "kafka")
    killed = result["killed"]
    assert killed is not None, "no executor was killed: the test watched for a running Kafka task and saw none"
    assert result["error"] is None, result["error"]
    assert result["keys"] == list(range(result["produced"])), "some record is missing or written twice"
    assert result["values_match"]
    assert result["produced"] >= 5 * 200
    # Spark re-ran the task that was running on the killed executor, on another executor
    ran = tasks(cluster_run, "kafka")
    reruns = [t for t in ran if (t["spark_batch"], t["partition"]) == (killed["batch"], killed["partition"])]
    assert reruns and all(t["executor"] != killed["executor"] for t in reruns), (killed, reruns)
    assert any(t["attempt"] >= 1 for t in reruns), (killed, reruns)
    assert not any(t["executor"] == killed["executor"] and t["start"] > killed["at"] for t in ran)
    # tasks ran in executor JVMs (not the driver), and the report names them
    assert len(result["executors"]) >= 2 and "driver" not in result["executors"], result["executors"]
    reported = result["report"]["spark"]
    named = set(reported["executors"]["kafka_cluster"])  # executors that ran tasks of the query (a sample of its jobs)
    assert len(named) >= 2 and named <= {t["executor"] for t in ran}, (reported["executors"], ran)
    assert reported["master"] == spark_cluster.master_url
    assert result["report"]["queries"]["kafka_cluster"]["rows_processed"] == result["produced"]
    # the Controller planned for both executors' cores and, once the Worker launched a replacement, for two again;
    # while Spark listed one executor for long enough to be seen (its looks come at a source's asks, at most once a
    # second, and a stream thread waits out the batch whose task was lost), for the one left
    samples = result["cores"]
    before = [planned for t, planned, _ in samples if t < killed["at"]]
    after = [(planned, listed) for t, planned, listed in samples if t > killed["at"]]
    assert before and before[-1] == 2 and after and after[-1] == (2, 2), (before[-5:], after)
    longest = run = 0
    for _, listed in after:
        run = run + 1 if listed == 1 else 0
        longest = max(longest, run)
    if longest >= 30:  # 3 s of Spark with one executor
        assert any(planned == 1 for planned, _ in after), after


def test_edf_orders_three_queries_whose_tasks_run_in_executors(cluster_run: Path) -> None:
    result = phase(cluster_run, "edf")
    deadlines, names = result["deadlines"], {v: k for k, v in result["query_ids"].items()}
    for name, rows in result["rows"].items():  # Spark's file sink: every row once
        assert sorted(r["id"] for r in rows) == list(range(6 * 40)), name
    ran = tasks(cluster_run, "edf")
    reported = result["report"]["spark"]["executors"]  # the report names the executors that ran each query
    assert all(reported[name] for name in deadlines), reported
    assert set().union(*(reported[name] for name in deadlines)) <= {t["executor"] for t in ran}, reported
    assert len({t["executor"] for t in ran}) == 2 and all(t["executor"].isdigit() for t in ran)
    for a, b in combinations(ran, 2):  # one batch at a time: no two queries' tasks overlap in the executors
        if a["query_id"] != b["query_id"]:
            assert a["end"] <= b["start"] or b["end"] <= a["start"], (names[a["query_id"]], a, names[b["query_id"]], b)
    contended = 0
    for a, b in combinations(result["batches"], 2):
        if a["query"] != b["query"] and a["admitted"] < b["started"] and b["admitted"] < a["started"]:
            contended += 1
            first, second = (a, b) if a["started"] <= b["started"] else (b, a)
            due = [x["arrival"] + deadlines[x["query"]] for x in (first, second)]
            assert due[0] <= due[1] + 1e-3, (first, second)
    assert contended >= 3, f"the queries never waited for each other ({len(result['batches'])} batches)"


def test_rdas_pools_hold_in_the_executors(cluster_run: Path) -> None:
    result = phase(cluster_run, "rdas")
    names = {v: k for k, v in result["query_ids"].items()}
    seen = 0
    for name, rows in result["rows"].items():
        assert sorted(r["id"] for r in rows) == list(range(6 * 40)), name
        for row in rows:  # what TaskContext said in the executor == what the gate decided for the batch
            assert names[row["query_id"]] == name
            decided = result["pools"].get(f"{name}/{row['spark_batch']}")
            assert decided is not None and decided.startswith("pacer-w"), (name, row)
            assert row["pool"] == decided, (name, row, decided)
            assert row["executor"].isdigit(), row
            seen += 1
    assert seen == 3 * 6 * 40
    assert len({p for p in result["pools"].values()}) >= 2, "every batch got the same pool: nothing was told apart"
    assert len({t["executor"] for t in tasks(cluster_run, "rdas")}) == 2


def test_the_pacer_jar_reaches_the_driver_with_no_step_and_no_executor_needs_it(cluster_run: Path,
                                                                              spark_cluster: Any) -> None:
    """``attach()`` loaded pacer's jar into the driver by itself (``spark.jars`` names only the Kafka connector), and
    the executors ran every task without it: pacer's classes run in the driver alone (the source wraps Spark's own,
    whose tasks the executors run); ``spark.jars`` reached them (they fetched the connector)."""
    jars = json.loads((cluster_run / "started").read_text())["jars"]
    assert "spark-sql-kafka" in jars and "pacer-spark-jvm" not in jars and "io.pacer" not in jars, jars
    logs = sorted(Path(spark_cluster.directory).glob("work-*/app-*/*/stderr"))
    assert len(logs) >= 3, logs  # two executors, and the one the master started after the kill
    texts = [log.read_text(errors="replace") for log in logs]
    assert all("io.pacer" not in text and "pacer-spark-jvm" not in text for text in texts)
    assert any("spark-sql-kafka" in text for text in texts), "no executor fetched the connector from spark.jars"


def test_pacer_gen_readers_on_executors_lose_nothing(cluster_run: Path) -> None:
    """Two ``pacer-gen`` queries whose readers run in the executors' Python workers: every dataset and row the
    traffic generated is processed once, and the Controller's ledger is complete."""
    result = phase(cluster_run, "gen")
    assert result["drained"] and not result["errors"] and result["ledger"] is None, result
    assert result["master"].startswith("spark://")
    for query_id, q in result["queries"].items():
        assert q["datasets_in"] == q["datasets_processed"] == 8, (query_id, q)
        assert q["rows_in"] == q["rows_processed"] > 0, (query_id, q)


def test_executors_scaled_down_and_up_between_batches_lose_and_repeat_no_record(cluster_run: Path) -> None:
    result = phase(cluster_run, "scale")
    assert result["error"] is None, result["error"]
    assert result["keys"] == list(range(result["produced"])), "some record is missing or written twice"
    assert result["values_match"]
    scaling = result["report"]["scaling"]
    assert scaling["strategy"] == "alternating"
    downs = [c for c in scaling["changes"] if c["to"] < c["from"]]
    ups = [c for c in scaling["changes"] if c["to"] > c["from"]]
    assert len(downs) >= 2 and len(ups) >= 2, scaling["changes"]
    # each removal was made between batches (no admitted batch running), and Spark removed the executors it named
    assert len(scaling["removals"]) >= 2 and all(r["between_batches"] for r in scaling["removals"]), scaling["removals"]
    removed = {e for r in scaling["removals"] for e in r["executors"]}
    gone = {s["id"] for s in result["spans"] if s["removed"] is not None and s["removed"] >= result["began"]}
    assert removed <= gone, (removed, result["spans"])
    # executors came back after each removal (the Worker started new ones at pacer's request)
    added = [s for s in result["spans"] if s["added"] > result["began"]]
    assert len(added) >= 2, result["spans"]
    # the executors over time went 2 -> 1 -> 2 at least twice, and fewer core-seconds were held than two the whole run
    running = [point[1] for point in scaling["executors"]]
    assert running.count(1) >= 1 and running[0] == 2, scaling["executors"]
    span = result["ended"] - result["began"]
    assert result["report"]["cost"]["allocated_core_s"] < 2 * span, (result["report"]["cost"], span)


def test_pacer_cluster_up_serves_two_workers_and_refuses_a_second_start(spark_cluster: Any) -> None:
    """The fixture ran ``pacer cluster up`` (its last line the master URL, checked there); ``down`` at the session's
    end must leave no process of it (checked there too)."""
    from pacer_spark.run.cluster import ClusterError, master_state, start_cluster

    state = master_state(spark_cluster)
    assert state["url"] == spark_cluster.master_url and state["aliveworkers"] == 2
    assert all(w["cores"] == 1 and w["host"] == "127.0.0.1" for w in state["workers"]), state["workers"]
    with pytest.raises(ClusterError, match="already runs .*pacer cluster down"):
        start_cluster(spark_cluster.directory)
    env = {k: v for k, v in os.environ.items() if k != "PACER_PLUGINS"}  # the command with every plugin
    status = subprocess.run([str(Path(sys.executable).with_name("pacer")), "cluster", "status", "--dir",
                             spark_cluster.directory], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert status.returncode == 0 and status.stdout.startswith("2 of 2 workers alive"), status
    assert status.stdout.strip().splitlines()[-1] == spark_cluster.master_url


INTRUDER = """
import org.apache.spark.sql.SparkSession;

public class Intruder {
  public static void main(String[] args) {
    System.out.println("intruder user " + System.getProperty("user.name"));
    SparkSession spark = SparkSession.builder().master(args[0]).appName("intruder")
        .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate();
    System.out.println("counted " + spark.range(10).count());
  }
}
"""


def test_an_application_without_the_cluster_s_secret_is_refused(spark_cluster: Any, tmp_path: Path) -> None:
    """``pacer cluster up`` runs with ``spark.authenticate``: its secret sits in a 0600 file of a 0700 folder (no
    command line shows it), and an application that does not present it never registers, so it runs nothing
    (before, any local user could run code on the owner's cluster)."""
    from pacer_spark.run.cluster import master_state

    conf = spark_cluster.properties_file
    assert oct(conf.stat().st_mode & 0o777) == "0o600" and oct(conf.parent.stat().st_mode & 0o777) == "0o700"
    assert spark_cluster.app_conf()["spark.authenticate"] == "true"
    secret = spark_cluster.app_conf()["spark.authenticate.secret"]
    assert len(secret) == 64 and not any(secret in " ".join(_cmdline(pid)) for pid in spark_cluster.worker_pids)
    if os.geteuid() == 0 and shutil.which("setpriv"):  # another Unix user cannot read it
        other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", str(conf)],
                               capture_output=True, text=True, timeout=30, check=False)
        assert other.returncode != 0 and "Permission denied" in other.stderr, (other.stdout, other.stderr)
    log = tmp_path / "intruder.log"
    folder = Path(tempfile.mkdtemp(prefix="pacer-intruder-"))  # pytest's tmp_path is root's alone (0700 above)
    command, env = _intruder(folder, spark_cluster.master_url)
    other_user = command[0] == "setpriv"
    with open(log, "wb") as out:
        intruder = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    refused = "Expected SaslMessage"  # the master's answer to a client without the secret
    try:
        limit = time.monotonic() + 60
        while time.monotonic() < limit and intruder.poll() is None:
            apps = master_state(spark_cluster).get("activeapps", [])
            assert not any(app.get("name") == "intruder" for app in apps), apps
            if refused in log.read_text(errors="replace") or "counted" in log.read_text(errors="replace"):
                break
            time.sleep(0.5)
        time.sleep(1.0)  # had it registered after all, the master would list it by now
        assert not any(app.get("name") == "intruder" for app in master_state(spark_cluster).get("activeapps", []))
    finally:
        intruder.kill()
        intruder.wait()
        shutil.rmtree(folder, ignore_errors=True)
    text = log.read_text(errors="replace")
    assert refused in text and "counted" not in text, text[-2000:]
    assert ("intruder user nobody" in text) == other_user, text[-2000:]
    completed = master_state(spark_cluster).get("completedapps", [])
    assert not any(app.get("name") == "intruder" for app in completed), completed


def _intruder(folder: Path, master_url: str) -> tuple[list[str], dict[str, str]]:
    """The intruder: a Spark application compiled into ``folder`` and started with PySpark's ``spark-submit``, as
    another Unix user (nobody, via ``setpriv``) where the tests run as root and that user can read PySpark's jars,
    else as this user. Either way without the cluster's secret. (A Java application: the Python of the tests may
    live where nobody can run it, e.g. under ``/root/.pyenv``.)"""
    import pyspark

    home = Path(pyspark.__file__).parent
    source = folder / "Intruder.java"
    source.write_text(INTRUDER)
    javac = shutil.which("javac")
    if javac is None:
        pytest.skip("no javac: the intruder application cannot be compiled")
    classpath = str(home / "jars" / "*")
    subprocess.run([javac, "-d", str(folder), "-cp", classpath, str(source)], check=True, timeout=120)
    subprocess.run(["jar", "--create", "--file", str(folder / "intruder.jar"), "-C", str(folder), "Intruder.class"],
                   check=True, timeout=60)
    submit = [str(home / "bin" / "spark-submit"), "--class", "Intruder", "--master", master_url,
              str(folder / "intruder.jar"), master_url]
    env = {**os.environ, "SPARK_HOME": str(home)}  # no Python to find it
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return submit, env
    for path in folder.iterdir():
        path.chmod(0o644)
    folder.chmod(0o777)  # nobody's home too, for Spark's and Ivy's files
    env.update(HOME=str(folder))
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*as_nobody, "sh", "-c", f'test -r "{home}/jars/spark-core_2.13-{pyspark.__version__}.jar" '
                            f'&& test -x "{home}/bin/spark-submit"'], timeout=60, check=False, env=env)
    return ([*as_nobody, *submit], env) if probe.returncode == 0 else (submit, env)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def test_bad_sizes_and_an_empty_folder_are_answered_without_starting_anything(tmp_path: Path) -> None:
    from pacer_spark.run.cluster import ClusterError, root_cause, running_cluster, start_cluster, stop_cluster

    with pytest.raises(ClusterError, match="at least one worker"):
        start_cluster(tmp_path, workers=0)
    with pytest.raises(ClusterError, match="look like 512m or 1g"):
        start_cluster(tmp_path, memory="lots")
    assert running_cluster(tmp_path) is None and stop_cluster(tmp_path) == []
    log = ("26/11/24 14:31:32 INFO Master: Starting Spark master at spark://127.0.0.1:7077\n"
           "Exception in thread \"main\" java.net.BindException: Address already in use\n"
           "\tat java.base/sun.nio.ch.Net.bind0(Native Method)\n")
    assert root_cause(log) == "java.net.BindException: Address already in use"


def test_a_master_that_moves_past_a_taken_port_still_gets_its_workers(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Between choosing a free port and the master's start another process can take it: Spark's master then binds
    the next port, and the workers must be told that one (they were told the taken one: 0 of 2 registered)."""
    import socket

    from pacer.infra.daemons import free_port
    from pacer_spark.run import cluster as c

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    held = taken.getsockname()[1]
    ports = iter([held])
    monkeypatch.setattr(c, "free_port", lambda: next(ports, None) or free_port())
    try:
        info = c.start_cluster(tmp_path / "moved", workers=1, timeout_s=120)
        try:
            assert info.master_port != held and len(info.worker_pids) == 1
            assert c.master_state(info)["workers"][0]["state"] == "ALIVE"
        finally:
            c.stop_cluster(tmp_path / "moved")
    finally:
        taken.close()
