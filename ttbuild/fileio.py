"""Atomic file writes shared by the build and the cache (a temp file, or a hard link to a file with the same bytes, in the target's directory, then os.replace) and file digests."""

from __future__ import annotations

import os
import uuid

# Temp files start with this; a killed build or cache writer leaves only such names behind,
# which the build lock's sweep and the cache's prune remove.
TMP_PREFIX = ".tmp-"


def _temp_beside(path: str | os.PathLike) -> tuple[str, str, str]:
    """(path as a string, its folder, a unique temp name in that folder): same file system, so
    renaming the temp file over `path` is atomic."""
    path = os.fspath(path)
    parent, name = os.path.split(path)
    return path, parent, os.path.join(parent, f"{TMP_PREFIX}{name}.{os.getpid()}-{uuid.uuid4().hex}")


def _in_folder(parent: str, make):
    """`make()`, creating `parent` first when it fails for want of it: a build writes thousands
    of files into folders that mostly exist, so the folder is asked for only when missing."""
    try:
        return make()
    except FileNotFoundError:
        os.makedirs(parent or ".", exist_ok=True)
        return make()


def replace_file(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` so readers see the old file or the new one, never a torn one.

    The temp file is uniquely named in the same directory (same filesystem, so `os.replace` is
    atomic) and created 0o666 minus the umask, like any other output, so artifacts and shared
    cache directories stay readable by the other users of a machine. Raises OSError; the temp
    file is removed on any failure.
    """
    path, parent, tmp = _temp_beside(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    fd = _in_folder(parent, lambda: os.open(tmp, flags, 0o666))
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


def link_file(source: str | os.PathLike, path: str | os.PathLike, data: bytes) -> bool:
    """Make `path` a hard link to `source` when `source` holds exactly `data`; False (nothing
    changed) when it does not, or cannot be linked (missing, another file system, no hard links,
    too many links, not ours to link). Atomic like `replace_file`: the link is made under a temp
    name in the target's directory, read back and compared with `data`, then renamed over `path`,
    so `path` only ever holds `data`. A new name costs no new inode: on file systems where
    creating a file is slow (ext4 without a journal checks every free inode it considers against
    recent deletions) that is a tenth of `replace_file`'s cost. The two names share one file
    from then on, so both must be the caller's own and only ever replaced, never written in
    place (the build links lib/ images to its stage outputs, never to the cache's blobs, whose
    damage must not reach artifacts). Raises nothing."""
    path, parent, tmp = _temp_beside(path)
    try:
        _in_folder(parent, lambda: os.link(source, tmp))
    except OSError:
        return False
    try:
        with open(tmp, "rb") as fh:
            if fh.read(len(data) + 1) == data:
                os.replace(tmp, path)
                return True
    except OSError:
        pass
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return False


def atomic_write(path: str | os.PathLike, data: bytes, same_as: str | os.PathLike | None = None) -> bool:
    """Write `data` to `path` so readers see the old file or the new one, never a torn one.

    Through `replace_file` (temp file in the same directory + os.replace), or, where `same_as`
    names a file holding exactly `data` (the stage output a lib/ image copies), through
    `link_file`: a hard link to it, checked byte for byte. If `path` already
    holds exactly `data`, the file is left alone (keeping its mtime), so an unchanged rebuild
    output costs the next check no hashing. Returns True when the file was (re)written. Raises
    OSError when it cannot be written.
    """
    try:
        st = os.stat(path)
    except OSError:
        pass
    else:
        if st.st_size == len(data):
            try:
                with open(path, "rb") as fh:
                    if fh.read() == data:
                        return False
            except OSError:
                pass
    if same_as is not None and link_file(same_as, path, data):
        return True
    replace_file(path, data)
    return True
