"""Per stage, a digest of the source of the modules that stage runs (its import closure inside the stage's package and ttbuild), so a compiler edit changes every key that edit can affect.

Triton hashes its compiler sources and libtriton into its cache key; ttbuild does the same per
stage. The closure is found statically: the stage module's file, then every module it imports
(at top level or inside functions: stages import their heavy dependencies inside `run`) that
lives in the `ttbuild` package or the stage's own package, recursively, with the `__init__.py`
of each package on the way. The digest (xxh3_64 hex) covers each file's path relative to its
package root and its bytes, so an installed release and a working tree with edits never share a
key. Computed at most once per process and stage package, and remembered beside ttbuild's
bytecode for the sources it was computed from (`_Memo`: a process whose package sources match
skips the walk); an edit during a running build is seen by the next one.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import sys
from pathlib import Path

import xxhash

ROOT = "ttbuild"


@functools.cache
def _package_dir(top: str) -> Path | None:
    """The directory of top-level package `top`, located without importing it."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _module_file(name: str) -> Path | None:
    """The source file of module `name` (a package's `__init__.py`), found from its top-level
    package's directory without importing anything (importing a package would run its
    `__init__`, and the build must stay free of MLIR and llvmlite until a stage runs), or None."""
    top, *rest = name.split(".")
    base = _package_dir(top)
    if base is None:
        return None
    path = base.joinpath(*rest)
    for candidate in (path.with_suffix(".py") if rest else None, path / "__init__.py"):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def _statements(body: list):
    """Every statement in `body` and, recursively, in the statement lists nested in it (the
    `body` / `orelse` / `finalbody` of compound statements, and the bodies of their except
    handlers and match cases).
    An import is a statement, and a statement only ever sits in such a list, so this finds
    what `ast.walk` finds without visiting expressions (most of a tree)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            nested = getattr(node, field, None)
            if isinstance(nested, list):
                yield from _statements(nested)
        for part in (*getattr(node, "handlers", ()), *getattr(node, "cases", ())):
            yield from _statements(part.body)


@functools.cache
def _imports(path: Path, module: str, top_level: bool = False) -> frozenset[str]:
    """Absolute names of the modules `path` (the source of `module`) imports, as written; for
    `from X import y` both X and X.y (y may be a submodule). `top_level`: only the statements
    that run on import (not those inside functions). Once per process and file: the stages'
    closures share most of their files."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    nodes = tree.body if top_level else _statements(tree.body)
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                head = ".".join(base + ([node.module] if node.module else []))
            else:
                head = node.module or ""
            out.add(head)
            out.update(f"{head}.{alias.name}" for alias in node.names if alias.name != "*")
    return frozenset(out)


def closure(stage_module: str, roots: tuple[str, ...] = (ROOT,)) -> dict[str, Path]:
    """Module name -> source file for `stage_module` and every module under the `roots`
    packages it reaches through imports (see the module doc); the parents' `__init__.py` too."""
    roots = tuple(dict.fromkeys(roots + (stage_module.split(".")[0],)))
    seen: dict[str, Path] = {}
    followed: set[tuple[str, bool]] = set()
    todo = [(stage_module, False)]
    while todo:
        name, parent_only = todo.pop()
        if (name, parent_only) in followed or (name, False) in followed \
                or not any(name == r or name.startswith(r + ".") for r in roots):
            continue
        path = _module_file(name)
        if path is None:
            continue
        followed.add((name, parent_only))
        seen[name] = path
        parts = name.split(".")
        todo.extend((".".join(parts[:i]), True) for i in range(1, len(parts)))
        # ttbuild's own __init__ imports the in-memory driver lazily (`ttbuild.compile`): a
        # package on the way, or the root, contributes what runs when it is imported.
        todo.extend((m, False) for m in _imports(path, name, top_level=parent_only or name == ROOT))
    return seen


@functools.cache
def module_digest(module: str) -> str:
    """xxh3_64 hex of the sources stage module `module` (a dotted name) runs: its closure over
    ttbuild and its own top-level package, computed once per process, and looked up first in
    the memo of the packages' present sources (`_Memo`). Raises ImportError when the module
    cannot be found."""
    if _module_file(module) is None:
        raise ImportError(f"no stage module {module}")
    roots = tuple(dict.fromkeys((ROOT, module.split(".")[0])))
    memo = _Memo.current()
    entry = module + "@" + ",".join(f"{r}={_tree_digest(r)}" for r in roots if r != ROOT)
    found = memo.get(entry)
    if found is not None:
        return found
    h = xxhash.xxh3_64()
    for name, path in sorted(closure(module, roots).items()):
        h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    memo.put(entry, h.hexdigest())
    return h.hexdigest()


@functools.cache
def _tree_digest(top: str) -> str:
    """xxh3_64 hex over the relative path and bytes of every `.py` file under package `top`'s
    directory: all a closure inside `top` can read (3 ms for ttbuild's 144 files)."""
    base = _package_dir(top)
    h = xxhash.xxh3_64()
    if base is None:
        return h.hexdigest()
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for file in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, file)
            with open(path, "rb") as f:
                h.update(os.path.relpath(path, base).encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()


class _Memo:
    """Digests kept beside ttbuild's bytecode (`ttbuild/__pycache__/codedigest.<key>.json`, `key`
    the `_tree_digest` of ttbuild's present sources), each under its module and the tree digests
    of its other root package (a stage package outside ttbuild), so a process whose sources
    match an earlier one's skips the import walk (0.24 s: it parses nearly every file of the
    package). A digest is a function of those sources alone (closures stay inside the roots),
    so an entry can only be right or absent. It sits where Python keeps bytecode: whoever can
    write there can already change the code run. Not written under PYTHONDONTWRITEBYTECODE or
    where the folder is not writable; memos of other ttbuild sources are removed when this one
    is written."""

    PREFIX = "codedigest."

    def __init__(self, path: str | None):
        self.path = path
        self.entries: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, "rb") as f:
                    doc = json.loads(f.read())
                if isinstance(doc, dict):
                    self.entries = {k: v for k, v in doc.items() if isinstance(k, str) and isinstance(v, str)}
            except (OSError, ValueError):
                pass

    @classmethod
    @functools.cache
    def current(cls) -> "_Memo":
        """The memo of this process's sources (one per process), or one that keeps nothing when ttbuild is not a
        package directory."""
        base = _package_dir(ROOT)
        if base is None:
            return cls(None)
        folder = os.path.dirname(importlib.util.cache_from_source(str(base / "__init__.py")))
        return cls(os.path.join(folder, f"{cls.PREFIX}{_tree_digest(ROOT)}.json"))

    def get(self, entry: str) -> str | None:
        """The digest stored under `entry`, or None."""
        return self.entries.get(entry)

    def put(self, entry: str, digest: str) -> None:
        """Store `digest` under `entry` and rewrite the memo file atomically (nothing is written without bytecode
        writing; write errors are ignored: the memo only saves time)."""
        self.entries[entry] = digest
        if self.path is None or sys.dont_write_bytecode:
            return
        from ttbuild.fileio import replace_file

        try:
            folder = os.path.dirname(self.path)
            os.makedirs(folder, exist_ok=True)
            replace_file(self.path, json.dumps(self.entries, sort_keys=True).encode())
            for name in os.listdir(folder):
                if name.startswith(self.PREFIX) and name.endswith(".json") and name != os.path.basename(self.path):
                    os.unlink(os.path.join(folder, name))
        except OSError:  # a read-only install: the walk runs in every process
            pass


def stage_digest(stage: str, package: str = "ttbuild.stages") -> str:
    """module_digest of `package`.`stage`."""
    return module_digest(f"{package}.{stage}")


def code_version(module: str) -> str:
    """What a stage's keys record as the `ttbuild` tool version: `__version__+digest`."""
    from ttbuild import __version__

    return f"{__version__}+{module_digest(module)}"
