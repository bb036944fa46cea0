"""`ttbuild build` and `ttbuild clean`: doit's `run` over the ttbuild graph, under the artifacts lock, with the cache chosen up front."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import urllib.parse

from .loader import Project, build_lock


def pick_reporter(stream=None):
    """The rich live display on a terminal; plain lines when not a TTY or when `CI` is set."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get("CI") or not getattr(stream, "isatty", lambda: False)():
        from ttbuild.graph.reporter import BuildReporter

        return BuildReporter
    from .progress import RichBuildReporter

    return RichBuildReporter


def _reachable(url: str, timeout: float = 2.0) -> str | None:
    """None when an http(s) cache URL's host accepts a TCP connection, else why not."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((parts.hostname, port), timeout=timeout).close()
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def quiet_cache_warnings() -> None:
    """Cache problems (a corrupt entry dropped, a tier gone) reach the cache's `log` and the
    `warnings` module alike; a build log wants each once, as `ttbuild: warning: ...` on stderr,
    not also Python's `file:line: CacheWarning` form with a source line."""
    import logging
    import warnings

    from ttbuild.cache import CacheWarning

    warnings.filterwarnings("ignore", category=CacheWarning)
    log = logging.getLogger("ttbuild.cache")
    if not any(getattr(h, "_ttbuild_cli", False) for h in log.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("ttbuild: warning: %(message)s"))
        handler.setLevel(logging.WARNING)
        handler._ttbuild_cli = True
        log.addHandler(handler)


def setup_cache(url: str | None) -> None:
    """Install the build's cache in this process before doit forks any worker.

    `--cache URL` wins over `$TTBUILD_CACHE` and is exported, so every process of the build
    agrees. An HTTP remote that does not answer is dropped here with ONE warning for the whole
    build (workers inherit the local-only cache), instead of one per worker process.
    """
    from ttbuild.cache import CacheError, HttpCache, LayeredCache, open_cache, set_default_cache

    quiet_cache_warnings()
    if url is not None:
        os.environ["TTBUILD_CACHE"] = url
    try:
        cache = open_cache()
    except CacheError as exc:
        raise SystemExit(f"ttbuild: error: {exc}") from None
    if isinstance(cache, LayeredCache) and isinstance(cache.remote, HttpCache):
        why = _reachable(os.environ["TTBUILD_CACHE"], cache.remote.timeout)
        if why is not None:
            print(f"ttbuild: warning: cache {cache.remote.name} is unreachable ({why}); "
                  f"building with the local cache {cache.local.name} only", file=sys.stderr, flush=True)
            cache = cache.local
            os.environ["TTBUILD_CACHE"] = ""
    set_default_cache(cache)


def _prefetch(project: Project):
    """Before doit runs, walk the chains of the missing stage outputs through the cache
    (ttbuild.graph.prefetch; `TTBUILD_PREFETCH=0` skips it): with a remote tier this fetches
    what they need in parallel and says how many it found; with the local cache alone it reads
    only, to learn whether the build has anything to compile. Returns
    (ttbuild.graph.prefetch.Prefetched, the tasks it walked: the build's own), or None where no
    walk ran (`--cache off`). A bad variant list is left to the build, which reports it."""
    import time

    from ttbuild.cache import DirCache, LayeredCache, default_cache
    from ttbuild.errors import CompilationError
    from ttbuild.graph.prefetch import prefetch
    from ttbuild.graph.tasks import generate_tasks
    from ttbuild.graph.variants import VariantError

    cache = default_cache()
    if not isinstance(cache, (LayeredCache, DirCache)) or os.environ.get("TTBUILD_PREFETCH", "1") in ("0", "off", "no"):
        return None
    remote = cache.remote if isinstance(cache, LayeredCache) else None  # a local walk fetches nothing
    try:
        tasks = list(generate_tasks(project.kernels, project.artifacts, project.stages,
                                    variants=project.variants()))
    except (VariantError, CompilationError):  # the build reports it
        return None
    start = time.monotonic()
    try:
        seen = prefetch(tasks, cache)
    except Exception as exc:  # an optimisation: the build itself fetches (or compiles) what is left
        print(f"ttbuild: warning: prefetch from {(remote or cache).name} stopped ({type(exc).__name__}: {exc})",
              file=sys.stderr, flush=True)
        return None
    if seen.looked and remote is not None:
        print(f"ttbuild: prefetched {seen.found} of {seen.looked} stage results from {remote.name} "
              f"in {time.monotonic() - start:.2f}s", flush=True)
    return seen, tasks


def build(project: Project, jobs: int = 1, keep_going: bool = False, cache: str | None = None,
          verbose: bool = False, keep_previous: bool = False) -> int:
    """Run doit's `run` over the project's graph; returns 0 (ok), 1 (a task failed, doit's 1
    and 2 alike) or 3 (a bad variant list). The artifacts lock is held from before the first status check
    until doit has saved its state (see BuildReporter.for_artifacts)."""
    from doit.cmd_base import ModuleTaskLoader
    from doit.doit_cmd import DoitMain

    _check_writable(project.artifacts)
    from ttbuild.limits import StageLimits

    try:  # once, here, rather than as every stage task's failure
        StageLimits.from_env()
    except ValueError as exc:
        raise SystemExit(f"ttbuild: error: {exc}") from None
    setup_cache(cache)
    seen, tasks = _prefetch(project) or (None, None)
    # The reporter holds artifacts/.ttbuild.lock for the run (BuildReporter.for_artifacts).
    # It also owns lib/ (BuildReporter.prune_lib): what no variant writes goes (not with --shard,
    # whose graph is a share), so does a variant that failed, unless --keep-previous.
    reporter = pick_reporter().for_artifacts(project.artifacts, prune_unknown=project.shard is None,
                                             prune_failed=not keep_previous)
    config = {"reporter": reporter, "continue": keep_going}
    argv = ["run"]
    if seen is not None and seen.only_hits() and jobs > 1:
        # A fresh checkout the cache serves whole: a hit costs well under a millisecond in this
        # process, less than handing the task to a worker and back (1000 variants from the
        # local tier: 3.0-3.5 s in this process, 5.0-5.2 s with -j 2; 3000: 15.6-19.9 s
        # against 20.4-21.9 s).
        print(f"ttbuild: every stage is in the cache: building in this process (not -j {jobs})", flush=True)
        jobs = 1
    if jobs > 1:
        # Processes, not threads: stages hold the GIL in MLIR/LLVM calls. Actions and the
        # checker are module-level functions and classes, so doit's pickling works.
        argv += ["-n", str(jobs), "-P", "process"]
    if verbose:
        argv += ["-v", "2"]
        os.environ["TTBUILD_LIST_UPTODATE"] = "1"
    # doit's sqlite3 backend with every row read in one query (ttbuild.graph.state.PreloadedSqliteDB)
    backends = {"BACKEND": {"sqlite3": "ttbuild.graph.state:PreloadedSqliteDB"}}
    from ttbuild.graph.state import SAVE_ERRORS

    del SAVE_ERRORS[:]
    status = DoitMain(ModuleTaskLoader(project.namespace(config, tasks)), extra_config=backends).run(argv)
    for why in SAVE_ERRORS:
        full = " (ENOSPC: no space left on the device?)" if "disk is full" in why else ""
        print(f"ttbuild: error: the build state could not be saved: {why}{full}; the files built are whole, "
              "the next build runs these stages again", file=sys.stderr)
        status = max(status, 1)
    # doit says 1 when a task failed and 2 when one raised (every stage failure raises), with or
    # without --continue; the build's contract (README) is one status for "a variant failed": 1
    return 1 if status in (1, 2) else status


def _check_writable(artifacts) -> None:
    """Raise OSError naming the folder when the build could not write `artifacts` (read-only,
    full, not ours), before doit starts: inside its run every failure is a traceback."""
    import errno
    import tempfile

    try:
        os.makedirs(artifacts, exist_ok=True)
        with tempfile.TemporaryFile(dir=artifacts):
            pass
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "")
        raise OSError(exc.errno, f"the artifacts folder cannot be written: {exc.strerror or exc} ({name})",
                      str(artifacts)) from None


def clean(project: Project) -> int:
    """Remove everything ttbuild writes under artifacts/ (stage directories, lib/, doit's DB),
    leaving any other file there alone. Waits for a running build first. The lock file stays:
    unlinking it could hand a waiter and a newcomer two different locks."""
    from ttbuild.buildrecord import RECORD
    from ttbuild.graph.state import CLEAN_MARK
    from ttbuild.graph.tasks import DEP_FILE, TASK_GROUPS

    art = project.artifacts
    if not art.is_dir():
        return 0
    with build_lock(art):
        removed = 0
        for name in [*TASK_GROUPS, "lib"]:
            if (art / name).is_dir():
                shutil.rmtree(art / name)
                removed += 1
        for db in [*art.glob(DEP_FILE + "*"), *art.glob(CLEAN_MARK), *art.glob(RECORD)]:
            db.unlink()
            removed += 1
    print(f"ttbuild: cleaned {art} ({removed} entries)")
    return 0


def clean_orphans(project: Project) -> int:
    """Remove the stage output folders (`artifacts/<stage>/<key>/`) that no variant of the
    project's variants.toml produces any more: what edits, renamed kernels and removed rows
    leave behind (the cache keeps its copies). Their doit state stays in the DB, unused. Waits
    for a running build first. Raises VariantError for a list that does not load (the CLI
    prints it, status 3): nothing is removed then, a broken list never reads as an empty one."""
    from ttbuild.graph.tasks import generate_tasks

    art, stages = project.artifacts, project.stages.names
    if not art.is_dir():
        return 0
    wanted = {(t["basename"], t["name"]) for t in generate_tasks(project.kernels, art, project.stages)
              if t.get("basename") in stages and t.get("name")}
    with build_lock(art):
        removed = 0
        for stage in stages:
            root = art / stage
            if not root.is_dir():
                continue
            for entry in root.iterdir():
                if entry.is_dir() and (stage, entry.name) not in wanted:
                    shutil.rmtree(entry)
                    removed += 1
    print(f"ttbuild: removed {removed} orphan stage output folder{'s' if removed != 1 else ''} from {art}")
    return 0
