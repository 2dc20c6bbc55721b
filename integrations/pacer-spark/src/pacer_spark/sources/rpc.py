"""The loopback RPC between a source's reader process and the driver's Controller.

Spark starts a streaming Python data source's reader in a Python process of its
own, so admission state (the Controller, with every query's feedback) cannot be
shared in memory. The driver runs a :class:`ControllerServer` on 127.0.0.1 with a
per-session random authkey; the reader holds a :class:`ControllerClient` and asks
it for each micro-batch's end offset. Messages are small dicts.

The authkey never travels in Spark's options (which plans, logs and the UI show): the server writes it
to a private file (0600, in a 0700 folder of its own) and the option :data:`~pacer_spark.options.OPT_AUTHKEY_FILE`
carries that file's path; the readers run in Python processes of the driver's machine, as its user.
The handshake (``multiprocessing.connection``'s HMAC challenge, both ways) runs on each connection's own
thread with a deadline, on both sides, so a local connection that says nothing blocks no reader.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import socket
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any

from pacer_spark.options import (
    OPT_ADDRESS,
    OPT_AUTHKEY,
    OPT_AUTHKEY_FILE,
    OPT_TIMEOUT,
    parse_address,
    parse_seconds,
)

log = logging.getLogger("pacer_spark.sources.rpc")

Handler = Callable[[dict[str, Any]], dict[str, Any]]

#: The name of the authkey file inside the server's private folder.
AUTHKEY_FILE_NAME = "authkey"


#: What a user does about a Controller that does not answer (every such error ends with it).
_WHAT_TO_DO = ("The driver's pacer session stopped (pacer.stop(), the driver exited) or is too busy to answer in "
               "time: the source admits every available dataset until it answers again, nothing is lost. Check the "
               "driver's log; if it runs, raise the source's pacer.timeout")


class ControllerUnavailable(ConnectionError):
    """The driver's Controller did not answer (gone, or too slow)."""


def _handshake(conn: Connection, authkey: bytes, timeout: float, *, server: bool) -> None:
    """The authkey challenge both ways on ``conn``, hanging up on it after ``timeout`` seconds.

    The hang-up is a ``shutdown`` (never a close: the socket stays its owner's to close), which wakes a
    ``recv`` blocked on a silent or trickling peer; it happens only while the handshake still runs.

    :raises TimeoutError: the peer took longer than ``timeout``; any other error of the challenge as is.
    """
    lock = threading.Lock()
    state = {"done": False, "timed_out": False}

    def hang_up() -> None:
        with lock:
            if state["done"]:
                return
            state["timed_out"] = True
            try:
                with socket.socket(fileno=os.dup(conn.fileno())) as dup:
                    dup.shutdown(socket.SHUT_RDWR)
            except OSError:  # pragma: no cover - the peer hung up already
                pass

    timer = threading.Timer(timeout, hang_up)
    timer.daemon = True
    timer.start()
    try:
        if server:
            deliver_challenge(conn, authkey)
            answer_challenge(conn, authkey)
        else:
            answer_challenge(conn, authkey)
            deliver_challenge(conn, authkey)
    except Exception as exc:
        if state["timed_out"]:
            raise TimeoutError(f"authentication handshake took longer than {timeout:g} s") from exc
        raise
    finally:
        with lock:
            state["done"] = True
        timer.cancel()


class ControllerServer:
    """Serves ``handler`` on a loopback socket; one thread per connected reader (its handshake included).

    Every socket is closed by the one thread that owns it (the accept thread its listener, a connection's
    thread its connection): closing a descriptor from a second thread races with that thread's own close,
    and a descriptor closed twice can close whatever the process opened under the same number in between
    (a Py4J socket, a checkpoint file), which then fails with ``EBADF`` far from here.

    :param handler: maps a request dict to a reply dict; an exception becomes ``{"error": message}``.
    :param authkey: shared secret (random per session when omitted).
    :param handshake_timeout: seconds a new connection has to authenticate before it is dropped.
    """

    #: Seconds a connection's thread waits for a request before it looks whether the server was closed.
    POLL_S = 0.2
    #: Connections authenticating at once; more are dropped at once (a flood delays no established reader).
    MAX_HANDSHAKES = 64

    def __init__(self, handler: Handler, *, authkey: bytes | None = None, handshake_timeout: float = 10.0) -> None:
        self.handler = handler
        self.authkey = authkey or secrets.token_bytes(32)
        self.handshake_timeout = handshake_timeout
        self.authkey_file = _write_private_key(self.authkey)
        self._remove_key = weakref.finalize(self, shutil.rmtree, str(self.authkey_file.parent), ignore_errors=True)
        self._listener = Listener(("127.0.0.1", 0), backlog=16)  # no authkey: each thread authenticates its own
        host, port = self._listener.address
        self._address = (str(host), int(port))
        self._closed = threading.Event()
        self._handshakes = threading.BoundedSemaphore(self.MAX_HANDSHAKES)
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept_loop, name="pacer-rpc-accept", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on."""
        return self._address

    @property
    def authkey_hex(self) -> str:
        """The authkey as hex (for a client built by hand: sources get :attr:`authkey_file` instead)."""
        return self.authkey.hex()

    def _accept_loop(self) -> None:
        with self._listener:
            while not self._closed.is_set():
                try:
                    conn = self._listener.accept()
                except OSError:
                    log.debug("rpc: accept failed", exc_info=True)
                    continue
                if self._closed.is_set():  # the wake-up connection of close()
                    conn.close()
                    return
                if not self._handshakes.acquire(blocking=False):
                    log.warning("rpc: %d connections are authenticating already; dropping one more",
                                self.MAX_HANDSHAKES)
                    conn.close()
                    continue
                thread = threading.Thread(target=self._serve, args=(conn,), name="pacer-rpc-conn", daemon=True)
                self._threads = [t for t in self._threads if t.is_alive()]
                self._threads.append(thread)
                thread.start()

    def _serve(self, conn: Connection) -> None:
        with conn:
            try:
                _handshake(conn, self.authkey, self.handshake_timeout, server=True)
            except Exception:
                log.debug("rpc: a connection failed the handshake", exc_info=True)
                return
            finally:
                self._handshakes.release()
            while not self._closed.is_set():
                try:
                    if not conn.poll(self.POLL_S):
                        continue
                    request = conn.recv()
                except (EOFError, OSError):
                    return
                try:
                    reply = self.handler(request)
                except Exception as exc:
                    log.debug("rpc handler raised", exc_info=True)
                    reply = {"error": f"{type(exc).__name__}: {exc}"}
                try:
                    conn.send(reply)
                except (OSError, ValueError):
                    return

    def close(self, timeout: float = 2.0) -> None:
        """Stop accepting, let every connection's thread close its socket, and wait up to ``timeout`` s for them.
        The authkey file goes too."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._remove_key()
        try:  # wakes the accept thread, which then closes the listener itself
            socket.create_connection(self._address, timeout=timeout).close()
        except OSError:  # pragma: no cover - the listener is already gone
            pass
        deadline = time.monotonic() + timeout
        for thread in [self._thread, *self._threads]:
            thread.join(max(0.0, deadline - time.monotonic()))


def _write_private_key(authkey: bytes) -> Path:
    """``authkey`` in a new file only this user can read, in a new folder only this user can enter."""
    folder = Path(tempfile.mkdtemp(prefix="pacer-rpc-"))  # 0700
    path = folder / AUTHKEY_FILE_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(authkey)
    return path


def read_authkey(path: str | Path) -> bytes:
    """The authkey in ``path``, refusing a file others could have written or read.

    :raises PermissionError: the file (or a link in its place) is not this user's alone.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if st.st_uid != os.geteuid() or st.st_mode & 0o077:
            raise PermissionError(f"the pacer authkey file {path} must be this user's, mode 0600")
        return handle.read()


class ControllerClient:
    """The reader's side: one lazily opened connection, a reply timeout, and a back-off after failure.

    :param address: ``(host, port)`` of the server.
    :param authkey: the shared secret, or None to read it from ``authkey_file`` (on first connect).
    :param timeout: seconds to wait for a reply before giving up on this call.
    :param retry_after: seconds to wait after a failure before trying to reconnect.
    :param authkey_file: the server's :attr:`ControllerServer.authkey_file`.
    :param connect_timeout: seconds the connection and its handshake may take.
    """

    def __init__(
        self, address: tuple[str, int], authkey: bytes | None = None, *, timeout: float = 10.0,
        retry_after: float = 5.0, authkey_file: str | Path | None = None, connect_timeout: float = 10.0,
    ) -> None:
        if authkey is None and authkey_file is None:
            raise ValueError("ControllerClient needs an authkey or an authkey_file")
        self.address = address
        self.authkey = authkey
        self.authkey_file = authkey_file
        self.timeout = timeout
        self.retry_after = retry_after
        self.connect_timeout = connect_timeout
        self._conn: Connection | None = None
        self._down_until = 0.0
        self._down_because = ""  # the last failure's cause, repeated while no call is tried

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ControllerClient | None:
        """The client a source's options wire it to (:meth:`pacer_spark.PacerSession.source_options`): the
        address, the authkey file (or, set by hand, the authkey as hex) and the reply timeout; None when
        the options name no Controller."""
        if OPT_ADDRESS not in options:
            return None
        address = parse_address(options[OPT_ADDRESS])
        timeout = parse_seconds(options.get(OPT_TIMEOUT, "10"), OPT_TIMEOUT, positive=True) or 10.0
        if OPT_AUTHKEY_FILE in options:
            return cls(address, authkey_file=options[OPT_AUTHKEY_FILE], timeout=timeout)
        if OPT_AUTHKEY in options:
            return cls(address, bytes.fromhex(options[OPT_AUTHKEY]), timeout=timeout)
        return None

    def _connect(self) -> Connection:
        if self.authkey is None:
            assert self.authkey_file is not None
            self.authkey = read_authkey(self.authkey_file)
        sock = socket.create_connection(self.address, timeout=self.connect_timeout)
        sock.setblocking(True)
        conn = Connection(sock.detach())
        try:
            _handshake(conn, self.authkey, self.connect_timeout, server=False)
        except BaseException:
            conn.close()
            raise
        return conn

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` and return the reply.

        :raises ControllerUnavailable: when the driver cannot be reached or does not answer in time.
        """
        if time.monotonic() < self._down_until:
            raise ControllerUnavailable(
                f"pacer Controller at {self.address[0]}:{self.address[1]} did not answer its last call "
                f"({self._down_because}); not asked again for {self.retry_after:g} s after it. {_WHAT_TO_DO}")
        try:
            if self._conn is None:
                self._conn = self._connect()
            self._conn.send(request)
            if not self._conn.poll(self.timeout):
                raise TimeoutError(f"no reply within {self.timeout:g} s")
            reply: dict[str, Any] = self._conn.recv()
            return reply
        except Exception as exc:
            self.close()
            self._down_until = time.monotonic() + self.retry_after
            self._down_because = f"{type(exc).__name__}: {exc}"
            raise ControllerUnavailable(f"pacer Controller at {self.address[0]}:{self.address[1]} did not answer "
                                        f"({self._down_because}). {_WHAT_TO_DO}") from exc

    def close(self) -> None:
        """Drop the connection (the next call reconnects)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:  # pragma: no cover
                pass
            self._conn = None
