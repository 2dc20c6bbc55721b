"""pacer.infra.trusted: whether a cached file is safe to load as code (no link, this user's or root's, owner-writable only)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pacer.infra.trusted import make_dirs, untrusted, untrusted_chain


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """``root/a/b/file.jar``, every level as pacer leaves it (folders 0o755, the file 0o644)."""
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    for folder in (root, root / "a", root / "a" / "b"):
        folder.chmod(0o755)
    file = root / "a" / "b" / "file.jar"
    file.write_bytes(b"code")
    file.chmod(0o644)
    return root, file


def test_a_private_file_and_folder_pass(tmp_path: Path) -> None:
    root, file = _tree(tmp_path)
    assert untrusted(file) is None and untrusted(root) is None
    assert untrusted_chain(root, file) is None and untrusted_chain(root, root) is None


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o620])
def test_a_file_group_or_others_can_write_fails(tmp_path: Path, mode: int) -> None:
    _, file = _tree(tmp_path)
    file.chmod(mode)
    assert untrusted(file) == f"{file} is writable by group or others (mode {mode:o})"


def test_a_symlink_fails_even_to_a_private_file(tmp_path: Path) -> None:
    _, file = _tree(tmp_path)
    link = tmp_path / "link.jar"
    link.symlink_to(file)
    assert untrusted(link) == f"{link} is a symbolic link"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user (chown) needs root")
def test_a_file_another_user_owns_fails(tmp_path: Path) -> None:
    _, file = _tree(tmp_path)
    os.chown(file, 65534, 65534)
    assert untrusted(file) == f"{file} belongs to another user (uid 65534)"


@pytest.mark.parametrize("level", ["root", "a", "a/b"])
def test_the_chain_names_the_first_folder_that_fails(tmp_path: Path, level: str) -> None:
    """A folder others can write lets them swap the file under it: the file alone passing is not enough."""
    root, file = _tree(tmp_path)
    loose = root if level == "root" else root / level
    loose.chmod(0o1777)  # like /tmp
    assert untrusted(file) is None
    assert untrusted_chain(root, file) == f"{loose} is writable by group or others (mode 777)"


def test_the_chain_refuses_a_folder_link_on_the_way(tmp_path: Path) -> None:
    root, file = _tree(tmp_path)
    (root / "a").rename(tmp_path / "real-a")
    (root / "a").symlink_to(tmp_path / "real-a")
    assert file.is_file() and untrusted(file) is None
    assert untrusted_chain(root, file) == f"{root / 'a'} is a symbolic link"


def test_the_chain_judges_only_paths_below_the_root(tmp_path: Path) -> None:
    root, _ = _tree(tmp_path)
    with pytest.raises(ValueError):
        untrusted_chain(root / "a" / "b", tmp_path / "elsewhere.jar")
    with pytest.raises(ValueError):
        untrusted_chain(root, root / ".." / "root" / "a" / "b" / "file.jar")
    with pytest.raises(FileNotFoundError):
        untrusted_chain(root, root / "a" / "missing.jar")


def test_make_dirs_creates_folders_that_pass_under_umask_002(tmp_path: Path, umask_002: None) -> None:
    """``Path.mkdir(parents=True)`` would make the parents 0o775 under umask 002 (and they would fail)."""
    existing = tmp_path / "shared"
    existing.mkdir(mode=0o775)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o775
    make_dirs(existing / "x" / "y" / "z")
    for folder in (existing / "x", existing / "x" / "y", existing / "x" / "y" / "z"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    assert untrusted_chain(existing / "x", existing / "x" / "y" / "z") is None
    assert stat.S_IMODE(existing.stat().st_mode) == 0o775  # not made by make_dirs: left to be judged
    make_dirs(existing / "x" / "y" / "z")  # there already: nothing to do
