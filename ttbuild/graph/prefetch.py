"""Before a build: fetch the remote cache's entries for every stage chain whose outputs are missing, many requests at once, so that the build itself finds them in the local cache."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from ttbuild.stages import STAGES

# Outputs the walk keeps in memory to compute children's keys without asking the cache again
# (bytes); past it, a key seen before is read back from the (local) cache instead.
MEMO_BYTES = 256 << 20


class Prefetched(NamedTuple):
    """What a prefetch saw, in stage tasks."""

    found: int  # results it found in the cache (now in the local tier)
    looked: int  # tasks it computed a key for (a chain stops at its first miss)
    missing: int  # tasks whose outputs were missing
    stages: int  # stage tasks in the graph

    def only_hits(self) -> bool:
        """True when every stage task was missing and is now a cache hit: a fresh checkout
        that compiles nothing. (A task whose outputs exist may still rerun, when its inputs or
        the compiler changed; only doit's state tells, so any such task makes this False.)"""
        return self.found == self.missing == self.stages


def prefetch(tasks: list[dict], cache, threads: int = 32) -> Prefetched:
    """Walk the stage tasks of `tasks` (generate_tasks' dicts) whose outputs are missing, chain
    by chain, `threads` chains at a time: compute each stage's cache key from its inputs (the
    kernel source, or its parent stage's outputs as the cache holds them) and `cache.get` it,
    which copies a remote hit into the local tier. A chain stops at its first miss (the build
    compiles from there). The build then runs its stages one by one against the local tier: a
    fresh checkout served by a remote pays one round trip per request per chain, in parallel,
    instead of all of them in a row.

    Each task's key is computed once, and each distinct key is looked up once (variants often
    share a stage's action: the same input bytes and options under different graph keys);
    outputs stay in memory up to MEMO_BYTES for the children's keys."""
    from ttbuild.compiler import stage_cache_key

    stage_tasks = {f"{t['basename']}:{t['name']}": t for t in tasks
                   if t.get("basename") in STAGES and t.get("name")}
    producer = {}
    for name, t in stage_tasks.items():
        (_action, args), = t["actions"]
        for role, path in args[3].items():
            producer[path] = (name, role)
    # os.path on the strings: a no-op build asks this of every output (Path objects cost 2x)
    missing = {name for name, t in stage_tasks.items() if not all(map(os.path.isfile, t["targets"]))}
    if not missing:
        return Prefetched(0, 0, 0, len(stage_tasks))
    needed = {producer[p][0] for t in stage_tasks.values() for p in t["actions"][0][1][2].values() if p in producer}
    leaves = [n for n in missing if n not in needed] or sorted(missing)

    walk = _Walk(stage_tasks, producer, cache, stage_cache_key)
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(walk.outputs, leaves))
    return Prefetched(walk.found, len(walk.keys), len(missing), len(stage_tasks))


class _Walk:
    """prefetch's shared state over its threads: per-task locks, each task's action key, and
    the outputs fetched per key (kept up to MEMO_BYTES for the children's keys)."""

    def __init__(self, stage_tasks: dict, producer: dict, cache, stage_cache_key):
        self.stage_tasks, self.producer, self.cache = stage_tasks, producer, cache
        self.stage_cache_key = stage_cache_key
        self.glock = threading.Lock()
        self.locks: dict[str, threading.Lock] = {}
        self.keys: dict[str, str | None] = {}  # task -> its action key, None where its chain missed
        self.memo: dict[str, dict[str, bytes] | None] = {}  # action key -> outputs (None: a miss)
        self.held = 0  # bytes in memo
        self.found = 0

    def lock_for(self, name: str) -> threading.Lock:
        """The lock of task or key `name`, made on first use."""
        with self.glock:
            return self.locks.setdefault(name, threading.Lock())

    def lookup(self, key: str):
        """The outputs under action `key`: from the memo, else from the cache (once per key:
        a second thread asking for it waits for the first)."""
        with self.lock_for("key:" + key):
            with self.glock:
                if key in self.memo:
                    return self.memo[key]
            out = self.cache.get(key)
            size = sum(len(b) for b in out.values()) if out is not None else 0
            with self.glock:
                if out is None or self.held + size <= MEMO_BYTES:
                    self.memo[key] = out
                    self.held += size
            return out

    def outputs(self, name: str):
        """The outputs of stage task `name` from the cache (None: not cached). Holds the task's
        lock while it walks up to its parents: locks are taken child before parent, and the
        graph has no cycle, so two threads never wait on each other."""
        with self.lock_for(name):
            if name in self.keys:
                key = self.keys[name]
                return None if key is None else self.lookup(key)
            t = self.stage_tasks[name]
            (_action, args), = t["actions"]
            stage, package, inputs, _outs, options = args[:5]
            data = {}
            for role, path in inputs.items():
                if path in self.producer:
                    parent, prole = self.producer[path]
                    got = self.outputs(parent)
                    if got is None:
                        self.keys[name] = None
                        return None
                    data[role] = got[prole]
                else:
                    data[role] = Path(path).read_bytes()
            key = self.stage_cache_key(stage, data, options, package=package)
            out = self.lookup(key)
            self.keys[name] = key if out is not None else None
            if out is not None:
                with self.glock:
                    self.found += 1
            return out
