"""The parse stage's extra inputs for a project kernel: modules it may import, environment variables read, device reads.

A static, conservative import closure under the declared source roots; environment variables are
those read by literal name.

Everything the parse output can depend on is then a parse input (the module files: file_dep and
the cache's action key) or a parse option (environment values, the target: the stage key), so
editing `pkg/compat.py` reruns the parse of exactly the kernels whose modules import it, and
early cutoff stops the rest when the output is unchanged (docs/CONTRACTS.md, "Project modules").
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

# Attribute names whose reads ask the device (ttbuild.pyeval.modules answers them from the target).
_DEVICE_FACTS = {"get_device_properties", "get_device_capability", "get_current_target", "is_available", "get_device_name",
                 "is_torch_npu_available", "is_torch_xpu_available", "hip"}


def module_of(rel: str) -> str:
    """`pkg/ops/norm.py` -> `pkg.ops.norm`; `pkg/__init__.py` -> `pkg` (a path under a source root)."""
    parts = list(Path(rel).with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_file(roots: tuple[str, ...], kernels_dir: Path, module: str) -> str | None:
    """The file (relative to the kernels directory, POSIX) Python would import for `module` from
    the source roots, in order: `a/b.py`, else the package `a/b/__init__.py`; None when absent."""
    rel = module.replace(".", "/")
    for root in roots:
        for cand in (f"{rel}.py", f"{rel}/__init__.py"):
            path = f"{root}/{cand}" if root not in ("", ".") else cand
            if _is_file(str(kernels_dir / path)):
                return path
    return None


@functools.lru_cache(maxsize=4096)
def _is_file(path: str) -> bool:
    return os.path.isfile(path)


def forget_files() -> None:
    """Ask the file system afresh (load_variants calls it: files come and go between loads)."""
    _is_file.cache_clear()
    _FACTS.clear()
    _DIRECT.clear()


@functools.lru_cache(maxsize=4096)
def _scan(path: str, stamp: tuple) -> tuple[tuple, frozenset, bool]:
    """(imports as (level, module, names), env names, reads device facts) of one file, once per
    version of it (`stamp`: mtime and size). An unreadable file scans as empty: the parse stage
    reports it with its location."""
    try:
        tree = ast.parse(Path(path).read_bytes())
    except (OSError, SyntaxError, ValueError, RecursionError):
        return (), frozenset(), False
    imports, env, device = [], set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports.extend((0, a.name, ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            imports.append((node.level, node.module or "", tuple(a.name for a in node.names)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f, a = node.func, node.args[0]
            reads_env = f.attr == "getenv" or (f.attr == "get" and _is_environ(f.value))
            if reads_env and isinstance(a, ast.Constant) and isinstance(a.value, str):
                env.add(a.value)
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                env.add(node.slice.value)
        elif isinstance(node, ast.Attribute) and node.attr in _DEVICE_FACTS:
            device = True
    return tuple(imports), frozenset(env), device


def _is_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ")


def parse_facts(kernels_dir: Path, roots: tuple[str, ...], rel: str, root: str) -> dict:
    """The parse options a project kernel adds (`module`, `modules`: name -> file, `env`: name ->
    value or None, read now from this process's environment, `device`: whether a device fact is
    read), from the kernel file `rel` (relative to the kernels directory) under source root `root`.
    Computed once per module of a variant list (forget_files starts afresh)."""
    own = module_of(os.path.relpath(rel, root) if root not in ("", ".") else rel)
    key = (str(kernels_dir), roots, own)
    if key not in _FACTS:
        _FACTS[key] = _facts(kernels_dir, roots, own, rel)
    facts = _FACTS[key]
    return {"module": own, "modules": dict(facts["modules"]), "env": dict(facts["env"]), "device": facts["device"]}


_FACTS: dict = {}  # (kernels dir, roots, module) -> its parse facts, for one variant list
_DIRECT: dict = {}  # (kernels dir, roots, module) -> (env names, device, [(imported module, file)])


def _facts(kernels_dir: Path, roots: tuple[str, ...], own: str, rel: str) -> dict:
    modules: dict[str, str] = {}
    env: set[str] = set()
    device = False
    todo = [(own, rel)]
    parts = own.split(".")  # Python runs the packages above the kernel's module first
    for i in range(1, len(parts)):
        found = module_file(roots, kernels_dir, ".".join(parts[:i]))
        if found is not None:
            todo.append((".".join(parts[:i]), found))
    while todo:
        name, path = todo.pop()
        if name in modules:
            continue
        modules[name] = path
        names, reads, deps = _direct(kernels_dir, roots, name, path)
        env |= names
        device |= reads
        todo.extend(d for d in deps if d[0] not in modules)
    return {"modules": dict(sorted(modules.items())), "env": {k: os.environ.get(k) for k in sorted(env)},
            "device": device}


def _direct(kernels_dir: Path, roots: tuple[str, ...], name: str, path: str):
    """What one module file reads directly: env names, device reads, the project modules it may import."""
    key = (str(kernels_dir), roots, name)
    if key in _DIRECT:
        return _DIRECT[key]
    full = kernels_dir / path
    try:
        st = full.stat()
    except OSError:
        _DIRECT[key] = (frozenset(), False, [])
        return _DIRECT[key]
    imports, names, reads = _scan(str(full), (st.st_mtime_ns, st.st_size))
    deps = []
    for cand in dict.fromkeys(_candidates(name, path.endswith("__init__.py"), imports)):
        found = module_file(roots, kernels_dir, cand)
        if found is not None:
            deps.append((cand, found))
    _DIRECT[key] = (names, reads, deps)
    return _DIRECT[key]


def _candidates(name: str, is_package: bool, imports) -> list[str]:
    """Every module an import may run: the module, its parent packages, and `from M import n`'s `M.n`."""
    out = []
    package = name.split(".") if is_package else name.split(".")[:-1]
    for level, module, names in imports:
        if level:
            if level - 1 > len(package):
                continue
            base = ".".join(package[: len(package) - (level - 1)] + ([module] if module else []))
        else:
            base = module
        if not base:
            continue
        parts = base.split(".")
        out.extend(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        out.extend(f"{base}.{n}" for n in names if n != "*")
    return out
