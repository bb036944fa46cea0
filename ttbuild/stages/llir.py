"""Stage llir: TTGIR -> optimized LLVM IR text for NVPTX (per-thread code, predicated vector accesses)."""

from __future__ import annotations

from typing import Any, Mapping

VERSION = 30  # 30: an access whose mask is not uniform over a chunk takes Triton's predicated scalar form past 16 chunks per thread (no branch per chunk); 29: elementwise ops computed once per block of constancy in every layout (the #mma column slice too: attention's key mask 8 -> 4 selects per thread), as Triton's maybeDeduplicate; 28: rank-3 (batched) tt.dot on the FMA path; 27: the wgmma descriptor address field through bfe.u32 (k steps stay adds, as Triton); 26: constant wgmma accumulator inits of a loop set before it by an opaque move (no non-wgmma writes of accumulator registers on the zero-trip edge: ptxas C7515 serialization gone); 25: cross-warp reductions: one partial per lane, butterfly shuffles, a broadcast from lane 0 (Triton's order); 24: ttng.async_tma_reduce (cp.reduce.async.bulk.tensor); 23: 23: the nvmma offset through the swizzled one (LLIR order only, the same instruction counts); 22: one descriptor per tile, k steps added to it; 21: wgmma with an fp16 accumulator (packed pairs, tied through the wait as such); 20: a zero splat C makes the first wgmma k step scale-d false (no zeroed registers), one barrier per landed tile set before wgmma; 19: RS wgmma (A from registers), waits tie every accumulator operand; 18: wgmma for tf32, fp8, int8; 32-bit shared pointers with wgmma; 17: wgmma (ttng.warp_group_dot / _wait, fence_async_shared), nvmma_shared tiles, global_smem 1024-aligned where they are used; 16: the packed conversion builds its pairs before the stores (LLIR order only, the same PTX); 15: the 16-bit mma accumulator converts through packed, padded rows (32-bit stores of neighbour pairs); 14: tt.join / tt.split between inferred layouts and tt.reshape between layouts giving each thread the same flat indices rename registers; 13: hints read by the axis analysis (vector widths); 12: the SLP vectorizer in the O3 pipeline, as Triton; 9: tensor cores (mma.sync, dot pipelining); 10: SSA numbering of dot kernels (an unused shift dropped); 11: dot operands addressed base + immediate, lazy ldmatrix across ring views, one barrier per async_wait, reductions on #mma


def run(inputs: Mapping[str, bytes], options: Mapping[str, Any]) -> dict[str, bytes]:
    """inputs: {"ttgir"}; options: target ("cuda:90"), enable_fp_fusion (bool: fmul/fadd/fsub
    carry `contract`, so LLVM may form FMAs), debug (bool: accepted; line tables not emitted yet).
    Returns {"llir": LLVM IR text after the O3 pipeline}. Raises CompilationError (a bad option,
    TTGIR without `ttg.num-warps`) / NotSupportedYet.
    """
    from ttbuild.backend.llir.emit import lower
    from ttbuild.backend.nvptx import llvm
    from ttbuild.options import stage_options
    from ttbuild.optraits import DOT_OPS

    opts = stage_options("llir", options)
    text = lower(inputs["ttgir"], fp_fusion=opts.enable_fp_fusion)
    # kernels with tensor cores use 32-bit shared pointers (nvptx.llvm.target_machine), as Triton
    short = any(f'"{name}"'.encode() in inputs["ttgir"] for name in DOT_OPS)
    return {"llir": llvm.optimize(text, opts.arch, opts.enable_fp_fusion, short_ptr=short).encode()}
