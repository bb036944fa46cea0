"""`EntryCache`: the action-cache entry protocol (get, put, verify, forget, prune, stats) written once over any `BlobStore`.

The protocol (docs/CONTRACTS.md, "## Cache"): an entry is read, decoded and, with a key
configured, authenticated (ttbuild.cache.base.decode_entry); each blob it names is read and
checked against its size and sha256; a corrupt entry or blob is dropped (unless read-only) and
is a miss. `put` writes blobs first and the entry last, so a reader never sees an entry whose
blobs are not there yet.

Under a shared key (issue 32, item 4): an entry signed with another key (`kid`) is a miss that
is never deleted, and `put` never overwrites it (nor one that is valid already), so a job with a
rotated or mistyped key cannot take the fleet's entries away; `verify` keeps them too. A remote
tier (HTTP) that answers `corrupt_limit` corrupt entries or blobs is marked down for the rest of
the process with one warning, and each cache has a byte budget for what it fetches
(`fetch_budget`, ttbuild.cache.base.fetch_budget): past it, the rest is built.
"""

from __future__ import annotations

import threading
import time
from typing import Mapping

from ttbuild.cache.base import (
    MAX_AC_BYTES,
    Cache,
    CacheError,
    CacheStats,
    ForeignEntry,
    PruneReport,
    VerifyReport,
    check_blob,
    check_key,
    decode_entry,
    encode_entry,
    entry_secret,
    key_id,
    log,
    warn,
)
from ttbuild.cache.keys import digest
from ttbuild.cache.store import BlobStore, StoreDown, StoreError
from ttbuild.fileio import TMP_PREFIX

_ABSENT, _FOREIGN = "absent", "foreign"


class EntryCache(Cache):
    """The Cache over `store`. `readonly` never writes (not even the last-use time); `grace`:
    seconds an unnamed blob or temp file is spared by prune (a put may have written its blobs
    and not yet its entry); `corrupt_limit`: corrupt answers after which the store is marked down
    (None: never); `fetch_budget`: bytes of blobs this cache may fetch in all (None: no limit)."""

    def __init__(self, store: BlobStore, *, readonly: bool = False, grace: float = 3600.0,
                 corrupt_limit: int | None = None, fetch_budget: int | None = None):
        self.store = store
        self.name = store.name
        self.readonly = readonly
        self.grace = grace
        self.corrupt_limit = corrupt_limit
        self.fetch_budget = fetch_budget
        self._fetched = 0
        self._corrupt_seen = 0
        self._lock = threading.Lock()
        self._stats = CacheStats(self.name)
        self._put_warned = False
        self._foreign_warned = False
        # What this process's gets learned of each key (absent, or signed with another key),
        # so a put after a miss knows whether it may write the entry without asking again.
        self._seen: dict[str, str] = {}
        # With a key configured (base.entry_secret), entries are signed on put and checked on get
        # and verify: one that is unsigned or forged is a miss (and dropped unless read-only).
        self.secret = entry_secret()

    # -- get ---------------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, bytes] | None:
        """The outputs stored under `key`, each blob checked, or None (absent, another key's,
        corrupt: dropped unless read-only, over the fetch budget, or the store failed)."""
        check_key(key)
        st = self._stats
        if self.store.down:
            st.misses += 1
            return None
        try:
            raw = self.store.read_ac(key, MAX_AC_BYTES)
            if raw is None:
                self._seen[key] = _ABSENT
                st.misses += 1
                return None
            try:
                refs = decode_entry(raw, key, self.secret)
            except ForeignEntry as exc:
                return self._foreign(key, exc)
            except ValueError as exc:
                return self._corrupt(key, f"AC entry {key[:16]}... is corrupt ({exc})", [])
            outputs = {}
            for role, ref in refs.items():
                if not self._spend(ref.size):
                    st.misses += 1
                    return None
                data = self.store.read_cas(ref)
                if data is None:
                    return self._dangling(key, ref)
                why = check_blob(ref, data)
                if why:
                    return self._corrupt(key, f"blob {ref.sha256[:16]}... ({role!r} of entry "
                                         f"{key[:16]}...) is corrupt: {why}", [ref.sha256])
                outputs[role] = data
        except StoreDown:
            st.misses += 1
            return None
        except StoreError as exc:
            st.errors += 1
            st.misses += 1
            log.info("cache %s: %s; treated as a miss", self.name, exc)
            return None
        if not self.readonly:
            self.store.touch_ac(key)
        st.hits += 1
        return outputs

    def _spend(self, size: int) -> bool:
        """Take `size` bytes from the fetch budget before reading them (threads share it);
        False, and the store marked down with one warning, once it is spent."""
        if self.fetch_budget is None:
            return True
        with self._lock:
            if self._fetched + size <= self.fetch_budget:
                self._fetched += size
                return True
        self._down(f"this process fetched {self._fetched} bytes of blobs and the next needs {size}: "
                   f"over the {self.fetch_budget}-byte budget (TTBUILD_CACHE_FETCH_BUDGET)")
        return False

    def _down(self, why: str, quiet: bool = False) -> None:
        with self._lock:
            if self.store.down:
                return
            self.store.mark_down(why)
        (log.info if quiet else warn)(f"cache {self.name}: {why}; going on without it for the rest of this process")

    def _foreign(self, key: str, exc: ForeignEntry) -> None:
        st = self._stats
        st.foreign += 1
        st.misses += 1
        self._seen[key] = _FOREIGN
        if not self._foreign_warned:
            self._foreign_warned = True
            warn(f"cache {self.name}: {exc}; such entries are misses and left in place "
                 "(is TTBUILD_CACHE_HMAC_KEY the fleet's?)")
        return None

    def _dangling(self, key: str, ref) -> None:
        # A concurrent prune can legitimately remove a blob: a dangling entry, not damage.
        log.info("cache %s: entry %s... names missing blob %s...", self.name, key[:16], ref.sha256[:16])
        if self.store.drops_dangling and not self.readonly:
            self.store.delete_ac(key)
        self._stats.misses += 1
        return None

    def _corrupt(self, key: str, why: str, blobs: list[str]) -> None:
        """A corrupt answer: dropped (_drop) and counted toward corrupt_limit, past which the
        store is marked down. With a limit only the first corrupt answer warns, and says what
        the limit does: a server of wrong bytes costs one warning, not one per stage."""
        limit = self.corrupt_limit
        if limit is None:
            self._drop(key, why, blobs)
            return None
        with self._lock:  # prefetch threads: exactly one of them is the first
            self._corrupt_seen += 1
            seen = self._corrupt_seen
        self._drop(key, why + (f" ({limit} corrupt answers take it out of this process)" if seen == 1 else ""),
                   blobs, quiet=seen > 1)
        if seen >= limit:
            self._down(f"{seen} corrupt answers (the last: {why})", quiet=True)
        return None

    def _drop(self, key: str, why: str, blobs: list[str], quiet: bool = False) -> None:
        st = self._stats
        st.corrupt += 1
        st.misses += 1
        report = log.info if quiet else warn
        if self.readonly:
            report(f"cache {self.name}: {why}; treated as a miss (read-only: not dropped)")
            return
        report(f"cache {self.name}: {why}; dropped, treated as a miss")
        self._seen[key] = _ABSENT
        try:
            self.store.delete_ac(key)
            for sha in blobs:
                self.store.delete_cas(sha)
        except StoreError:  # best effort: the entry is a miss either way
            pass

    def forget(self, key: str, why: str) -> bool:
        """Drop the entry of `key` with a warning saying `why`; False where read-only."""
        check_key(key)
        self._drop(key, why, [])
        return not self.readonly

    # -- put ---------------------------------------------------------------------------------
    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        """Store `outputs` under `key`, blobs first, the entry last; never over an entry of
        another key. Failures warn once and are otherwise ignored."""
        check_key(key)
        if self.readonly or self.store.down:
            return
        entry, refs = encode_entry(outputs, key, self.secret)
        try:
            if not self._may_write(key):
                return
            self.store.check_writable()
            for role, ref in refs.items():
                if not self.store.has_cas(ref):  # content-addressed: same name, same bytes (get re-checks)
                    self.store.write_cas(ref.sha256, bytes(outputs[role]))
            self.store.write_ac(key, entry)
        except StoreDown:
            return
        except StoreError as exc:
            self._stats.errors += 1
            if not self._put_warned:
                self._put_warned = True
                warn(f"cache {self.name}: {exc}; results are not stored")
            return
        self._stats.puts += 1

    def _may_write(self, key: str) -> bool:
        """False where the stored entry is signed with another key: it stays, for the jobs that
        hold that key. A get of this process that saw the key answers without asking again;
        without a key of our own there is nothing to tell apart (every signed entry reads)."""
        seen = self._seen.pop(key, None)
        if seen == _ABSENT or (seen is None and self.secret is None):
            return True
        if seen is None:
            try:
                raw = self.store.read_ac(key, MAX_AC_BYTES)
                if raw is None:
                    return True
                decode_entry(raw, key, self.secret)
                return True
            except ForeignEntry:
                pass
            except StoreDown:
                raise
            except (StoreError, ValueError):  # unreadable or not valid for us: ours to replace
                return True
        log.info("cache %s: entry %s... is signed with another key; not overwritten", self.name, key[:16])
        return False

    # -- whole-store operations --------------------------------------------------------------
    def stats(self) -> CacheStats:
        """This process's counters, plus entries, blobs and bytes where the store can list itself."""
        st = self._stats
        if not self.store.scannable:
            return st
        st.entries = st.blobs = st.bytes = 0
        for item in self.store.scan_ac():
            if item.name:
                st.entries += 1
                st.bytes += item.size
        for item in self.store.scan_cas():
            if item.name:
                st.blobs += 1
                st.bytes += item.size
        return st

    def verify(self) -> VerifyReport:
        """Re-hash every blob and check every entry (its mac too, with a key), dropping the bad
        ones unless read-only; entries of another key are kept and counted. CacheError where
        the store cannot list itself."""
        if not self.store.scannable:
            return super().verify()
        rep = VerifyReport()
        good = self._verify_blobs(rep)
        kids: set = set()
        for item in self.store.scan_ac():
            if item.name is None:
                continue
            rep.entries_checked += 1
            try:
                refs = decode_entry(self.store.read_listed(item), item.name, self.secret)
                bad = [r for r in refs.values() if good.get(r.sha256) != r.size]
                if bad:
                    raise ValueError(f"names {len(bad)} missing or damaged blob(s)")
            except ForeignEntry as exc:
                rep.entries_foreign += 1
                kids.add(exc.kid)
            except (OSError, ValueError) as exc:
                rep.problems.append(f"entry {item.name}: {exc}")
                if not self.readonly and self.store.remove(item):
                    rep.entries_dropped += 1
        if rep.entries_foreign:
            names = ", ".join(sorted(k or "none" for k in kids))
            rep.problems.append(f"{rep.entries_foreign} entries are signed with another key (key id {names}; "
                                f"ours {key_id(self.secret) if self.secret else 'none'}): kept; "
                                "check TTBUILD_CACHE_HMAC_KEY")
        for p in rep.problems:
            warn(f"cache {self.name}: verify: {p}")
        return rep

    def _verify_blobs(self, rep: VerifyReport) -> dict[str, int]:
        good: dict[str, int] = {}
        for item in self.store.scan_cas():
            if item.name is None:
                continue  # temp files and strays belong to prune
            rep.blobs_checked += 1
            try:
                data = self.store.read_listed(item)
            except OSError as exc:
                rep.problems.append(f"blob {item.handle}: unreadable ({exc})")
                continue
            if digest(data) != item.name:
                rep.problems.append(f"blob {item.name}: content does not hash to its name")
                if not self.readonly and self.store.remove(item):
                    rep.blobs_dropped += 1
                continue
            good[item.name] = len(data)
        return good

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> PruneReport:
        """Cache.prune over the store's listing; CacheError where read-only or not listable."""
        if not self.store.scannable:
            return super().prune(max_bytes, max_age)
        if self.readonly:
            raise CacheError(f"cache {self.name} is read-only: prune it from a job that may write it")
        rep = PruneReport()
        now = time.time()

        def remove(item) -> bool:
            if not self.store.remove(item):
                return False
            rep.bytes_freed += item.size
            return True

        def stale_temp(item) -> bool:
            return item.temp and now - item.mtime > self.grace

        entries = []  # (last use, key, item, blob names)
        for item in self.store.scan_ac():
            if item.name is None:
                rep.temps_removed += stale_temp(item) and remove(item)
                continue
            try:
                refs = decode_entry(self.store.read_listed(item))
            except (OSError, ValueError):
                rep.entries_removed += remove(item)
                continue
            if max_age is not None and now - item.mtime > max_age:
                rep.entries_removed += remove(item)
                continue
            entries.append((item.mtime, item.name, item, [r.sha256 for r in refs.values()]))
        blobs = {}  # sha -> item
        for item in self.store.scan_cas():
            if item.name is None:
                rep.temps_removed += stale_temp(item) and remove(item)
            else:
                blobs[item.name] = item
        self._prune_lru(rep, entries, blobs, now, max_bytes, remove)
        return rep

    def _prune_lru(self, rep: PruneReport, entries: list, blobs: dict, now: float, max_bytes, remove) -> None:
        refcount: dict[str, int] = {}
        for *_, shas in entries:
            for sha in set(shas):
                refcount[sha] = refcount.get(sha, 0) + 1
        for sha, item in list(blobs.items()):
            if sha not in refcount and now - item.mtime > self.grace:
                rep.blobs_removed += remove(item)
                del blobs[sha]
        total = sum(e[2].size for e in entries) + sum(b.size for b in blobs.values())
        if max_bytes is not None and total > max_bytes:
            entries.sort(key=lambda e: (e[0], e[1]))  # least recently used first
            for _, _key, item, shas in entries:
                if total <= max_bytes:
                    break
                if remove(item):
                    rep.entries_removed += 1
                total -= item.size
                for sha in set(shas):
                    refcount[sha] -= 1
                    if refcount[sha] == 0 and sha in blobs:
                        blob = blobs.pop(sha)
                        rep.blobs_removed += remove(blob)
                        total -= blob.size
        rep.bytes_left = total

    def close(self) -> None:
        """Close the store (its connections); the cache stays usable."""
        self.store.close()


def is_temp(name: str) -> bool:
    """Whether a file name is a writer's temp file (ttbuild.fileio.replace_file's prefix)."""
    return name.startswith(TMP_PREFIX)
