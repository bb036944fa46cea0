"""Content-addressed build cache shared across machines: `open_cache()` → `Cache.get/put` by action key.

Typical use from a stage task (see docs/CONTRACTS.md, "## Cache"):

    from ttbuild.cache import run_cached
    outputs = run_cached("ptx", ttbuild.stages.ptx, inputs, options)   # instead of mod.run(...)

which is, spelled out:

    cache = open_cache()                         # honours TTBUILD_CACHE, TTBUILD_CACHE_READONLY
    key = action_key(stage, mod.VERSION, {r: digest(b) for r, b in inputs.items()},
                     options, tool_versions_for(stage))
    outputs = cache.get(key)
    if outputs is None:
        outputs = mod.run(inputs, options)
        cache.put(key, outputs)

Importing this package is cheap (standard library only); llvmlite and ptxas are touched only
when their versions are first asked for.
"""

from ttbuild.cache.base import BlobRef, Cache, CacheError, CacheStats, CacheWarning, PruneReport, VerifyReport
from ttbuild.cache.config import default_local_dir, open_cache, remote_from_url
from ttbuild.cache.entry import EntryCache
from ttbuild.cache.http import HttpCache, HttpStore
from ttbuild.cache.keys import (
                                STAGE_TOOLS,
                                action_key,
                                canonical_action,
                                digest,
                                fast_hash,
                                is_key,
                                tool_versions,
                                tool_versions_for,
)
from ttbuild.cache.layered import LayeredCache, NullCache
from ttbuild.cache.local import DirCache, DirStore
from ttbuild.cache.stage import default_cache, module_action_key, run_cached, run_cached_hit, set_default_cache
from ttbuild.cache.store import BlobStore, StoreDown, StoreError

__all__ = [
    "BlobRef", "BlobStore", "Cache", "CacheError", "CacheStats", "CacheWarning", "DirCache", "DirStore",
    "EntryCache", "HttpCache", "HttpStore", "StoreDown", "StoreError",
    "LayeredCache", "NullCache", "PruneReport", "STAGE_TOOLS", "VerifyReport", "action_key",
    "canonical_action", "default_local_dir", "digest", "fast_hash", "is_key", "open_cache",
    "remote_from_url", "tool_versions", "tool_versions_for", "default_cache",
    "run_cached", "run_cached_hit", "set_default_cache", "module_action_key",
]
