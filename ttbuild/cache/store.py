"""The byte stores under a cache: `BlobStore` reads, writes, deletes and scans the AC and CAS tables of one transport; `ttbuild.cache.entry.EntryCache` holds the entry protocol.

A store knows bytes and names only: an AC entry is the bytes under a 64-hex action key, a blob
the bytes under its sha256. It neither parses entries nor checks blobs; that is written once, in
EntryCache (HMAC, blob checks, dropping, counting, write order). A store reports what it could
not do by raising `StoreError` (a failure of this one request: the caller counts an error and
treats it as a miss) or `StoreDown` (the store is gone for the rest of the process: it already
said so once). The directory (`ttbuild.cache.local.DirStore`) and HTTP
(`ttbuild.cache.http.HttpStore`) transports implement it; a new backend (S3, GCS) is one more
subclass plus its URL scheme in `ttbuild.cache.config.remote_from_url`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Iterator

from ttbuild.cache.base import BlobRef, CacheError


class StoreError(Exception):
    """One request failed (an unreadable file, an HTTP status other than found / not found)."""


class StoreDown(StoreError):
    """The store is unreachable for the rest of this process (it warned once already)."""


@dataclass(frozen=True)
class Listed:
    """One file of a scan: its key or sha256 (None for a temp file or a stray), its size in bytes,
    its mtime (seconds since the epoch: an entry's last use), whether it is a writer's temp file,
    and the store's own handle for `read_listed` / `remove`."""

    name: str | None
    size: int
    mtime: float
    temp: bool
    handle: Any


class BlobStore(ABC):
    """AC and CAS tables of one transport. `name` is printable (no credentials). `scannable`:
    whether `scan_ac`/`scan_cas` work (a directory can list itself, an HTTP server cannot);
    `drops_dangling`: whether an entry naming a missing blob is deleted on sight (a directory:
    a concurrent prune left it; over HTTP the server owns eviction)."""

    name = "store"
    scannable = False
    drops_dangling = False
    down = False

    @abstractmethod
    def read_ac(self, key: str, limit: int) -> bytes | None:
        """The entry bytes under `key` (at most `limit` + 1 of them), or None when absent."""

    @abstractmethod
    def read_cas(self, ref: BlobRef) -> bytes | None:
        """The blob `ref` names (at most `ref.size` + 1 bytes), or None when absent."""

    @abstractmethod
    def has_cas(self, ref: BlobRef) -> bool:
        """True when a blob of `ref`'s name and size is present (a put then skips it)."""

    @abstractmethod
    def write_cas(self, sha: str, data: bytes) -> None:
        """Store a blob under its sha256; whole or not at all."""

    @abstractmethod
    def write_ac(self, key: str, data: bytes) -> None:
        """Store an entry under its action key; whole or not at all."""

    @abstractmethod
    def delete_ac(self, key: str) -> bool:
        """Delete an entry (best effort); True when one was deleted."""

    @abstractmethod
    def delete_cas(self, sha: str) -> bool:
        """Delete a blob (best effort); True when one was deleted."""

    def check_writable(self) -> None:  # noqa: B027  (optional hook: most stores can always try)
        """Raise StoreError when writes cannot go anywhere (an unmounted share)."""

    def touch_ac(self, key: str) -> None:  # noqa: B027  (optional hook: not every store keeps use times)
        """Record a use of the entry `key` (the LRU time prune reads), where the store keeps one."""

    def mark_down(self, why: str) -> None:
        """Stop using this store for the rest of the process (the caller warned)."""
        self.down = True

    def scan_ac(self) -> Iterator[Listed]:
        """Every file of the AC table (names that are not keys: name None)."""
        raise CacheError(f"{self.name} cannot be listed from a client")

    def scan_cas(self) -> Iterator[Listed]:
        """Every file of the CAS table (names that are not sha256 in their folder: name None)."""
        raise CacheError(f"{self.name} cannot be listed from a client")

    def read_listed(self, item: Listed) -> bytes:
        """The whole bytes of a scanned file. Raises OSError."""
        raise CacheError(f"{self.name} cannot be listed from a client")

    def remove(self, item: Listed) -> bool:
        """Delete a scanned file; False when it was already gone."""
        raise CacheError(f"{self.name} cannot be listed from a client")

    def close(self) -> None:  # noqa: B027  (optional hook: most stores hold nothing to release)
        """Release connections; the store stays usable."""
