"""LLIR rule for tt.reduce: in-thread combine, warp shuffles, then shared memory across warps.

tt.reduce (Triton ReduceOpToLLVM's three steps): combine the elements a thread holds along the
axis (left to right, as Triton does: the products of a sum of products fuse into FMAs and
need not all be live at once); then butterfly shuffles (`shfl.sync.bfly.b32`, PTX ISA 9.7.9.6)
across the lanes that hold distinct data along the axis, from the highest lane mask down (Triton's
warpReduce), so every lane ends with its group's result; then, when several warps hold distinct
data along the axis, lane 0 of each writes its partial to shared memory and, after one barrier,
every warp reduces the W = plan.warps partials (a power of two) with shuffles, one partial per
lane as Triton's ReduceOpToLLVM accumulatePartialReductions: lane l loads the partial of warp
l mod W, butterflies with masks W/2, ..., 1 combine them, and `shfl.sync.idx` (PTX ISA 9.7.9.6)
from lane 0 gives every lane lane 0's value. Triton has warp 0 alone do this, store the result and
meet at a second barrier; here every warp does it, so one barrier does, and each thread loads
one partial, not W (this rule before). The broadcast keeps the result warp-uniform (ptxas keeps
e.g. layer norm's mean and rstd in uniform registers) and the same on every lane even for a
non-commutative combine. Where the lanes along the axis (those sharing an output) are fewer than
W, each loads W / lanes partials and combines them first, and the shuffles and the broadcast
stay within those lanes. The user's combine region is inlined at each step (multi-operand
reductions such as argmax carry tuples).
Shared memory: the plan of ttbuild.backend.analysis.allocation (offset 0; a barrier before a write only when
shared memory was read since the last barrier).
"""

from __future__ import annotations

import functools
from math import prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, reduce_plan, round4
from ttbuild.backend.ir.encodings import Blocked, NvidiaMma, Slice
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, I64, TensorVal
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.errors import NotSupportedYet
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _log2(n: int) -> int:
    return n.bit_length() - 1


def shfl_bfly(ctx, v, lane_mask: int):
    """Value of lane (lane ^ lane_mask) in this warp; any type up to 64 bits."""
    return _shfl(ctx, "bfly", v, ir.Constant(I32, lane_mask))


def shfl_idx(ctx, v, src_lane):
    """Value of lane `src_lane` (an int or an i32 value) in this warp; any type up to 64 bits."""
    return _shfl(ctx, "idx", v, src_lane if isinstance(src_lane, ir.Value) else ir.Constant(I32, src_lane))


def shfl_up(ctx, v, delta: int):
    """Value of lane (lane - delta), or this lane's own below lane delta (Triton's shuffleUp)."""
    return _shfl(ctx, "up", v, ir.Constant(I32, delta), clamp=0)


def shfl_down(ctx, v, delta: int):
    """Value of lane (lane + delta), or this lane's own from lane 32 - delta up."""
    return _shfl(ctx, "down", v, ir.Constant(I32, delta))


def _shfl(ctx, mode: str, v, b_op, clamp: int = 0x1F):
    """`shfl.sync.<mode>.b32` over the whole warp (PTX ISA 9.7.9.6; `clamp`: 0x1F, the last lane,
    except for `up`, whose bound is lane 0); 16-bit values widened to 32 bits, 64-bit ones
    shuffled as two halves."""
    b = ctx.builder
    fn = ctx.intrinsic(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
    call = lambda w: b.call(fn, [ir.Constant(I32, -1), w, b_op, ir.Constant(I32, clamp)])
    t = v.type
    bits = t.width if isinstance(t, ir.IntType) else {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(t)]
    it = ir.IntType(bits)
    w = v if isinstance(t, ir.IntType) else b.bitcast(v, it)
    if bits == 64:
        lo, hi = b.trunc(w, I32), b.trunc(b.lshr(w, ir.Constant(I64, 32)), I32)
        lo, hi = call(lo), call(hi)
        r = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    elif bits == 32:
        r = call(w)
    else:
        r = b.trunc(call(b.zext(w, I32)), it)
    return r if isinstance(t, ir.IntType) else b.bitcast(r, t)


def tree(combine, items: list) -> list:
    """Combine `items` (each a tuple of operand values) pairwise, neighbours first, keeping their
    order: depth log2(n) instead of a chain of n - 1 dependent steps (the combiner is associative,
    as tl.reduce requires; floating-point sums may round differently from a left fold)."""
    while len(items) > 1:
        nxt = [combine(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            nxt.append(items[-1])
        items = nxt
    return items[0]


def _across_warps(ctx, op, layout, shape, axis, plan, groups, accs, combine):
    """Step 3 of `reduce`: each warp's partials (`accs`, one per group of `groups`, the
    thread's element indices sharing offsets off `axis`) through shared memory to every
    lane that holds the output (Triton's ReduceOpToLLVM:
    storeWarpReduceToSharedMemory, accumulatePartialReductions);
    returns the combined values, in `accs`' order."""
    b = ctx.builder
    out_shape = shape[:axis] + shape[axis + 1:]
    lane, warp = ctx.lane_warp()
    tpw, wpc = plan.lane_span, plan.warp_span
    lane_a = b.and_(b.lshr(lane, ir.Constant(I32, _log2(plan.lane_stride))), ir.Constant(I32, tpw - 1))
    warp_a = b.and_(b.lshr(warp, ir.Constant(I32, _log2(plan.warp_stride))), ir.Constant(I32, wpc - 1))
    writer = b.and_(b.icmp_unsigned("==", lane_a, ir.Constant(I32, 0)),
                    b.icmp_unsigned("<", warp_a, ir.Constant(I32, plan.warps)))
    idx = ctx.indices(layout, shape)
    lins = [linear(b, idx[js[0]][:axis] + idx[js[0]][axis + 1:], out_shape) for js in groups]
    outs = prod(out_shape)
    slots = [round4(elem_bytes(mu.elem_str(v.type))) for v in op.operands]
    bases = [outs * plan.warps * sum(slots[:i]) for i in range(len(slots))]
    W = ir.Constant(I32, plan.warps)
    ctx.before_smem_write()
    with b.if_then(writer):
        for lin, acc in zip(lins, accs):
            for i, v in enumerate(acc):
                slot = b.add(b.mul(lin, W), warp_a)
                off = b.add(b.mul(slot, ir.Constant(I32, slots[i])), ir.Constant(I32, bases[i]))
                smem_store(ctx, off, v)
    ctx.barrier()
    # each lane loads the partials of warps (lane_a mod G) + G j, G = the lanes sharing its
    # outputs (at most W), combines them, then G-lane butterflies and a broadcast from the
    # group's first lane (lane_a == 0)
    assert plan.warps & (plan.warps - 1) == 0 and tpw & (tpw - 1) == 0, plan
    G = min(plan.warps, tpw)
    lane_g = b.and_(lane_a, ir.Constant(I32, G - 1))
    if tpw == 32:
        src = 0
    else:
        src = b.and_(lane, ir.Constant(I32, 31 & ~((tpw - 1) * plan.lane_stride)))
    new = []
    for lin, acc in zip(lins, accs):
        parts = []
        for j in range(plan.warps // G):
            slot = b.add(b.mul(lin, W), b.add(lane_g, ir.Constant(I32, j * G)) if j else lane_g)
            parts.append([smem_load(ctx, b.add(b.mul(slot, ir.Constant(I32, slots[i])),
                                                ir.Constant(I32, bases[i])), v.type)
                          for i, v in enumerate(acc)])
        part = tree(combine, parts)
        if G > 1:
            k = G // 2
            while k >= 1:
                part = combine(part, [shfl_bfly(ctx, v, k * plan.lane_stride) for v in part])
                k //= 2
            part = [shfl_idx(ctx, v, src) for v in part]
        new.append(part)
    ctx.after_smem_read()
    return new


@rule(TT.REDUCE)
def reduce(ctx, op, *srcs):
    """tt.reduce of `srcs` (one TensorVal per operand, same layout and shape) along its "axis":
    within each thread, across lanes by butterfly shuffles, across warps through shared memory
    (Triton's ReduceOpToLLVM, same combine order). Returns a TensorVal per operand in the
    Slice(axis) layout (scalars for a 1-D source). Raises NotSupportedYet for a source layout
    other than Blocked, NvidiaMma or Slice."""
    axis = mu.int_attr(mu.props(op)["axis"])
    layout, shape = srcs[0].layout, srcs[0].shape
    if not isinstance(layout, (Blocked, NvidiaMma, Slice)):
        raise NotSupportedYet(f"tt.reduce of a tensor with layout {type(layout).__name__}", None, "llir")
    block = op.regions[0].blocks[0]
    combine = lambda acc, val: ctx.run_block(block, list(acc) + list(val))

    # 1. within the thread, grouped by the element's offsets off the axis
    groups: dict = {}
    for j, off in enumerate(layout.local_offsets(shape)):
        groups.setdefault(off[:axis] + off[axis + 1:], []).append(j)
    # left to right, Triton's order within a thread (ReduceOpToLLVM reduceWithinThreads)
    accs = [functools.reduce(combine, [[s.elems[j] for s in srcs] for j in js]) for js in groups.values()]

    # 2. across lanes, from the highest mask down (Triton's warpReduce)
    plan = reduce_plan(layout, shape, axis)
    k = plan.lanes // 2
    while k >= 1:
        accs = [combine(acc, [shfl_bfly(ctx, v, k * plan.lane_stride) for v in acc]) for acc in accs]
        k //= 2

    # 3. across warps, through shared memory
    out_shape = shape[:axis] + shape[axis + 1:]
    if plan.warps > 1:
        accs = _across_warps(ctx, op, layout, shape, axis, plan, list(groups.values()), accs, combine)

    if not out_shape:
        res = accs[0]
    else:
        sl = Slice(axis, layout)
        res = [TensorVal([acc[i] for acc in accs], sl, out_shape) for i in range(len(srcs))]
    return res[0] if len(res) == 1 else res
