"""`ttbuild tune [-o ARTIFACTS] [-k KERNELS] [--kernel NAME]... [--recorded PATH]`: the command line over ttbuild.runtime.tuner, with its progress and summary.

It loads the library (ttbuild.runtime.load), keeps its tuned launchers that have a tune plan,
and has ttbuild.runtime.tuner time them and write `artifacts/tuning/<kernel>.json`.
"""

from __future__ import annotations

import argparse
import os
import sys

from .metadata import MetadataError
from .tuner import _torch, plans, tune_kernel


def main(argv: list[str] | None = None) -> int:
    """`ttbuild tune [-o ARTIFACTS] [-k KERNELS] [--kernel NAME]...`; exit 0, or 2 (nothing to tune, bad usage)."""
    ap = argparse.ArgumentParser(prog="ttbuild tune", description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--artifacts", default="artifacts", metavar="DIR", help="the built library (lib/ inside)")
    ap.add_argument("-k", "--kernels", default="kernels", metavar="DIR", help="the kernels folder (tune harnesses)")
    ap.add_argument("--kernel", action="append", default=None, metavar="NAME", help="tune only this kernel")
    ap.add_argument("--shapes", default=None, metavar="FILE.toml",
                    help="tune plans instead of the rows' own: [<row name>] args = \"file.py:function\", shapes = [...]")
    ap.add_argument("--cache", default=None, metavar="URL",
                    help="where earlier timings are kept (default: TTBUILD_CACHE, else the local cache directory)")
    ap.add_argument("--force", action="store_true", help="time every shape again (the cache is still filled)")
    ap.add_argument("--warmup-ms", type=float, default=25.0)
    ap.add_argument("--rep-ms", type=float, default=100.0)
    ap.add_argument("--recorded", default=None, metavar="PATH",
                    help="retime the keys `ttbuild record` tuned: its tuning table, a folder of them or a record directory")
    ap.add_argument("--root", default=".", metavar="DIR", help="with --recorded DIR of records: the project root")
    ap.add_argument("--dry-run", action="store_true", help="with --recorded: print what would be timed, time nothing")
    args = ap.parse_args(argv)
    from . import load

    try:
        lib = load(args.artifacts)
    except MetadataError as exc:
        print(f"ttbuild tune: {exc}", file=sys.stderr)
        return 2
    tuning_dir = os.path.join(args.artifacts, "tuning")
    if args.recorded:
        from .retune import run_recorded

        return run_recorded(lib, args.recorded, tuning_dir, args.root, args.kernel, args.dry_run,
                            warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
    override = read_shapes(args.shapes) if args.shapes else None
    todo, status = [], 0
    for name in tunable_kernels(lib, args.kernel):
        try:
            launcher = lib[name]
        except MetadataError as exc:  # this kernel cannot be tuned; the others still are
            print(f"ttbuild tune: {name}: {exc}", file=sys.stderr)
            status = 1
            continue
        mine = plans(launcher) if override is None else {g: p for g, p in override.items()
                                                          if any(v.autotune and v.autotune["group"] == g
                                                                 for v in launcher.variants)}
        if mine:
            todo.append((name, launcher, mine))
    unknown = sorted(set(args.kernel or ()) - set(lib.kernels))
    if unknown:
        print(f"ttbuild tune: no kernel {', '.join(unknown)} in {args.artifacts}; kernels: {', '.join(lib.kernels)}",
              file=sys.stderr)
        return 2
    if not todo:
        print("ttbuild tune: no autotuned kernel with a tune plan (a row with autotune = true and "
              "tune = { args = ..., shapes = [...] })", file=sys.stderr)
        return 2
    try:
        cuda = _torch().cuda.is_available()
    except ImportError:
        cuda = None
    if not cuda:
        print("ttbuild tune: timing needs torch with a CUDA GPU ("
              + ("torch is not installed" if cuda is None else "torch sees no GPU") + ")", file=sys.stderr)
        return 2
    from ttbuild.cache import open_cache

    cache = open_cache(args.cache)
    if args.force:
        cache = _WriteOnly(cache)
    report = _Report(sum(len(p["shapes"]) for _, _, mine in todo for p in mine.values()))
    with report:
        for name, launcher, mine in todo:
            table = name.replace(".py:", ".").replace(":", ".")
            doc = tune_kernel(launcher, args.kernels, tuning_dir, table, progress=report.step, only=mine,
                              cache=cache, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
            report.rows.extend((name, e) for e in doc["entries"])
    report.summary(tuning_dir)
    return status


def tunable_kernels(lib, wanted=None) -> list[str]:
    """The names of `lib`'s kernels (ttbuild.runtime.Library) built from `@triton.autotune` rows,
    read from their variants' metadata without making their launchers: a kernel that cannot be
    launched by name (a TMA kernel whose variants encode a descriptor differently raises
    MetadataError on lookup) is never looked up unless it is autotuned. `wanted`: only these
    names (`--kernel`), short or "file.py:name"."""
    tuned = {(v.file, v.kernel) for v in lib.variants if v.autotune}
    out = []
    for name in lib.kernels:
        file, _, kernel = name.rpartition(":")
        if wanted is not None and name not in wanted:
            continue
        if any(k == kernel and (not file or f == file) for f, k in tuned):
            out.append(name)
    return out


def read_shapes(path: str) -> dict[str, dict]:
    """A shapes file: one table per row name (the autotune group) with `args` and `shapes`, as a
    row's `tune` plan. Raises SystemExit naming the file for anything else."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: TOML nested past the parser's depth
        raise SystemExit(f"ttbuild tune: {path}: {exc}") from None
    for group, plan in doc.items():
        ok = (isinstance(plan, dict) and isinstance(plan.get("args"), str) and plan["args"].count(":") == 1
              and isinstance(plan.get("shapes"), list) and all(isinstance(x, dict) for x in plan["shapes"]))
        if not ok:
            raise SystemExit(f"ttbuild tune: {path}: [{group}] needs args = \"file.py:function\" and "
                             "shapes = [{ M = 512, ... }, ...]")
    return doc


class _WriteOnly:
    """--force: every get misses, puts go through."""

    def __init__(self, cache):
        self.cache = cache

    def get(self, key):
        """Always a miss: --force measures again."""
        return None

    def put(self, key, outputs):
        """Store the new measurement in the wrapped cache."""
        self.cache.put(key, outputs)


class _Report:
    """A progress bar (rich, on a terminal) or one line per shape, and the summary table."""

    def __init__(self, total: int):
        self.total, self.rows, self.cached = total, [], 0
        self.bar = None
        try:
            from rich.progress import Progress

            if sys.stdout.isatty():
                self.bar = Progress()
        except ImportError:
            pass

    def __enter__(self):
        if self.bar is not None:
            self.bar.__enter__()
            self.task = self.bar.add_task("tuning", total=self.total)
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def step(self, group, shape, times, best, cached=False):
        """One shape of `group` tuned: advance the bar, or print the winner `best` with its time in ms (and
        "(cached)" when the cache served it)."""
        self.cached += cached
        if self.bar is not None:
            self.bar.advance(self.task)
        else:
            t = times.get(best)
            print(f"{group} {shape}: config {best}" + (f" {t:.4f} ms" if t is not None else "")
                  + (" (cached)" if cached else ""), flush=True)

    def summary(self, tuning_dir: str) -> None:
        """Print the table of winners (kernel, group, shape, winning config, its ms, the runner-up's slowdown) and
        where the tuning tables were written (`tuning_dir`)."""
        header = ("kernel", "group", "shape", "winner", "ms", "runner-up")
        lines = []
        for name, e in self.rows:
            ran = sorted((t, int(c)) for c, t in e["times_ms"].items() if t is not None)
            second = f"c{ran[1][1]} {ran[1][0] / ran[0][0]:.2f}x" if len(ran) > 1 else "-"
            lines.append((name, e["group"], " ".join(f"{k}={v}" for k, v in e.get("shape", {}).items()),
                          f"c{e['config']}", f"{ran[0][0]:.4f}" if ran else "-", second))
        try:
            from rich.console import Console
            from rich.table import Table

            table = Table(*header, title=f"tuning tables in {tuning_dir}"
                          + (f" ({self.cached} of {self.total} shapes from the cache)" if self.cached else ""))
            for row in lines:
                table.add_row(*row)
            Console().print(table)
        except ImportError:
            print("  ".join(header))
            for row in lines:
                print("  ".join(row))
