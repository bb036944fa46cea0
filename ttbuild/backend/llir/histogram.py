"""LLIR rule for tt.histogram: counts of a 1-D integer block's values in shared memory, read back in the result's layout.

Triton (lib/Conversion/TritonGPUToLLVM/HistogramOpToLLVM.cpp) bins a value by its low
log2(P) bits, P = max(num_bins, 32), counts per warp with ballots and adds the warps' counts
into P shared-memory slots with atomics. Here every element is added by the one thread that
owns it (`ctx.owned`: a broadcast layout counts each element once, as Triton's division by the
replication factor does) with a shared-memory atomic add; masked-off elements add 0. Same bins,
same counts; P * 4 bytes of scratch (ttbuild.backend.analysis.allocation.histogram_bytes).
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import histogram_bytes
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal, layout_of
from ttbuild.backend.llir.smem import smem_load, smem_store
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


@rule(TT.HISTOGRAM)
def histogram(ctx, op, src, mask=None):
    b = ctx.builder
    res = op.results[0]
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    slots = histogram_bytes(shape[0]) // 4
    threads = 32 * ctx.num_warps
    tid = ctx.sreg("tid.x")
    ctx.before_smem_write()
    for i in range((slots + threads - 1) // threads):  # zero the slots, each by one thread
        slot = b.urem(b.add(tid, ir.Constant(I32, i * threads)), ir.Constant(I32, slots))
        smem_store(ctx, b.mul(slot, ir.Constant(I32, 4)), ir.Constant(I32, 0))
    ctx.barrier()
    own = ctx.owned(src.layout, src.shape)
    for j, v in enumerate(src.elems):
        pred = own[j] if own is not None else None
        if mask is not None:
            pred = mask.elems[j] if pred is None else b.and_(pred, mask.elems[j])
        w = v.type.width
        low = b.and_(v, ir.Constant(v.type, slots - 1))
        bin_ = b.trunc(low, I32) if w > 32 else (b.zext(low, I32) if w < 32 else low)
        one = ir.Constant(I32, 1) if pred is None else b.zext(pred, I32)
        ptr = b.bitcast(ctx.smem(b.mul(bin_, ir.Constant(I32, 4))), ir.PointerType(I32, addrspace=3))
        b.atomic_rmw("add", ptr, one, "monotonic")
    ctx.barrier()
    out = [smem_load(ctx, b.mul(ix[0], ir.Constant(I32, 4)), I32) for ix in ctx.indices(lay, shape)]
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)
