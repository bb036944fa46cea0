"""`ttbuild cache verify --recompute N`: run a sample of the project's stages afresh and check that the cache's entries for them hold the same bytes."""

from __future__ import annotations

import random
from pathlib import Path

from .loader import Project


def recompute(project: Project, n: int, cache, seed: int | None = None) -> int:
    """Pick `n` stage tasks of `project` (all of them for n <= 0) whose inputs are in its
    artifacts folder, look up each one's cache entry, run the stage afresh and compare bytes.
    A cached action whose outputs a fresh run does not reproduce (a poisoned or wrongly shared
    entry: blobs are checked against their hash, an entry's pairing of action and blobs only by
    who wrote it) is reported and dropped (`Cache.forget`; read-only caches keep it). Prints one
    line per finding and a summary. Returns 0, or 1 when an entry did not reproduce."""
    from ttbuild.compiler import run_stage, stage_cache_key
    from ttbuild.graph.tasks import generate_tasks

    tasks = [t for t in generate_tasks(project.kernels, project.artifacts, project.stages)
             if t.get("basename") in project.stages.names and t.get("name")]
    runnable = []
    for t in tasks:
        (_action, args), = t["actions"]
        stage, package, inputs, _outputs, options = args[:5]
        if all(Path(p).is_file() for p in inputs.values()):
            runnable.append((t["basename"] + ":" + t["name"], stage, package, inputs, options))
    sample = runnable if n <= 0 or n >= len(runnable) else random.Random(seed).sample(runnable, n)
    checked = cached = bad = 0
    for name, stage, package, inputs, options in sample:
        package.module(stage)  # an unknown stage fails here, loudly
        data = {role: Path(p).read_bytes() for role, p in inputs.items()}
        key = stage_cache_key(stage, data, options, package=package)
        stored = cache.get(key)
        checked += 1
        if stored is None:
            continue
        cached += 1
        fresh, _ = run_stage(stage, data, options, package=package, cache=None)
        differ = sorted(r for r in fresh if bytes(fresh[r]) != bytes(stored.get(r, b"")))
        if differ:
            bad += 1
            why = f"entry {key[:16]}... of {name} does not reproduce (outputs {', '.join(differ)} differ)"
            dropped = cache.forget(key, why)
            print(f"{name}: cache entry {key[:16]}... does not reproduce: {', '.join(differ)} differ"
                  f"{'; dropped' if dropped else ' (read-only: kept)'}")
    print(f"recomputed {checked} of {len(runnable)} stages ({cached} cached): "
          f"{bad} entr{'y' if bad == 1 else 'ies'} did not reproduce")
    return 1 if bad else 0
