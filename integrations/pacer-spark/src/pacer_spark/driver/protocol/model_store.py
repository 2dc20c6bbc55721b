"""A ``format("pacer")`` query's fitted service-time model, kept with its checkpoint.

A restart with a backlog needs to know how much fits a deadline before its first batch: without a model the first
batches are probes (``PROBE_ROWS``). The model (:meth:`pacer.ServiceTimeModel.state`) is written beside Spark's
logs, ``<checkpoint>/pacer/service-model.json`` (Spark ignores folders it does not know there), atomically and at
most every :data:`SAVE_EVERY_S` seconds, and read back when a run of the query starts. A file that cannot be read,
that another pacer wrote in another form, or whose values are out of range (:func:`out_of_range`: a model that
restored would size the first batches from nonsense, or whose restore would fail) is ignored with one warning: the
query then starts with probes. Only a checkpoint on this machine keeps a model: Spark names it by a ``file:`` URI
(percent-encoded) or a plain path; on another filesystem (``hdfs://``, ``s3a://``) the query runs without one, said
once per checkpoint.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from pacer.service_time import ServiceTimeModel
from pacer_spark.checkpoint import local_checkpoint

log = logging.getLogger("pacer_spark.driver.protocol.model_store")

#: Where the model lives inside the query's checkpoint.
MODEL_IN_CHECKPOINT = ("pacer", "service-model.json")
#: Seconds between two saves of one query's model (a batch completes every few hundred ms at most).
SAVE_EVERY_S = 5.0
#: The largest model file read (bytes): pacer writes a few kilobytes (two windows of a hundred errors).
MAX_MODEL_BYTES = 1 << 20
#: The most batches a saved model may count (2**53: beyond, a float no longer counts one by one).
MAX_BATCHES = 1 << 53
#: The largest batch size per task slot a saved model may hold, megabytes (a petabyte per slot: no batch is).
MAX_MB_PER_SLOT = 1e9
#: The most prediction errors a saved model may list (pacer keeps a window of 100 by default).
MAX_ERRORS = 10_000

#: The checkpoints on another filesystem already warned of (the first model lookup of each logs, not every run's).
_remote_warned: set[str] = set()
_remote_lock = threading.Lock()


def model_path(source_checkpoint: str | None) -> Path | None:
    """The model's file for a source whose checkpoint folder is ``<checkpoint>/sources/<i>`` (a plain path or a
    ``file:`` URI, percent-decoded); None when the checkpoint is unknown, laid out otherwise, or not on this machine
    (``hdfs://``, ``s3a://``: warned once per checkpoint, the query then starts with probes after every restart)."""
    if not source_checkpoint:
        return None
    folder = _local_folder(source_checkpoint)
    if folder is None or folder.parent.name != "sources":
        return None
    return folder.parent.parent.joinpath(*MODEL_IN_CHECKPOINT)


def _local_folder(checkpoint: str) -> Path | None:
    """``checkpoint``'s folder on this machine: a ``file:`` URI decoded (Spark percent-encodes a space, ``%`` and,
    in some versions, non-ASCII characters), a plain path as :func:`~pacer_spark.checkpoint.local_checkpoint` takes
    it; None, with a warning once per checkpoint, for one on another filesystem or host."""
    parts = urlsplit(checkpoint)
    if not parts.scheme or len(parts.scheme) == 1:  # a plain path (``C:`` is a drive letter, not a scheme)
        return local_checkpoint(checkpoint)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        # the bytes of a name that is not UTF-8 come back as they were (os.fsencode's surrogateescape)
        return Path(unquote(parts.path, errors="surrogateescape")).resolve()
    _warn_remote(checkpoint, parts.scheme)
    return None


def _warn_remote(checkpoint: str, scheme: str) -> None:
    """Say once per checkpoint (its sources and runs share it) that its model is not kept, why, and what follows."""
    root = re.sub(r"/sources/[^/]+/*$", "", checkpoint)
    with _remote_lock:
        if root in _remote_warned:
            return
        _remote_warned.add(root)
    log.warning("pacer: the checkpoint %s is not on this machine's filesystem (%s://), and pacer keeps a query's "
                "service-time model with a local checkpoint only: after a restart this query starts with probe "
                "batches", root, scheme)


def load(path: Path) -> dict[str, Any] | None:
    """The saved model, None when there is none; a file that cannot be read, or whose values are out of range
    (:func:`out_of_range`), is ignored with one warning."""
    try:
        size = path.stat().st_size
        if size > MAX_MODEL_BYTES:
            log.warning("pacer: the service-time model %s is %d bytes, more than any model pacer writes (%d at "
                        "most); it is ignored and the query starts with probe batches", path, size, MAX_MODEL_BYTES)
            return None
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("pacer: the service-time model %s cannot be read (%s); the query starts with probe batches",
                    path, exc)
        return None
    if not isinstance(state, dict):
        log.warning("pacer: %s holds no service-time model; the query starts with probe batches", path)
        return None
    problem = out_of_range(state)
    if problem is not None:
        log.warning("pacer: the service-time model %s is ignored: %s; the query starts with probe batches",
                    path, problem)
        return None
    return state


# The checks of :data:`FIELDS`: whether a value JSON gave is of the field's type and in its range.


def _number(value: object) -> float | None:
    """``value`` as a float when JSON made it a number (not a bool, not an int beyond floats), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _count(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_BATCHES


def _amount(value: object) -> bool:
    number = _number(value)
    return number is not None and math.isfinite(number) and number >= 0


def _size(value: object) -> bool:
    number = _number(value)
    return number is not None and 0 <= number <= MAX_MB_PER_SLOT


def _positive(value: object) -> bool:
    number = _number(value)
    return number is not None and math.isfinite(number) and number > 0


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _sums(value: object) -> bool:
    return isinstance(value, list) and len(value) == 5 and all(_amount(v) for v in value)


def _errors(value: object) -> bool:
    return isinstance(value, list) and len(value) <= MAX_ERRORS and all(_positive(v) for v in value)


#: The fields of a model of :attr:`ServiceTimeModel.STATE_VERSION` (:meth:`ServiceTimeModel.state`): each one's
#: check, whether the model must hold it, and the range it says.
FIELDS: dict[str, tuple[Callable[[object], bool], bool, str]] = {
    "seen": (_count, True, f"a whole number of batches from 0 to {MAX_BATCHES}"),
    "n": (_count, True, f"a whole number of batches from 0 to {MAX_BATCHES}"),
    "largest_mb_per_slot": (_size, True, f"megabytes per task slot from 0 to {MAX_MB_PER_SLOT:g}"),
    "ceiling_mb_per_slot": (_optional(_positive), True, "null or a finite number of megabytes per task slot > 0"),
    "sums": (_sums, True, "a list of 5 finite numbers >= 0"),
    "errors": (_errors, True, f"a list of at most {MAX_ERRORS} finite ratios > 0"),
    "proportional_errors": (_errors, True, f"a list of at most {MAX_ERRORS} finite ratios > 0"),
    "prior_batches": (_optional(_amount), False, "null or a finite number of batches >= 0"),
    "slots": (_optional(_positive), False, "null or a finite number of task slots > 0"),
}


def out_of_range(state: dict[str, Any]) -> str | None:
    """What makes ``state`` unfit to restore, naming the field (None: nothing): a value of the wrong type, not
    finite, negative, or beyond any batch (:data:`FIELDS`), or fewer batches seen than fitted. A model of another
    version is left to :meth:`ServiceTimeModel.restore`, which refuses it."""
    if state.get("version") != ServiceTimeModel.STATE_VERSION:
        return None
    for name, (check, required, expected) in FIELDS.items():
        if name not in state:
            if required:
                return f"it has no {name!r}"
            continue
        if not check(state[name]):
            shown = repr(state[name])
            return f"{name!r} is {shown if len(shown) <= 60 else shown[:57] + '...'}, not {expected}"
    if state["n"] > state["seen"]:
        return f"'n' is {state['n']}, more batches fitted than the {state['seen']} seen"
    return None


def save(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (a crash leaves the previous model or the new one, never half)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only checkpoint: the next restart probes, nothing else changes
        log.debug("pacer: cannot save the service-time model to %s: %s", path, exc)
