"""`ttbuild record`: run a command under Triton with the recorder on, then merge what it (and any record directory or miss log named) compiled into variant rows and tuning tables.

    ttbuild record [-o variants.toml] [--root DIR] [--source-root DIR ...] [--tuning DIR] [--target cuda:90 ...]
                   [--from PATH ...] [-- CMD ...]

    ttbuild serve ARTIFACTS [--miss error|warn] [--miss-log PATH] [--facade] [--summary] -- CMD ...

Exit status: the command's when it fails, else 0; 2 bad usage or nothing to merge.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import tomllib

from .failed import failed_configs
from .rows import merge_records, rows_text, source_notes
from .store import ENV, read_records
from .tuning import write_tables

STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "startup")


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ttbuild record", description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=None, metavar="FILE",
                    help="variant rows to write, merged with the rows already there (default: ROOT/variants.toml)")
    ap.add_argument("--root", default=".", metavar="DIR", help="project root: rows name files relative to it (default: .)")
    ap.add_argument("--tuning", default=None, metavar="DIR",
                    help="where the autotune choices go as tuning tables (default: artifacts/tuning beside the rows' root)")
    ap.add_argument("--target", action="append", default=None, metavar="T",
                    help="build the recorded rows for target T (repeat; default: the recording GPU's)")
    ap.add_argument("--source-root", dest="source_roots", action="append", default=[], metavar="DIR",
                    help="add DIR (relative to the root) to [project] source_roots, as sys.path holds it")
    ap.add_argument("--from", dest="sources", action="append", default=[], metavar="PATH",
                    help="also merge a record directory (TTBUILD_RECORD=DIR) or a miss log (.jsonl)")
    return ap


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """(options, command): the command is everything after the first `--`."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def run_recorded(command: list[str], directory: str, **extra_env) -> int:
    """Run `command` with TTBUILD_RECORD=directory (unless empty) and the startup hook first on PYTHONPATH."""
    env = dict(os.environ, **extra_env)
    if directory:
        env[ENV] = directory
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # ttbuild's parent
    env["PYTHONPATH"] = os.pathsep.join([STARTUP, here] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    try:
        return subprocess.call(command, env=env)
    except OSError as exc:
        print(f"ttbuild record: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        return 127


def existing(path: str) -> tuple[list[dict], dict]:
    """(rows, other top-level tables) of the variant list at `path` (empty when absent)."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        return [], {}
    return list(doc.pop("variant", [])), doc


def with_source_roots(tables: dict, roots: list[str]) -> dict:
    """`[project] source_roots` (docs/CONTRACTS.md "Project modules") with `roots` added once each."""
    if roots:
        project = tables.setdefault("project", {})
        have = list(project.get("source_roots", []))
        project["source_roots"] = have + [r for r in roots if r not in have]
    return tables


def main(argv: list[str]) -> int:
    options, command = split_command(argv)
    args = parser().parse_args(options)
    if not command and not args.sources:
        print("ttbuild record: give a command after --, or --from PATH", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    output = args.output or os.path.join(root, "variants.toml")
    status = 0
    with tempfile.TemporaryDirectory(prefix="ttbuild-record-") as tmp:
        if command:
            status = run_recorded(command, tmp)
        events = read_records(tmp, *args.sources)
    try:
        old_rows, tables = existing(output)
    except tomllib.TOMLDecodeError as exc:
        print(f"ttbuild record: {output}: not TOML: {exc}", file=sys.stderr)
        return 2
    rows, problems = merge_records(events, root, old_rows, args.target)
    with open(output + ".tmp", "w", encoding="utf-8") as f:
        f.write(rows_text(rows, source_notes(events, root), with_source_roots(tables, args.source_roots)))
    os.replace(output + ".tmp", output)
    tuning = args.tuning or os.path.join(os.getcwd(), "artifacts", "tuning")
    tables = write_tables(events, root, tuning)
    n = sum(1 for e in events if e["event"] == "compile")
    dropped = len(failed_configs(events))
    print(f"ttbuild record: {n} compiles recorded, {len(rows)} rows in {output}"
          + (f", {dropped} compiles of autotune configs Triton could not run dropped" if dropped else "")
          + (f", {len(tables)} tuning tables in {tuning}" if tables else ""), file=sys.stderr)
    for p in problems:
        print(f"ttbuild record: skipped: {p}", file=sys.stderr)
    return status


def serve_main(argv: list[str]) -> int:
    """`ttbuild serve ARTIFACTS -- CMD`: run CMD with the library served to every Python process it starts."""
    ap = argparse.ArgumentParser(prog="ttbuild serve", description="run a command with a library served to its Triton call sites")
    ap.add_argument("artifacts", help="the built library (artifacts directory)")
    ap.add_argument("--miss", choices=("error", "warn"), default="error", help="what a launch no variant covers does")
    ap.add_argument("--miss-log", default=None, metavar="PATH", help="append misses here (.jsonl or directory)")
    ap.add_argument("--facade", action="store_true", help="without an installed Triton, `import triton` loads ttbuild's façade")
    ap.add_argument("--summary", action="store_true",
                    help="each served process prints launches served, misses and Triton's compiles at exit")
    options, command = split_command(argv)
    args = ap.parse_args(options)
    if not command:
        print("ttbuild serve: give a command after --", file=sys.stderr)
        return 2
    extra = {"TTBUILD_SERVE": os.path.abspath(args.artifacts), "TTBUILD_SERVE_MISS": args.miss}
    if args.facade:
        extra["TTBUILD_SERVE_FACADE"] = "1"
    if args.summary:
        extra["TTBUILD_SERVE_SUMMARY"] = "1"
    if args.miss_log:
        extra["TTBUILD_MISS_LOG"] = os.path.abspath(args.miss_log)
    return run_recorded(command, "", **extra)
