"""Atomic file writes shared by the build and the cache (a temp file in the target's directory, then os.replace) and file digests."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

# Temp files start with this; a killed build or cache writer leaves only such names behind,
# which the build lock's sweep and the cache's prune remove.
TMP_PREFIX = ".tmp-"


def replace_file(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so readers see the old file or the new one, never a torn one.

    The temp file is uniquely named in the same directory (same filesystem, so `os.replace` is
    atomic) and created 0o666 minus the umask, like any other output, so artifacts and shared
    cache directories stay readable by the other users of a machine. Raises OSError; the temp
    file is removed on any failure.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}-{uuid.uuid4().hex}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
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


def file_digest(path: str | os.PathLike) -> str:
    """xxh3_64 of a file's bytes, 16 hex digits; OSError if it cannot be read."""
    import xxhash  # a dependency of ttbuild; imported here so `replace_file` users need only the stdlib

    hasher = xxhash.xxh3_64()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            hasher.update(chunk)
    return hasher.hexdigest()


def atomic_write(path: str | os.PathLike, data: bytes) -> bool:
    """Write `data` to `path` so readers see the old file or the new one, never a torn one.

    Through `replace_file` (temp file in the same directory + os.replace). If `path` already
    holds exactly `data`, the file is left alone (keeping its mtime), so an unchanged rebuild
    output costs the next check no hashing. Returns True when the file was (re)written.
    """
    path = Path(path)
    try:
        if path.stat().st_size == len(data) and path.read_bytes() == data:
            return False
    except OSError:
        pass
    replace_file(path, data)
    return True
