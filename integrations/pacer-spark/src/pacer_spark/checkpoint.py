"""A query checkpoint as pacer sees it before Spark starts on it: where it is on this machine, and what a run
stopped while it logged its first batch left behind.

Spark logs a batch's offsets by writing ``offsets/.<n>.<uuid>.tmp`` and renaming it to ``offsets/<n>``. On a new
checkpoint it logs batch 0 as the first trigger ends even when no source has data: with no batch logged yet, any
offset a source returns counts as new (``MicroBatchExecution.isNewDataAvailable``), and a Python data source cannot
return "no offset". So a ``pacer-gen``/``pacer-files`` query whose Controller holds its whole backlog still writes
``offsets/0`` (an empty batch) right after its first ``latestOffset``. ``StreamingQuery.stop()`` interrupts the
query's thread; caught inside that write, the temp file (and its ``.crc``) stays behind. Spark 4.1+ then refuses
the checkpoint for good: with no batch in ``offsets/`` it requires ``offsets/`` and ``commits/`` to be empty
(``spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart``) and fails with
``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``: "...offsets should be empty on batch 0".
:func:`clear_interrupted_first_batch` removes exactly those files (no batch was logged, so nothing is lost).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection
from pathlib import Path

log = logging.getLogger("pacer_spark.checkpoint")

#: Spark's temp file for batch file ``<n>`` of a metadata log (``CheckpointFileManager.createAtomic``), and the
#: checksum Hadoop's local file system writes beside it.
_TEMP = re.compile(r"\.\d+\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.tmp")
_LOGS = ("offsets", "commits")


def local_checkpoint(checkpoint: str) -> Path | None:
    """The checkpoint's directory on this machine (``file:`` URIs and plain paths, resolved as Spark resolves a
    relative one: against the working directory); None for a remote one (``hdfs://``, ``s3a://``...)."""
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[len("file:"):]
        if checkpoint.startswith("//"):
            checkpoint = checkpoint[2:]
    elif "://" in checkpoint:
        return None
    return Path(checkpoint).expanduser().resolve()


def is_interrupted_write(name: str) -> bool:
    """Whether ``name`` is a temp file of Spark's atomic batch-file write (or its ``.crc``), never a batch."""
    if name.startswith("..") and name.endswith(".crc"):
        name = name[1 : -len(".crc")]
    return _TEMP.fullmatch(name) is not None


def _query_id(root: Path) -> str | None:
    try:
        return str(json.loads((root / "metadata").read_text().splitlines()[0])["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None


def clear_interrupted_first_batch(checkpoint: str, active: Collection[str] = ()) -> list[Path]:
    """Remove what a run stopped while it logged its first batch left in ``offsets/`` and ``commits/`` (Spark's
    temp files, see the module's docstring), so Spark can start on the checkpoint; the files removed (logged).

    Nothing is touched when ``offsets/`` logs a batch (Spark resumes from it and never asks for empty folders), when
    either folder holds anything else (not pacer's to judge: Spark names it), for a remote checkpoint, or while a
    query of ``active`` (Spark query ids, as ``str``) runs on this checkpoint (its write may be in flight).
    """
    root = local_checkpoint(checkpoint)
    if root is None or not (root / "offsets").is_dir():
        return []
    names = {folder: [p.name for p in (root / folder).iterdir()] if (root / folder).is_dir() else []
             for folder in _LOGS}
    if any(not is_interrupted_write(name) for found in names.values() for name in found):
        return []  # a logged batch (offsets/0...), or something pacer does not know
    leftovers = [root / folder / name for folder, found in names.items() for name in found]
    if not leftovers or _query_id(root) in set(active):
        return []
    for path in leftovers:
        path.unlink(missing_ok=True)
    log.warning("checkpoint %s: removed %s, left by a run stopped while it logged its first batch (Spark would refuse "
                "to start on it: STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY); no batch was logged, nothing is lost",
                root, ", ".join(str(p.relative_to(root)) for p in leftovers))
    return leftovers
