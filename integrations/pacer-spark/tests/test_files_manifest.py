"""The ``pacer-files`` manifest keeps Spark's file-source contract through crashes (no Spark needed).

A line is written whole, with its checksum; a last line torn by a crash was never acknowledged and is cut off (its
file is listed again under the same offset); any other damage refuses the load, naming the file and what to do;
a checkpoint whose offsets reach past the manifest is refused; a file gone before its batch read it is skipped and
recorded under ``malformed=quarantine`` and fails the batch under ``fail``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from pyspark.sql.types import IntegerType, StructField, StructType

from pacer_spark.manifest import Manifest, ManifestDamaged
from pacer_spark.sources.file_rows import RowParser


def _folder(tmp_path: Path, count: int) -> Path:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for i in range(count):
        path = inbox / f"part-{i}.csv"
        path.write_text(f"{i},a\n{i},b\n")
        os.utime(path, (1000.0 + i, 1000.0 + i))
    return inbox


def test_lines_are_whole_and_checksummed_and_read_back_the_same(tmp_path: Path) -> None:
    inbox = _folder(tmp_path, 3)
    manifest = Manifest(tmp_path / "m.jsonl")
    assert [e.name for e in manifest.refresh(inbox, "csv", False, 2000.0)] == ["part-0.csv", "part-1.csv", "part-2.csv"]
    text = manifest.path.read_text()
    assert text.endswith("\n") and all("crc" in json.loads(line) for line in text.splitlines())
    again = Manifest(manifest.path)
    assert again.entries == manifest.entries and not again.refresh(inbox, "csv", False, 2000.0)


def test_a_torn_last_line_is_cut_off_and_its_file_gets_the_same_offset_again(tmp_path: Path) -> None:
    """A crash mid-append: before, the next append was glued onto the torn line, that line and every later one
    were skipped on load, and a file re-listed below the checkpoint's offset was never read."""
    inbox = _folder(tmp_path, 3)
    manifest = Manifest(tmp_path / "m.jsonl")
    manifest.refresh(inbox, "csv", False, 2000.0)
    whole = manifest.path.read_text()
    manifest.path.write_text(whole[: len(whole) - 25])  # the last line torn
    repaired = Manifest(manifest.path)
    assert [e.index for e in repaired.entries] == [0, 1]
    assert [(e.index, e.name) for e in repaired.refresh(inbox, "csv", False, 2000.0)] == [(2, "part-2.csv")]
    (inbox / "part-3.csv").write_text("3,a\n")
    repaired.refresh(inbox, "csv", False, 3000.0)
    assert [(e.index, e.name) for e in Manifest(manifest.path).entries][-2:] == [(2, "part-2.csv"), (3, "part-3.csv")]


@pytest.mark.parametrize("damage", ["torn-middle", "checksum", "gap"])
def test_damage_before_the_last_line_refuses_the_load_naming_what_to_do(tmp_path: Path, damage: str) -> None:
    inbox = _folder(tmp_path, 3)
    manifest = Manifest(tmp_path / "m.jsonl")
    manifest.refresh(inbox, "csv", False, 2000.0)
    lines = manifest.path.read_text().splitlines()
    if damage == "torn-middle":
        lines[1] = lines[1][:20]
    elif damage == "checksum":
        lines[1] = lines[1].replace('"rows": 2', '"rows": 3')
    else:
        del lines[1]
    manifest.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ManifestDamaged, match=r"is damaged: line 2 .*new checkpoint"):
        Manifest(manifest.path)


def test_a_checkpoint_past_the_manifest_is_refused(tmp_path: Path) -> None:
    manifest = Manifest(tmp_path / "lost.jsonl")
    manifest.check_covers(0)
    with pytest.raises(ManifestDamaged, match="read up to file offset 4, but its manifest .* names 0 files"):
        manifest.check_covers(4)


def test_a_file_gone_before_its_batch_is_skipped_and_recorded_or_fails_naming_it(tmp_path: Path) -> None:
    schema = StructType([StructField("id", IntegerType())])
    quarantine = tmp_path / "quarantine"
    RowParser(schema, "quarantine", str(quarantine)).missing(tmp_path / "part-7.csv", "offset 7")
    recorded = json.loads((quarantine / "part-7.csv.missing").read_text())
    assert recorded["file"] == "part-7.csv" and recorded["offset"] == "offset 7"
    with pytest.raises(FileNotFoundError, match="part-7.csv .* is gone before its batch read it.*malformed=quarantine"):
        RowParser(schema, "fail", None).missing(tmp_path / "part-7.csv", "offset 7")


def test_a_file_gone_between_listing_and_measuring_is_no_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pacer_spark.manifest as files_source

    inbox = _folder(tmp_path, 2)
    real = files_source.count_rows

    def vanishing(path: Path, fmt: str, header: bool) -> int:
        if path.name == "part-0.csv":
            path.unlink()
        return real(path, fmt, header)

    monkeypatch.setattr(files_source, "count_rows", vanishing)
    manifest = Manifest(tmp_path / "m.jsonl")
    assert [(e.index, e.name) for e in manifest.refresh(inbox, "csv", False, 2000.0)] == [(0, "part-1.csv")]
