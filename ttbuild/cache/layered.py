"""Local-first caching over a remote tier (shared directory or HTTP), with write-back of remote hits;
and the no-op cache for `TTBUILD_CACHE=off`.

`readonly` is about the remote: an untrusted job (a pull request from a fork) reads the fleet's
cache but never writes it, while its own private local directory is still filled, which is
safe because nothing but that job reads it.
"""

from __future__ import annotations

from typing import Mapping

from ttbuild.cache.base import Cache, CacheStats, PruneReport, VerifyReport, check_key, log, warn
from ttbuild.cache.local import DirCache


class LayeredCache(Cache):
    """`get` tries `local`, then `remote` (a hit there is copied into `local`); a local hit is
    copied to `remote` unless `readonly` (once per key and process: what one machine built
    reaches the fleet even when it was cached before the remote was configured); `put` writes
    `local`, and `remote` unless `readonly`. A remote that raises is dropped for the rest of the
    process with one warning; tiers already degrade on their own (HttpCache marks itself down)."""

    def __init__(self, local: DirCache, remote: Cache, *, readonly: bool = False):
        self.local = local
        self.remote = remote
        self.readonly = readonly
        self.name = f"{local.name} + {remote.name}{' (read-only)' if readonly else ''}"
        self._stats = CacheStats(self.name)
        self._remote_ok = True
        self._on_remote: set[str] = set()  # keys this process found on, or wrote to, the remote

    def _remote_failed(self, exc: Exception) -> None:
        self._remote_ok = False
        self._stats.errors += 1
        warn(f"cache {self.remote.name} failed ({type(exc).__name__}: {exc}); "
             f"local cache only for the rest of this process")

    def get(self, key: str) -> dict[str, bytes] | None:
        """The outputs under action `key` from the local tier, else the remote one (a remote hit is copied into the
        local tier); a local hit the remote lacks is uploaded unless read-only. Returns None on a miss in both.
        Raises ValueError for a malformed key."""
        check_key(key)
        st = self._stats
        out = self.local.get(key)
        if out is not None:
            st.hits += 1
            if key not in self._on_remote and not self.readonly and self._remote_ok:
                self._put_remote(key, out)
            return out
        if self._remote_ok:
            try:
                out = self.remote.get(key)
            except (ValueError, TypeError):
                raise
            except Exception as exc:  # a tier bug must not fail the build
                self._remote_failed(exc)
                out = None
        if out is None:
            st.misses += 1
            return None
        self._on_remote.add(key)
        self.local.put(key, out)
        st.hits += 1
        log.debug("cache: %s... hit in %s, written back to %s", key[:16], self.remote.name,
                  self.local.name)
        return out

    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        """Store `outputs` (role -> bytes) under `key` in the local tier, and in the remote unless read-only or the
        remote failed earlier this run."""
        check_key(key)
        self.local.put(key, outputs)
        if not self.readonly and self._remote_ok:
            self._put_remote(key, outputs)
        self._stats.puts += 1

    def _put_remote(self, key: str, outputs: Mapping[str, bytes]) -> None:
        try:
            self.remote.put(key, outputs)
            self._on_remote.add(key)
        except (ValueError, TypeError):
            raise
        except Exception as exc:
            self._remote_failed(exc)

    def stats(self) -> CacheStats:
        """This cache's counts, with each tier's own CacheStats in `tiers` (local first)."""
        self._stats.tiers = [self.local.stats(), self.remote.stats()]
        return self._stats

    def verify(self) -> VerifyReport:
        """Verify the local tier (the remote is verified by whoever owns it: `--cache` it directly)."""
        return self.local.verify()

    def forget(self, key: str, why: str) -> bool:
        """Drop the entry from the local tier and, unless read-only, from the remote one."""
        dropped = self.local.forget(key, why)
        if not self.readonly and self._remote_ok:
            dropped = self.remote.forget(key, why) and dropped
        return dropped

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> PruneReport:
        """Prune the local tier only; a shared directory is pruned by opening it on its own."""
        return self.local.prune(max_bytes=max_bytes, max_age=max_age)

    def close(self) -> None:
        """Close both tiers (the remote's connections, the local index)."""
        self.local.close()
        self.remote.close()


class NullCache(Cache):
    """Caches nothing: every `get` is a miss, `put` does nothing (`TTBUILD_CACHE=off`)."""

    name = "off"

    def __init__(self):
        self._stats = CacheStats(self.name)

    def get(self, key: str) -> None:
        """Always a miss (counted). Raises ValueError for a malformed key."""
        check_key(key)
        self._stats.misses += 1
        return None

    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        """Stores nothing. Raises ValueError for a malformed key."""
        check_key(key)

    def stats(self) -> CacheStats:
        """Misses only: this cache holds nothing."""
        return self._stats

    def verify(self) -> VerifyReport:
        """An empty report: nothing to check."""
        return VerifyReport()

    def forget(self, key: str, why: str) -> bool:
        """True: the key is not held, as asked."""
        check_key(key)
        return True

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> PruneReport:
        """An empty report: nothing to remove."""
        return PruneReport()
