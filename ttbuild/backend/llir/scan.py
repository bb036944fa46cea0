"""LLIR rule for tt.scan (cumsum, cumprod, associative_scan; forward or reverse, any axis): registers and warp shuffles, shared memory only across warps.

Triton's ScanOpToLLVM, for a blocked layout or a slice of one (ttbuild.backend.analysis.allocation.
scan_plan: each thread holds `reps` chunks of `spt` consecutive elements of a line; lanes, then
warps, hold consecutive chunks; chunk r of the whole CTA comes before chunk r + 1):
1. each thread scans each of its chunks in registers;
2. the chunk totals are scanned across the lanes along the axis with `shfl.sync.up` (PTX ISA
   9.7.9.6) at distances 1, 2, 4, ... (Triton's warpScan), so every lane holds the combined totals
   of its chunk and those of the lanes before it;
3. when one warp holds the line, the carry of the earlier chunks passes from the last lane
   (`shfl.sync.idx`, Triton's AddPartialReduceOneWarp); when several do, the last lane of each warp
   stores its chunk totals to shared memory and, after one barrier, every thread combines those of
   the warps (and chunks) before its own (Triton's storeWarpAccumulator and AddPartialReduce);
4. the rest of a chunk takes the total of the lane before (`shfl.sync.up` by one lane) or the carry.
A reverse scan runs the same steps from the end of the line: chunks and their elements from the
last, lanes and warps reflected, `shfl.sync.down` for up (Triton flips every element with five
butterflies before and after). The user's combine region is inlined with the earlier value first,
so associative but non-commutative combiners keep Triton's order. Other layouts go through shared
memory (llir.scan_smem).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.allocation import elem_bytes, round4, scan_plan
from ttbuild.backend.ir.ops import TT
from ttbuild.backend.llir.context import I32, TensorVal
from ttbuild.backend.llir.reduce import shfl_down, shfl_idx, shfl_up
from ttbuild.backend.llir.scan_smem import scan_through_smem
from ttbuild.backend.llir.smem import linear, smem_load, smem_store
from ttbuild.registry import RuleSet

RULES = RuleSet()  # this module's rules; ttbuild.backend.llir.rules builds the table
rule = RULES.rule


def _c(v):
    return ir.Constant(I32, v)


@dataclass(frozen=True)
class Spec:
    """What a lowering needs of a tt.scan: its axis, direction, operand element types (TTGIR
    spelling) and combine (operand values of the earlier, then the later -> combined values)."""
    axis: int
    reverse: bool
    elems: tuple
    combine: Callable


@rule(TT.SCAN)
def scan(ctx, op, *srcs):
    """`tt.scan` of `srcs` (one TensorVal per operand, same layout and shape) along its "axis",
    in registers (see the module docstring) or, for layouts scan_plan does not cover, through
    shared memory. Returns a TensorVal per operand (one: itself)."""
    p, block = mu.props(op), op.regions[0].blocks[0]
    spec = Spec(mu.int_attr(p["axis"]), "reverse" in p and str(p["reverse"]) == "true",
                tuple(mu.elem_str(v.type) for v in op.operands), lambda x, y: ctx.run_block(block, list(x) + list(y)))
    outs = lower_scan(ctx, spec, srcs)
    return outs[0] if len(outs) == 1 else outs


def lower_scan(ctx, spec: Spec, srcs) -> list:
    """The scan of `srcs` per `spec`: a TensorVal per operand."""
    plan = scan_plan(srcs[0].layout, tuple(srcs[0].shape), spec.axis)
    lines = _chunks(srcs[0], spec.axis, plan, spec.reverse) if plan else None
    if lines is None:
        return scan_through_smem(ctx, spec, srcs)
    outs = _Scan(ctx, spec, srcs, plan).run(lines)
    return [TensorVal([o[k] for o in outs], srcs[0].layout, srcs[0].shape) for k in range(len(srcs))]


def _chunks(src, axis, plan, reverse):
    """Per line a thread holds (its elements sharing the offsets off the axis), its element
    indices in scan order cut into plan.reps chunks of plan.spt; None if a line does not split so."""
    lines: dict = {}
    for j, off in enumerate(src.layout.local_offsets(src.shape)):
        lines.setdefault(off[:axis] + off[axis + 1:], []).append((off[axis], j))
    out = []
    for held in lines.values():
        js = [j for _, j in sorted(held, reverse=reverse)]
        if len(js) != plan.spt * plan.reps:
            return None
        out.append([js[r * plan.spt:(r + 1) * plan.spt] for r in range(plan.reps)])
    return out


class _Scan:
    """One tt.scan in registers: its plan, combine and this thread's lane and warp index along
    the axis in scan order (`li` < lanes, `wi` < warps; reflected for a reverse scan)."""

    def __init__(self, ctx, spec, srcs, plan):
        self.ctx, self.b, self.srcs, self.plan = ctx, ctx.builder, srcs, plan
        self.axis, self.reverse, self.combine = spec.axis, spec.reverse, spec.combine
        self.slots = [round4(elem_bytes(e)) for e in spec.elems]
        shape = tuple(srcs[0].shape)
        self.lines = prod(shape) // shape[spec.axis]  # of the tensor (a thread holds a few)
        self.nslots = self.lines * plan.reps * plan.red.warps  # totals per operand across warps
        red = plan.red
        lane, warp = ctx.lane_warp()
        self.li = self._coord(lane, red.lane_stride, red.lanes)
        self.wi = self._coord(warp, red.warp_stride, red.warps)

    def _coord(self, v, stride: int, n: int):
        """(v / stride) mod n, reflected (n - 1 - it) for a reverse scan; n and stride powers of two."""
        if n == 1:
            return _c(0)
        b = self.b
        x = b.and_(b.lshr(v, _c(stride.bit_length() - 1)) if stride > 1 else v, _c(n - 1))
        return b.xor(x, _c(n - 1)) if self.reverse else x

    def step(self, vals, delta: int):
        """Every operand's value of the lane `delta` lanes before this one in scan order."""
        d = delta * self.plan.red.lane_stride
        return [(shfl_down if self.reverse else shfl_up)(self.ctx, v, d) for v in vals]

    def after(self, pre, vals, has=None):
        """combine(pre, vals), or vals where the i1 `has` is false (nothing comes before)."""
        out = self.combine(pre, vals)
        return out if has is None else [self.b.select(has, n, o) for n, o in zip(out, vals)]

    def run(self, lines):
        """Steps 1-4 over `lines` (from _chunks); returns every element's operand values."""
        elems = [list(v) for v in zip(*(s.elems for s in self.srcs))]
        totals = [[self.in_thread(elems, ch) for ch in chunks] for chunks in lines]
        totals = [[self.warp_scan(t) for t in tots] for tots in totals]
        if self.plan.red.warps > 1:
            self.across_warps(elems, lines, totals)
        else:
            self.one_warp(elems, lines, totals)
        return elems

    def in_thread(self, elems, chunk):
        """1. Scan the chunk in place; returns its total."""
        acc = None
        for j in chunk:
            acc = elems[j] = elems[j] if acc is None else self.combine(acc, elems[j])
        return acc

    def warp_scan(self, acc):
        """2. The combined totals of this lane's chunk and the lanes before it (Triton's warpScan)."""
        b, d = self.b, 1
        while d < self.plan.red.lanes:
            acc = self.after(self.step(acc, d), acc, b.icmp_unsigned(">=", self.li, _c(d)))
            d *= 2
        return acc

    def finish(self, elems, chunk, total, carry, before=None):
        """4. The chunk's last element is `total` (the carry included); the others take the
        total of the lane before, or `carry` on the first lane (None: nothing comes before chunk
        0 of the first lane). `before`: an i1 saying whether earlier warps hold chunk 0, or None."""
        b = self.b
        elems[chunk[-1]] = total
        if len(chunk) == 1:
            return
        lanes, pre, has = self.plan.red.lanes, carry, before
        if lanes > 1:
            prev, later = self.step(total, 1), b.icmp_unsigned("!=", self.li, _c(0))
            pre = prev if carry is None else [b.select(later, p, c) for p, c in zip(prev, carry)]
            has = later if carry is None else (b.or_(before, later) if before is not None else None)
        if pre is not None:
            for j in chunk[:-1]:
                elems[j] = self.after(pre, elems[j], has)

    def one_warp(self, elems, lines, totals):
        """3. One warp holds each line: chunk r's carry is the total of chunk r - 1's last lane."""
        lanes, stride = self.plan.red.lanes, self.plan.red.lane_stride
        lane, _ = self.ctx.lane_warp()
        span = (lanes - 1) * stride
        last = self.b.and_(lane, _c(~span & 31))
        if not self.reverse:
            last = self.b.or_(last, _c(span))
        for chunks, tots in zip(lines, totals):
            carry = None
            for r, (chunk, t) in enumerate(zip(chunks, tots)):
                t = t if carry is None else self.combine(carry, t)
                self.finish(elems, chunk, t, carry)
                if r + 1 < len(chunks):
                    carry = [shfl_idx(self.ctx, v, last) for v in t] if lanes > 1 else t

    def across_warps(self, elems, lines, totals):
        """3. Several warps hold each line: the last lane of each warp stores its chunk totals;
        after one barrier each thread combines, in order, those of the chunks and warps before
        its own (Triton's storeWarpAccumulator, AddPartialReduce)."""
        ctx, b, plan = self.ctx, self.b, self.plan
        shape, ax = tuple(self.srcs[0].shape), self.axis
        rest = shape[:ax] + shape[ax + 1:]
        idx = ctx.indices(self.srcs[0].layout, shape)
        ids = [linear(b, idx[ch[0][0]][:ax] + idx[ch[0][0]][ax + 1:], rest) for ch in lines]
        ctx.before_smem_write()
        with b.if_then(b.icmp_unsigned("==", self.li, _c(plan.red.lanes - 1))):
            for line, tots in zip(ids, totals):
                for r, t in enumerate(tots):
                    for k, v in enumerate(t):
                        smem_store(ctx, self.slot(k, line, r, self.wi), v)
        ctx.barrier()
        accs = [None] * len(lines)
        for r in range(plan.reps):  # chunk by chunk, as Triton (every line's chunk r, then r + 1)
            for i, (line, chunks, tots) in enumerate(zip(ids, lines, totals)):
                accs[i] = self.add_warp_totals(elems, line, r, chunks[r], tots[r], accs[i])
        ctx.after_smem_read()

    def slot(self, k, line, r: int, w):
        """Byte offset of operand k's total of warp `w` (scan order; an int or an i32) in chunk r
        of `line` (i32): chunk by chunk, warp by warp, the lines side by side (as Triton's
        storeWarpAccumulator: the lanes of a warp holding consecutive lines hit distinct banks)."""
        b, n = self.b, self.plan.red.warps
        at = _c(r * n + w) if isinstance(w, int) else b.add(_c(r * n), w)
        i = b.add(b.mul(at, _c(self.lines)), line) if self.lines > 1 else at
        return b.add(b.mul(i, _c(self.slots[k])), _c(sum(self.nslots * s for s in self.slots[:k])))

    def add_warp_totals(self, elems, line, r: int, chunk, t, acc):
        """3-4 for chunk r of one line: `acc` (None for chunk 0) combines every warp's totals of
        the chunks before, `mine` also those of chunk r before this thread's warp (valid past
        chunk 0 or warp 0). Returns acc with every warp's total of chunk r but the last chunk's."""
        b, n = self.b, self.plan.red.warps
        mine = acc
        for w in range(n if r + 1 < self.plan.reps else n - 1):
            part = [smem_load(self.ctx, self.slot(k, line, r, w), v.type) for k, v in enumerate(t)]
            acc = part if acc is None else self.combine(acc, part)
            later = b.icmp_unsigned(">", self.wi, _c(w))
            mine = acc if mine is None else [b.select(later, a, m) for a, m in zip(acc, mine)]
        before = b.icmp_unsigned("!=", self.wi, _c(0)) if r == 0 else None
        self.finish(elems, chunk, self.after(mine, t, before), mine, before)
        return acc
