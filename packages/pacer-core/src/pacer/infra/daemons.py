"""What the commands that start local daemons (``pacer kafka up``, ``pacer cluster up``) share: a free port on
loopback and whether a process they started is still alive."""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

#: The address every daemon pacer starts listens on.
LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (reaping it when it is our own exited child)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


__all__ = ["LOOPBACK", "free_port", "process_alive"]
