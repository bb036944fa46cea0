"""`python -m ttbuild.cache [--cache URL] [--remote] stats|verify|prune`: inspect and trim a build cache."""

from __future__ import annotations

import argparse
import re
import sys

from ttbuild.cache.base import CacheError
from ttbuild.cache.config import open_cache
from ttbuild.cache.layered import LayeredCache

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_AGES = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_size(text: str) -> int:
    """`500M`, `10G`, `1024` → bytes (binary units). Raises argparse.ArgumentTypeError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 500M, 10G)")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def parse_age(text: str) -> float:
    """`30d`, `12h`, `90m`, `3600` (seconds) → seconds. Raises argparse.ArgumentTypeError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"not an age: {text!r} (e.g. 30d, 12h)")
    return float(m.group(1)) * _AGES[m.group(2) or "s"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttbuild.cache", description=__doc__)
    ap.add_argument("--cache", default=None, help="cache URL (default: $TTBUILD_CACHE, else local)")
    ap.add_argument("--remote", action="store_true",
                    help="act on the remote tier (a shared directory) instead of the local one")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("stats", help="entries, blobs and bytes held")
    sub.add_parser("verify", help="re-hash every blob, drop corrupt blobs and entries")
    pr = sub.add_parser("prune", help="drop old / least-recently-used entries")
    pr.add_argument("--max-bytes", type=parse_size, default=None)
    pr.add_argument("--max-age", type=parse_age, default=None)
    args = ap.parse_args(argv)
    try:
        cache = open_cache(args.cache)
        if isinstance(cache, LayeredCache):
            cache = cache.remote if args.remote else cache.local
        elif args.remote:
            raise CacheError("--remote needs a --cache URL (or $TTBUILD_CACHE) naming a remote tier")
        if args.cmd == "stats":
            s = cache.stats()
            print(f"{cache.name}: {s.entries} entries, {s.blobs} blobs, {s.bytes} bytes")
        elif args.cmd == "verify":
            r = cache.verify()
            print(f"{cache.name}: checked {r.blobs_checked} blobs, {r.entries_checked} entries; "
                  f"dropped {r.blobs_dropped} blobs, {r.entries_dropped} entries")
            if r.entries_foreign:  # a wrong key must not empty the fleet's cache
                print(f"{cache.name}: kept {r.entries_foreign} entries signed with another key "
                      "(check TTBUILD_CACHE_HMAC_KEY)")
            return 0 if r.ok else 1
        else:
            if args.max_bytes is None and args.max_age is None:
                ap.error("prune needs --max-bytes and/or --max-age")
            r = cache.prune(max_bytes=args.max_bytes, max_age=args.max_age)
            print(f"{cache.name}: removed {r.entries_removed} entries, {r.blobs_removed} blobs, "
                  f"{r.temps_removed} temp files ({r.bytes_freed} bytes); {r.bytes_left} bytes left")
    except CacheError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
