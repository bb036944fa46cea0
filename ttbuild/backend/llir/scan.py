"""LLIR rule for tt.scan (cumsum, cumprod, associative_scan; forward or reverse, any axis).

Through shared memory, in three phases separated by barriers (ttbuild.backend.analysis.allocation.scan_plan):
1. every thread stores its elements (row-major slots);
2. each line along the axis is cut into P segments of S elements; the thread of a segment scans
   it in place, in order (reverse: from the end), and stores the segment's total;
3. it combines the totals of the segments before its own (in order) into a prefix and applies
   it to its segment; then every thread loads its elements back.
The user's combine region is inlined with the earlier value first, so associative but
non-commutative combiners keep Triton's order.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, round4, scan_plan
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _c(v):
    return ir.Constant(I32, v)


@rule(TT.SCAN)
def scan(ctx, op, *srcs):
    b = ctx.builder
    p = mu.props(op)
    axis = mu.int_attr(p["axis"])
    reverse = "reverse" in p and str(p["reverse"]) == "true"
    layout, shape = srcs[0].layout, tuple(srcs[0].shape)
    threads = 32 * ctx.num_warps
    lines, P, S = scan_plan(shape, axis, threads)
    L = shape[axis]
    inner = prod(shape[axis + 1:])
    numel = prod(shape)
    elems = [mu.elem_str(v.type) for v in op.operands]
    tys = [llvm_type(e) for e in elems]
    slots = [round4(elem_bytes(e)) for e in elems]
    a_base = [sum(numel * s for s in slots[:k]) for k in range(len(slots))]
    b_base = [sum(numel * s for s in slots) + sum(lines * P * s for s in slots[:k]) for k in range(len(slots))]
    block = op.regions[0].blocks[0]
    combine = lambda x, y: ctx.run_block(block, list(x) + list(y))

    def a_off(k, lin):
        return b.add(b.mul(lin, _c(slots[k])), _c(a_base[k]))

    def b_off(k, lin):
        return b.add(b.mul(lin, _c(slots[k])), _c(b_base[k]))

    # 1. store
    idx = ctx.indices(layout, shape)
    lins = [linear(b, ix, shape) for ix in idx]
    ctx.before_smem_write()
    for k, s in enumerate(srcs):
        for lin, v in zip(lins, s.elems):
            smem_store(ctx, a_off(k, lin), v)
    ctx.barrier()

    tid = ctx.sreg("tid.x")
    items = []
    for r in range(-(-lines * P // threads)):
        w = b.add(tid, _c(r * threads)) if r else tid
        line = b.udiv(w, _c(P)) if P > 1 else w
        seg = b.urem(w, _c(P)) if P > 1 else _c(0)
        outer = b.udiv(line, _c(inner)) if inner > 1 else line
        inn = b.urem(line, _c(inner)) if inner > 1 else _c(0)
        active = b.icmp_unsigned("<", w, _c(lines * P))
        items.append((line, seg, outer, inn, active))

    def addr(outer, inn, pos):
        return b.add(b.mul(b.add(b.mul(outer, _c(L)), pos), _c(inner)), inn)

    def positions(seg):
        first = b.mul(seg, _c(S))
        out = []
        for q in range(S):
            pos = b.add(first, _c(q)) if q else first
            out.append(b.sub(_c(L - 1), pos) if reverse else pos)
        return out

    # 2. scan each segment in place, store its total
    for line, seg, outer, inn, active in items:
        with b.if_then(active):
            ads = [addr(outer, inn, pos) for pos in positions(seg)]
            acc = None
            for ad in ads:
                x = [smem_load(ctx, a_off(k, ad), tys[k]) for k in range(len(srcs))]
                acc = x if acc is None else combine(acc, x)
                for k, v in enumerate(acc):
                    smem_store(ctx, a_off(k, ad), v)
            tot = b.add(b.mul(line, _c(P)), seg)
            for k, v in enumerate(acc):
                smem_store(ctx, b_off(k, tot), v)
    ctx.barrier()

    # 3. prefix of earlier segments, applied to this one
    if P > 1:
        for line, seg, outer, inn, active in items:
            with b.if_then(b.and_(active, b.icmp_unsigned(">", seg, _c(0)))):
                base = b.mul(line, _c(P))
                pre = [smem_load(ctx, b_off(k, base), tys[k]) for k in range(len(srcs))]
                for j in range(1, P - 1):
                    x = [smem_load(ctx, b_off(k, b.add(base, _c(j))), tys[k]) for k in range(len(srcs))]
                    nxt = combine(pre, x)
                    take = b.icmp_unsigned("<", _c(j), seg)
                    pre = [b.select(take, n, o) for n, o in zip(nxt, pre)]
                for ad in [addr(outer, inn, pos) for pos in positions(seg)]:
                    x = [smem_load(ctx, a_off(k, ad), tys[k]) for k in range(len(srcs))]
                    for k, v in enumerate(combine(pre, x)):
                        smem_store(ctx, a_off(k, ad), v)
        ctx.barrier()

    # 4. load back in the layout
    outs = [TensorVal([smem_load(ctx, a_off(k, lin), tys[k]) for lin in lins], layout, shape)
            for k in range(len(srcs))]
    ctx.after_smem_read()
    return outs[0] if len(outs) == 1 else outs
