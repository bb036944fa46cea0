"""Stage llir: TTGIR -> optimized LLVM IR text for NVPTX (per-thread code, predicated vector accesses)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 8


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ttgir"}; options: target ("cuda:90"), enable_fp_fusion (bool: fmul/fadd/fsub
    carry `contract`, so LLVM may form FMAs), debug (bool: accepted; line tables not emitted yet).
    Returns {"llir": LLVM IR text after the O3 pipeline}. Raises CompilationError/NotSupportedYet.
    """
    from ttbuild.backend import nvptx
    from ttbuild.backend.llir.emit import lower
    from ttbuild.errors import CompilationError

    target = str(options.get("target", "cuda:90"))
    backend, _, cc = target.partition(":")
    if backend != "cuda" or not cc.isdigit():
        raise CompilationError(f"unsupported target {target!r} (expected 'cuda:<cc>')", stage="llir")
    arch = f"sm_{cc}a" if int(cc) >= 90 else f"sm_{cc}"
    fusion = bool(options.get("enable_fp_fusion", True))
    text = lower(inputs["ttgir"], fp_fusion=fusion)
    # kernels with tensor cores use 32-bit shared pointers (nvptx.target_machine)
    short = b'"tt.dot"' in inputs["ttgir"]
    return {"llir": nvptx.optimize(text, arch, fusion, short_ptr=short).encode()}
