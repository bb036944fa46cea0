"""Tensor-core layouts (ttbuild.backend.ir.distributed, .shared; analysis.mma_layout). What is checked:

Every element owned as mma.sync's fragment tables say, swizzle offsets a permutation, Triton's
swizzle parameters, and the TTGIR spelling.
"""

from __future__ import annotations

from collections import Counter

import pytest

from ttbuild.backend.analysis.mma_layout import for_operand
from ttbuild.backend.ir.encodings import DotOperand, NvidiaMma, SwizzledShared, parse_encoding


def _owners(layout, shape, threads):
    return Counter(ix for tid in range(threads) for ix in layout.thread_indices(tid, shape))


@pytest.mark.parametrize("warps,shape", [((2, 2), (64, 64)), ((4, 1), (64, 32)), ((8, 1), (128, 256)),
                                         ((1, 2), (16, 64)), ((2, 4), (128, 128))])
def test_mma_accumulator_owns_each_element_once(warps, shape):
    lay = NvidiaMma(warps)
    n = warps[0] * warps[1] * 32
    own = _owners(lay, shape, n)
    assert set(own) == {(i, j) for i in range(shape[0]) for j in range(shape[1])}
    assert set(own.values()) == {1}
    assert lay.elems_per_thread(shape) * n == shape[0] * shape[1]


def test_mma_fragment_table():
    """TENSORCORE.md section 3: lane 4g + t holds c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..)."""
    lay = NvidiaMma((1, 1))
    for lane in range(32):
        g, t = lane // 4, lane % 4
        assert lay.thread_indices(lane, (16, 8)) == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def test_dot_operand_fragment_tables():
    mma = NvidiaMma((1, 1))
    a, b = DotOperand(0, mma, 2), DotOperand(1, mma, 2)
    for lane in range(32):
        g, t = lane // 4, lane % 4
        want_a = [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1),
                  (g, 2 * t + 8), (g, 2 * t + 9), (g + 8, 2 * t + 8), (g + 8, 2 * t + 9)]
        assert a.thread_indices(lane, (16, 16)) == want_a
        assert b.thread_indices(lane, (16, 8)) == [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]
    tf32 = DotOperand(0, mma, 1)  # m16n8k8: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)
    assert tf32.thread_indices(5, (16, 8)) == [(1, 1), (9, 1), (1, 5), (9, 5)]
    i8 = DotOperand(1, mma, 4)  # m16n8k32: b0 rows 4t..4t+3, b1 rows 4t+16.., column g
    assert i8.thread_indices(6, (32, 8)) == [(8, 1), (9, 1), (10, 1), (11, 1), (24, 1), (25, 1), (26, 1), (27, 1)]


@pytest.mark.parametrize("op_idx,shape,warps", [(0, (64, 32), (2, 2)), (1, (32, 64), (2, 2)), (0, (128, 64), (8, 1)),
                                                (1, (64, 16), (4, 1))])
def test_dot_operand_covers_tile_replicated_per_warp_row(op_idx, shape, warps):
    """Each element is held by every warp of the row (A) / column (B) of warps that needs it."""
    op = DotOperand(op_idx, NvidiaMma(warps), 2)
    own = _owners(op, shape, warps[0] * warps[1] * 32)
    assert set(own) == {(i, j) for i in range(shape[0]) for j in range(shape[1])}
    assert set(own.values()) == {warps[1] if op_idx == 0 else warps[0]}


def test_regs_group_k_width_elements():
    op = DotOperand(0, NvidiaMma((2, 2)), 2)
    regs = op.regs((64, 32))
    assert len(regs) == 2 * 2  # 2 m tiles x 2 k steps
    offs = op.local_offsets((64, 32))
    for r in regs[(0, 1, 1)]:
        (m0, k0), (m1, k1) = offs[r[0]], offs[r[1]]
        assert m0 == m1 and k1 == k0 + 1


def test_swizzle_is_a_permutation_and_keeps_vec_groups():
    sw = SwizzledShared(8, 2, 4, (1, 0))
    shape = (64, 32)
    offs = [sw.offset((i, j), shape) for i in range(64) for j in range(32)]
    assert sorted(offs) == list(range(64 * 32))
    assert all(sw.offset((5, j + 1), shape) == sw.offset((5, j), shape) + 1 for j in range(0, 32, 8) for _ in [0])
    # the 8 rows of an ldmatrix 8x8 matrix land in 8 distinct 16-byte bank groups
    starts = {(sw.offset((r, 0), shape) * 2 // 16) % 8 for r in range(0, 8)}
    assert len(starts) >= 4


def test_triton_swizzle_parameters():
    """Values Triton 3.6 prints for these operands (cuda:90, MMAv2, 4 warps)."""
    assert for_operand(0, (64, 32), (1, 0), 16, 2) == SwizzledShared(8, 2, 4, (1, 0))
    assert for_operand(1, (32, 64), (1, 0), 16, 2) == SwizzledShared(8, 1, 8, (1, 0))
    assert for_operand(0, (64, 32), (1, 0), 32, 1) == SwizzledShared(4, 1, 8, (1, 0))
    assert for_operand(1, (32, 64), (1, 0), 32, 1) == SwizzledShared(8, 1, 4, (1, 0))


def test_spelling_round_trips():
    mma = NvidiaMma((2, 2))
    assert mma.attr() == "#ttg.nvidia_mma<{versionMajor = 2, versionMinor = 0, warpsPerCTA = [2, 2], instrShape = [16, 8]}>"
    op = DotOperand(1, mma, 2)
    assert parse_encoding(op.attr()) == op and parse_encoding(mma.attr()) == mma
    sw = SwizzledShared(8, 1, 8, (1, 0))
    assert SwizzledShared.parse(sw.attr()) == sw


@pytest.mark.parametrize("warps,shape", [((4, 1), (128, 64)), ((2, 2), (64, 64)), ((8, 1), (128, 128))])
def test_slices_of_the_accumulator_hold_each_row_once_per_thread(warps, shape):
    """A reduction along N leaves `#ttg.slice<{dim = 1, parent = #mma}>`: each thread holds its rows
    (g and g + 8 of each m16 repetition) once, in the order the in-thread reduction groups them."""
    from ttbuild.backend.ir.encodings import Slice

    lay = NvidiaMma(warps)
    sl = Slice(1, lay)
    rows = [off[0] for off in lay.local_offsets(shape)]
    groups = list(dict.fromkeys(rows))          # first appearance order, as tt.reduce groups
    assert [off[0] for off in sl.local_offsets((shape[0],))] == groups
    assert sl.elems_per_thread((shape[0],)) == len(groups)
    # expand_dims back to [M, 1] then broadcast: the same rows, columns clipped to the shape
    assert [off for off in lay.local_offsets((shape[0], 1))] == [(r, 0) for r in groups]


@pytest.mark.parametrize("warps,axis,plan", [
    ((4, 1), 1, (4, 1, 1, 4, 1)),     # softmax over N with all warps on M: a quad of lanes, no shared memory
    ((2, 2), 1, (4, 1, 2, 4, 2)),     # N split over 2 warps (warp stride 1: N is the fastest warp dimension)
    ((2, 2), 0, (8, 4, 2, 8, 2)),     # M: lanes g (stride 4), then 2 warps (stride 2)
])
def test_reduce_plan_on_the_accumulator(warps, axis, plan):
    from ttbuild.backend.analysis.allocation import reduce_plan

    p = reduce_plan(NvidiaMma(warps), (128, 64), axis)
    assert (p.lanes, p.lane_stride, p.warps, p.lane_span, p.warp_span) == plan
    assert p.warp_stride == (warps[1] if axis == 0 else 1)


def test_accumulator_to_a_operand_is_a_register_renaming():
    """Triton's mma -> dot_op shortcut: with warps only on M, an f16 accumulator's registers are
    the A operand's of the next dot; with warps on N they are not."""
    from ttbuild.backend.analysis.layout import same_thread_map

    assert same_thread_map(NvidiaMma((4, 1)), DotOperand(0, NvidiaMma((4, 1)), 2), (128, 64), 128) is not None
    assert same_thread_map(NvidiaMma((2, 2)), DotOperand(0, NvidiaMma((2, 2)), 2), (128, 64), 128) is None
