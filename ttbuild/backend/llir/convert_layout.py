"""LLIR rule for ttg.convert_layout: a register renaming when every thread already holds its new elements, else shuffles or shared memory.

Warp shuffles take a 32-bit mma accumulator into a tf32 A operand (attention's P, convert_shfl).

The round trip through shared memory is sized by ttbuild.backend.analysis.allocation.convert_bytes:
packed rows for the 16-bit mma accumulator, one word per element otherwise. A 16-bit tile leaving
the mma accumulator for a blocked layout with one element per thread along its fastest dimension
(a store with no vector alignment) is laid out by destination instead (`reader_packed`): each
thread's elements 8 at a time in one 16-byte slot (slots XOR-swizzled, `_slot_of`), so the reads
are `ld.shared.v4` and the tile stays packed two to a register (128 halves in 64 registers, not
128) until it is stored, as Triton's conversion reads it.
"""

from __future__ import annotations

from math import prod

from llvmlite import ir

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis import shuffle_plan
from ttbuild.backend.analysis.allocation import elem_bytes, packed_pitch, round4
from ttbuild.backend.analysis.fma_staging import staged_base
from ttbuild.backend.analysis.layout import same_thread_map
from ttbuild.backend.ir.encodings import Blocked, NvidiaMma
from ttbuild.backend.ir.ops import TTG
from ttbuild.backend.llir import convert_shfl
from ttbuild.backend.llir.context import I32, TensorVal, layout_of, llvm_type
from ttbuild.backend.llir.fma import StagedOperand
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
    base = staged_base(op)
    if base is not None:  # an FMA dot's operand: stored here, loaded by the dot (llir.fma)
        return _staged(ctx, src, lay, shape, ety, base, round4(elem_bytes(elem)))
    pairs = ctx.memo(("shfl_plan", src.layout, lay, shape),
                     lambda: shuffle_plan.plan(src.layout, lay, shape, mu.elem_bits(elem), 32 * ctx.num_warps))
    if pairs is not None:  # tf32 P of attention: two shuffle rounds per register pair
        return convert_shfl.convert(ctx, src, lay, shape, pairs)
    if reader_packed(src.layout, lay, shape, elem, 32 * ctx.num_warps):
        return _through_reader_slots(ctx, src, lay, shape, ety)
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


def _staged(ctx, src, lay, shape, ety, base: int, slot: int) -> StagedOperand:
    """Every thread stores its elements at scratch byte `base` + slot x row-major index, one
    barrier; the loads are left to the dot (analysis.fma_staging)."""
    b = ctx.builder
    ctx.before_smem_write()
    for ix, v in zip(ctx.indices(src.layout, shape), src.elems):
        smem_store(ctx, b.add(ir.Constant(I32, base), b.mul(linear(b, ix, shape), ir.Constant(I32, slot))), v)
    ctx.barrier()
    return StagedOperand(ctx, base, slot, ety, lay, shape)


def _pair(b, ety, lo, hi):
    """Two 16-bit values as one i32 (`lo` in the low half, as a little-endian store lays them)."""
    pair = ir.Constant(ir.VectorType(ety, 2), ir.Undefined)
    pair = b.insert_element(pair, lo, ir.Constant(I32, 0))
    return b.bitcast(b.insert_element(pair, hi, ir.Constant(I32, 1)), I32)


_SLOT = 8  # 16-bit elements per 16-byte slot
_MIN_ELEMS = 64  # elements per thread from which reader_packed applies


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def reader_packed(src_layout, dst_layout, shape, elem: str, threads: int) -> bool:
    """Whether a conversion goes through destination-ordered slots (module doc): a 16-bit tile
    from `#ttg.nvidia_mma` to a blocked layout that covers `shape` exactly once (powers of two,
    no wrapping or replication), one element per thread along its fastest dimension, a multiple
    of 8 and at least 64 elements per thread (where the 16-bit tile's registers count: below,
    the scalar reads of the packed-row plan cost fewer shared-memory wavefronts). Needs 2 bytes
    per element of scratch (allocation.convert_bytes gives at least that)."""
    if not (isinstance(src_layout, NvidiaMma) and isinstance(dst_layout, Blocked)) or mu.elem_bits(elem) != 16:
        return False
    lay = dst_layout
    if lay.size_per_thread[lay.order[0]] != 1 or not all(_pow2(x) for x in shape):
        return False
    if any(shape[d] % lay.tile(d) for d in range(lay.rank)):
        return False
    if 32 * prod(lay.warps_per_cta) != threads or prod(lay.threads_per_warp) != 32:
        return False
    n = lay.elems_per_thread(shape)
    return n % _SLOT == 0 and n >= _MIN_ELEMS


def _dst_slot(b, lay: Blocked, shape, idx):
    """(thread, element) of blocked layout `lay` that holds the element at index `idx` (i32 per
    dimension): the inverse of Blocked.thread_indices for a layout that covers `shape` once."""
    c = lambda n: ir.Constant(I32, n)  # noqa: E731
    lane = warp = j = None
    lane_mul = warp_mul = j_mul = 1
    for d in lay.order:
        spt, tpw, wpc, tile = lay.size_per_thread[d], lay.threads_per_warp[d], lay.warps_per_cta[d], lay.tile(d)
        x = idx[d]
        pos = b.and_(x, c(tile - 1)) if tile < shape[d] else x
        rep = b.lshr(x, c(tile.bit_length() - 1)) if tile < shape[d] else None
        s = b.and_(pos, c(spt - 1)) if spt > 1 else None
        ln = b.and_(b.lshr(pos, c(spt.bit_length() - 1)), c(tpw - 1)) if tpw > 1 else None
        wp = b.lshr(pos, c((spt * tpw).bit_length() - 1)) if wpc > 1 else None
        q = s
        if rep is not None:
            r = b.mul(rep, c(spt)) if spt > 1 else rep
            q = r if q is None else b.add(r, q)
        for val, mul, name in ((ln, lane_mul, "lane"), (wp, warp_mul, "warp"), (q, j_mul, "j")):
            if val is None:
                continue
            term = b.mul(val, c(mul)) if mul > 1 else val
            if name == "lane":
                lane = term if lane is None else b.add(lane, term)
            elif name == "warp":
                warp = term if warp is None else b.add(warp, term)
            else:
                j = term if j is None else b.add(j, term)
        lane_mul, warp_mul = lane_mul * tpw, warp_mul * wpc
        j_mul *= spt * (shape[d] // tile)
    tid = lane if lane is not None else c(0)
    if warp is not None:
        tid = b.add(b.mul(warp, c(32)), tid)
    return tid, (j if j is not None else c(0))


def _slot_of(j: int, t: int, threads: int) -> int:
    """Byte offset of element j of thread t: slot (j / 8) * threads + (t ^ (j / 8) % 8), 16 bytes
    each, (j % 8) * 2 inside it. The XOR permutes the slots of each 8-thread phase of a read
    (still 8 distinct 16-byte bank groups) and spreads over them the writers of one column whose
    rows land in successive slots of one thread (2-way bank conflicts become none at 2 warps;
    with the warps along the columns, as the epilogues of kernels/ have them, there are none)."""
    k = j // _SLOT
    return (k * threads + (t ^ (k % _SLOT))) * 16 + (j % _SLOT) * 2


def _slot_constants(src_layout, dst: Blocked, shape, threads: int):
    """Byte offsets C_j such that every thread's element j lands at S(its element 0) ^ C_j, S
    the slot address of an index (one XOR per store from one address per thread, as Triton's
    linear-layout stores), checked on every thread; None where the layouts do not split so."""
    where = {}
    for t in range(threads):
        for j, ix in enumerate(dst.thread_indices(t, shape)):
            where[ix] = _slot_of(j, t, threads)
    consts = [where.get(tuple(o)) for o in src_layout.local_offsets(shape)]
    if None in consts:
        return None
    for t in range(threads):
        first = where.get(tuple(src_layout.thread_base(t % 32, t // 32)))
        if first is None:
            return None
        if any(where[ix] != first ^ cj for ix, cj in zip(src_layout.thread_indices(t, shape), consts)):
            return None
    return consts


def _slot_address(b, lay, shape, threads, ix):
    """LLIR of _slot_of for index `ix` (i32 per dimension)."""
    c = lambda n: ir.Constant(I32, n)  # noqa: E731
    tid, j = _dst_slot(b, lay, shape, ix)
    k = b.lshr(j, c(3))
    slot = b.add(b.mul(k, c(threads)), b.xor(tid, b.and_(k, c(_SLOT - 1))))
    return b.add(b.mul(slot, c(16)), b.mul(b.and_(j, c(_SLOT - 1)), c(2)))


def _through_reader_slots(ctx, src, lay, shape, ety):
    """Element j of thread t at _slot_of(j, t): the writers scatter halves, each reader loads
    its 8-element slots as 16-byte vectors."""
    b = ctx.builder
    threads = 32 * ctx.num_warps
    c = lambda n: ir.Constant(I32, n)  # noqa: E731
    consts = ctx.memo(("reader_slots", src.layout, lay, shape),
                      lambda: _slot_constants(src.layout, lay, shape, threads))
    ctx.before_smem_write()
    if consts is not None:
        first = _slot_address(b, lay, shape, threads, ctx.thread_base(src.layout))
        addrs = [b.xor(first, c(k)) if k else first for k in consts]
    else:
        addrs = [_slot_address(b, lay, shape, threads, ix) for ix in ctx.indices(src.layout, shape)]
    for at, v in zip(addrs, src.elems):
        b.store(v, b.bitcast(ctx.smem(at), ir.PointerType(ety, addrspace=3)))
    ctx.barrier()
    tid = ctx.sreg("tid.x")
    vt = ir.VectorType(ety, _SLOT)
    out = []
    for k in range(lay.elems_per_thread(shape) // _SLOT):
        at = b.mul(b.add(c(k * threads), b.xor(tid, c(k % _SLOT))), c(16))
        vec = b.load(b.bitcast(ctx.smem(at), ir.PointerType(vt, addrspace=3)), align=16)
        out.extend(b.extract_element(vec, c(e)) for e in range(_SLOT))
    ctx.after_smem_read()
    return TensorVal(out, lay, shape)
