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
import time
from pathlib import Path
from typing import Mapping

from ttbuild.cache.base import (
    MAX_AC_BYTES,
    Cache,
    CacheError,
    CacheStats,
    PruneReport,
    VerifyReport,
    check_blob,
    check_key,
    decode_entry,
    encode_entry,
    entry_secret,
    log,
    warn,
)
from ttbuild.cache.keys import digest, is_key
from ttbuild.fileio import TMP_PREFIX, replace_file


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


class DirCache(Cache):
    """The directory backend, for `~/.cache/ttbuild` and shared mounts alike. `readonly=True`
    never writes (not even the last-use time). `create=False` (shared tiers) never creates
    `root`: a missing root means an unmounted share, so puts are refused with one warning
    instead of filling the empty mount point on the local disk. `grace`: seconds an unnamed
    blob or temp file is spared by `prune`."""

    def __init__(self, root: str | os.PathLike, *, readonly: bool = False, grace: float = 3600.0,
                 create: bool = True):
        self.root = Path(root).expanduser()
        self.readonly = readonly
        self.create = create
        self.grace = grace
        self.name = f"dir:{self.root}"
        # `get` joins strings: it runs once per stage of a build, and pathlib's joins were a
        # third of its time in a profile of a fresh checkout.
        self._ac = os.path.join(str(self.root), "ac")
        self._cas = os.path.join(str(self.root), "cas")
        self._stats = CacheStats(self.name)
        self._put_warned = False
        # With a key configured (base.entry_secret), entries are signed on put and checked on get
        # and verify: one that is unsigned or forged is a miss (and dropped unless read-only).
        self.secret = entry_secret()

    # -- layout --------------------------------------------------------------------------------
    def ac_path(self, key: str) -> Path:
        return self.root / "ac" / key

    def cas_path(self, sha: str) -> Path:
        return self.root / "cas" / sha[:2] / sha

    # -- Cache API -----------------------------------------------------------------------------
    def get(self, key: str) -> dict[str, bytes] | None:
        check_key(key)
        st = self._stats
        acp = os.path.join(self._ac, key)
        try:
            raw = _read_bounded(acp, MAX_AC_BYTES)
        except FileNotFoundError:
            st.misses += 1
            return None
        except OSError as exc:
            st.errors += 1
            st.misses += 1
            log.info("cache %s: cannot read %s: %s", self.name, acp, exc)
            return None
        try:
            refs = decode_entry(raw, key, self.secret)
        except ValueError as exc:
            return self._drop(key, f"AC entry {key[:16]}... is corrupt ({exc})", [])
        outputs = {}
        for role, ref in refs.items():
            path = os.path.join(self._cas, ref.sha256[:2], ref.sha256)
            try:
                data = _read_bounded(path, ref.size)
            except FileNotFoundError:
                # A concurrent prune can legitimately remove a blob: a dangling entry, not damage.
                log.info("cache %s: entry %s... names missing blob %s...; dropped",
                         self.name, key[:16], ref.sha256[:16])
                if not self.readonly:
                    _unlink(acp)
                st.misses += 1
                return None
            except OSError as exc:
                st.errors += 1
                st.misses += 1
                log.info("cache %s: cannot read %s: %s", self.name, path, exc)
                return None
            why = check_blob(ref, data)
            if why:
                return self._drop(key, f"blob {ref.sha256[:16]}... ({role!r} of entry "
                                  f"{key[:16]}...) is corrupt: {why}", [path])
            outputs[role] = data
        if not self.readonly:
            try:
                os.utime(acp)
            except OSError:
                pass
        st.hits += 1
        return outputs

    def forget(self, key: str, why: str) -> bool:
        check_key(key)
        self._drop(key, why, [])
        return not self.readonly

    def _drop(self, key: str, why: str, blobs: list) -> None:
        st = self._stats
        st.corrupt += 1
        st.misses += 1
        if self.readonly:
            warn(f"cache {self.name}: {why}; treated as a miss (read-only: not dropped)")
            return None
        warn(f"cache {self.name}: {why}; dropped, treated as a miss")
        for p in [self.ac_path(key), *blobs]:
            try:
                _unlink(p)
            except OSError:
                pass
        return None

    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        check_key(key)
        if self.readonly:
            return
        entry, refs = encode_entry(outputs, key, self.secret)
        try:
            if not self.create and not self.root.is_dir():
                raise FileNotFoundError(f"shared cache directory {self.root} does not exist "
                                        "(not mounted?)")
            for role, ref in refs.items():
                path = self.cas_path(ref.sha256)
                try:
                    if path.stat().st_size == ref.size:
                        continue  # content-addressed: same name, same bytes (get re-checks)
                except FileNotFoundError:
                    pass
                write_atomic(path, bytes(outputs[role]))
            write_atomic(self.ac_path(key), entry)
        except OSError as exc:
            self._stats.errors += 1
            if not self._put_warned:
                self._put_warned = True
                warn(f"cache {self.name}: cannot write ({exc}); builds go on without storing")
            return
        self._stats.puts += 1

    def has_blob(self, ref) -> bool:
        """True when the blob named by `ref` (a BlobRef) is present with the right size."""
        try:
            return self.cas_path(ref.sha256).stat().st_size == ref.size
        except OSError:
            return False

    # -- scanning ------------------------------------------------------------------------------
    def _scan_ac(self):
        """Yield (key, path, stat) for every AC file; temp files and strays are yielded with key None."""
        try:
            it = os.scandir(self.root / "ac")
        except (FileNotFoundError, NotADirectoryError):
            return
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                yield (e.name if is_key(e.name) else None), Path(e.path), st

    def _scan_cas(self):
        """Yield (sha or None, path, stat) for every CAS file."""
        try:
            tops = os.scandir(self.root / "cas")
        except (FileNotFoundError, NotADirectoryError):
            return
        with tops:
            for top in tops:
                if not top.is_dir(follow_symlinks=False):
                    continue
                try:
                    it = os.scandir(top.path)
                except FileNotFoundError:
                    continue  # removed by a concurrent prune
                with it:
                    for e in it:
                        try:
                            st = e.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue
                        ok = is_key(e.name) and e.name[:2] == top.name
                        yield (e.name if ok else None), Path(e.path), st

    def stats(self) -> CacheStats:
        st = self._stats
        st.entries = st.blobs = st.bytes = 0
        for key, _, s in self._scan_ac():
            if key:
                st.entries += 1
                st.bytes += s.st_size
        for sha, _, s in self._scan_cas():
            if sha:
                st.blobs += 1
                st.bytes += s.st_size
        return st

    def verify(self) -> VerifyReport:
        rep = VerifyReport()
        good: dict[str, int] = {}
        for sha, path, _stat in self._scan_cas():
            if sha is None:
                continue  # temp files and strays belong to prune
            rep.blobs_checked += 1
            try:
                data = path.read_bytes()
            except OSError as exc:
                rep.problems.append(f"blob {path}: unreadable ({exc})")
                continue
            if digest(data) != sha:
                rep.problems.append(f"blob {sha}: content does not hash to its name")
                if not self.readonly and _unlink(path):
                    rep.blobs_dropped += 1
                continue
            good[sha] = len(data)
        for key, path, _stat in self._scan_ac():
            if key is None:
                continue
            rep.entries_checked += 1
            try:
                refs = decode_entry(path.read_bytes(), key, self.secret)
                bad = [r for r in refs.values() if good.get(r.sha256) != r.size]
                if bad:
                    raise ValueError(f"names {len(bad)} missing or damaged blob(s)")
            except (OSError, ValueError) as exc:
                rep.problems.append(f"entry {key}: {exc}")
                if not self.readonly and _unlink(path):
                    rep.entries_dropped += 1
        for p in rep.problems:
            warn(f"cache {self.name}: verify: {p}")
        return rep

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> PruneReport:
        if self.readonly:
            raise CacheError(f"cache {self.name} is read-only: prune it from a job that may write it")
        rep = PruneReport()
        now = time.time()

        def remove(path: Path, size: int) -> bool:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            rep.bytes_freed += size
            return True

        entries = []  # (last use, key, path, size, refs)
        for key, path, s in self._scan_ac():
            if key is None:
                if path.name.startswith(TMP_PREFIX) and now - s.st_mtime > self.grace:
                    rep.temps_removed += remove(path, s.st_size)
                continue
            try:
                refs = decode_entry(path.read_bytes())
            except (OSError, ValueError):
                rep.entries_removed += remove(path, s.st_size)
                continue
            if max_age is not None and now - s.st_mtime > max_age:
                rep.entries_removed += remove(path, s.st_size)
                continue
            entries.append((s.st_mtime, key, path, s.st_size, [r.sha256 for r in refs.values()]))
        blobs = {}  # sha -> (path, size, mtime)
        for sha, path, s in self._scan_cas():
            if sha is None:
                if path.name.startswith(TMP_PREFIX) and now - s.st_mtime > self.grace:
                    rep.temps_removed += remove(path, s.st_size)
                continue
            blobs[sha] = (path, s.st_size, s.st_mtime)
        refcount: dict[str, int] = {}
        for *_, shas in entries:
            for sha in set(shas):
                refcount[sha] = refcount.get(sha, 0) + 1
        for sha, (path, size, mtime) in list(blobs.items()):
            if sha not in refcount and now - mtime > self.grace:
                rep.blobs_removed += remove(path, size)
                del blobs[sha]
        total = sum(e[3] for e in entries) + sum(b[1] for b in blobs.values())
        if max_bytes is not None and total > max_bytes:
            entries.sort(key=lambda e: (e[0], e[1]))  # least recently used first
            for _, _key, path, size, shas in entries:
                if total <= max_bytes:
                    break
                if remove(path, size):
                    rep.entries_removed += 1
                total -= size
                for sha in set(shas):
                    refcount[sha] -= 1
                    if refcount[sha] == 0 and sha in blobs:
                        bpath, bsize, _ = blobs.pop(sha)
                        rep.blobs_removed += remove(bpath, bsize)
                        total -= bsize
        rep.bytes_left = total
        return rep

