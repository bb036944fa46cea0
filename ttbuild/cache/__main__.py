"""`python -m ttbuild.cache [--cache URL] [--remote] stats|verify|prune`: inspect and trim a build cache."""

from __future__ import annotations

import argparse
import sys

from ttbuild.cache.base import CacheError
from ttbuild.cache.config import open_cache
from ttbuild.cache.layered import LayeredCache
from ttbuild.units import parse_duration, parse_size


def _argument(parse):
    """`parse` (ttbuild.units) as an argparse type: its ValueError's text becomes the CLI's error."""
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    convert.__name__ = parse.__name__
    return convert


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttbuild.cache", description=__doc__)
    ap.add_argument("--cache", default=None, help="cache URL (default: $TTBUILD_CACHE, else local)")
    ap.add_argument("--remote", action="store_true",
                    help="act on the remote tier (a shared directory) instead of the local one")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("stats", help="entries, blobs and bytes held")
    sub.add_parser("verify", help="re-hash every blob, drop corrupt blobs and entries")
    pr = sub.add_parser("prune", help="drop old / least-recently-used entries")
    pr.add_argument("--max-bytes", type=_argument(parse_size), default=None)
    pr.add_argument("--max-age", type=_argument(parse_duration), default=None)
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
