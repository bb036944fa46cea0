"""Atomic writes (temp file in the same directory + os.replace) and doit's xxh3_64 file checker."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import xxhash
from doit.dependency import FileChangedChecker

TMP_PREFIX = ".tmp-"


def file_digest(path: str | os.PathLike) -> str:
    """xxh3_64 of a file's bytes, 16 hex digits; OSError if it cannot be read."""
    hasher = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def atomic_write(path: str | os.PathLike, data: bytes) -> bool:
    """Write `data` to `path` so readers see the old file or the new one, never a torn one.

    Writes a temp file in the same directory (same filesystem, so os.replace is atomic) and
    renames it over `path`. If `path` already holds exactly `data`, the file is left alone
    (keeping its mtime), so an unchanged rebuild output costs the next check no hashing.
    Returns True when the file was (re)written. The temp file is removed on any failure.
    """
    path = Path(path)
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX + path.name + ".", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return True


class XXHashChecker(FileChangedChecker):
    """doit `check_file_uptodate` checker comparing xxh3_64 digests of file contents.

    State saved per dependency: [mtime_ns, size, inode, digest]. When mtime, size and inode
    all match the saved state the file is taken as unchanged without reading it; otherwise
    its digest decides. So a parent stage that reruns and writes identical bytes does not
    rerun its children (early cutoff). The inode is part of the fast path because atomic
    writes always make a new inode: a replaced file is re-hashed even on filesystems with
    coarse mtimes.
    """

    def check_modified(self, file_path, file_stat, state):
        if not isinstance(state, (list, tuple)) or len(state) != 4:
            return True
        mtime_ns, size, inode, digest = state
        if file_stat.st_size != size:
            return True
        if file_stat.st_mtime_ns == mtime_ns and file_stat.st_ino == inode:
            return False
        return file_digest(file_path) != digest

    def get_state(self, dep, current_state):
        st = os.stat(dep)
        if (isinstance(current_state, (list, tuple)) and len(current_state) == 4
                and current_state[:3] in ([st.st_mtime_ns, st.st_size, st.st_ino],
                                          (st.st_mtime_ns, st.st_size, st.st_ino))):
            return None
        return [st.st_mtime_ns, st.st_size, st.st_ino, file_digest(dep)]
