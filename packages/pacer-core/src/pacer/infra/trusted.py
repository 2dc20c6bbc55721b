"""Whether a cached file is safe to load as code: no link, this user's (or root's), writable by its owner alone.

pacer caches files that end up on a JVM's classpath, code that runs as the user: the jars of
:mod:`pacer.infra.jars`' Maven cache and pacer-spark's ``format("pacer")`` jar. A file another local
user wrote, or could still replace, must not be loaded: one in a cache under a shared folder (a
``$PACER_MAVEN_CACHE`` under ``/tmp``), one left writable by group or others, or a symbolic link
planted to point elsewhere. :func:`untrusted` says why one path fails (None: it passes);
:func:`untrusted_chain` checks the cache's root, every folder below it on the way, and the file
(another user who can write a folder can swap what is in it). :func:`make_dirs` creates cache
folders that pass, whatever the umask.

Folders above a cache's root are not judged (``/tmp`` itself is writable by all).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The mode of a cache folder pacer creates (the umask may take bits away, never add group or other write).
FOLDER_MODE = 0o755
#: The mode pacer gives a cached file it moves into place.
FILE_MODE = 0o644


def untrusted(path: Path) -> str | None:
    """Why ``path`` is not safe to load as code (None when it is): it must be no symbolic link, owned by this
    user or root, and writable by its owner alone.

    :raises OSError: ``path`` cannot be examined (``lstat``), e.g. it does not exist.
    """
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} is writable by group or others (mode {st.st_mode & 0o777:o})"
    return None


def untrusted_chain(root: Path, path: Path) -> str | None:
    """Why ``path`` is not safe to load as code, judged from the cache's ``root`` down (None when it is):
    ``root``, each folder between it and ``path``, and ``path`` itself pass :func:`untrusted`; the first
    that does not is named.

    :raises ValueError: ``path`` is not ``root`` or below it (compared as written, not resolved).
    :raises OSError: one of them cannot be examined, e.g. it does not exist.
    """
    relative = path.relative_to(root)
    if ".." in relative.parts:
        raise ValueError(f"{path} is not below {root}")
    current = root
    problem = untrusted(current)
    for part in relative.parts:
        if problem is not None:
            break
        current = current / part
        problem = untrusted(current)
    return problem


def make_dirs(folder: Path) -> None:
    """``mkdir -p folder``, each level it creates made :data:`FOLDER_MODE` and stripped of any group or other
    write (``Path.mkdir(parents=True)`` gives the parents it creates ``0o777`` less the umask: ``0o775`` under
    umask ``002``, which :func:`untrusted` refuses). Folders already there are left as they are, for
    :func:`untrusted_chain` to judge.
    """
    missing = []
    current = folder
    while not os.path.lexists(current) and current.parent != current:
        missing.append(current)
        current = current.parent
    for level in reversed(missing):
        try:
            level.mkdir(mode=FOLDER_MODE)
        except FileExistsError:
            continue  # made meanwhile, not by this call: judged, not changed
        mode = stat.S_IMODE(level.lstat().st_mode)
        if mode & 0o022:  # a default ACL can add what the umask does not take away
            level.chmod(mode & ~0o022)
