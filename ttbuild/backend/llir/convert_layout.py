"""LLIR rule for ttg.convert_layout: a register renaming when every thread already holds its new elements, else a round trip through shared memory (ttbuild.backend.analysis.allocation.convert_bytes: packed rows for the 16-bit mma accumulator, one word per element otherwise)."""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, packed_pitch, round4
from ttbuild.backend.analysis.layout import same_thread_map
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


@rule("ttg.convert_layout")
def convert_layout(ctx, op, src):
    """Registers when each thread already holds its new elements, else through shared memory:
    every thread stores its elements at their row-major index, one barrier, loads its new ones."""
    b = ctx.builder
    res = op.results[0]
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    if src.layout == lay:
        return src
    pos = same_thread_map(src.layout, lay, shape, 32 * ctx.num_warps)
    if pos is not None:
        return TensorVal([src.elems[p] for p in pos], lay, shape)
    ety = llvm_type(mu.elem_str(res.type))
    pitch = packed_pitch(src.layout, shape, mu.elem_str(res.type))
    if pitch:
        return _packed(ctx, src, lay, shape, ety, pitch)
    slot = ir.Constant(I32, round4(elem_bytes(mu.elem_str(res.type))))
    ctx.before_smem_write()
    for ix, v in zip(ctx.indices(src.layout, shape), src.elems):
        smem_store(ctx, b.mul(linear(b, ix, shape), slot), v)
    ctx.barrier()
    out = [smem_load(ctx, b.mul(linear(b, ix, shape), slot), ety) for ix in ctx.indices(lay, shape)]
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)


def _packed(ctx, src, lay, shape, ety, pitch: int):
    """The 16-bit mma accumulator through packed rows (allocation.packed_pitch): each pair of
    neighbours one 32-bit store, then each new element a 16-bit load (LLVM's load/store
    vectorizer joins a thread's contiguous ones into 128-bit loads)."""
    b = ctx.builder
    pair_t = ir.VectorType(ety, 2)
    p, two = ir.Constant(I32, pitch), ir.Constant(I32, 2)

    def at(ix):
        return b.add(b.mul(ix[0], p), b.mul(ix[1], two))

    ctx.before_smem_write()
    idx = ctx.indices(src.layout, shape)
    for j in range(0, len(src.elems), 2):
        pair = ir.Constant(pair_t, ir.Undefined)
        pair = b.insert_element(pair, src.elems[j], ir.Constant(I32, 0))
        pair = b.insert_element(pair, src.elems[j + 1], ir.Constant(I32, 1))
        smem_store(ctx, at(idx[j]), b.bitcast(pair, I32))
    ctx.barrier()
    out = [smem_load(ctx, at(ix), ety) for ix in ctx.indices(lay, shape)]
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)
