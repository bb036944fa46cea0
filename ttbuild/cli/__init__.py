"""`ttbuild` command line: build / list / explain / show / clean / cache / doit / package / tune / record / serve, over doit's API and the repo's task graph.

    ttbuild build [KERNELS_DIR] [-o ARTIFACTS] [-j N] [--shard I/N] [--cache URL] [--cache-readonly] [--continue] [--keep-previous]
    ttbuild list [KERNELS_DIR] [-o ARTIFACTS] [--shard I/N]
    ttbuild explain VARIANT [-k KERNELS_DIR] [-o ARTIFACTS]
    ttbuild show VARIANT --stage ttgir [--role loc] [--path] [-k KERNELS_DIR] [-o ARTIFACTS]
    ttbuild clean [-o ARTIFACTS] [--orphans [-k KERNELS]]
    ttbuild cache [--cache URL] [--remote] stats|verify|prune [--max-bytes 10G] [--max-age 30d]
    ttbuild cache [--cache URL] verify --recompute N [-k KERNELS] [-o ARTIFACTS] [--seed S]
    ttbuild doit [DOIT ARGS...]      (any doit command on the same graph and state DB)
    ttbuild package [--name N --version V] [-d dist] [-o ARTIFACTS]   (artifacts/lib as a wheel; ttbuild.wheel)
    ttbuild tune [-o ARTIFACTS] [-k KERNELS] [--kernel NAME]   (ttbuild.runtime.tunecli; needs a GPU)
    ttbuild record [-o variants.toml] [--root DIR] [--from PATH ...] [-- CMD ...]   (rows from Triton's compiles; ttbuild.record.cli)
    ttbuild serve ARTIFACTS [--miss error|warn] [--miss-log PATH] [--facade] [--summary] -- CMD   (ttbuild.record.cli)

`ttbuild` alone is `ttbuild build`. Exit status: 0 ok; build: 1 a task failed (with or without
--continue), 3 a bad variant list; others: 2 bad usage,
3 a bad variant list (`list` still lists the rows that load and shows each bad row's diagnostic;
`show`/`explain` of a variant a bad row may define; ttbuild.cli.inspect).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from ttbuild.collector import graph_phase
from ttbuild.stages import DEFAULT, StageSet, stage_set

# Nothing of the compiler is imported at module level here (ttbuild.stages is the stage table
# alone): `ttbuild --help` works in a runtime-only install.

COMMANDS = ("build", "list", "explain", "show", "clean", "cache", "doit", "package", "tune", "record", "serve")


def parse_shard(text: str) -> tuple[int, int]:
    """`2/4` -> (2, 4): shard I of N, 1-based (argparse type; ArgumentTypeError otherwise)."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError(f"not a shard: {text!r} (I/N with 1 <= I <= N, e.g. 2/4)")
    return int(m.group(1)), int(m.group(2))


def _jobs(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"-j needs a positive number of processes, not {text!r}")
    return int(text)


def parser() -> argparse.ArgumentParser:
    """ttbuild's argument parser: one subcommand per command (build, tune, package, cache, inspect, record, serve,
    ...), each with its options and help."""
    ap = argparse.ArgumentParser(prog="ttbuild", description="Build a library of Triton-language kernels.")
    sub = ap.add_subparsers(dest="cmd", metavar="COMMAND")

    def dirs(p, positional: bool):
        """Add the kernels directory (positional, or -k) and -o artifacts options to subparser `p`."""
        if positional:
            p.add_argument("kernels", nargs="?", default=None, metavar="KERNELS_DIR",
                           help="directory holding variants.toml (default: ./kernels)")
        else:
            p.add_argument("-k", "--kernels", default=None, metavar="KERNELS_DIR",
                           help="directory holding variants.toml (default: ./kernels)")
        p.add_argument("-o", "--artifacts", default=None, metavar="DIR", help="output directory (default: ./artifacts)")

    b = sub.add_parser("build", help="compile every variant (default command)")
    dirs(b, True)
    b.add_argument("-j", "--jobs", type=_jobs, default=1, metavar="N", help="parallel worker processes")
    b.add_argument("--shard", type=parse_shard, default=None, metavar="I/N",
                   help="build only the variants of shard I of N (stable hash of the variant name)")
    b.add_argument("--cache", default=None, metavar="URL",
                   help="remote cache: a shared directory or http(s):// Bazel-protocol server; 'off' disables")
    b.add_argument("--cache-readonly", action="store_true",
                   help="read the remote cache but never write it (untrusted jobs); same as TTBUILD_CACHE_READONLY=1")
    b.add_argument("--continue", dest="keep_going", action="store_true",
                   help="keep building other variants after a failure")
    b.add_argument("--keep-previous", action="store_true",
                   help="a variant whose build fails keeps its previous good build in lib/ (default: removed)")
    b.add_argument("-v", "--verbose", action="store_true", help="show what stages print, and a line per up-to-date task")

    ls = sub.add_parser("list", help="variants and whether they are up to date")
    dirs(ls, True)
    ls.add_argument("--shard", type=parse_shard, default=None, metavar="I/N")

    ex = sub.add_parser("explain", help="which stages of VARIANT would run, and what changed")
    ex.add_argument("variant")
    dirs(ex, False)

    sh = sub.add_parser("show", help="print one stage's output file of VARIANT")
    sh.add_argument("variant")
    sh.add_argument("--stage", default="ttgir", choices=("parse", "ttir", "ttgir", "llir", "ptx", "cubin"))
    sh.add_argument("--role", default=None, help="which output of the stage (parse: json or loc)")
    sh.add_argument("--path", action="store_true", help="print the file's path only")
    dirs(sh, False)

    cl = sub.add_parser("clean", help="remove everything ttbuild wrote under artifacts/")
    cl.add_argument("-k", "--kernels", default=None, metavar="KERNELS_DIR",
                    help="directory holding variants.toml (default: ./kernels; for --orphans)")
    cl.add_argument("-o", "--artifacts", default=None, metavar="DIR")
    cl.add_argument("--orphans", action="store_true",
                    help="remove only stage outputs that no variant of variants.toml produces any more")

    # cache, doit, package, tune, record and serve parse their own arguments (`ttbuild COMMAND --help`)
    sub.add_parser("cache", help="inspect or trim the build cache: stats, verify [--recompute N], prune", add_help=False)
    sub.add_parser("doit", help="run any doit command on the same graph", add_help=False)
    sub.add_parser("package", help="turn artifacts/lib into a wheel needing only the runtime (-d DIST)", add_help=False)
    sub.add_parser("tune", help="time each autotuned kernel's configs on this GPU, write artifacts/tuning/",
                   add_help=False)
    sub.add_parser("record", help="run a command under Triton and turn what it compiled into variant rows and tuning tables",
                   add_help=False)
    sub.add_parser("serve", help="run a command with the built library served to its Triton call sites", add_help=False)
    return ap


def _cache(rest: list[str], stages: StageSet) -> int:
    """`ttbuild cache [--cache URL] [--remote] stats|verify|prune ...`, where verify also takes
    `--recompute N [-k KERNELS] [-o ARTIFACTS] [--seed S]`: the usual verify, then N of the
    project's stages run afresh against their cache entries (ttbuild.cli.cacheverify; N = 0:
    all of them)."""
    from ttbuild.cache.__main__ import main as cache_main

    def recompute(args, cache) -> int:
        """`ttbuild cache verify --recompute`: rebuild a sample of cached actions and compare their outputs byte for
        byte (cli.cacheverify). Returns the exit status."""
        from .cacheverify import recompute as run
        from .loader import Project

        project = Project.from_args(args.kernels, args.artifacts, None, stages)
        return run(project, args.recompute, cache, args.seed)

    return cache_main(rest, prog="ttbuild cache", recompute=recompute)


def main(argv: list[str] | None = None, *, stage_package: StageSet | str = DEFAULT) -> int:
    """Run the command line on `argv` (default sys.argv[1:]); returns the exit status.

    stage_package: the `ttbuild.stages.StageSet` that compiles, or its package's name (the
    compiler's own by default; tests pass their stand-ins here, never through the environment)."""
    stages = stage_set(stage_package)
    args_in = list(sys.argv[1:] if argv is None else argv)
    if not args_in or (args_in[0].startswith("-") and args_in[0] not in ("-h", "--help")):
        args_in.insert(0, "build")
    if args_in[0] == "doit":
        return _doit(args_in[1:], stages)
    if args_in[0] == "package":
        from ttbuild.wheel import main as package_main

        return package_main(args_in[1:])
    if args_in[0] == "cache":
        return _cache(args_in[1:], stages)
    if args_in[0] == "tune":
        from ttbuild.runtime.tunecli import main as tune_main

        return tune_main(args_in[1:])
    if args_in[0] in ("record", "serve"):  # no compiler: they run where Triton and the project run
        from ttbuild.record.cli import main as record_main
        from ttbuild.record.cli import serve_main

        return (record_main if args_in[0] == "record" else serve_main)(args_in[1:])
    args = parser().parse_args(args_in)
    try:
        with graph_phase():  # no cyclic collection over the task graph while it is checked
            return _dispatch(args, stages)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
            return 2
        raise
    except ImportError:  # a runtime-only install: ttbuild.__main__ names the missing extra
        raise
    except KeyboardInterrupt:
        # doit has saved its state for what finished; what was cut short reruns next time
        print("ttbuild: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        import sqlite3

        from doit.exceptions import InvalidDodoFile

        from ttbuild.graph import VariantError

        if isinstance(exc, (VariantError, InvalidDodoFile)):
            print(f"ERROR: {exc.render() if isinstance(exc, VariantError) else exc}", file=sys.stderr)
            return 3
        if isinstance(exc, BrokenPipeError):
            # `ttbuild list | head`: the reader left; say nothing more (Python docs, "Note on SIGPIPE")
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 141
        if isinstance(exc, OSError):  # the environment, not the build: say what and where
            where = f": {exc.filename}" if exc.filename else ""
            print(f"ttbuild: error: {exc.strerror or exc}{where}", file=sys.stderr)
            return 1
        if isinstance(exc, sqlite3.Error):  # doit's state DB (artifacts/.doit.db)
            print(f"ttbuild: error: the build state database in {getattr(args, 'artifacts', None) or 'artifacts'}/ "
                  f"failed: {exc} (disk full or folder not writable?)", file=sys.stderr)
            return 1
        raise


def _dispatch(args, stages: StageSet = DEFAULT) -> int:
    from .loader import Project

    project = Project.from_args(getattr(args, "kernels", None), args.artifacts, getattr(args, "shard", None),
                                stages)
    if project.artifacts.exists() and not project.artifacts.is_dir():
        print(f"ttbuild: error: the artifacts folder {project.artifacts} is a file (-o names a folder)",
              file=sys.stderr)
        return 2
    if args.cmd == "build":
        from .build import build

        if args.cache_readonly:
            os.environ["TTBUILD_CACHE_READONLY"] = "1"
        return build(project, jobs=args.jobs, keep_going=args.keep_going, cache=args.cache,
                     verbose=args.verbose, keep_previous=args.keep_previous)
    if args.cmd == "clean":
        from .build import clean, clean_orphans

        return clean_orphans(project) if args.orphans else clean(project)
    from . import inspect

    if args.cmd == "list":
        return inspect.cmd_list(project)
    if args.cmd == "explain":
        return inspect.cmd_explain(project, args.variant)
    if args.cmd == "show":
        return inspect.cmd_show(project, args.variant, args.stage, args.role, args.path)
    raise AssertionError(args.cmd)


def _doit(rest: list[str], stages: StageSet = DEFAULT) -> int:
    """`ttbuild doit ARGS`: doit's own command line over ./kernels and ./artifacts."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    from .loader import Project

    return DoitMain(ModuleTaskLoader(Project.from_args(None, None, stage_package=stages).namespace())).run(rest)
