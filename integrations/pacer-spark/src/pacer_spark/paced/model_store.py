"""A ``format("pacer")`` query's fitted service-time model, kept with its checkpoint.

A restart with a backlog needs to know how much fits a deadline before its first batch: without a model the first
batches are probes (``PROBE_ROWS``). The model (:meth:`pacer.ServiceTimeModel.state`) is written beside Spark's
logs, ``<checkpoint>/pacer/service-model.json`` (Spark ignores folders it does not know there), atomically and at
most every :data:`SAVE_EVERY_S` seconds, and read back when a run of the query starts. A file that cannot be read,
or that another pacer wrote in another form, is ignored with a warning: the query then starts with probes.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from pacer_spark.checkpoint import local_checkpoint

log = logging.getLogger("pacer_spark.paced.model_store")

#: Where the model lives inside the query's checkpoint.
MODEL_IN_CHECKPOINT = ("pacer", "service-model.json")
#: Seconds between two saves of one query's model (a batch completes every few hundred ms at most).
SAVE_EVERY_S = 5.0


def model_path(source_checkpoint: str | None) -> Path | None:
    """The model's file for a source whose checkpoint folder is ``<checkpoint>/sources/<i>``; None when the
    checkpoint is not on this machine (``hdfs://``, ``s3a://``) or unknown."""
    if not source_checkpoint:
        return None
    folder = local_checkpoint(source_checkpoint)
    if folder is None or folder.parent.name != "sources":
        return None
    return folder.parent.parent.joinpath(*MODEL_IN_CHECKPOINT)


def load(path: Path) -> dict[str, Any] | None:
    """The saved model, None when there is none; a file that cannot be read is ignored, with a warning."""
    try:
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
    return state


def save(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically (a crash leaves the previous model or the new one, never half)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only checkpoint: the next restart probes, nothing else changes
        log.debug("pacer: cannot save the service-time model to %s: %s", path, exc)
