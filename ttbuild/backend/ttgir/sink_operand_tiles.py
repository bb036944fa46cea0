"""TTGIR pass: dot operand tiles written from registers are made once per value, and move down to their first reader when another dot runs in between.

The tile is a `ttg.local_alloc` of a tensor, moved with its proxy fence, so tiles of different dots are not live at once.
Two tiles of the same tensor in the same encoding (causal attention's Q, an operand of both passes' QK^T) are one
tile: a register-written tile is immutable, so the later one's readers read the earlier.

Triton 3.6 stages a later dot's operands after the earlier dot has run (its kernels with two dots
on 128x128 fp32 tiles need three tiles of shared memory, not four); ours placed them where their
values were computed, which kept both dots' tiles live across the first dot. The liveness-based
allocation (ttbuild.backend.analysis.allocation) then lets the two dots' tiles share bytes.
"""

from __future__ import annotations

from ttbuild.backend.ir.ops import TT, TTG, TTNG
from ttbuild.backend.ttgir.pipeline.wgmma_waits import erase_fence_after

_DOTS = (TT.DOT, TTNG.WARP_GROUP_DOT)


def _in_block(op, block_ops: set):
    """The ancestor of `op` (or op itself) that is one of `block_ops`, else None."""
    while op is not None and op not in block_ops:
        op = op.parent
    return op


def _merge_block(block) -> int:
    """Erase every `ttg.local_alloc` of a tensor that an earlier one in `block` already wrote in the same
    memdesc type (its readers take the earlier tile; a proxy fence right after it goes too). Returns how many."""
    first, merged = {}, 0
    tiles = [o.operation for o in block.operations if o.operation.name == TTG.LOCAL_ALLOC and len(o.operation.operands) == 1]
    for op in tiles:  # listed first: the fences erased below are never visited
        key = (op.operands[0], str(op.results[0].type))
        if key not in first:
            first[key] = op
            continue
        op.results[0].replace_all_uses_with(first[key].results[0])
        erase_fence_after(op)
        op.erase()
        merged += 1
    return merged


def _sink_block(block) -> int:
    ops = [o.operation for o in block.operations]
    members = set(ops)
    moved = 0
    for op in ops:
        if op.name != TTG.LOCAL_ALLOC or not len(op.operands):
            continue
        readers = [_in_block(u.owner.operation, members) for u in op.results[0].uses]
        if not readers or any(r is None for r in readers):
            continue
        pos = {o: k for k, o in enumerate(o.operation for o in block.operations)}
        first = min(readers, key=lambda r: pos[r])
        here = pos[op]
        between = list(block.operations)[here + 1:pos[first]]
        if not any(b.operation.name in _DOTS for b in between):
            continue
        fence = between[0].operation if between and between[0].operation.name == TTNG.FENCE_ASYNC_SHARED else None
        op.move_before(first)
        if fence is not None:
            fence.move_before(first)
        moved += 1
    return moved


def sink_operand_tiles(module) -> int:
    """Merge register-written operand tiles of the same tensor and type in one block (_merge_block),
    then move every such tile that another dot separates from its first reader (in the same block)
    to just before that reader, its `ttng.fence_async_shared` with it. Returns how many tiles
    merged or moved; raises nothing."""
    blocks = []

    def visit(op):
        for region in op.regions:
            for blk in region.blocks:
                blocks.append(blk)
                for o in blk.operations:
                    visit(o.operation)

    for func in module.body.operations:
        visit(func.operation)
    return sum(_merge_block(b) + _sink_block(b) for b in blocks)
