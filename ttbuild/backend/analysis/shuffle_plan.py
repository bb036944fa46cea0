"""Which ttg.convert_layout runs as warp shuffles: a 32-bit mma accumulator into the tf32 A operand of its own mma (attention's P of an fp32 P.V), checked over the whole CTA.

The accumulator's thread (g = lane / 4, t = lane % 4) holds columns 2t and 2t + 1 of each
8-column tile (rows g and g + 8); the A operand wants columns t and t + 4 of each 8-column k step
(PTX ISA 9.7.14.5.14 mma.m16n8k8 .tf32 A fragments, which wgmma's RS form reads the same way,
9.7.15.5.1). Within a quad, each of the four lanes needs two values that two other lanes hold,
so two `shfl.sync.idx` rounds per pair of A registers deliver them: in round one lane t sends
its column 2t + (t >> 1) and reads lane (t >> 1) | ((t & 1) << 1), in round two the other
column from that lane ^ 2; an even lane received its column t first, an odd one its t + 4.
`plan` checks this in Python against both layouts' element maps for every thread and returns
None where it does not hold (the conversion then goes through shared memory). The LLIR is
ttbuild.backend.llir.convert_shfl; ttbuild.backend.analysis.allocation gives these no scratch.
"""

from __future__ import annotations

from ttbuild.backend.ir.distributed import DotOperand
from ttbuild.backend.ir.encodings import NvidiaMma


def _src_lanes(t: int) -> tuple[int, int]:
    """Quad lanes (round one, round two) that lane t of a quad reads."""
    first = (t >> 1) | ((t & 1) << 1)
    return first, first ^ 2


def _pairs(src, dst, shape):
    """[(lo, hi, c0, c1)]: A registers lo (column t) and hi (column t + 4) of one row and k step
    and the accumulator elements c0, c1 (columns 2t, 2t + 1) of the same row and 8 columns,
    read off lane 0 of warp 0; None when an element has no such partner."""
    s0, d0 = src.thread_indices(0, shape), dst.thread_indices(0, shape)
    at = {p: i for i, p in enumerate(s0)}
    dpos = {p: i for i, p in enumerate(d0)}
    out = []
    for j, (r, c) in enumerate(d0):
        if c % 8 >= 4:
            continue
        hi, c0, c1 = dpos.get((r, c + 4)), at.get((r, c)), at.get((r, c + 1))
        if None in (hi, c0, c1):
            return None
        out.append((j, hi, c0, c1))
    return out if 2 * len(out) == len(d0) else None


def _simulate(src, dst, shape, pairs, threads: int) -> bool:
    """Whether the two rounds give every thread of the CTA exactly its A elements."""
    held = [src.thread_indices(tid, shape) for tid in range(threads)]
    for tid in range(threads):
        t, quad = tid % 4, tid - tid % 4
        want = dst.thread_indices(tid, shape)
        for lo, hi, c0, c1 in pairs:
            # the sender's position in its quad (and the round) picks the column it sends
            got = [held[quad + lane][(c0, c1)[(lane >> 1) ^ rnd]] for rnd, lane in enumerate(_src_lanes(t))]
            if got != ([want[lo], want[hi]] if t % 2 == 0 else [want[hi], want[lo]]):
                return False
    return True


def plan(src_layout, dst_layout, shape, elem_bits: int, threads: int):
    """The (lo, hi, c0, c1) pairs of a shuffle conversion from `src_layout` to `dst_layout`
    (see the module docstring), or None where it does not apply. The two mma layouts may differ
    in instrShape (P of a 64-wide QK feeding a 128-wide P.V): the simulation decides."""
    if not (isinstance(src_layout, NvidiaMma) and isinstance(dst_layout, DotOperand) and elem_bits == 32
            and dst_layout.op_idx == 0 and dst_layout.k_width == 1 and isinstance(dst_layout.parent, NvidiaMma)
            and len(shape) == 2 and src_layout.warps_per_cta[-1] == 1 and dst_layout.parent.warps_per_cta[-1] == 1):
        return None
    pairs = _pairs(src_layout, dst_layout, shape)
    if pairs is None or not _simulate(src_layout, dst_layout, shape, pairs, threads):
        return None
    return pairs
