"""LLIR rule for ttg.convert_layout: a register renaming when every thread already holds its new elements, else shared memory.

The round trip through shared memory is sized by ttbuild.backend.analysis.allocation.convert_bytes:
packed rows for the 16-bit mma accumulator, one word per element otherwise.
"""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, packed_pitch, round4
from ttbuild.backend.analysis.layout import same_thread_map
from ttbuild.backend.ir.ops import TTG
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


@rule(TTG.CONVERT_LAYOUT)
def convert_layout(ctx, op, src):
    """Registers when each thread already holds its new elements, else through shared memory:
    every thread stores its elements at their row-major index, one barrier, loads its new ones."""
    b = ctx.builder
    res = op.results[0]
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    if src.layout == lay:
        return src
    # once per function and pair of layouts: attention converts the same pairs several times
    # (fwd d128: 6 conversions, 4 pairs), each check walking all 256 threads' elements
    pos = ctx.memo(("same_thread_map", src.layout, lay, shape),
                   lambda: same_thread_map(src.layout, lay, shape, 32 * ctx.num_warps))
    if pos is not None:
        return TensorVal([src.elems[p] for p in pos], lay, shape)
    elem = mu.elem_str(res.type)
    ety = llvm_type(elem)
    pitch = packed_pitch(src.layout, shape, elem)
    ctx.before_smem_write()
    if pitch:  # 16-bit mma accumulator: neighbour pairs as one word each, in padded rows
        p, two = ir.Constant(I32, pitch), ir.Constant(I32, 2)

        def at(ix):
            return b.add(b.mul(ix[0], p), b.mul(ix[1], two))

        idx = ctx.indices(src.layout, shape)
        stores = [(idx[j], _pair(b, ety, src.elems[j], src.elems[j + 1])) for j in range(0, len(src.elems), 2)]
    else:  # one 32-bit slot per element, at its row-major index
        slot = ir.Constant(I32, round4(elem_bytes(elem)))

        def at(ix):
            return b.mul(linear(b, ix, shape), slot)

        stores = zip(ctx.indices(src.layout, shape), src.elems)
    for ix, v in stores:
        smem_store(ctx, at(ix), v)
    ctx.barrier()
    # packed: 16-bit loads, which LLVM's load/store vectorizer joins into 128-bit ones
    out = [smem_load(ctx, at(ix), ety) for ix in ctx.indices(lay, shape)]
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)


def _pair(b, ety, lo, hi):
    """Two 16-bit values as one i32 (`lo` in the low half, as a little-endian store lays them)."""
    pair = ir.Constant(ir.VectorType(ety, 2), ir.Undefined)
    pair = b.insert_element(pair, lo, ir.Constant(I32, 0))
    return b.bitcast(b.insert_element(pair, hi, ir.Constant(I32, 1)), I32)
