"""`ttbuild cache` (also `python -m ttbuild.cache`) `[--cache URL] [--remote] stats|verify|prune`: inspect and trim a build cache."""

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


def parser(prog: str = "python -m ttbuild.cache", recompute: bool = False) -> argparse.ArgumentParser:
    """The cache command's arguments. `--cache` and `--remote` go before or after the command
    (`cache stats --cache X`). `recompute`: verify takes `--recompute N [-k KERNELS] [-o
    ARTIFACTS] [--seed S]` (`ttbuild cache`, which has a project to recompute)."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subcommand's default never overwrites what was given before the command
    common.add_argument("--cache", default=argparse.SUPPRESS, metavar="URL",
                        help="cache URL (default: $TTBUILD_CACHE, else local)")
    common.add_argument("--remote", action="store_true", default=argparse.SUPPRESS,
                        help="act on the remote tier (a shared directory) instead of the local one")
    ap = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0].split(": ", 1)[1],
                                 parents=[common])
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{stats,verify,prune}")
    sub.add_parser("stats", parents=[common], help="entries, blobs and bytes held")
    ve = sub.add_parser("verify", parents=[common], help="re-hash every blob, drop corrupt blobs and entries"
                        + ("; --recompute N: run N sampled stages afresh and compare" if recompute else ""))
    if recompute:
        ve.add_argument("--recompute", type=int, default=None, metavar="N",
                        help="also run N sampled stages of the project afresh (0: all) and drop entries they do not reproduce")
        ve.add_argument("-k", "--kernels", default=None, metavar="KERNELS_DIR", help="for --recompute (default: ./kernels)")
        ve.add_argument("-o", "--artifacts", default=None, metavar="DIR", help="for --recompute (default: ./artifacts)")
        ve.add_argument("--seed", type=int, default=None, help="seed of --recompute's sample (default: a new one)")
    pr = sub.add_parser("prune", parents=[common], help="drop old / least-recently-used entries")
    pr.add_argument("--max-bytes", type=_argument(parse_size), default=None)
    pr.add_argument("--max-age", type=_argument(parse_duration), default=None)
    return ap


def main(argv: list[str] | None = None, prog: str = "python -m ttbuild.cache", recompute=None) -> int:
    """Run the cache command; returns 0, 1 (verify found damage) or 2 (bad usage, a cache that
    cannot be opened). `recompute(args, cache) -> status`: verify's --recompute (ttbuild.cli)."""
    ap = parser(prog, recompute is not None)
    args = ap.parse_args(argv)
    args.cache = getattr(args, "cache", None)
    args.remote = getattr(args, "remote", False)
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
            status = 0 if r.ok else 1
            if getattr(args, "recompute", None) is not None:
                status = max(status, recompute(args, open_cache(args.cache)))
            return status
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
