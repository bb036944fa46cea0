"""Pipeliner, wgmma waits (Triton's WGMMAPipeline.cpp): a wgmma group left in flight into the next iteration.

Also: the uses of a staged operand's memdesc moved onto its ring slot.
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.builders import create
from ttbuild.backend.ir.ops import SCF, TTG, TTNG

ir = mu.ir


def keep_in_flight(wg, loop) -> None:
    """When a wgmma's wait hands its accumulator straight to the loop's yield and every shared
    operand outlives the next iteration (a ring slot, or a tile written before the loop), its
    group stays in flight into the next iteration, with a `ttng.warp_group_dot_wait {pendings =
    0}` on the loop's result (Triton's pipelined forms):
    - the loop's only wgmma (the matmul): its wait keeps one group (`pendings = 1`);
    - else (attention's P.V) its wait goes, and the first full wait of the next iteration that
      comes before any use of the carried accumulator (the QK dot's) takes it as an operand:
      that wait retires the group and ties its registers, so nothing reads them in flight."""
    a, bm = wg.operands[0], wg.operands[1]
    body = loop.regions[0].blocks[0]
    if any(_from_registers(v) and v.owner.operation.block == body for v in (a, bm)):
        return
    waits = [u.owner for u in wg.results[0].uses if u.owner.name == TTNG.WARP_GROUP_DOT_WAIT]
    if len(waits) != 1:
        return
    wait = waits[0]
    acc = wait.results[0]
    uses = list(acc.uses)
    if len(uses) != 1 or uses[0].owner.name != SCF.YIELD or uses[0].owner.operation.block != body:
        return
    index = uses[0].operand_number
    res = loop.results[index]
    i32 = ir.IntegerType.get_signless(32)
    if sum(1 for o in body.operations if o.operation.name == TTNG.WARP_GROUP_DOT) == 1:
        wait.attributes["pendings"] = ir.IntegerAttr.get(i32, 1)
    elif not _tie_to_next_wait(wait, body.arguments[1 + index]):
        return
    with ir.InsertionPoint.after(loop):
        done = create(TTNG.WARP_GROUP_DOT_WAIT, results=[res.type], operands=[res],
                                   attrs={"pendings": ir.IntegerAttr.get(i32, 0)}, loc=loop.location)
    res.replace_all_uses_except(done.results[0], done)


def _tie_to_next_wait(wait, arg) -> bool:
    """Drop `wait` (its group stays in flight) and add the carried accumulator `arg` to the
    body's first full warp_group_dot_wait that precedes every use of `arg`; False (nothing
    changed) when there is none."""
    body = arg.owner
    ops = [o.operation for o in body.operations]
    pos = {o: k for k, o in enumerate(ops)}

    def top(op):  # the op of `body` that holds op
        while op.block != body:
            op = op.parent
        return op

    first_use = min(pos[top(u.owner.operation)] for u in arg.uses)
    target = next((o for o in ops[:first_use] if o.name == TTNG.WARP_GROUP_DOT_WAIT and o != wait.operation
                   and mu.int_attr(o.attributes["pendings"]) == 0), None)
    if target is None:
        return False
    with ir.InsertionPoint(target):
        new = create(TTNG.WARP_GROUP_DOT_WAIT, results=[r.type for r in target.results] + [arg.type],
                                  operands=list(target.operands) + [arg],
                                  attrs={"pendings": target.attributes["pendings"]}, loc=target.location)
    for old, r in zip(target.results, new.results):
        old.replace_all_uses_with(r)
    arg.replace_all_uses_except(new.results[len(target.results)], new)
    target.erase()
    for r, v in zip(list(wait.results), list(wait.operands)):
        r.replace_all_uses_with(v)
    wait.operation.erase()
    return True


def retarget(old, new) -> None:
    """Every use of memdesc `old` reads `new` instead; a `ttng.warp_group_dot_wait` result
    that passes `old` through takes `new`'s type."""
    for use in list(old.uses):
        owner = use.owner
        owner.operands[use.operand_number] = new
        if owner.name == TTNG.WARP_GROUP_DOT_WAIT:
            owner.results[use.operand_number].set_type(new.type)


def _from_registers(v) -> bool:
    """Whether memdesc v is a `ttg.local_alloc` of a register tensor (written by st.shared)."""
    return isinstance(v, ir.OpResult) and v.owner.name == TTG.LOCAL_ALLOC and len(v.owner.operands) > 0


def erase_fence_after(alloc) -> None:
    """The `ttng.fence_async_shared` accelerate_matmul put right after a register tile's
    local_alloc goes with it (cp.async writes need none: Triton's FenceInsertion)."""
    ops = [o.operation for o in alloc.operation.block.operations]
    i = ops.index(alloc.operation)
    if i + 1 < len(ops) and ops[i + 1].name == TTNG.FENCE_ASYNC_SHARED:
        ops[i + 1].erase()
