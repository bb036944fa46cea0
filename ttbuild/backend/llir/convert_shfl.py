"""LLIR helper for ttg.convert_layout: a 32-bit mma accumulator into the tf32 A operand of its own mma (attention's P of an fp32 P.V) by warp shuffles, no shared memory.

Two `shfl.sync.idx` rounds per pair of A registers (the pattern and its check:
ttbuild.backend.analysis.shuffle_plan): 32 shuffles for a 64x64 fp32 tile on 4 warps, as
Triton 3.6 emits for this conversion (its ConvertLayoutOpToLLVM transferWithinWarp). The round
trip through shared memory instead kept 64 shared addresses live across attention's loop and
spilled (a 64x64 fp32 attention forward: 136 bytes of stack, Triton's 16).
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend.llir.context import I32, TensorVal
from ttbuild.backend.llir.reduce import shfl_idx


def convert(ctx, src: TensorVal, lay, shape, pairs) -> TensorVal:
    """`src` in `lay` by two shuffle rounds per pair (plan's pairs)."""
    b = ctx.builder
    lane, _ = ctx.lane_warp()
    t = b.and_(lane, ir.Constant(I32, 3))
    one = ir.Constant(I32, 1)
    sends_c1 = b.icmp_unsigned("!=", b.and_(t, ir.Constant(I32, 2)), ir.Constant(I32, 0))
    odd = b.icmp_unsigned("!=", b.and_(t, one), ir.Constant(I32, 0))
    first = b.or_(b.and_(lane, ir.Constant(I32, ~3)), b.or_(b.lshr(t, one), b.shl(b.and_(t, one), one)))
    second = b.xor(first, ir.Constant(I32, 2))
    out = [None] * (2 * len(pairs))
    for lo, hi, c0, c1 in pairs:
        x0, x1 = src.elems[c0], src.elems[c1]
        got1 = shfl_idx(ctx, b.select(sends_c1, x1, x0), first)
        got2 = shfl_idx(ctx, b.select(sends_c1, x0, x1), second)
        out[lo] = b.select(odd, got2, got1)
        out[hi] = b.select(odd, got1, got2)
    return TensorVal(out, lay, shape)
