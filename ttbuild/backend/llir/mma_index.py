"""LLIR index math of the tensor-core layouts (ttbuild.backend.ir.distributed): each thread's base index from its lane and warp, plus the layout's fixed per-element offsets."""

from __future__ import annotations

from llvmlite import ir

from ttbuild.backend.ir.encodings import DotOperand, FmaOperand, NvidiaMma

I32 = ir.IntType(32)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _warp_coords(b, mma: NvidiaMma, warp) -> list[ir.Value]:
    """The warp's coordinate per dimension, in the layout's warp order (NvidiaMma.warp_coords)."""
    wc, rem = [None] * mma.rank, warp
    for d in mma.warp_order:
        w = mma.warps_per_cta[d]
        wc[d] = b.and_(rem, _c(w - 1)) if w > 1 else _c(0)
        rem = b.lshr(rem, _c(w.bit_length() - 1)) if w > 1 else rem
    return wc


def warp_origin(ctx, layout) -> list[ir.Value]:
    """Per dimension, the first index of this warp's tile (warp coordinate x warp tile; 0 along
    the dimensions a dot operand is replicated over)."""
    b = ctx.builder
    _, warp = ctx.lane_warp()
    parent = layout.parent if isinstance(layout, DotOperand) else layout
    rank = parent.rank
    wc = _warp_coords(b, parent, warp)
    wt = layout._warp_tile()
    out = []
    for d in range(rank):
        if isinstance(layout, DotOperand) and layout._warps()[d] == 1:
            out.append(_c(0))
        else:
            out.append(b.mul(wc[d], _c(wt[d])) if wt[d] != 1 else wc[d])
    return out


def bases(ctx, layout) -> list[ir.Value]:
    """Per dimension, the unwrapped index of this thread's element 0 (mirrors
    `layout.thread_base(lane, warp)`); emitted where the builder is (callers use the entry block)."""
    if isinstance(layout, FmaOperand):  # the blocked parent's base along batch and M (A) or N (B), 0 along K
        pb = ctx._bases(layout.parent)
        return [_c(0) if d == layout.k_dim else pb[d] for d in range(layout.rank)]
    b = ctx.builder
    lane, warp = ctx.lane_warp()
    g = b.lshr(lane, _c(2))
    t = b.and_(lane, _c(3))
    parent = layout.parent if isinstance(layout, DotOperand) else layout
    rank = parent.rank
    wc = _warp_coords(b, parent, warp)
    if isinstance(layout, NvidiaMma):
        lane_b = [_c(0)] * (rank - 2) + [g, b.shl(t, _c(1))]
    else:
        kt = b.mul(t, _c(layout.k_width)) if layout.k_width > 1 else t
        lane_b = [_c(0)] * (rank - 2) + ([g, kt] if layout.op_idx == 0 else [kt, g])
        wc[layout.k_dim] = _c(0)
    wt = layout._warp_tile()
    out = []
    for d in range(rank):
        w = b.mul(wc[d], _c(wt[d])) if wt[d] != 1 else wc[d]
        out.append(b.add(w, lane_b[d]))
    return out


def indices(ctx, layout, shape) -> list[tuple[ir.Value, ...]]:
    """Per element of this thread (local_offsets order), its index per dimension, wrapped modulo
    the shape where the layout's tile exceeds it."""
    b = ctx.builder
    base = bases(ctx, layout)
    out = []
    for off in layout.local_offsets(shape):
        idx = []
        for d in range(len(shape)):
            v = b.add(base[d], _c(off[d])) if off[d] else base[d]
            if layout.tile(d) > shape[d]:
                v = b.and_(v, _c(shape[d] - 1))
            idx.append(v)
        out.append(tuple(idx))
    return out
