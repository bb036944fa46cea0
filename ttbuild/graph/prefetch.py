"""Before a build: fetch the remote cache's entries for every stage chain whose outputs are missing, many requests at once, so that the build itself finds them in the local cache."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .tasks import STAGES


def prefetch(tasks: list[dict], cache, threads: int = 32) -> tuple[int, int]:
    """Walk the stage tasks of `tasks` (generate_tasks' dicts) whose outputs are missing, chain
    by chain, `threads` chains at a time: compute each stage's cache key from its inputs (the
    kernel source, or its parent stage's outputs as the cache holds them) and `cache.get` it,
    which copies a remote hit into the local tier. A chain stops at its first miss (the build
    compiles from there). The build then runs its stages one by one against the local tier: a
    fresh checkout served by a remote pays one round trip per request per chain, in parallel,
    instead of all of them in a row. Returns (stage results found, stage tasks looked at)."""
    from ttbuild.compiler import stage_cache_key

    stage_tasks = {f"{t['basename']}:{t['name']}": t for t in tasks
                   if t.get("basename") in STAGES and t.get("name")}
    producer = {}
    for name, t in stage_tasks.items():
        (_action, args), = t["actions"]
        for role, path in args[3].items():
            producer[path] = (name, role)
    missing = {name for name, t in stage_tasks.items() if not all(Path(p).is_file() for p in t["targets"])}
    if not missing:
        return 0, 0
    needed = {producer[p][0] for t in stage_tasks.values() for p in t["actions"][0][1][2].values() if p in producer}
    leaves = [n for n in missing if n not in needed] or sorted(missing)
    lock = threading.Lock()
    keys: dict[str, str | None] = {}
    found = [0]

    def outputs(name: str):
        """The outputs of stage task `name` from the cache (None: not cached)."""
        t = stage_tasks[name]
        (_action, args), = t["actions"]
        stage, package, inputs, _outs, options = args[:5]
        with lock:
            key = keys.get(name, "")
        if key is None:
            return None
        if not key:
            data = {}
            for role, path in inputs.items():
                if path in producer:
                    parent, prole = producer[path]
                    got = outputs(parent)
                    if got is None:
                        with lock:
                            keys[name] = None
                        return None
                    data[role] = got[prole]
                else:
                    data[role] = Path(path).read_bytes()
            key = stage_cache_key(stage, data, options, package=package)
        out = cache.get(key)
        with lock:
            if name not in keys:
                keys[name] = key if out is not None else None
                found[0] += out is not None
        return out

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(outputs, leaves))
    return found[0], len(keys)
