"""A cache in a directory (`ac/<key>`, `cas/<sha[:2]>/<sha>`): the per-user local cache, or a shared
mount (NFS) for a CI fleet; every write is atomic (temp file + os.replace), safe across processes.

Concurrency: writers never modify a file in place. Each blob and entry is written to a fresh
temp file in its final directory and renamed over the target, so a reader sees either no file or
a whole one, and two processes putting the same key leave one of two identical files. Blobs go
in before the AC entry that names them. `prune` only removes an unnamed blob once it is older
than `grace` seconds, so it does not race a `put` that has written its blobs but not its entry.
An entry's mtime is its last use (refreshed on each hit), which is what LRU pruning reads.
"""

from __future__ import annotations

import os
from pathlib import Path

from ttbuild.cache.base import BlobRef
from ttbuild.cache.entry import EntryCache, is_temp
from ttbuild.cache.keys import is_key
from ttbuild.cache.store import BlobStore, Listed, StoreError
from ttbuild.fileio import replace_file


def write_atomic(path: Path, data: bytes) -> None:
    """`ttbuild.fileio.replace_file`: temp file + os.replace, 0o666 minus the umask so a shared
    directory stays usable by the other members of its group. Raises OSError."""
    replace_file(path, data)


def _read_bounded(path: str | Path, limit: int) -> bytes:
    # Read at most limit + 1 bytes: enough to tell "too long" from "right size" without
    # slurping a runaway file.
    with open(path, "rb") as f:
        return f.read(limit + 1)


def _unlink(path: str | Path) -> bool:
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


class DirStore(BlobStore):
    """The AC and CAS tables as files under `root`. `create=False` (shared tiers) never creates
    `root`: a missing root is an unmounted share, so writes are refused."""

    scannable = True
    drops_dangling = True  # a concurrent prune removed the blob: the entry is dead

    def __init__(self, root: str | os.PathLike, *, create: bool = True):
        self.root = Path(root).expanduser()
        self.create = create
        self.name = f"dir:{self.root}"
        # `read_ac` joins strings: it runs once per stage of a build, and pathlib's joins were a
        # third of its time in a profile of a fresh checkout.
        self._ac = os.path.join(str(self.root), "ac")
        self._cas = os.path.join(str(self.root), "cas")

    def ac_path(self, key: str) -> Path:
        """`<root>/ac/<key>`."""
        return self.root / "ac" / key

    def cas_path(self, sha: str) -> Path:
        """`<root>/cas/<sha[:2]>/<sha>`."""
        return self.root / "cas" / sha[:2] / sha

    def _read(self, path: str, limit: int) -> bytes | None:
        try:
            return _read_bounded(path, limit)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc}") from None

    def read_ac(self, key: str, limit: int) -> bytes | None:
        """The entry file's bytes (at most `limit` + 1), or None when absent; StoreError when unreadable."""
        return self._read(os.path.join(self._ac, key), limit)

    def read_cas(self, ref: BlobRef) -> bytes | None:
        """The blob file's bytes (at most `ref.size` + 1), or None when absent; StoreError when unreadable."""
        return self._read(os.path.join(self._cas, ref.sha256[:2], ref.sha256), ref.size)

    def has_cas(self, ref: BlobRef) -> bool:
        """True when the blob file exists with `ref`'s size."""
        try:
            return self.cas_path(ref.sha256).stat().st_size == ref.size
        except OSError:
            return False

    def check_writable(self) -> None:
        """StoreError when `root` is missing and may not be created (an unmounted share)."""
        if not self.create and not self.root.is_dir():
            raise StoreError(f"cannot write (shared cache directory {self.root} does not exist (not "
                             "mounted?)); builds go on without storing")

    def _write(self, path: Path, data: bytes) -> None:
        try:
            write_atomic(path, data)
        except OSError as exc:
            raise StoreError(f"cannot write ({exc}); builds go on without storing") from None

    def write_cas(self, sha: str, data: bytes) -> None:
        """Write a blob atomically (temp file + rename); StoreError when it cannot."""
        self._write(self.cas_path(sha), data)

    def write_ac(self, key: str, data: bytes) -> None:
        """Write an entry atomically (temp file + rename); StoreError when it cannot."""
        self._write(self.ac_path(key), data)

    def delete_ac(self, key: str) -> bool:
        """Unlink an entry file; False when it was not there or cannot go."""
        try:
            return _unlink(self.ac_path(key))
        except OSError:
            return False

    def delete_cas(self, sha: str) -> bool:
        """Unlink a blob file; False when it was not there or cannot go."""
        try:
            return _unlink(self.cas_path(sha))
        except OSError:
            return False

    def touch_ac(self, key: str) -> None:
        """Set the entry file's mtime to now: its last use, which LRU pruning reads."""
        try:
            os.utime(os.path.join(self._ac, key))
        except OSError:
            pass

    def _listed(self, entry: os.DirEntry, name: str | None) -> Listed | None:
        try:
            st = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            return None
        return Listed(name, st.st_size, st.st_mtime, is_temp(entry.name), Path(entry.path))

    def _scan(self, folder, name_of):
        """Listed per file of `folder`, named `name_of(entry)` (None: a temp file or a stray);
        nothing when the folder does not exist (a concurrent prune removed it) or is not one."""
        try:
            it = os.scandir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return
        with it:
            for e in it:
                item = self._listed(e, name_of(e))
                if item is not None:
                    yield item

    def scan_ac(self):
        """Listed per file of ac/ (temp files and strays: name None); nothing when it does not exist."""
        yield from self._scan(self.root / "ac", lambda e: e.name if is_key(e.name) else None)

    def scan_cas(self):
        """Listed per file of cas/<xx>/ (a name that is not its folder's sha256: None)."""
        try:
            tops = os.scandir(self.root / "cas")
        except (FileNotFoundError, NotADirectoryError):
            return
        with tops:
            for top in tops:
                if top.is_dir(follow_symlinks=False):
                    yield from self._scan(top.path, lambda e, xx=top.name: e.name if is_key(e.name) and e.name[:2] == xx
                                          else None)

    def read_listed(self, item: Listed) -> bytes:
        """The whole file. Raises OSError."""
        return item.handle.read_bytes()

    def remove(self, item: Listed) -> bool:
        """Unlink the file; False when a concurrent prune got there first."""
        return _unlink(item.handle)


class DirCache(EntryCache):
    """The directory backend, for `~/.cache/ttbuild` and shared mounts alike: EntryCache over a
    DirStore. `readonly=True` never writes (not even the last-use time). `create=False` (shared
    tiers) never creates `root`: a missing root means an unmounted share, so puts are refused
    with one warning instead of filling the empty mount point on the local disk. `grace`:
    seconds an unnamed blob or temp file is spared by `prune`. `fetch_budget`: bytes of blobs
    it may read in all (a remote tier's; None: no limit)."""

    def __init__(self, root: str | os.PathLike, *, readonly: bool = False, grace: float = 3600.0,
                 create: bool = True, fetch_budget: int | None = None):
        super().__init__(DirStore(root, create=create), readonly=readonly, grace=grace,
                         fetch_budget=fetch_budget)
        self.root = self.store.root
        self.create = create

    def ac_path(self, key: str) -> Path:
        """Where the AC entry of `key` lives."""
        return self.store.ac_path(key)

    def cas_path(self, sha: str) -> Path:
        """Where the blob of sha256 `sha` lives."""
        return self.store.cas_path(sha)

    def has_blob(self, ref) -> bool:
        """True when the blob named by `ref` (a BlobRef) is present with the right size."""
        return self.store.has_cas(ref)
