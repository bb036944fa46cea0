"""parse stage: kernel source bytes → canonical JSON description + location table (docs/CONTRACTS.md)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 2  # parameters with a literal default say so (has_default)


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """`inputs["source"]`: the kernel file; `options`: `kernel` (name), `file` (path relative to the
    kernel library root). Returns `json` (no positions: comment/blank-line edits leave it
    byte-identical) and `loc` (node id → line, col). Raises CompilationError on a syntax error or
    a kernel name the file does not define as @jit."""
    from ttbuild.frontend.canon import canonicalize, dumps

    desc, loc = canonicalize(inputs["source"], options["kernel"], options["file"])
    return {"json": dumps(desc), "loc": dumps(loc)}
