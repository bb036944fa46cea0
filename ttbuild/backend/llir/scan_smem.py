"""tt.scan through shared memory, for layouts llir.scan cannot scan in registers (not blocked below their slices).

In three phases separated by barriers (ttbuild.backend.analysis.allocation.segment_plan):
1. every thread stores its elements (row-major slots);
2. each line along the axis is cut into P segments of S elements; the thread of a segment scans
   it in place, in order (reverse: from the end), and stores the segment's total;
3. it combines the totals of the segments before its own (in order) into a prefix and applies
   it to its segment (past 16 segments, through groups of totals scanned in place first); then
   every thread loads its elements back.
The user's combine region is inlined with the earlier value first, so associative but
non-commutative combiners keep Triton's order.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from ttbuild.backend.analysis.allocation import elem_bytes, round4, segment_plan
from ttbuild.backend.llir.context import I32, TensorVal, llvm_type
from ttbuild.backend.llir.smem import linear, smem_load, smem_store


def _c(v):
    return ir.Constant(I32, v)


def scan_through_smem(ctx, spec, srcs) -> list:
    """The scan (llir.scan.Spec) of `srcs` (TensorVals of one layout and shape) through shared
    memory (see the module docstring): store the operands, scan each segment in place, apply the
    prefix of the earlier segments, load back in the layout. Returns a TensorVal per operand."""
    sc = _Scan(ctx, spec, srcs)
    lins = sc.store()
    items = sc.work_items()
    sc.scan_segments(items)
    if sc.P > 1:
        sc.add_prefixes(items)
    return sc.load_back(lins)


class _Scan:
    """One tt.scan's plan (analysis.allocation.segment_plan: `lines` lines of P segments of S
    elements, one thread per segment) and its scratch: the operands' elements at a_off, one
    total per segment at b_off, each element in round4 bytes."""

    def __init__(self, ctx, spec, srcs):
        self.ctx, self.b, self.srcs = ctx, ctx.builder, srcs
        self.axis, self.reverse, self.combine = spec.axis, spec.reverse, spec.combine
        self.layout, self.shape = srcs[0].layout, tuple(srcs[0].shape)
        self.threads = 32 * ctx.num_warps
        self.lines, self.P, self.S = segment_plan(self.shape, self.axis, self.threads)
        self.L = self.shape[self.axis]
        self.inner = prod(self.shape[self.axis + 1:])
        numel = prod(self.shape)
        self.tys = [llvm_type(e) for e in spec.elems]
        slots = [round4(elem_bytes(e)) for e in spec.elems]
        self.slots = slots
        self.a_base = [sum(numel * s for s in slots[:k]) for k in range(len(slots))]
        self.b_base = [sum(numel * s for s in slots) + sum(self.lines * self.P * s for s in slots[:k])
                       for k in range(len(slots))]

    def a_off(self, k, lin):
        """Byte offset of operand k's element at linear index `lin`."""
        b = self.b
        return b.add(b.mul(lin, _c(self.slots[k])), _c(self.a_base[k]))

    def b_off(self, k, lin):
        """Byte offset of operand k's total of segment `lin` (line * P + segment)."""
        b = self.b
        return b.add(b.mul(lin, _c(self.slots[k])), _c(self.b_base[k]))

    def addr(self, outer, inn, pos):
        """Linear index of element `pos` along the axis of the line (outer, inn)."""
        b = self.b
        return b.add(b.mul(b.add(b.mul(outer, _c(self.L)), pos), _c(self.inner)), inn)

    def positions(self, seg):
        """The S positions along the axis of segment `seg`, in scan order (reversed for reverse)."""
        b = self.b
        first = b.mul(seg, _c(self.S))
        out = []
        for q in range(self.S):
            pos = b.add(first, _c(q)) if q else first
            out.append(b.sub(_c(self.L - 1), pos) if self.reverse else pos)
        return out

    def load(self, off):
        """Every operand's element at byte offsets off(k)."""
        return [smem_load(self.ctx, off(k), self.tys[k]) for k in range(len(self.srcs))]

    def store(self) -> list:
        """1. Every thread stores its elements; returns their linear indices."""
        ctx, b = self.ctx, self.b
        idx = ctx.indices(self.layout, self.shape)
        lins = [linear(b, ix, self.shape) for ix in idx]
        ctx.before_smem_write()
        for k, s in enumerate(self.srcs):
            for lin, v in zip(lins, s.elems):
                smem_store(ctx, self.a_off(k, lin), v)
        ctx.barrier()
        return lins

    def work_items(self) -> list:
        """The segments this thread scans: (line, seg, outer, inner index, active) per round."""
        b, P, inner, threads = self.b, self.P, self.inner, self.threads
        tid = self.ctx.sreg("tid.x")
        items = []
        for r in range(-(-self.lines * P // threads)):
            w = b.add(tid, _c(r * threads)) if r else tid
            line = b.udiv(w, _c(P)) if P > 1 else w
            seg = b.urem(w, _c(P)) if P > 1 else _c(0)
            outer = b.udiv(line, _c(inner)) if inner > 1 else line
            inn = b.urem(line, _c(inner)) if inner > 1 else _c(0)
            active = b.icmp_unsigned("<", w, _c(self.lines * P))
            items.append((line, seg, outer, inn, active))
        return items

    def scan_run(self, off, count):
        """Scan in place, in order, the run of `count` slots whose operand k's t-th lies at byte
        offset off(k, t); returns the run's total."""
        acc = None
        for t in range(count):
            x = self.load(lambda k, t=t: off(k, t))
            if acc is None:
                acc = x
                continue
            acc = self.combine(acc, x)
            for k, v in enumerate(acc):
                smem_store(self.ctx, off(k, t), v)
        return acc

    def scan_segments(self, items) -> None:
        """2. Scan each segment in place and store its total."""
        ctx, b = self.ctx, self.b
        for line, seg, outer, inn, active in items:
            with b.if_then(active):
                ads = [self.addr(outer, inn, pos) for pos in self.positions(seg)]
                acc = self.scan_run(lambda k, t, ads=ads: self.a_off(k, ads[t]), len(ads))
                tot = b.add(b.mul(line, _c(self.P)), seg)
                for k, v in enumerate(acc):
                    smem_store(ctx, self.b_off(k, tot), v)
        ctx.barrier()

    def add_prefixes(self, items) -> None:
        """3. The combined totals of the earlier segments of the line, applied to this one. Past
        16 segments a line's totals are first scanned in place in groups of T (one thread per
        group), so a segment's prefix takes at most P / T + 1 combines instead of P - 1 (a
        4096-element cumsum on 8 warps: 256 segments, 255 serial combines per thread before)."""
        ctx, b, P = self.ctx, self.b, self.P
        T = 1 << (P.bit_length() - 1) // 2 if P >= 16 else 1
        if T > 1:
            self.scan_groups(items, T)
        for line, seg, outer, inn, active in items:
            with b.if_then(b.and_(active, b.icmp_unsigned(">", seg, _c(0)))):
                base = b.mul(line, _c(P))
                pre = self.prefix(base, seg, T)
                for ad in [self.addr(outer, inn, pos) for pos in self.positions(seg)]:
                    x = self.load(lambda k, ad=ad: self.a_off(k, ad))
                    for k, v in enumerate(self.combine(pre, x)):
                        smem_store(ctx, self.a_off(k, ad), v)
        ctx.barrier()

    def total(self, base, j):
        """The totals at segment `j` (an i32 value or an int) of the line starting at `base`."""
        b = self.b
        at = j if isinstance(j, ir.Value) else _c(j)
        return self.load(lambda k: self.b_off(k, b.add(base, at)))

    def running(self, base, idx, count, upto):
        """The combine, in order, of the totals at `idx(0..count-1)` whose index is below `upto`
        (`upto` >= 1: the first always counts)."""
        b = self.b
        pre = self.total(base, idx(0))
        for j in range(1, count):
            nxt = self.combine(pre, self.total(base, idx(j)))
            take = b.icmp_unsigned("<", _c(j), upto)
            pre = [b.select(take, n, o) for n, o in zip(nxt, pre)]
        return pre

    def prefix(self, base, seg, T):
        """The combined totals of segments 0..seg-1 (seg > 0) of the line at `base`: with groups
        (T > 1), the group totals before seg's group, then seg's group's scanned totals to seg - 1."""
        b, P = self.b, self.P
        if T == 1:
            return self.running(base, lambda j: j, P - 1, seg)
        group, within = b.udiv(seg, _c(T)), b.urem(seg, _c(T))
        before = self.running(base, lambda j: j * T + T - 1, P // T - 1, group)  # valid when group > 0
        inner = self.total(base, b.sub(seg, _c(1)))  # seg's group scanned to seg - 1: valid when within > 0
        both = self.combine(before, inner)
        has_group, has_inner = b.icmp_unsigned(">", group, _c(0)), b.icmp_unsigned(">", within, _c(0))
        return [b.select(has_group, b.select(has_inner, x, g), i) for x, g, i in zip(both, before, inner)]

    def scan_groups(self, items, T) -> None:
        """3a. Each group of T segment totals of a line scanned in place (inclusive, in order) by
        its first segment's thread."""
        ctx, b = self.ctx, self.b
        for line, seg, _outer, _inn, active in items:
            first = b.icmp_unsigned("==", b.urem(seg, _c(T)), _c(0))
            with b.if_then(b.and_(active, first)):
                base = b.add(b.mul(line, _c(self.P)), seg)
                self.scan_run(lambda k, t, base=base: self.b_off(k, b.add(base, _c(t))), T)
        ctx.barrier()

    def load_back(self, lins) -> list:
        """4. Every thread loads its elements back, in the operands' layout."""
        outs = [TensorVal([smem_load(self.ctx, self.a_off(k, lin), self.tys[k]) for lin in lins], self.layout, self.shape)
                for k in range(len(self.srcs))]
        self.ctx.after_smem_read()
        return outs
