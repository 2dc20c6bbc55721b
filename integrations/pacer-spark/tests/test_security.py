"""Local security of pacer-spark: the reader/driver RPC, the authkey's path, the jar cache, error traces.

No SparkSession and no ``javac`` here: the jar cache tests build with a stand-in compiler (the real
build is covered by ``test_wrapper.py``), so the whole module runs in a few seconds.
"""

from __future__ import annotations

import os
import socket
import stat
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pacer_spark.jvm import jar as jvm
from pacer_spark.options import OPT_ADDRESS, OPT_AUTHKEY
from pacer_spark.run.spark_runtime import write_error_traces
from pacer_spark.runtime import PacerSession
from pacer_spark.sources.rpc import ControllerClient, ControllerServer, ControllerUnavailable

# -- the RPC handshake ------------------------------------------------------------------------------


def _in_thread(fn: Callable[[], Any], timeout: float) -> tuple[bool, Any]:
    """Runs ``fn`` on a daemon thread: (finished within ``timeout``, its result or exception)."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as exc:
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    return (not thread.is_alive(), out[0] if out else None)


def test_a_silent_connection_blocks_no_reader_and_is_dropped_after_the_timeout() -> None:
    server = ControllerServer(lambda req: {"echo": req["x"]}, handshake_timeout=1.0)
    silent = socket.create_connection(server.address)
    opened = time.monotonic()
    try:
        time.sleep(0.2)  # the server has accepted it and waits for its answer to the challenge
        client = ControllerClient(server.address, server.authkey, timeout=2.0, connect_timeout=2.0)
        started = time.monotonic()
        finished, reply = _in_thread(lambda: client.call({"x": 7}), timeout=3.0)
        assert finished, "a real client hung behind a silent connection"
        assert reply == {"echo": 7}
        assert time.monotonic() - started < 1.0
        client.close()

        silent.settimeout(5.0)
        while silent.recv(4096):  # the challenge, then the hang-up
            pass
        assert 0.8 < time.monotonic() - opened < 3.0
    finally:
        silent.close()
        server.close()


def test_a_client_gives_up_on_a_server_that_never_authenticates() -> None:
    with socket.create_server(("127.0.0.1", 0)) as mute:  # accepts (backlog), never speaks
        client = ControllerClient(mute.getsockname()[:2], b"k" * 32, timeout=0.5, connect_timeout=0.5)
        started = time.monotonic()
        finished, outcome = _in_thread(lambda: client.call({"x": 1}), timeout=3.0)
        assert finished, "the client's connect/handshake has no timeout"
        assert isinstance(outcome, ControllerUnavailable)
        assert time.monotonic() - started < 2.0


def test_a_wrong_authkey_is_refused_and_the_server_keeps_serving() -> None:
    server = ControllerServer(lambda req: {"ok": True})
    try:
        with pytest.raises(ControllerUnavailable):
            ControllerClient(server.address, b"wrong" * 4, connect_timeout=2.0).call({})
        assert ControllerClient(server.address, server.authkey).call({}) == {"ok": True}
    finally:
        server.close()


# -- the authkey stays out of Spark's options -----------------------------------------------------


def test_source_options_carry_a_private_key_file_not_the_key() -> None:
    server = ControllerServer(lambda req: {"echo": req["x"]})
    try:
        fake = SimpleNamespace(server=server, driver=SimpleNamespace(gate_timeout_s=5.0))
        options = PacerSession.source_options(fake, "q1")  # type: ignore[arg-type]

        text = repr(options)
        assert server.authkey_hex not in text and server.authkey.hex().upper() not in text
        assert OPT_AUTHKEY not in options
        key_file = Path(server.authkey_file)
        assert str(key_file) in options.values()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700

        client = ControllerClient.from_options(options)
        assert client is not None and client.call({"x": 5}) == {"echo": 5}
        client.close()
    finally:
        server.close()
    assert not Path(server.authkey_file).exists()  # close() removes the key with its folder


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    server = ControllerServer(lambda req: {"ok": True})
    try:
        loose = tmp_path / "key"
        loose.write_bytes(server.authkey)
        loose.chmod(0o644)
        client = ControllerClient.from_options({OPT_ADDRESS: "{}:{}".format(*server.address),
                                                "pacer.authkey.file": str(loose)})
        assert client is not None
        with pytest.raises(ControllerUnavailable, match="mode 0600"):
            client.call({})
    finally:
        server.close()


# -- the jar cache ----------------------------------------------------------------------------------


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """A stand-in for ``javac``: writes a small genuine jar and records each build (the real build is
    test_wrapper's)."""
    calls: list[Path] = []

    def compile_(sources: Path, jar: Path) -> None:
        calls.append(jar)
        jar.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(jar, "w") as z:
            z.writestr("io/pacer/spark/Built.txt", f"build {len(calls)}")

    monkeypatch.setattr(jvm, "_compile", compile_)
    yield calls


def test_a_planted_jar_with_a_matching_stamp_is_not_used(tmp_path: Path, builds: list[Path]) -> None:
    planted = b"PK\x05\x06" + b"\0" * 18  # someone else's jar (an empty zip here)
    # the jar and stamp a writer of a shared cache plants under the old scheme (the stamp = the sources' hash)
    tmp_path.joinpath(jvm.JAR_NAME).write_bytes(planted)
    tmp_path.joinpath("pacer-spark-jvm.sources.sha256").write_text(jvm.sources_hash() + "\n")
    first = jvm.build_jar(cache=tmp_path)
    assert first.compiled and first.jar.read_bytes() != planted

    # the genuine stamp kept, the jar swapped afterwards
    first.jar.write_bytes(planted)
    again = jvm.build_jar(cache=tmp_path)
    assert again.compiled and again.jar.read_bytes() != planted
    assert len(builds) == 2


def test_a_planted_lock_link_is_never_followed(tmp_path: Path, builds: list[Path]) -> None:
    """A ``.lock`` planted as a link to a victim's file: the build refuses it, naming it, and the victim's file is
    intact (before, the cache opened it with "w", truncating the target)."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the victim's data\n")
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    (cache / ".lock").symlink_to(victim)
    with pytest.raises(jvm.JvmBuildError, match=r"\.lock is a symbolic link"):
        jvm.build_jar(cache=cache)
    assert victim.read_text() == "the victim's data\n" and not builds


def test_a_jar_others_can_write_is_rebuilt(tmp_path: Path, builds: list[Path]) -> None:
    jar = jvm.build_jar(cache=tmp_path).jar
    jar.chmod(0o666)
    assert jvm.build_jar(cache=tmp_path).compiled
    assert stat.S_IMODE(jar.stat().st_mode) == 0o644


def test_a_read_only_cache_with_a_valid_jar_works(tmp_path: Path, builds: list[Path],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    built = jvm.build_jar(cache=cache)
    (cache / ".lock").unlink()
    cache.chmod(0o555)
    try:
        used = jvm.build_jar(cache=cache)
        assert not used.compiled and used.jar == built.jar
        assert not (cache / ".lock").exists()  # reading takes no lock (nor write access)

        empty = tmp_path / "empty"
        empty.mkdir(mode=0o555)
        if os.geteuid() == 0:  # root writes anywhere: stand in for the refusal a read-only cache gives
            def refuse(folder: Path) -> Any:
                raise PermissionError(13, "Permission denied", str(folder / ".lock"))
            monkeypatch.setattr(jvm, "_locked", refuse)
        with pytest.raises(jvm.JvmBuildError, match="cannot be written.*PACER_JVM_CACHE"):
            jvm.build_jar(cache=empty)
    finally:
        cache.chmod(0o755)
    assert len(builds) == 1


def test_the_cache_key_covers_the_spark_jars_compiled_against(tmp_path: Path, builds: list[Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    (home / "jars" / "spark-sql_2.13-4.3.0.jar").write_bytes(b"x" * 10)
    monkeypatch.setenv("SPARK_HOME", str(home))
    monkeypatch.setenv("PACER_JVM_CACHE", str(tmp_path / "cache"))
    before_key, before_dir = jvm.classpath_key(), jvm.cache_dir()
    assert jvm.build_jar().compiled and not jvm.build_jar().compiled

    (home / "jars" / "spark-sql_2.13-4.3.0.jar").write_bytes(b"x" * 11)  # another Spark build, same version
    assert jvm.classpath_key() != before_key and jvm.cache_dir() != before_dir
    assert jvm.build_jar().compiled

    monkeypatch.setattr(jvm, "classpath_key", lambda jars=None: "other")  # the same folder, another classpath
    assert jvm.build_jar(cache=before_dir).compiled
    assert len(builds) == 3


# -- error traces -----------------------------------------------------------------------------------


def test_error_traces_go_to_a_private_file_not_through_a_planted_link(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / f"pacer-run-{os.getpid()}-errors.txt").symlink_to(victim)

    path = write_error_traces({"q1": "Traceback ...\nValueError: boom"})

    assert victim.read_text() == "precious\n"
    assert "ValueError: boom" in path.read_text()
    assert not path.is_symlink()
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert path.parent.parent == tmp_path


def test_a_cached_rapids_jar_another_user_could_have_written_is_refused(tmp_path: Path) -> None:
    """The RAPIDS jar goes on Spark's classpath: one group-writable in pacer's Maven cache is refused, naming it."""
    from pacer.infra import jars
    from pacer_spark.plan import rapids_jar
    cache = tmp_path / "maven"
    jar = jars.jar_path(rapids_jar.GROUP, rapids_jar.ARTIFACT, "26.08.0", cache=cache)
    jars.make_trusted_dirs(jar.parent, cache=cache)
    jar.write_bytes(b"PK\x05\x06" + bytes(18))
    jar.chmod(0o664)
    with pytest.raises(jars.UntrustedCacheError, match=str(jar)):
        rapids_jar.cached_rapids_jar("26.08.0", cache=cache)
    jar.chmod(0o644)
    assert rapids_jar.cached_rapids_jar("26.08.0", cache=cache) == jar
