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
import math
import re
from typing import Any, Mapping

from ttbuild.canonical import canonical_bytes
from ttbuild.stages import BY_NAME
from ttbuild.toolchain import libdevice_id, llvm_version, mlir_version, ptxas_id

ACTION_SCHEMA = "ttbuild.action/1"

# Which external tools can change each stage's output for the same inputs and options: the stage
# table's `tools` (ttbuild.stages). Python's version keys `parse` because the `ast` module's node
# fields change between releases.
STAGE_TOOLS: dict[str, tuple[str, ...]] = {name: stage.tools for name, stage in BY_NAME.items()}

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
    return canonical_bytes(desc, allow_nan=False)


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


TOOL_VERSIONS = {
    "ttbuild": ttbuild_version,
    "python": python_version,
    "llvm": llvm_version,
    "mlir": mlir_version,
    "ptxas": ptxas_id,
    "libdevice": libdevice_id,
}


def tool_versions(*names: str) -> dict[str, str]:
    """Versions of the named tools (`ttbuild python llvm mlir ptxas libdevice`), each probed once
    per process (ptxas and libdevice: version and file digest, `ttbuild.toolchain`).

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
