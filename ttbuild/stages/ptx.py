"""Stage ptx: LLVM IR -> PTX text through llvmlite's NVPTX backend."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 5  # warp-uniform mul.wide + add.s64 fused into mad.wide (nvptx/mad_wide); 4 was the -nvptx-mad-wide-opt build (50cd68a)


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"llir"}; options: arch ("sm_90a"), ptx_version (int, 90 = PTX ISA 9.0).
    Returns {"ptx"}. Raises CompilationError when the IR does not parse or verify."""
    from ttbuild.backend.nvptx import llvm
    from ttbuild.errors import CompilationError
    from ttbuild.target import DEFAULT_TARGET

    arch = str(options.get("arch", DEFAULT_TARGET.arch))
    version = int(options.get("ptx_version", DEFAULT_TARGET.ptx_version))
    try:
        ptx = llvm.emit_ptx(inputs["llir"].decode(), arch, version)
    except RuntimeError as e:  # llvmlite reports parse/verify failures as RuntimeError
        raise CompilationError(f"LLVM IR rejected: {e}", stage="ptx") from None
    return {"ptx": ptx.encode()}
