"""Turn `--cache URL`, `TTBUILD_CACHE`, `TTBUILD_CACHE_DIR` and `TTBUILD_CACHE_READONLY` into a Cache.

URL forms (`--cache` wins over `TTBUILD_CACHE`):
  (unset or empty)               the local directory only
  off | none                     no caching at all
  /path, ./path, file:///path    local directory, then that shared directory (e.g. an NFS mount)
  http(s)://[user:pass@]host[:port][/prefix]
                                 local directory, then a Bazel-protocol HTTP cache
The local directory is `$TTBUILD_CACHE_DIR`, else `$XDG_CACHE_HOME/ttbuild`, else
`~/.cache/ttbuild`, shared by every project of the user. `TTBUILD_CACHE_READONLY=1` (or
`readonly=True`) keeps the remote tier read-only.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path
from typing import Mapping

from ttbuild.cache.base import Cache, CacheError, fetch_budget
from ttbuild.cache.http import HttpCache
from ttbuild.cache.layered import LayeredCache, NullCache
from ttbuild.cache.local import DirCache
from ttbuild.cachedir import default_local_dir

_TRUE = {"1", "true", "yes", "on"}


def remote_from_url(url: str, *, readonly: bool = False, timeout: float = 2.0) -> Cache:
    """The remote tier a cache URL names (shared DirCache or HttpCache), with the build's
    fetch budget (ttbuild.cache.base.fetch_budget). A new transport is one BlobStore
    (ttbuild.cache.store) and one scheme here.

    Raises CacheError for an unknown scheme or a file URL on another host.
    """
    if "://" not in url:
        return DirCache(url, readonly=readonly, create=False, fetch_budget=fetch_budget())
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise CacheError(f"file cache URL names host {parts.netloc!r}: mount it and give a path")
        return DirCache(urllib.parse.unquote(parts.path), readonly=readonly, create=False,
                        fetch_budget=fetch_budget())
    if parts.scheme in ("http", "https"):
        return HttpCache(url, readonly=readonly, timeout=timeout)
    raise CacheError(f"unsupported cache URL scheme {parts.scheme!r} in --cache/TTBUILD_CACHE "
                     "(use a path, file:///path, http:// or https://)")


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def open_cache(url: str | None = None, *, readonly: bool | None = None,
               local_dir: str | os.PathLike | None = None, timeout: float = 2.0,
               env: Mapping[str, str] | None = None) -> Cache:
    """The cache a build should use; see the module docstring for the URL forms.

    `url=None` reads `TTBUILD_CACHE`; `readonly=None` reads `TTBUILD_CACHE_READONLY`;
    `local_dir=None` uses `default_local_dir`. `timeout` (seconds) bounds each remote request.
    Nothing is touched on disk or network until the first get/put. Raises CacheError for a bad URL.
    """
    env = os.environ if env is None else env
    if url is None:
        url = env.get("TTBUILD_CACHE", "")
    url = url.strip()
    if readonly is None:
        readonly = env.get("TTBUILD_CACHE_READONLY", "").strip().lower() in _TRUE
    if url.lower() in ("off", "none"):
        return NullCache()
    local = DirCache(local_dir if local_dir is not None else default_local_dir(env))
    if not url:
        return local
    remote = remote_from_url(url, readonly=readonly, timeout=timeout)
    if isinstance(remote, DirCache) and _same_dir(remote.root, local.root):
        return local
    return LayeredCache(local, remote, readonly=readonly)
