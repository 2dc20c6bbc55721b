"""Spark confs through the JVM: a session's own (static ones included), and those of the session a streaming query
plans its batches in (``sparkSessionForStream``), where a batch's placement is enacted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def set_stream_confs(handle: Any, confs: Mapping[str, str]) -> None:
    """Set ``confs`` on the session the streaming query plans its batches in (``sparkSessionForStream``): the next
    batch it plans sees them."""
    session = handle._jsq.streamingQuery().sparkSessionForStream()
    for key, value in confs.items():
        session.conf().set(key, value)


def set_stream_confs_by_id(spark: Any, stream_id: str, confs: Mapping[str, str]) -> bool:
    """As :func:`set_stream_confs`, for the active streaming query ``stream_id`` of ``spark``'s session (its
    ``StreamingQueryManager``); False when no active query has that id there (nothing set)."""
    jquery = spark._jsparkSession.streams().get(stream_id)
    if jquery is None:
        return False
    session = jquery.streamingQuery().sparkSessionForStream()
    for key, value in confs.items():
        session.conf().set(key, value)
    return True


def session_conf(spark: Any, key: str) -> str | None:
    """The value of ``key`` in ``spark``'s session conf (static confs included), None when unset."""
    value = spark._jsparkSession.conf().getOption(key)
    return None if value.isEmpty() else str(value.get())


__all__ = ["session_conf", "set_stream_confs", "set_stream_confs_by_id"]
