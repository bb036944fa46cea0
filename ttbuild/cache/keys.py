"""Action keys and content addresses: sha256 over canonical JSON / bytes, plus cached tool versions.

One hashing scheme for every backend (see docs/CONTRACTS.md, "## Cache"): Bazel's remote-cache
protocol names CAS blobs by their sha256 (bazel-remote refuses a /cas/ PUT whose path is not the
body's sha256) and wants 64 hex characters under /ac/, so action keys and blob addresses are both
sha256 hex here, and the local and shared directories use the very same names. A blob can then
move between tiers without being renamed or rehashed. xxhash (`fast_hash`) stays the hash of
doit's up-to-date checks, where speed matters and nothing is shared between machines.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import math
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Mapping

ACTION_SCHEMA = "ttbuild.action/1"

# Which external tools can change each stage's output for the same inputs and options.
# Python's version keys `parse` because the `ast` module's node fields change between releases.
STAGE_TOOLS: dict[str, tuple[str, ...]] = {
    "parse": ("ttbuild", "python"),
    "ttir": ("ttbuild", "mlir"),
    "ttgir": ("ttbuild", "mlir"),
    "llir": ("ttbuild", "llvm"),
    "ptx": ("ttbuild", "llvm"),
    "cubin": ("ttbuild", "ptxas"),
}

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")


def digest(data: bytes) -> str:
    """Content address of `data`: sha256, 64 lowercase hex characters (the CAS name on every tier)."""
    return hashlib.sha256(data).hexdigest()


def fast_hash(data: bytes) -> str:
    """xxh3_128 of `data`, 32 lowercase hex characters: for local up-to-date checks, not addresses."""
    import xxhash  # a dependency of ttbuild; imported here so `keys` stays importable without it

    return xxhash.xxh3_128_hexdigest(data)


def is_key(text: str) -> bool:
    """True when `text` is a well-formed action key or content address (64 lowercase hex)."""
    return isinstance(text, str) and _HEX64.match(text) is not None


def _check_json(value: Any, where: str) -> None:
    # json.dumps would turn NaN into the non-JSON token `NaN` and tuples into lists silently;
    # reject what does not round-trip so two equal-looking option sets cannot hash apart.
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"action option {where} is {value!r}: not finite, cannot be keyed")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"action option {where} has non-string key {k!r}")
            _check_json(v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_json(v, f"{where}[{i}]")
    elif not (value is None or isinstance(value, (str, int, float, bool))):
        raise TypeError(f"action option {where} is a {type(value).__name__}: not JSON-serialisable")


def canonical_action(stage: str, stage_version: int, input_hashes: Mapping[str, str],
                     options: Mapping[str, Any], tool_versions: Mapping[str, str]) -> bytes:
    """The canonical JSON bytes an action key hashes: sorted keys, no spaces, UTF-8.

    Raises TypeError / ValueError for options that are not plain JSON (sets, objects, NaN).
    """
    if not isinstance(stage, str) or not stage:
        raise ValueError(f"stage must be a non-empty str, got {stage!r}")
    if isinstance(stage_version, bool) or not isinstance(stage_version, int):
        raise TypeError(f"stage_version must be an int, got {stage_version!r}")
    desc = {
        "schema": ACTION_SCHEMA,
        "stage": stage,
        "stage_version": stage_version,
        "inputs": dict(input_hashes),
        "options": dict(options),
        "tools": dict(tool_versions),
    }
    _check_json(desc, "action")
    return json.dumps(desc, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def action_key(stage: str, stage_version: int, input_hashes: Mapping[str, str],
               options: Mapping[str, Any], tool_versions: Mapping[str, str]) -> str:
    """The cache key of one stage run: sha256 hex (64 chars) of `canonical_action(...)`.

    `input_hashes` maps each input role to its content hash (use `digest`), `options` are the
    stage's options exactly as passed to `run`, `tool_versions` comes from `tool_versions_for`.
    Mapping order never matters; any change of a value, a role name or a version changes the key.
    """
    return digest(canonical_action(stage, stage_version, input_hashes, options, tool_versions))


# ---- tool versions, each computed at most once per process ------------------------------------

@functools.cache
def ttbuild_version() -> str:
    """ttbuild's own `__version__`."""
    from ttbuild import __version__

    return __version__


@functools.cache
def python_version() -> str:
    """`major.minor` of the running interpreter (the `ast` node layout follows it)."""
    import sys

    return f"{sys.version_info[0]}.{sys.version_info[1]}"


@functools.cache
def llvm_version() -> str:
    """LLVM version inside llvmlite plus llvmlite's own, e.g. `22.1.0/llvmlite-0.50.0`.

    Imports `llvmlite.binding` (about 0.3 s, loads libLLVM), hence only on first call.
    """
    import llvmlite
    import llvmlite.binding as llvm

    return ".".join(map(str, llvm.llvm_version_info)) + f"/llvmlite-{llvmlite.__version__}"


@functools.cache
def mlir_version() -> str:
    """Version of the installed MLIR Python bindings distribution (read from package metadata)."""
    from importlib import metadata

    for dist in ("xtc-mlir-python-bindings", "mlir-python-bindings", "mlir"):
        try:
            return f"{dist}-{metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def ptxas_path() -> Path:
    """ptxas from the `nvidia-cuda-nvcc` wheel (`nvidia/cu13/bin/ptxas`), never a system CUDA.

    Raises FileNotFoundError when the wheel is not installed.
    """
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for rel in ("cu13/bin/ptxas", "cuda_nvcc/bin/ptxas"):
            cand = Path(root) / rel
            if cand.is_file() and os.access(cand, os.X_OK):
                return cand
    raise FileNotFoundError("ptxas not found: install nvidia-cuda-nvcc (looked under "
                            f"{roots or 'no nvidia package'} for cu13/bin/ptxas)")


@functools.cache
def ptxas_version(path: str | None = None) -> str:
    """ptxas's build id from `ptxas --version`, e.g. `V13.0.88 (cuda_13.0.r13.0/compiler.36424714_0)`.

    Raises ToolError when ptxas cannot be run or prints no version.
    """
    from ttbuild.errors import ToolError

    exe = path or str(ptxas_path())
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolError("ptxas", str(exc), f"{exe} --version") from exc
    release = re.search(r"\bV\d+\.\d+\.\d+\b", proc.stdout)
    build = re.search(r"^Build (\S+)", proc.stdout, re.M)
    if proc.returncode != 0 or not release:
        raise ToolError("ptxas", proc.stderr or proc.stdout, f"{exe} --version")
    return release.group(0) + (f" ({build.group(1)})" if build else "")


TOOL_VERSIONS = {
    "ttbuild": ttbuild_version,
    "python": python_version,
    "llvm": llvm_version,
    "mlir": mlir_version,
    "ptxas": ptxas_version,
}


def tool_versions(*names: str) -> dict[str, str]:
    """Versions of the named tools (`ttbuild python llvm mlir ptxas`), each probed once per process.

    Raises KeyError for an unknown tool name.
    """
    out = {}
    for name in names:
        if name not in TOOL_VERSIONS:
            raise KeyError(f"unknown tool {name!r}; known: {', '.join(TOOL_VERSIONS)}")
        out[name] = TOOL_VERSIONS[name]()
    return out


def tool_versions_for(stage: str) -> dict[str, str]:
    """`tool_versions` of the tools in `STAGE_TOOLS[stage]`: what a stage's action key needs."""
    return tool_versions(*STAGE_TOOLS[stage])
