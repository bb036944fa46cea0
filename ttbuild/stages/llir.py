"""Stage llir: TTGIR -> optimized LLVM IR text for NVPTX (per-thread code, predicated vector accesses)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 46  # setmaxnreg plans per block (register_plan): an 8-warp block aims at two CTAs an SM


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ttgir"}; options: target ("cuda:90"), enable_fp_fusion (bool: fmul/fadd/fsub
    carry `contract`, so LLVM may form FMAs), debug (bool: accepted; line tables not emitted yet).
    Returns {"llir": LLVM IR text after the O3 pipeline}. Raises CompilationError (a bad option,
    TTGIR without `ttg.num-warps`) / NotSupportedYet.
    """
    from ttbuild.backend.llir.emit import lower
    from ttbuild.backend.nvptx import llvm
    from ttbuild.stages import declared_options

    opts = declared_options("llir", options)
    text = lower(inputs["ttgir"], fp_fusion=opts.enable_fp_fusion)
    # 32-bit shared pointers (nvptx.llvm.target_machine), as Triton in every kernel: a reduction whose
    # threads hold many rows keeps one hoisted shared address per row live across its loop
    return {"llir": llvm.optimize(text, opts.arch, opts.enable_fp_fusion, short_ptr=True).encode()}
