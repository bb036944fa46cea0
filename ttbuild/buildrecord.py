"""The record of the last build (`artifacts/.ttbuild-build.json`) and the check `ttbuild package` makes against it; stdlib only.

A build writes the record when it ends, under the artifacts lock (ttbuild.graph.reporter): the
sha256 of every source the variant list reads (`variants.toml` and each `*.py` under the kernels
folder), the variants its graph holds, those that failed (or were kept from a previous build by
`--keep-previous`), its shard, and whether it reached every variant. `ttbuild package`, which
runs in a runtime-only install, compares that record with the kernels folder and with `lib/` as
they are now (`library_problems`), so a library that a failed, partial, stale or sharded build
left is refused instead of shipped (issue 32, item 3).
"""

from __future__ import annotations

import hashlib
import json
import os

RECORD = ".ttbuild-build.json"
SCHEMA = "ttbuild.build/1"


def source_digests(kernels_dir: str | os.PathLike) -> dict[str, str]:
    """{path relative to `kernels_dir` ('/'-separated): sha256 hex} of `variants.toml` and every
    `*.py` below it (caches and hidden folders left out); {} for a missing folder."""
    root = os.fspath(kernels_dir)
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__pycache__")))
        for name in sorted(files):
            if name.endswith(".py") or (name == "variants.toml" and folder == root):
                path = os.path.join(folder, name)
                try:
                    with open(path, "rb") as f:
                        digest = hashlib.sha256(f.read()).hexdigest()
                except OSError:
                    continue
                out[os.path.relpath(path, root).replace(os.sep, "/")] = digest
    return out


def write_record(artifacts: str | os.PathLike, kernels_dir: str | os.PathLike | None, *, variants, failed,
                 shard: str | None, complete: bool) -> None:
    """Write the record of the build that just ended (atomically: temp file + rename).
    `variants`: the lib/ JSON names (without `.json`) its graph writes; `failed`: those that
    failed or were skipped; `complete`: every variant was reached and none failed."""
    # No absolute path: artifacts/ moves between machines (a CI cache) and stays byte-identical.
    doc = {"schema": SCHEMA, "sources": source_digests(kernels_dir) if kernels_dir is not None else {},
           "variants": sorted(set(variants)), "failed": sorted(set(failed)), "shard": shard,
           "complete": bool(complete) and not failed and shard is None}
    path = os.path.join(os.fspath(artifacts), RECORD)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def forget_record(artifacts: str | os.PathLike) -> None:
    """Remove the record as a build starts: until it ends, lib/ is no build's complete result."""
    try:
        os.unlink(os.path.join(os.fspath(artifacts), RECORD))
    except FileNotFoundError:
        pass


def read_record(artifacts: str | os.PathLike) -> dict | None:
    """The record of the last build in `artifacts`, or None when there is none (or not ours)."""
    try:
        with open(os.path.join(os.fspath(artifacts), RECORD), "rb") as f:
            doc = json.loads(f.read(1 << 24))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == SCHEMA else None


def _names(items, limit: int = 6) -> str:
    items = sorted(items)
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def library_problems(artifacts: str | os.PathLike, kernels_dir: str | os.PathLike, lib_names) -> list[str]:
    """Why `lib/` (whose JSON files are `lib_names`, without `.json`) is not the complete,
    current build of the variant list in `kernels_dir`: one sentence per problem, [] when it is."""
    doc = read_record(artifacts)
    if doc is None:
        return [f"{os.path.join(os.fspath(artifacts), RECORD)} records no build: run `ttbuild build` first"]
    out = []
    if doc.get("shard"):
        out.append(f"the last build was shard {doc['shard']} only (build the whole list before packaging)")
    failed = doc.get("failed") or []
    if failed:
        out.append(f"the last build failed for {len(failed)} variant(s): {_names(failed)}")
    elif not doc.get("complete") and not doc.get("shard"):
        out.append("the last build stopped before it reached every variant")
    have, then = source_digests(kernels_dir), doc.get("sources") or {}
    changed = [p for p in sorted(set(have) | set(then)) if have.get(p) != then.get(p)]
    if changed:
        out.append(f"{_names(changed)} changed since the last build (build again)")
    built = set(doc.get("variants") or ())
    lib = set(lib_names)
    if lib - built:
        out.append(f"lib/ holds {_names(lib - built)}, which the last build did not write")
    if built - lib:
        out.append(f"lib/ lacks {_names(built - lib)}, which the variant list names")
    return out


def state(artifacts: str | os.PathLike, kernels_dir: str | os.PathLike, problems: list[str]) -> dict:
    """What a wheel records of the variant list it was made from: the sources' combined sha256,
    whether the library was the complete current build, and the problems it was packaged with."""
    sources = source_digests(kernels_dir)
    text = "".join(f"{p}\0{d}\n" for p, d in sorted(sources.items()))
    doc = read_record(artifacts) or {}
    return {"sources_sha256": hashlib.sha256(text.encode()).hexdigest(), "complete": not problems,
            "shard": doc.get("shard"), "problems": list(problems)}
