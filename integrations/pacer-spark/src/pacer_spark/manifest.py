"""pacer-files' manifest: which file of a watched folder got which offset, and when it arrived.

Offsets are file indices in the order files were first listed (``{"index": n}``: files ``0 .. n-1`` are consumed),
recorded in a manifest inside the query's checkpoint (:func:`manifest_in_checkpoint`), so a restart on the same
checkpoint, from any driver, gives every file the same offset. The reader (:mod:`pacer_spark.sources.files_source`)
lists and appends; the driver reads it to describe a batch's datasets.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pacer_spark.checkpoint import local_checkpoint

FILES_FORMAT = "pacer-files"
#: Where a query's manifest lives inside its checkpoint directory (Spark ignores what it does not know there).
MANIFEST_IN_CHECKPOINT = ("pacer-files", "manifest.jsonl")
log = logging.getLogger("pacer_spark.manifest")


@dataclass(frozen=True)
class ManifestEntry:
    """One file of a watched directory: its offset, name, arrival (its mtime) and size."""

    index: int
    name: str
    arrival: float
    bytes: int
    rows: int

    def as_json(self) -> dict[str, Any]:
        """The manifest line."""
        return {"index": self.index, "name": self.name, "arrival": self.arrival, "bytes": self.bytes, "rows": self.rows}


def count_rows(path: Path, fmt: str, header: bool) -> int:
    """Rows in a data file (lines for CSV/JSON lines, metadata for Parquet)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    with path.open("rb") as fh:
        lines = sum(1 for line in fh if line.strip())
    return max(0, lines - (1 if header and fmt == "csv" else 0))


def manifest_in_checkpoint(checkpoint: str, legacy: Path | None = None) -> Path | None:
    """The manifest of a query checkpointed at ``checkpoint``: ``<checkpoint>/pacer-files/manifest.jsonl``, so it
    moves with the checkpoint. None for a checkpoint that is not a local path (``hdfs://``, ``s3a://``...).

    :param legacy: where an older pacer kept it (``<checkpoint_root>/<query>/pacer-manifest.jsonl``): copied into
        a checkpoint Spark has written offsets to but that has no manifest yet, so such a query keeps its offsets
        (a new checkpoint starts a new manifest).
    """
    root = local_checkpoint(checkpoint)
    if root is None:
        return None
    manifest = root.joinpath(*MANIFEST_IN_CHECKPOINT)
    if legacy is not None and legacy.is_file() and (root / "offsets").is_dir() and not manifest.exists():
        manifest.parent.mkdir(parents=True, exist_ok=True)
        tmp = manifest.with_name(f".{manifest.name}.tmp")
        shutil.copyfile(legacy, tmp)
        os.replace(tmp, manifest)
    return manifest


def check_outside(manifest: Path, directory: Path) -> None:
    """Refuse a manifest inside the watched folder: pacer never writes there (it would be read as data).

    :raises ValueError: naming both.
    """
    if manifest.resolve().is_relative_to(directory.resolve()):
        raise ValueError(f"pacer-files: its manifest {manifest} would be inside the watched folder {directory}; "
                         "keep the query's checkpoint (or option manifest) outside the folder it watches")


def ignored_name(name: str) -> bool:
    """Hidden, temporary and bookkeeping files (``_x``, ``.x``, ``*.tmp``, ``*.crc``) are not datasets."""
    return name.startswith(("_", ".")) or name.endswith((".tmp", ".crc", ".inprogress"))


class ManifestDamaged(ValueError):
    """A manifest line other than a torn last one cannot be read back: which file holds which offset is unknown."""


def _line(entry: ManifestEntry) -> str:
    """One manifest line: the entry and a CRC-32 of its canonical JSON, newline-terminated."""
    body = json.dumps(entry.as_json(), sort_keys=True)
    return json.dumps({**entry.as_json(), "crc": zlib.crc32(body.encode())}, sort_keys=True) + "\n"


def _entry(line: str) -> ManifestEntry:
    """The entry of a manifest line; ``ValueError`` for a line that is not one, or whose checksum differs (a
    line without ``crc`` is an older pacer's, taken as it is)."""
    raw = json.loads(line)
    crc = raw.pop("crc", None)
    entry = ManifestEntry(**raw)
    if crc is not None and crc != zlib.crc32(json.dumps(entry.as_json(), sort_keys=True).encode()):
        raise ValueError("its checksum does not match")
    return entry


class Manifest:
    """The durable record of which file got which offset and when it arrived (JSON lines, append-only).

    A restart reads it back, so offsets and arrival times stay stable across restarts. Each line is written
    whole (one write of a newline-terminated line with its CRC-32, flushed and fsynced before the offsets that
    name it are answered). On load, a last line without its newline was torn by a crash before any offset named
    it: it is cut off (the file is listed again at the next look, under the same offset). Any other line that
    cannot be read, a checksum that does not match, or offsets out of order refuse the load
    (:class:`ManifestDamaged`): skipping it would shift every later file to another offset.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[ManifestEntry] = []
        self._names: set[str] = set()
        if not path.exists():
            return
        text = path.read_text()
        if text and not text.endswith("\n"):  # a torn append: never acknowledged, so never in an offset
            whole = text[: text.rfind("\n") + 1]
            log.warning("pacer-files: the last line of the manifest %s was torn by a crash (%d bytes); it is cut "
                        "off and its file listed again", path, len(text) - len(whole))
            tmp = path.with_name(f".{path.name}.repair")
            tmp.write_text(whole)
            os.replace(tmp, path)
            text = whole
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = _entry(line)
            except (ValueError, TypeError) as exc:
                raise ManifestDamaged(self._damaged(number, f"line {number} cannot be read ({exc})")) from exc
            if entry.index != len(self.entries):
                raise ManifestDamaged(self._damaged(number, f"line {number} holds offset {entry.index} where "
                                                            f"{len(self.entries)} was due"))
            self.entries.append(entry)
            self._names.add(entry.name)

    def _damaged(self, number: int, what: str) -> str:
        return (f"pacer-files: the manifest {self.path} is damaged: {what}. It records which file holds which offset "
                "of the query's checkpoint; reading on would read some files twice or never. Restore it from a "
                "backup of the checkpoint, or start the query on a new checkpoint (every file in the folder is then "
                "read again)")

    def check_covers(self, index: int) -> None:
        """Refuse a checkpoint whose offsets reach past the files the manifest names (it was lost or replaced).

        :raises ManifestDamaged: naming both counts and what to do.
        """
        if index > len(self.entries):
            raise ManifestDamaged(f"pacer-files: the query's checkpoint has read up to file offset {index}, but its "
                                  f"manifest {self.path} names {len(self.entries)} files: the manifest was lost, cut "
                                  "or is not this checkpoint's (it lives in <checkpoint>/pacer-files/). Restore it "
                                  "with the checkpoint, or start the query on a new checkpoint")

    def refresh(self, directory: Path, fmt: str, header: bool, now: float) -> list[ManifestEntry]:
        """List ``directory``, give new files the next offsets (oldest mtime first) and persist them. A file that
        vanishes between the listing and its measuring is left out (it is no dataset)."""
        try:
            names = [e for e in os.scandir(directory) if e.is_file() and not ignored_name(e.name)]
        except FileNotFoundError:
            return []
        fresh = []
        for e in names:
            if e.name in self._names:
                continue
            try:
                st = e.stat()
            except FileNotFoundError:
                continue
            fresh.append((st.st_mtime, e.name, st.st_size))
        fresh.sort(key=lambda t: (t[0], t[1]))
        added = []
        for mtime, name, size in fresh:
            try:
                rows = count_rows(directory / name, fmt, header)
            except FileNotFoundError:
                continue
            entry = ManifestEntry(len(self.entries), name, min(mtime, now), size, rows)
            self.entries.append(entry)
            self._names.add(name)
            added.append(entry)
        if added:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a") as fh:
                fh.write("".join(_line(entry) for entry in added))  # whole lines, in one write
                fh.flush()
                os.fsync(fh.fileno())
        return added


__all__ = ["FILES_FORMAT", "MANIFEST_IN_CHECKPOINT", "Manifest", "ManifestDamaged", "ManifestEntry", "check_outside",
           "count_rows", "ignored_name", "manifest_in_checkpoint"]
