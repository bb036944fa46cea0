"""Shared-memory plans shared by the ttgir stage (sizes -> `ttg.shared`) and LLIR (offsets, who writes).

A reduction or a scan along `axis` of a blocked layout needs shared memory only when more than one warp
holds distinct data along the axis; a layout conversion always goes through shared memory
(one slot per tensor element). Every user starts at offset 0: users run one after another,
separated by barriers, so the kernel needs the maximum, not the sum (Triton's allocation
analysis gives the same answer for kernels without overlapping live buffers).

The pipeliner's `ttg.local_alloc` buffers (ttbuild.backend.ttgir.pipeline) are live across a whole
loop, while scratch users inside that loop come and go: `allocate` places them one after
another above the scratch (16-byte aligned, as cp.async.cg needs), so they never overlap it or
each other, and writes each offset on its op as `allocation.offset` (Triton's attribute name).
Dot-operand rings sit above the scratch of their loop only (see `allocate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis import shuffle_plan
from ttbuild.backend.analysis.fma_staging import staged_bytes
from ttbuild.backend.analysis.layout import joined, same_thread_map, trans_order, transposed
from ttbuild.backend.ir.encodings import Blocked, NvidiaMma, Slice, parse_encoding
from ttbuild.backend.ir.ops import SCF, TT, TTG, TTNG
from ttbuild.backend.ir.optraits import SCALAR_REGIONS, walk
from ttbuild.backend.ir.types import MemDescType


@dataclass(frozen=True)
class ReducePlan:
    """How a reduction along `axis` crosses threads: butterfly shuffles over `lanes` lanes spaced
    `lane_stride` apart, then `warps` partials per output through shared memory. A thread's lane
    coordinate along the axis is (lane / lane_stride) % lane_span, its warp's (warp /
    warp_stride) % warp_span."""
    axis: int
    lanes: int
    lane_stride: int
    warps: int
    warp_stride: int
    lane_span: int
    warp_span: int


def _distinct(total: int, per: int, count: int) -> int:
    """How many of `count` consecutive groups of `per` elements hold distinct data of a
    dimension of `total` elements (the rest wrap around and duplicate: broadcasting)."""
    return max(1, min(count, total // per if total >= per else 1))


def reduce_plan(layout, shape, axis: int) -> ReducePlan:
    """The plan for a blocked layout, or for the `#ttg.nvidia_mma` accumulator (lane = 4g + t:
    t holds 2 columns of an n8 tile, g one row of each 8-row half of an m16 tile; warps N
    fastest for mma.sync, M fastest for wgmma), whose softmax reductions stay within a quad of
    lanes when warps split only M. A slice layout (a reduction's result reduced again) takes its
    parent's plan along the same parent dimension: the parent's threads along the sliced
    dimension hold copies, so they shuffle and write the same values (Triton's LinearLayout
    reduction treats those lanes as broadcast)."""
    if isinstance(layout, Slice):
        pa = axis + (axis >= layout.dim)
        p = reduce_plan(layout.parent, layout.parent_shape(shape), pa)
        return ReducePlan(axis, p.lanes, p.lane_stride, p.warps, p.warp_stride, p.lane_span, p.warp_span)
    if isinstance(layout, NvidiaMma):
        r = layout.rank
        wt, wpc = layout._warp_tile(), layout.warps_per_cta
        span, per, stride = {r - 1: (4, 2, 1), r - 2: (8, 1, 4)}.get(axis, (1, 1, 1))
        return ReducePlan(axis, _distinct(shape[axis], per, span), stride,
                          _distinct(shape[axis], wt[axis], wpc[axis]), layout.warp_stride(axis), span, wpc[axis])
    spt = min(layout.size_per_thread[axis], shape[axis])
    tpw, wpc = layout.threads_per_warp[axis], layout.warps_per_cta[axis]
    lanes = _distinct(shape[axis], spt, tpw)
    warps = _distinct(shape[axis], spt * tpw, wpc)
    pos = layout.order.index(axis)
    lane_stride = prod(layout.threads_per_warp[d] for d in layout.order[:pos])
    warp_stride = prod(layout.warps_per_cta[d] for d in layout.order[:pos])
    return ReducePlan(axis, lanes, lane_stride, warps, warp_stride, tpw, wpc)


def elem_bytes(elem: str) -> int:
    """Bytes of one element of type `elem` (sub-byte types: 1)."""
    return max(1, mu.elem_bits(elem) // 8)


def histogram_bytes(num_bins: int) -> int:
    """Scratch of a tt.histogram: one i32 slot per bin, at least one per lane of a warp (Triton's
    HistogramOpToLLVM pads the bins to 32 and bins by the low log2 of that)."""
    return max(num_bins, 32) * 4


def reduce_bytes(layout, shape, axis: int, elems: list[str]) -> int:
    """Bytes of shared memory a tt.reduce needs (0 when it stays within warps)."""
    if not isinstance(layout, (Blocked, NvidiaMma, Slice)):
        return 0
    plan = reduce_plan(layout, shape, axis)
    if plan.warps == 1:
        return 0
    outs = prod(shape) // shape[axis]
    return outs * plan.warps * sum(round4(elem_bytes(e)) for e in elems)


def convert_bytes(shape, elem: str, src_layout=None) -> int:
    """Scratch of a conversion through shared memory: packed rows (`packed_pitch`) when the
    source layout allows it, else one 32-bit word per element."""
    pitch = packed_pitch(src_layout, shape, elem) if src_layout is not None else None
    return shape[0] * pitch if pitch else prod(shape) * round4(elem_bytes(elem))


def packed_pitch(src_layout, shape, elem: str) -> int | None:
    """Row pitch in bytes of a conversion that stores 16-bit elements as packed pairs: out of the
    tensor-core accumulator (`#ttg.nvidia_mma`, mma.sync or wgmma), whose threads hold each
    element with its right neighbour (c0 c1, c2 c3 of each 16x8 tile), a rank-2 tile its warps cover without
    wrapping. Each pair is one 32-bit store at row * pitch + 2 * col; the 16 bytes of padding per
    row put the eight rows a warp stores into different banks (row r starts at bank 4r), as
    Triton pads its conversion scratch. None: no packed plan (one word per element)."""
    if not isinstance(src_layout, NvidiaMma) or len(shape) != 2:
        return None
    if elem_bytes(elem) != 2 or mu.elem_bits(elem) != 16:
        return None
    if shape[0] % src_layout.tile(0) or shape[1] % src_layout.tile(1):
        return None
    offs = src_layout.local_offsets(tuple(shape))
    if len(offs) % 2 or any(offs[j + 1] != (offs[j][0], offs[j][1] + 1) for j in range(0, len(offs), 2)):
        return None
    return shape[1] * 2 + 16


def round4(n: int) -> int:
    """Bytes a scratch element of `n` bytes occupies: at least one 32-bit word."""
    return max(4, n)  # narrow elements move as 32-bit words (no sub-word bank conflicts)


@dataclass(frozen=True)
class ScanPlan:
    """How a tt.scan along an axis of a blocked layout (or a slice of one) splits each line
    (Triton ScanOpToLLVM): a thread holds `reps` chunks of `spt` consecutive elements; in line
    order chunk r of every lane and warp comes before chunk r + 1, and within a chunk the
    `red.lanes` lanes, then the `red.warps` warps, follow one another (`red`: the lane and warp
    coordinates along the axis, as reduce_plan gives them)."""
    spt: int
    reps: int
    red: ReducePlan


def scan_plan(layout, shape, axis: int) -> ScanPlan | None:
    """The register plan of a scan of `shape` along `axis` in `layout`; None when the layout is
    not blocked below its slices or does not split the axis so (the scan then goes through
    shared memory: segment_plan)."""
    base, pshape, pa = layout, tuple(shape), axis
    while isinstance(base, Slice):
        pa += pa >= base.dim
        pshape, base = base.parent_shape(pshape), base.parent
    if not isinstance(base, Blocked):
        return None
    red = reduce_plan(layout, shape, axis)
    spt = min(base.size_per_thread[pa], pshape[pa])
    reps = max(1, shape[axis] // (spt * red.lanes * red.warps))
    return ScanPlan(spt, reps, red) if spt * red.lanes * red.warps * reps == shape[axis] else None


def segment_plan(shape, axis: int, threads: int) -> tuple[int, int, int]:
    """(lines, P, S) of a scan through shared memory (llir.scan_smem): `lines` independent lines
    along `axis`, each cut into P segments of S elements, one thread per segment (P a power of
    two, lines * P <= threads when the lines allow it)."""
    L = shape[axis]
    lines = prod(shape) // L
    P = 1
    while P * 2 <= L and lines * P * 2 <= threads:
        P *= 2
    return lines, P, L // P


def scan_bytes(layout, shape, axis: int, threads: int, elems: list[str]) -> int:
    """Scratch bytes of a tt.scan of `shape` along `axis` in `layout` over operands of element
    types `elems`, each in round4 bytes: in registers (scan_plan), one total per line, chunk and
    warp when several warps hold the line (Triton's getScratchSizeInElems, less the warps and
    lanes holding copies), else none; through shared memory, every element plus one carry per
    segment (segment_plan)."""
    plan = scan_plan(layout, shape, axis)
    lines = prod(shape) // shape[axis]
    if plan is None:
        _, P, _ = segment_plan(shape, axis, threads)
        return sum((prod(shape) + lines * P) * round4(elem_bytes(e)) for e in elems)
    if plan.red.warps == 1:
        return 0
    return lines * plan.reps * plan.red.warps * sum(round4(elem_bytes(e)) for e in elems)


# Scratch of a ttng.tensormap_create: the 128-byte CUtensorMap it builds in shared memory before
# copying it to global memory (Triton's TMAToLLVM; offset 0, 128-byte aligned).
TENSORMAP_BYTES = 128


def module_bytes(module, num_warps: int) -> int:
    """`ttg.shared` of a TTGIR module: the largest shared-memory user (reduce, convert_layout,
    tensormap_create, ...)."""
    best = 0
    for func in module.body.operations:
        for region in func.regions:
            for blk in region.blocks:
                best = max(best, ops_bytes(blk.operations, num_warps))
    return best


def ops_bytes(ops, num_warps: int) -> int:
    """The largest scratch user among `ops` and the ops nested in them (see module_bytes)."""
    best = 0
    for top in ops:
        # combiner regions of tt.reduce / tt.scan hold scalars: no shared-memory users inside
        for op in [top.operation, *walk(top, skip_regions_of=SCALAR_REGIONS)]:
            name = op.name
            if name == TT.REDUCE:
                src = op.operands[0]
                ax = mu.int_attr(mu.props(op)["axis"])
                lay = parse_encoding(mu.encoding_str(src.type))
                best = max(best, reduce_bytes(lay, mu.shape_of(src.type), ax,
                                              [mu.elem_str(v.type) for v in op.operands]))
            if name in (TT.ATOMIC_RMW, TT.ATOMIC_CAS) and _atomic_shares(op):
                # old values reach threads holding duplicates (or all threads, for scalars)
                r = op.results[0]
                best = max(best, convert_bytes(mu.shape_of(r.type) or (1,), mu.elem_str(r.type)))
            if name == TT.SPLIT and not _join_in_registers(op):
                src = op.operands[0]
                best = max(best, convert_bytes(mu.shape_of(src.type), mu.elem_str(src.type)))
            if _permutes_through_shared(op, num_warps):
                r = op.results[0]
                best = max(best, convert_bytes(mu.shape_of(r.type), mu.elem_str(r.type)))
            if name == TT.HISTOGRAM:
                best = max(best, histogram_bytes(mu.shape_of(op.results[0].type)[0]))
            if name == TTNG.TENSORMAP_CREATE:  # the CUtensorMap template it fills (llir.tensormap)
                best = max(best, TENSORMAP_BYTES)
            if name == TT.SCAN:
                src = op.operands[0]
                ax = mu.int_attr(mu.props(op)["axis"])
                lay = _layout_or_none(mu.encoding_str(src.type))  # None: through shared memory
                best = max(best, scan_bytes(lay, mu.shape_of(src.type), ax, 32 * num_warps,
                                            [mu.elem_str(v.type) for v in op.operands]))
            if name == TTG.CONVERT_LAYOUT and not _in_registers(op, num_warps):
                src = op.operands[0]
                staged = staged_bytes(op)  # an FMA dot's operand tile, next to the other one
                best = max(best, staged if staged is not None else convert_bytes(
                    mu.shape_of(src.type), mu.elem_str(src.type), _layout_or_none(mu.encoding_str(src.type))))
    return best


def _layout_or_none(text: str):
    try:
        return parse_encoding(text)
    except ValueError:
        return None


def _atomic_shares(op) -> bool:
    """Whether an atomic's old values cross threads through shared memory (llir.atomic): only
    when they are used, and the op is scalar (one thread does it for all) or its layout gives
    several threads the same element (one owner does it for the others)."""
    r = op.results[0]
    if next(iter(r.uses), None) is None:
        return False
    shape = tuple(mu.shape_of(r.type))
    if not shape:
        return True
    layout = parse_encoding(mu.encoding_str(r.type))
    while isinstance(layout, Slice):
        shape = layout.parent_shape(shape)
        layout = layout.parent
    return any(layout.tile(d) > shape[d] for d in range(len(shape)))


def _in_registers(op, num_warps: int) -> bool:
    """Whether a ttg.convert_layout to or from a tensor-core layout is a register renaming
    (layout.same_thread_map; checked for those only, where it is cheap and common: the
    accumulator -> dot operand shortcut) or warp shuffles (shuffle_plan: tf32 P)."""
    src, dst = (mu.encoding_str(v.type) or "" for v in (op.operands[0], op.results[0]))
    if not any(k in e for e in (src, dst) for k in ("#ttg.nvidia_mma<", "#ttg.dot_op<")):
        return False
    shape = tuple(mu.shape_of(op.results[0].type))
    s, d, threads = parse_encoding(src), parse_encoding(dst), 32 * num_warps
    return (same_thread_map(s, d, shape, threads) is not None
            or shuffle_plan.plan(s, d, shape, mu.elem_bits(mu.elem_str(op.results[0].type)), threads) is not None)


def _permutes_through_shared(op, num_warps: int) -> bool:
    """A view op (llir.view) that moves elements between threads through a result-sized scratch."""
    name = op.name
    if name == TT.RESHAPE:
        return not _reshape_in_registers(op, num_warps)
    if name == TT.JOIN:
        return not _join_in_registers(op)
    if name == TT.TRANS:
        return not _trans_in_registers(op)
    return name == TT.CAT


def _reshape_in_registers(op, num_warps: int) -> bool:
    """A tt.reshape whose threads keep their elements (llir.view renames registers)."""
    src, res = op.operands[0], op.results[0]
    pos = same_thread_map(parse_encoding(mu.encoding_str(src.type)), parse_encoding(mu.encoding_str(res.type)),
                          tuple(mu.shape_of(src.type)), 32 * num_warps, dst_shape=tuple(mu.shape_of(res.type)))
    return pos is not None


def _join_in_registers(op) -> bool:
    """tt.join / tt.split between the layouts Triton infers for each other (llir.view renames registers)."""
    narrow = [parse_encoding(mu.encoding_str(v.type)) for v in (op.operands if op.name == TT.JOIN else op.results)]
    wide = parse_encoding(mu.encoding_str((op.results if op.name == TT.JOIN else op.operands)[0].type))
    return narrow[0] == narrow[1] and wide == joined(narrow[0])


def _trans_in_registers(op) -> bool:
    src = parse_encoding(mu.encoding_str(op.operands[0].type))
    return parse_encoding(mu.encoding_str(op.results[0].type)) == transposed(src, trans_order(op))


def buffer_bytes(alloc) -> int:
    """Bytes of a `ttg.local_alloc`'s buffer (its memdesc's shape times the element size)."""
    shape, elem = MemDescType.header(alloc.results[0].type)
    return prod(shape) * mu.elem_bits(elem) // 8


def buffers(module) -> list:
    """Every `ttg.local_alloc` of the module with its byte size: [(op, bytes)] in program order."""
    return [(op, buffer_bytes(op)) for func in module.body.operations
            for op in walk(func) if op.name == TTG.LOCAL_ALLOC]


def feeds_dot(ring) -> bool:
    """Whether a ring's slots are read into `#ttg.dot_op` or by a `ttng.warp_group_dot` (a
    dot-operand ring)."""
    for use in ring.results[0].uses:
        view = use.owner
        if view.name != TTG.MEMDESC_INDEX:
            continue
        for u in view.results[0].uses:
            if u.owner.name == TTNG.WARP_GROUP_DOT:
                return True
            if u.owner.name == TTG.LOCAL_LOAD and mu.encoding_str(u.owner.results[0].type).startswith("#ttg.dot_op<"):
                return True
    return False


def ring_groups(module) -> list:
    """[(rings, live ops)]: the dot-operand rings of each pipelined loop (a `ttg.local_alloc`
    without operand whose `ttg.local_dealloc` is in the same block) and the ops of that block
    from the first ring's alloc to the last one's dealloc (while any of them is live)."""
    out = []
    blocks = [blk for func in module.body.operations for op in [func.operation, *walk(func)]
              for region in op.regions for blk in region.blocks]
    for block in blocks:
        ops = list(block.operations)
        pos = {op.operation: i for i, op in enumerate(ops)}
        spans = []
        for i, op in enumerate(ops):
            if op.operation.name != TTG.LOCAL_ALLOC or len(op.operands) or not feeds_dot(op):
                continue
            ends = [pos[u.owner] for u in op.results[0].uses
                    if u.owner.name == TTG.LOCAL_DEALLOC and u.owner in pos]
            if ends:
                spans.append((i, max(ends), op))
        group, lo, hi = [], None, None
        for i, j, op in spans + [(None, None, None)]:
            if group and (i is None or i > hi):
                out.append((group, ops[lo:hi + 1]))
                group = []
            if i is None:
                break
            lo = i if not group else lo
            hi = j if not group else max(hi, j)
            group.append(op)
    return out


def _align(n: int, a: int = 16) -> int:
    return (n + a - 1) // a * a


def buffer_align(alloc) -> int:
    """Byte alignment of a buffer's offset: 1024 for a swizzled `#ttg.nvmma_shared` (the
    128-byte swizzle repeats every 8 rows of 128 bytes and wgmma and TMA apply it to absolute
    shared addresses, PTX ISA 9.7.15.5.1; `global_smem` is then 1024-aligned too), 128 for an
    unswizzled one (a TMA destination, PTX ISA cp.async.bulk.tensor), 8 for an mbarrier (one
    i64, as Triton places them), else 16."""
    text = str(alloc.results[0].type)
    if "#ttg.nvmma_shared<" in text:
        return 128 if "swizzlingByteWidth = 0," in text else 1024
    if _is_mbarrier(text):
        return 8
    return 16


def _is_mbarrier(text: str) -> bool:
    try:
        shape, elem = MemDescType.header(text)
    except ValueError:
        return False
    return elem == "i64" and len(shape) <= 2 and shape[-1] == 1


def allocate(module, num_warps: int) -> int:
    """Place every `ttg.local_alloc` (`allocation.offset = <bytes> : i32` on the op) and return
    `ttg.shared` in bytes (0 when nothing uses shared memory).

    The dot-operand rings of a pipelined loop (ttbuild.backend.ttgir.pipeline) are live only from their
    local_alloc to their local_dealloc: they go right above the scratch of the ops in that range,
    so they may share bytes with scratch used before or after the loop (the epilogue's
    convert_layout of the accumulator), as Triton's liveness-based allocation lets them; the
    LLIR keeps that safe (a bar.sync before the first copy when shared memory was read, and after
    `async_wait {num = 0}` before the next scratch write). Every other buffer goes above all of
    that, at the lowest 16-byte-aligned offset where it overlaps no buffer live at the same time
    (_live_ranges), first come first placed."""
    top = module_bytes(module, num_warps)
    for ws in (o for func in module.body.operations for o in walk(func) if o.name == TTG.WARP_SPECIALIZE):
        # consumer groups running at once would share scratch at offset 0 (ttgir.warp_specialize
        # takes two groups only where the tiles need none)
        if len(ws.regions) > 2 and ops_bytes([o for r in ws.regions for o in r.blocks[0].operations], num_warps):
            raise AssertionError("two consumer groups of a warp-specialized loop need scratch")
    bufs = buffers(module)
    if not bufs:
        return top
    i32 = mu.ir.IntegerType.get_signless(32)
    shared, placed = top, []
    for group, live_ops in ring_groups(module):
        at = _align(ops_bytes(live_ops, num_warps))
        for op in group:
            at = _align(at, buffer_align(op))
            op.operation.attributes["allocation.offset"] = mu.ir.IntegerAttr.get(i32, at)
            at = _align(at + buffer_bytes(op), min(16, buffer_align(op)))
            placed.append(op.operation)
        shared = max(shared, at)
    top = _align(shared)
    rest = [(op, size) for op, size in bufs if not any(op.operation == p for p in placed)]
    if not rest:
        return shared
    live = _live_ranges(module)
    taken = [(live[op.operation], int(op.operation.attributes["allocation.offset"].value), buffer_bytes(op))
             for g, _ in ring_groups(module) for op in g]
    ordered = [o for func in module.body.operations for o in [func.operation, *walk(func)]]
    for op, size in sorted(rest, key=lambda b: live[b[0].operation][0]):
        span = live[op.operation]
        align = buffer_align(op)
        # above the scratch of the ops that run while it is live (the accumulator's conversion
        # after a loop may reuse the bytes of operand tiles the loop wrote, as Triton's does)
        at = _align(_scratch_during(ordered, span, num_warps), align)
        for (lo, hi), off, n in sorted(taken, key=lambda t: t[1]):
            if lo <= span[1] and span[0] <= hi and off < at + size and at < off + n:
                at = _align(off + n, align)
        op.operation.attributes["allocation.offset"] = mu.ir.IntegerAttr.get(i32, at)
        taken.append((span, at, size))
        shared = max(shared, _align(at + size, min(16, align)))
    return shared


def _scratch_during(ordered, span, num_warps: int) -> int:
    """The largest scratch of an op at pre-order positions span[0]..span[1] of `ordered` (the
    positions _live_ranges uses); control-flow ops count only through the ops they nest."""
    ops = [o for o in ordered[span[0]:span[1] + 1] if not o.name.startswith(("scf.", TT.FUNC))]
    return ops_bytes(ops, num_warps)


def _live_ranges(module) -> dict:
    """Per `ttg.local_alloc` (Operation), its live range (first, last) in pre-order op positions:
    from the alloc to the last reader of its memory (through memdesc views, and the users of a
    `ttg.local_load` into `#ttg.dot_op`, where a lazy ldmatrix reads), widened to the whole of any loop that reads
    it without containing the alloc (the buffer must survive every iteration), and to the whole
    of a `ttg.warp_specialize` op of two consumer groups holding it (they run at once; a
    producer region holds no buffers). Buffers whose
    ranges are disjoint may share bytes (Triton's liveness-based allocation); the LLIR puts a
    bar.sync before a register tile is written into shared memory (llir.dot.local_alloc_from)."""
    pos, last = {}, {}
    for func in module.body.operations:
        ops = [func.operation, *walk(func)]
        for op in ops:
            pos[op] = len(pos)
        for op in reversed(ops):  # a loop's range ends at its last nested op
            inner = [pos[o] for r in op.regions for b in r.blocks for o in b.operations]
            last[op] = max([pos[op]] + [last.get(o.operation, pos[o.operation]) for r in op.regions
                                        for b in r.blocks for o in b.operations] + inner)
    out = {}
    for func in module.body.operations:
        for op in walk(func):
            if op.name != TTG.LOCAL_ALLOC:
                continue
            alloc = op.operation
            lo = hi = pos[alloc]
            ancestors = set()
            p = alloc.parent
            while p is not None and p.name != "builtin.module":
                ancestors.add(p)
                p = p.parent
            todo, readers = [alloc.results[0]], []
            while todo:
                v = todo.pop()
                for u in v.uses:
                    o = u.owner.operation
                    readers.append(o)
                    if o.name.startswith("ttg.memdesc_"):
                        todo.append(o.results[0])
                    elif o.name == TTG.LOCAL_LOAD and "#ttg.dot_op<" in str(o.results[0].type):
                        readers += [w.owner.operation for w in o.results[0].uses]
            ws = next((p for p in ancestors if p.name == TTG.WARP_SPECIALIZE), None)
            if ws is not None and len(ws.regions) > 2:  # consumer groups run at once: a buffer of
                lo, hi = pos[ws], last[ws]                # one lives while any of them runs
            for o in readers:
                hi = max(hi, pos[o])
                p, outer = o.parent, None
                while p is not None and p not in ancestors and p.name != "builtin.module":
                    if p.name in (SCF.FOR, SCF.WHILE):
                        outer = p
                    p = p.parent
                if outer is not None:
                    hi = max(hi, last[outer])
            out[alloc] = (lo, hi)
    return out
