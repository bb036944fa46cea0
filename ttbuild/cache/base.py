"""The `Cache` interface every backend implements, its AC entry format, stats and verify reports.

A cache maps an action key (see `keys.action_key`) to a set of outputs keyed by role. It is
two tables, as in Bazel's remote cache: the action cache (AC) holds, per action key, a small
JSON entry naming each output's content address and size; the content-addressable store (CAS)
holds the bytes under their sha256. A cache never breaks a build: failures on `get` are misses,
failures on `put` are logged warnings.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Mapping

from ttbuild.cache.keys import digest, is_key
from ttbuild.canonical import canonical_bytes
from ttbuild.errors import TTBuildError

log = logging.getLogger("ttbuild.cache")

AC_SCHEMA = "ttbuild.cache/1"
# An AC entry lists a handful of roles; anything far bigger is not one of ours.
MAX_AC_BYTES = 1 << 20
# The largest blob an entry may name (stage outputs are kilobytes to a few megabytes): an entry
# claiming more is refused before anything is read, so a hostile or broken server cannot make a
# build allocate gigabytes. `$TTBUILD_CACHE_MAX_BLOB_BYTES` overrides it.
DEFAULT_MAX_BLOB_BYTES = 256 << 20


# What one build may fetch from a remote tier in all (`$TTBUILD_CACHE_FETCH_BUDGET` bytes, 0 for
# no limit): a server that names big blobs (each under the cap) cannot make a build download
# gigabytes; past it the build compiles what is left.
DEFAULT_FETCH_BUDGET = 1 << 30


def fetch_budget() -> int | None:
    """The remote fetch budget in bytes (DEFAULT_FETCH_BUDGET or `$TTBUILD_CACHE_FETCH_BUDGET`;
    None for no limit when it is 0)."""
    text = os.environ.get("TTBUILD_CACHE_FETCH_BUDGET", "").strip()
    if not text.isdigit():
        return DEFAULT_FETCH_BUDGET
    return int(text) or None


def max_blob_bytes() -> int:
    """The blob size cap in bytes (DEFAULT_MAX_BLOB_BYTES or `$TTBUILD_CACHE_MAX_BLOB_BYTES`)."""
    text = os.environ.get("TTBUILD_CACHE_MAX_BLOB_BYTES", "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_BLOB_BYTES


class CacheError(TTBuildError):
    """A cache that cannot be set up or asked to do what it does not support (bad URL, HTTP prune)."""


class CacheWarning(UserWarning):
    """A corrupt entry was dropped, or a tier went unreachable: the build goes on without it."""


def warn(message: str) -> None:
    """Report through both `logging` (for services) and `warnings` (visible in pytest and CLIs)."""
    log.warning(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


@dataclass(frozen=True)
class BlobRef:
    """One output in an AC entry: its sha256 content address and its size in bytes."""

    sha256: str
    size: int


# A key file holds a key, not a disk image: one bigger than this is refused unread
# (`/dev/zero` as the key file used to read 5.6 GB).
MAX_KEY_FILE_BYTES = 4096
_empty_key_warned = False


def entry_secret() -> bytes | None:
    """The key that authenticates action-cache entries: `$TTBUILD_CACHE_HMAC_KEY` (the key's
    text), else the bytes of the file `$TTBUILD_CACHE_HMAC_KEY_FILE` (surrounding whitespace
    stripped), else None (entries are not authenticated). An empty or blank
    `$TTBUILD_CACHE_HMAC_KEY` (what CI gives for a missing secret) warns once per process
    instead of silently meaning no authentication. Raises CacheError for a key file that is
    unreadable, not a regular file, empty, or over MAX_KEY_FILE_BYTES."""
    global _empty_key_warned
    text = os.environ.get("TTBUILD_CACHE_HMAC_KEY")
    if text and text.strip():
        return text.encode("utf-8")
    path = os.environ.get("TTBUILD_CACHE_HMAC_KEY_FILE")
    if not path:
        if text is not None and not _empty_key_warned:
            _empty_key_warned = True
            warn("TTBUILD_CACHE_HMAC_KEY is set but empty (a missing CI secret?): cache entries are "
                 "neither signed nor checked; unset it to say so, or give the key")
        return None
    return _read_key_file(path)


def _read_key_file(path: str) -> bytes:
    import stat

    try:
        with open(path, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise CacheError(f"TTBUILD_CACHE_HMAC_KEY_FILE {path} is not a regular file")
            data = f.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise CacheError(f"TTBUILD_CACHE_HMAC_KEY_FILE {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_KEY_FILE_BYTES:
        raise CacheError(f"TTBUILD_CACHE_HMAC_KEY_FILE {path} is over {MAX_KEY_FILE_BYTES} bytes: not a key")
    data = data.strip()
    if not data:
        raise CacheError(f"TTBUILD_CACHE_HMAC_KEY_FILE {path} is empty")
    return data


def key_id(secret: bytes) -> str:
    """The public name of a key (16 hex digits of a domain-separated sha256), stored in each
    entry it signs: an entry of another key is then told from a forgery, and left alone."""
    return hashlib.sha256(b"ttbuild.cache key id\0" + secret).hexdigest()[:16]


class ForeignEntry(ValueError):
    """An entry signed with another key than ours (its `kid` differs, or an entry from before key
    ids whose mac does not match): a miss, never deleted or overwritten; `.kid` is its key id."""

    def __init__(self, message: str, kid: str | None):
        super().__init__(message)
        self.kid = kid


def entry_mac(secret: bytes, key: str, body: bytes) -> str:
    """HMAC-SHA256 (RFC 2104) of an entry `body` bound to its action `key`: an entry signed for
    one action cannot be replayed under another."""
    return hmac.new(secret, key.encode("ascii") + b"\0" + body, hashlib.sha256).hexdigest()


def encode_entry(outputs: Mapping[str, bytes], key: str | None = None,
                 secret: bytes | None = None) -> tuple[bytes, dict[str, BlobRef]]:
    """AC entry bytes for `outputs` (role -> bytes), plus the refs it names.

    Format: `{"schema": "ttbuild.cache/1", "outputs": {role: {"sha256": hex, "size": n}}}`,
    canonical JSON (sorted keys, no spaces); with a `secret` (entry_secret) also `"kid"`
    (key_id) and `"mac"`: entry_mac over the action `key` and the entry without the mac. Raises
    TypeError for non-str roles or non-bytes.
    """
    refs = {}
    for role, data in outputs.items():
        if not isinstance(role, str) or not role:
            raise TypeError(f"output role must be a non-empty str, got {role!r}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"output {role!r} must be bytes, got {type(data).__name__}")
        data = bytes(data)
        refs[role] = BlobRef(digest(data), len(data))
    body = {"schema": AC_SCHEMA,
            "outputs": {r: {"sha256": b.sha256, "size": b.size} for r, b in refs.items()}}
    if secret is not None:
        if key is None:
            raise TypeError("an authenticated entry needs its action key")
        body["kid"] = key_id(secret)
        raw = canonical_bytes(body, ensure_ascii=True)
        return canonical_bytes(dict(body, mac=entry_mac(secret, key, raw)), ensure_ascii=True), refs
    return canonical_bytes(body, ensure_ascii=True), refs


def decode_entry(raw: bytes, key: str | None = None, secret: bytes | None = None) -> dict[str, BlobRef]:
    """Parse an AC entry; raises ValueError on anything that is not a well-formed entry, and,
    with a `secret`, on an entry whose `mac` is missing or is not entry_mac(secret, key, ...)
    (an unsigned or forged entry: the caller treats it as a miss). An entry signed with another
    key raises ForeignEntry (a ValueError) instead: the caller leaves it in place."""
    if len(raw) > MAX_AC_BYTES:
        raise ValueError(f"AC entry is {len(raw)} bytes, more than {MAX_AC_BYTES}")
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"AC entry is not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("schema") != AC_SCHEMA:
        raise ValueError(f"AC entry schema is not {AC_SCHEMA!r}")
    if secret is not None:
        _check_mac(body, key, secret)
    outs = body.get("outputs")
    if not isinstance(outs, dict):
        raise ValueError("AC entry has no outputs table")
    refs = {}
    cap = max_blob_bytes()
    for role, ref in outs.items():
        if not (isinstance(ref, dict) and is_key(ref.get("sha256"))
                and isinstance(ref.get("size"), int) and ref["size"] >= 0):
            raise ValueError(f"AC entry output {role!r} is malformed: {ref!r}")
        if ref["size"] > cap:
            raise ValueError(f"AC entry output {role!r} claims {ref['size']} bytes, more than the "
                             f"{cap}-byte cap (TTBUILD_CACHE_MAX_BLOB_BYTES)")
        refs[role] = BlobRef(ref["sha256"], ref["size"])
    return refs


def _check_mac(body: dict, key: str | None, secret: bytes) -> None:
    """Raise ValueError unless `body` (its mac popped) carries entry_mac(secret, key, ...);
    ForeignEntry where another key signed it."""
    mac = body.pop("mac", None)
    if not isinstance(mac, str):
        raise ValueError("AC entry is not authenticated (no mac) and a cache key is configured")
    kid, ours = body.get("kid"), key_id(secret)
    if isinstance(kid, str) and kid != ours:
        raise ForeignEntry(f"AC entry is signed with another key (key id {kid}, ours {ours})", kid)
    if key is None or not hmac.compare_digest(mac, entry_mac(secret, key, canonical_bytes(body, ensure_ascii=True))):
        if kid is None:  # from before key ids: a forgery cannot be told from another key's entry
            raise ForeignEntry("AC entry's mac does not match and it names no key id: signed with "
                               "another key, or forged", None)
        raise ValueError("AC entry's mac does not match: forged, or signed for another action")


def check_blob(ref: BlobRef, data: bytes) -> str | None:
    """None when `data` is the blob `ref` names, else why not (size first: it is free)."""
    if len(data) != ref.size:
        return f"size {len(data)} != {ref.size}"
    got = digest(data)
    if got != ref.sha256:
        return f"sha256 {got[:12]}... != {ref.sha256[:12]}..."
    return None


@dataclass
class CacheStats:
    """Counters of this process (hits, misses, puts, dropped corrupt entries, errors), plus
    what the store holds where the backend can count it (`entries`, `blobs`, `bytes`; None
    when it cannot, as over HTTP). `tiers` holds each layer's own stats in a layered cache."""

    name: str
    hits: int = 0
    misses: int = 0
    puts: int = 0
    corrupt: int = 0
    foreign: int = 0   # entries signed with another key: misses, left in place
    errors: int = 0
    entries: int | None = None
    blobs: int | None = None
    bytes: int | None = None
    tiers: list["CacheStats"] = field(default_factory=list)


@dataclass
class VerifyReport:
    """What `verify()` checked and dropped: blob and AC entry counts, and one line per problem."""

    blobs_checked: int = 0
    entries_checked: int = 0
    blobs_dropped: int = 0
    entries_dropped: int = 0
    entries_foreign: int = 0   # signed with another key: kept (a wrong key must not empty the cache)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class PruneReport:
    """What `prune()` removed: AC entries, blobs, stale temp files, and bytes freed; bytes left."""

    entries_removed: int = 0
    blobs_removed: int = 0
    temps_removed: int = 0
    bytes_freed: int = 0
    bytes_left: int = 0


class Cache(ABC):
    """A build cache: `get(key) -> {role: bytes} | None` and `put(key, {role: bytes})`.

    Keys are 64-hex action keys (`keys.action_key`); a malformed key raises ValueError, since
    that is a caller bug, not a cache failure. Every other failure degrades to a miss (`get`)
    or a warning (`put`). `readonly` caches never write.
    """

    name = "cache"
    readonly = False

    @abstractmethod
    def get(self, key: str) -> dict[str, bytes] | None:
        """The outputs stored under `key`, each blob checked against its sha256, or None."""

    @abstractmethod
    def put(self, key: str, outputs: Mapping[str, bytes]) -> None:
        """Store `outputs` under `key`: blobs first, the AC entry last (readers never see half)."""

    @abstractmethod
    def stats(self) -> CacheStats:
        """Counters of this process and, where countable, the store's size."""

    def verify(self) -> VerifyReport:
        """Re-hash every blob and parse every AC entry, dropping the bad ones."""
        raise CacheError(f"{self.name} cannot be verified from a client")

    def forget(self, key: str, why: str) -> bool:
        """Drop the AC entry of `key` (an entry whose outputs a fresh run does not reproduce),
        with a warning saying `why`; blobs stay until prune. False where read-only."""
        raise CacheError(f"{self.name} cannot drop entries from a client")

    def prune(self, max_bytes: int | None = None, max_age: float | None = None) -> PruneReport:
        """Drop entries unused for more than `max_age` seconds, then least-recently-used ones
        until the store holds at most `max_bytes`; then blobs no entry names."""
        raise CacheError(f"{self.name} cannot be pruned from a client: the server owns its size")

    def close(self) -> None:  # noqa: B027  (optional hook: most tiers hold nothing to release)
        """Release connections; the cache stays usable (it reconnects on demand)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_key(key: str) -> None:
    """Raise ValueError unless `key` is a 64-hex action key (keeps keys safe as path names)."""
    if not is_key(key):
        raise ValueError(f"cache key must be 64 lowercase hex characters, got {key!r}")
