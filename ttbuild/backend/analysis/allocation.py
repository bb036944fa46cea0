"""Shared-memory plans shared by the ttgir stage (sizes -> `ttg.shared`) and LLIR (offsets, who writes).

A reduction along `axis` of a blocked layout needs shared memory only when more than one warp
holds distinct data along the axis; a layout conversion always goes through shared memory
(one slot per tensor element). Every user starts at offset 0: users run one after another,
separated by barriers, so the kernel needs the maximum, not the sum (Triton's allocation
analysis gives the same answer for kernels without overlapping live buffers).

The pipeliner's `ttg.local_alloc` buffers (ttbuild.backend.ttgir.pipeline) are live across a whole
loop, while scratch users inside that loop come and go: `allocate` places them one after
another above the scratch (16-byte aligned, as cp.async.cg needs), so they never overlap it or
each other, and writes each offset on its op as `allocation.offset` (Triton's attribute name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.analysis.layout import Blocked, parse_layout, trans_order, transposed
from ttbuild.optraits import SCALAR_REGIONS, walk


@dataclass(frozen=True)
class ReducePlan:
    """How a reduction along `axis` crosses threads: butterfly shuffles over `lanes` lanes spaced
    `lane_stride` apart, then `warps` partials per output through shared memory."""
    axis: int
    lanes: int
    lane_stride: int
    warps: int
    warp_stride: int


def _distinct(total: int, per: int, count: int) -> int:
    """How many of `count` consecutive groups of `per` elements hold distinct data of a
    dimension of `total` elements (the rest wrap around and duplicate: broadcasting)."""
    return max(1, min(count, total // per if total >= per else 1))


def reduce_plan(layout: Blocked, shape, axis: int) -> ReducePlan:
    spt = min(layout.size_per_thread[axis], shape[axis])
    tpw, wpc = layout.threads_per_warp[axis], layout.warps_per_cta[axis]
    lanes = _distinct(shape[axis], spt, tpw)
    warps = _distinct(shape[axis], spt * tpw, wpc)
    pos = layout.order.index(axis)
    lane_stride = prod(layout.threads_per_warp[d] for d in layout.order[:pos])
    warp_stride = prod(layout.warps_per_cta[d] for d in layout.order[:pos])
    return ReducePlan(axis, lanes, lane_stride, warps, warp_stride)


def elem_bytes(elem: str) -> int:
    return max(1, mu.elem_bits(elem) // 8)


def reduce_bytes(layout, shape, axis: int, elems: list[str]) -> int:
    """Bytes of shared memory a tt.reduce needs (0 when it stays within warps)."""
    if not isinstance(layout, Blocked):
        return 0
    plan = reduce_plan(layout, shape, axis)
    if plan.warps == 1:
        return 0
    outs = prod(shape) // shape[axis]
    return outs * plan.warps * sum(round4(elem_bytes(e)) for e in elems)


def convert_bytes(shape, elem: str) -> int:
    return prod(shape) * round4(elem_bytes(elem))


def round4(n: int) -> int:
    return max(4, n)  # narrow elements move as 32-bit words (no sub-word bank conflicts)


def scan_plan(shape, axis: int, threads: int) -> tuple[int, int, int]:
    """(lines, P, S): a scan along `axis` runs over `lines` independent lines, each cut into P
    segments of S elements, one thread per segment (P a power of two, lines * P <= threads when
    the lines allow it)."""
    L = shape[axis]
    lines = prod(shape) // L
    P = 1
    while P * 2 <= L and lines * P * 2 <= threads:
        P *= 2
    return lines, P, L // P


def scan_bytes(shape, axis: int, threads: int, elems: list[str]) -> int:
    lines, P, _ = scan_plan(shape, axis, threads)
    return sum((prod(shape) + lines * P) * round4(elem_bytes(e)) for e in elems)


def module_bytes(module, num_warps: int = 4) -> int:
    """`ttg.shared` of a TTGIR module: the largest shared-memory user (reduce or convert_layout)."""
    best = 0
    for func in module.body.operations:
        # combiner regions of tt.reduce / tt.scan hold scalars: no shared-memory users inside
        for op in walk(func, skip_regions_of=SCALAR_REGIONS):
            name = op.name
            if name == "tt.reduce":
                src = op.operands[0]
                ax = mu.int_attr(mu.props(op)["axis"])
                lay = parse_layout(mu.encoding_str(src.type))
                best = max(best, reduce_bytes(lay, mu.shape_of(src.type), ax,
                                              [mu.elem_str(v.type) for v in op.operands]))
            if name in ("tt.atomic_rmw", "tt.atomic_cas"):
                # old values reach threads holding duplicates (or all threads, for scalars)
                r = op.results[0]
                best = max(best, convert_bytes(mu.shape_of(r.type) or (1,), mu.elem_str(r.type)))
            if name == "tt.split":
                src = op.operands[0]
                best = max(best, convert_bytes(mu.shape_of(src.type), mu.elem_str(src.type)))
            if name in ("tt.reshape", "tt.cat", "tt.join") or (name == "tt.trans" and not _trans_in_registers(op)):
                r = op.results[0]
                best = max(best, convert_bytes(mu.shape_of(r.type), mu.elem_str(r.type)))
            if name == "tt.scan":
                src = op.operands[0]
                ax = mu.int_attr(mu.props(op)["axis"])
                best = max(best, scan_bytes(mu.shape_of(src.type), ax, 32 * num_warps,
                                            [mu.elem_str(v.type) for v in op.operands]))
            if name == "ttg.convert_layout":
                src = op.operands[0]
                best = max(best, convert_bytes(mu.shape_of(src.type), mu.elem_str(src.type)))
    return best


def _trans_in_registers(op) -> bool:
    src = parse_layout(mu.encoding_str(op.operands[0].type))
    return parse_layout(mu.encoding_str(op.results[0].type)) == transposed(src, trans_order(op))


def buffers(module) -> list:
    """Every `ttg.local_alloc` of the module with its byte size: [(op, bytes)] in program order."""
    out = []
    for func in module.body.operations:
        for op in walk(func):
            if op.name == "ttg.local_alloc":
                m = re.match(r"!ttg\.memdesc<([0-9x]+)x([a-zA-Z0-9]+),", str(op.results[0].type))
                shape = [int(s) for s in m.group(1).split("x")]
                out.append((op, prod(shape) * mu.elem_bits(m.group(2)) // 8))
    return out


def _align(n: int, a: int = 16) -> int:
    return (n + a - 1) // a * a


def allocate(module, num_warps: int = 4) -> int:
    """Place every `ttg.local_alloc` above the scratch (`allocation.offset = <bytes> : i32` on
    the op) and return `ttg.shared`: scratch + buffers, in bytes (0 when neither exists)."""
    top = module_bytes(module, num_warps)
    bufs = buffers(module)
    if not bufs:
        return top
    i32 = mu.ir.IntegerType.get_signless(32)
    top = _align(top)
    for op, size in bufs:
        op.operation.attributes["allocation.offset"] = mu.ir.IntegerAttr.get(i32, top)
        top = _align(top + size)
    return top
