"""LLIR rules for view ops (Triton's ViewOpToLLVM): tt.expand_dims, tt.broadcast (same elements, new positions in registers), tt.trans, tt.reshape, tt.cat, tt.join, tt.split.

The last five move elements between positions: each goes through shared memory (one slot per element of the result, row-major): every thread
stores its source elements where they land in the result, one barrier, every thread loads the
result elements its layout gives it. Triton turns trans into a layout change instead (no data
movement); this is the simple correct form, at the cost of a round trip through shared memory.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, round4
from ttbuild.backend.analysis.layout import joined, same_thread_map, trans_order, transposed
from ttbuild.backend.ir.encodings import Slice
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.errors import CompilationError
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def permute(ctx, srcs, where, res) -> TensorVal:
    """`srcs`: TensorVals; `where(k, idx) -> dst index tuple` for element idx of source k."""
    b = ctx.builder
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    elem = mu.elem_str(res.type)
    slot = ir.Constant(I32, round4(elem_bytes(elem)))
    ctx.before_smem_write()
    for k, src in enumerate(srcs):
        for ix, v in zip(ctx.indices(src.layout, src.shape), src.elems):
            smem_store(ctx, b.mul(linear(b, where(k, ix), shape), slot), v)
    ctx.barrier()
    ety = llvm_type(elem)
    out = [smem_load(ctx, b.mul(linear(b, ix, shape), slot), ety) for ix in ctx.indices(lay, shape)]
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)


@rule(TT.EXPAND_DIMS)
def expand_dims(ctx, op, src):
    """Same elements: the operand's slice layout is the result layout with `axis` removed."""
    res = op.results[0]
    lay = layout_of(res)
    d = mu.int_attr(mu.props(op)["axis"])
    if src.layout != Slice(d, lay):
        raise CompilationError(f"tt.expand_dims operand layout {src.layout} is not a slice of {lay}", stage="llir")
    return TensorVal(list(src.elems), lay, mu.shape_of(res.type))


@rule(TT.BROADCAST)
def broadcast(ctx, op, src):
    """Each output element takes the operand element at the same offsets, 0 along size-1 dims."""
    res = op.results[0]
    lay, shape = layout_of(res), mu.shape_of(res.type)
    if src.layout != lay:
        raise CompilationError("tt.broadcast across layouts needs a convert_layout first", stage="llir")
    where = {off: j for j, off in enumerate(src.layout.local_offsets(src.shape))}
    elems = []
    for off in lay.local_offsets(shape):
        o = tuple(0 if src.shape[d] == 1 else off[d] for d in range(len(shape)))
        elems.append(src.elems[where[o]])
    return TensorVal(elems, lay, shape)


@rule(TT.TRANS)
def trans(ctx, op, src):
    """result[i] = src[j] with j[order[k]] = i[k] (Triton TransOp: result dim k is source dim
    order[k]). With the transposed layout (what the ttgir stage picks) every thread keeps its
    elements: a renaming of registers; otherwise through shared memory."""
    order = trans_order(op)
    res = op.results[0]
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    if lay == transposed(src.layout, order):
        where = {tuple(o[order[k]] for k in range(len(order))): j
                 for j, o in enumerate(src.layout.local_offsets(src.shape))}
        return TensorVal([src.elems[where[o]] for o in lay.local_offsets(shape)], lay, shape)

    def moved(_k, ix):
        """Index `ix` of the result in the source: the transposed order's permutation."""
        return tuple(ix[order[k]] for k in range(len(order)))
    return permute(ctx, [src], moved, res)


def _unlinear(b, lin, shape):
    out = []
    for d in range(len(shape)):
        stride = prod(shape[d + 1:])
        q = b.udiv(lin, ir.Constant(I32, stride)) if stride != 1 else lin
        out.append(b.urem(q, ir.Constant(I32, shape[d])) if d else q)
    return tuple(out)


@rule(TT.RESHAPE)
def reshape(ctx, op, src):
    """Row-major order is kept (a reshape with allow_reorder may keep it too). Between layouts
    that give each thread the same flat indices (the pair Triton infers, what the ttgir stage
    gives: layout.unflatten) a renaming of registers; otherwise through shared memory."""
    b = ctx.builder
    dst = tuple(mu.shape_of(op.results[0].type))
    lay = layout_of(op.results[0])
    pos = same_thread_map(src.layout, lay, tuple(src.shape), 32 * ctx.num_warps, dst_shape=dst)
    if pos is not None:
        return TensorVal([src.elems[p] for p in pos], lay, dst)

    def where(_k, ix):
        """Index `ix` of the source in the result: same row-major linear index, unflattened in the result's shape."""
        return _unlinear(b, linear(b, ix, src.shape), dst)
    return permute(ctx, [src], where, op.results[0])


@rule(TT.CAT)
def cat(ctx, op, lhs, rhs):
    """Concatenation along dimension 0 (Triton's tl.cat with can_reorder keeps this order)."""
    b = ctx.builder
    n0 = lhs.shape[0]

    def where(k, ix):
        """Index `ix` of operand `k` in the result: the rhs moves down by the lhs's first dimension."""
        return ix if k == 0 else (b.add(ix[0], ir.Constant(I32, n0)),) + tuple(ix[1:])
    return permute(ctx, [lhs, rhs], where, op.results[0])


@rule(TT.JOIN)
def join(ctx, op, lhs, rhs):
    """result[..., 0] = lhs, result[..., 1] = rhs (a new minor dimension of size 2). With the
    layout Triton infers (layout.joined, what the ttgir stage gives) each thread already holds
    both: a renaming of registers; otherwise through shared memory."""
    res = op.results[0]
    lay, shape = layout_of(res), tuple(mu.shape_of(res.type))
    if lhs.layout == rhs.layout and lay == joined(lhs.layout):
        where = {o: j for j, o in enumerate(lhs.layout.local_offsets(lhs.shape))}
        srcs = (lhs, rhs)
        return TensorVal([srcs[o[-1]].elems[where[o[:-1]]] for o in lay.local_offsets(shape)], lay, shape)
    return permute(ctx, [lhs, rhs], lambda k, ix: tuple(ix) + (ir.Constant(I32, k),), res)


@rule(TT.SPLIT)
def split(ctx, op, src):
    """Inverse of tt.join: the minor dimension (size 2) becomes two results; a renaming of
    registers when the operand's layout is layout.joined of the results' (Triton's inferred pair)."""
    b = ctx.builder
    elem = mu.elem_str(op.operands[0].type)
    shape = tuple(src.shape)
    lays = [layout_of(r) for r in op.results]
    if lays[0] == lays[1] and src.layout == joined(lays[0]):
        where = {o: j for j, o in enumerate(src.layout.local_offsets(shape))}
        rshape = shape[:-1]
        return [TensorVal([src.elems[where[o + (k,)]] for o in lays[0].local_offsets(rshape)], lays[0], rshape)
                for k in range(2)]
    slot = ir.Constant(I32, round4(elem_bytes(elem)))
    ctx.before_smem_write()
    for ix, v in zip(ctx.indices(src.layout, shape), src.elems):
        smem_store(ctx, b.mul(linear(b, ix, shape), slot), v)
    ctx.barrier()
    ety = llvm_type(elem)
    outs = []
    for k, res in enumerate(op.results):
        lay, rshape = layout_of(res), tuple(mu.shape_of(res.type))
        vals = [smem_load(ctx, b.mul(linear(b, tuple(ix) + (ir.Constant(I32, k),), shape), slot), ety)
                for ix in ctx.indices(lay, rshape)]
        outs.append(TensorVal(vals, lay, rshape))
    ctx.after_smem_read()
    return outs
