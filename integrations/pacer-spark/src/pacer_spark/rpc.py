"""The loopback RPC between a source's reader process and the driver's Controller.

Spark starts a streaming Python data source's reader in a Python process of its
own, so admission state (the Controller, with every query's feedback) cannot be
shared in memory. The driver runs a :class:`ControllerServer` on 127.0.0.1 with a
per-session random authkey; the reader holds a :class:`ControllerClient` and asks
it for each micro-batch's end offset. Messages are small dicts.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

log = logging.getLogger("pacer_spark.rpc")

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class ControllerUnavailable(ConnectionError):
    """The driver's Controller did not answer (gone, or too slow)."""


class ControllerServer:
    """Serves ``handler`` on a loopback socket; one thread per connected reader.

    Every socket is closed by the one thread that owns it (the accept thread its listener, a connection's
    thread its connection): closing a descriptor from a second thread races with that thread's own close,
    and a descriptor closed twice can close whatever the process opened under the same number in between
    (a Py4J socket, a checkpoint file), which then fails with ``EBADF`` far from here.

    :param handler: maps a request dict to a reply dict; an exception becomes ``{"error": message}``.
    :param authkey: shared secret (random per session when omitted).
    """

    #: Seconds a connection's thread waits for a request before it looks whether the server was closed.
    POLL_S = 0.2

    def __init__(self, handler: Handler, *, authkey: bytes | None = None) -> None:
        self.handler = handler
        self.authkey = authkey or secrets.token_bytes(32)
        self._listener = Listener(("127.0.0.1", 0), authkey=self.authkey)
        host, port = self._listener.address
        self._address = (str(host), int(port))
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._accept_loop, name="pacer-rpc-accept", daemon=True)
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` the server listens on."""
        return self._address

    @property
    def authkey_hex(self) -> str:
        """The authkey as hex, for passing through a source option."""
        return self.authkey.hex()

    def _accept_loop(self) -> None:
        with self._listener:
            while not self._closed.is_set():
                try:
                    conn = self._listener.accept()
                except Exception:  # a client failing the handshake
                    log.debug("rpc: a connection failed the handshake", exc_info=True)
                    continue
                if self._closed.is_set():  # the wake-up connection of close()
                    conn.close()
                    return
                thread = threading.Thread(target=self._serve, args=(conn,), name="pacer-rpc-conn", daemon=True)
                self._threads.append(thread)
                thread.start()

    def _serve(self, conn: Connection) -> None:
        with conn:
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
        """Stop accepting, let every connection's thread close its socket, and wait up to ``timeout`` s for them."""
        if self._closed.is_set():
            return
        self._closed.set()
        try:  # wakes the accept thread, which then closes the listener itself
            Client(self._address, authkey=self.authkey).close()
        except OSError:  # pragma: no cover - the listener is already gone
            pass
        deadline = time.monotonic() + timeout
        for thread in [self._thread, *self._threads]:
            thread.join(max(0.0, deadline - time.monotonic()))


class ControllerClient:
    """The reader's side: one lazily opened connection, a reply timeout, and a back-off after failure.

    :param address: ``(host, port)`` of the server.
    :param authkey: the shared secret.
    :param timeout: seconds to wait for a reply before giving up on this call.
    :param retry_after: seconds to wait after a failure before trying to reconnect.
    """

    def __init__(
        self, address: tuple[str, int], authkey: bytes, *, timeout: float = 10.0, retry_after: float = 5.0
    ) -> None:
        self.address = address
        self.authkey = authkey
        self.timeout = timeout
        self.retry_after = retry_after
        self._conn: Connection | None = None
        self._down_until = 0.0

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` and return the reply.

        :raises ControllerUnavailable: when the driver cannot be reached or does not answer in time.
        """
        if time.monotonic() < self._down_until:
            raise ControllerUnavailable("the driver's Controller did not answer recently; not retrying yet")
        try:
            if self._conn is None:
                self._conn = Client(self.address, authkey=self.authkey)
            self._conn.send(request)
            if not self._conn.poll(self.timeout):
                raise TimeoutError(f"no reply within {self.timeout:g} s")
            reply: dict[str, Any] = self._conn.recv()
            return reply
        except Exception as exc:
            self.close()
            self._down_until = time.monotonic() + self.retry_after
            raise ControllerUnavailable(f"pacer Controller at {self.address[0]}:{self.address[1]}: {exc}") from exc

    def close(self) -> None:
        """Drop the connection (the next call reconnects)."""
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:  # pragma: no cover
                pass
            self._conn = None
