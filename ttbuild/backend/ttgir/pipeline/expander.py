"""Pipeliner, loop surgery (Triton's PipelineExpander.cpp): the `scf.for` copied with more or fewer iter_args, ops cloned for peeled iterations.

grow_loop adds iter_args, shrink_loop and drop_dead_args remove them, clone_ops clones ops with
renamed operands.
"""

from __future__ import annotations

from ttbuild.backend import mlir_util as mu
from ttbuild.backend.ir.builders import create
from ttbuild.backend.ir.ops import ARITH, SCF
from ttbuild.backend.ir.optraits import is_pure

ir = mu.ir


def grow_loop(old, body, extra_inits):
    """A copy of scf.for `old` (whose body block is `body`) with `extra_inits` appended to its
    iter_args, the old body moved in; the old loop's results are replaced by the new one's and
    the old loop erased. Returns the new loop."""
    operands = list(old.operands) + extra_inits
    results = [r.type for r in old.results] + [v.type for v in extra_inits]
    with ir.InsertionPoint(old):
        new = create(SCF.FOR, results=results, operands=operands, regions=1, loc=old.location)
    attrs = old.operation.attributes
    for name in [a.name if hasattr(a, "name") else a for a in attrs]:
        new.attributes[name] = attrs[name]
    arg_types = [a.type for a in body.arguments] + [v.type for v in extra_inits]
    blk = ir.Block.create_at_start(new.regions[0], arg_types,
                                   [a.location for a in body.arguments] + [old.location] * len(extra_inits))
    for a_old, a_new in zip(body.arguments, blk.arguments):
        a_old.replace_all_uses_with(a_new)
    for op in list(body.operations):
        move_to_end(blk, op)
    for r_old, r_new in zip(old.results, new.results):
        r_old.replace_all_uses_with(r_new)
    old.operation.erase()
    return new


def drop_dead_args(loop, idxs):
    """Removes the iter_args among `idxs` that nothing needs any more (the original pointer,
    now that the copies read the one carried ahead): unused loop result, and the body only
    updates it by pure ops that feed nothing but its own yield (or those of other such
    iter_args). What remains is Triton's form: the loop carries the advanced pointer only.
    Returns the loop (a new scf.for when some iter_args went)."""
    body = loop.regions[0].blocks[0]
    args = list(body.arguments)
    dead = {j for j in idxs if unused(loop.results[j])}
    while True:
        chains = {j: _chain(args[1 + j], dead) for j in dead}
        still = {j for j in dead if chains[j] is not None}
        if still == dead:
            break
        dead = still
    if not dead:
        return loop
    order = {op.operation: i for i, op in enumerate(body.operations)}
    ops = {o.operation: o for j in dead for o in chains[j]}
    yield_op = list(body.operations)[-1]
    keep = [j for j in range(len(args) - 1) if j not in dead]
    ylds = list(yield_op.operands)
    create(SCF.YIELD, results=[], operands=[ylds[j] for j in keep],
                        loc=yield_op.location, ip=ir.InsertionPoint(yield_op))
    yield_op.erase()
    for key in sorted(ops, key=lambda k: -order[k]):
        ops[key].operation.erase()
    return shrink_loop(loop, keep)


def shrink_loop(old, keep):
    """A copy of scf.for `old` with only the iter_args `keep` (their indices; the others must be
    unused), the body moved in; `old` is erased."""
    body = old.regions[0].blocks[0]
    operands = list(old.operands)
    with ir.InsertionPoint(old):
        new = create(SCF.FOR, results=[old.results[j].type for j in keep],
                                  operands=operands[:3] + [operands[3 + j] for j in keep],
                                  regions=1, loc=old.location)
    attrs = old.operation.attributes
    for name in [a.name if hasattr(a, "name") else a for a in attrs]:
        new.attributes[name] = attrs[name]
    args = list(body.arguments)
    kept = [args[0]] + [args[1 + j] for j in keep]
    blk = ir.Block.create_at_start(new.regions[0], [a.type for a in kept], [a.location for a in kept])
    for a_old, a_new in zip(kept, blk.arguments):
        a_old.replace_all_uses_with(a_new)
    for op in list(body.operations):
        move_to_end(blk, op)
    for i, j in enumerate(keep):
        old.results[j].replace_all_uses_with(new.results[i])
    old.operation.erase()
    return new


def clone_ops(ops, m):
    """Clones of `ops` at the current insertion point, operands renamed through `m` (which
    receives the clones' results)."""
    for op in ops:
        c = op.operation.clone()
        for i, x in enumerate(op.operands):
            if x in m:
                c.operands[i] = m[x]
        for r_old, r_new in zip(op.results, c.results):
            m[r_old] = r_new


def _chain(arg, dead) -> list | None:
    """The ops reached from block argument `arg` through uses, when all are pure and end only in
    the scf.yield at the positions of iter_args in `dead`; None otherwise."""
    seen, out, todo = set(), [], [arg]
    while todo:
        v = todo.pop()
        for use in v.uses:
            op = use.owner
            if op.name == SCF.YIELD:
                if use.operand_number not in dead:
                    return None
                continue
            if not _pure(op):
                return None
            if op in seen:
                continue
            seen.add(op)
            out.append(op)
            todo.extend(op.results)
    return out


def move_to_end(block, op):
    """Move `op` to the end of `block`."""
    ops = list(block.operations)
    if ops:
        op.operation.move_after(ops[-1])
    else:
        # An empty block: insert through an insertion point at its end.
        op.operation.detach_from_parent()
        ir.InsertionPoint(block).insert(op.operation)


def unused(v) -> bool:
    """Whether value v has no use."""
    return next(iter(v.uses), None) is None


def _pure(op) -> bool:
    """Pure and without regions: an op that may go when its results do."""
    return is_pure(op.operation.name) and not len(op.regions)


def const_int(v):
    """The value of an integer `arith.constant` v, else None."""
    if isinstance(v, ir.OpResult) and v.owner.name == ARITH.CONSTANT:
        a = v.owner.attributes["value"]
        if isinstance(a, ir.IntegerAttr):
            return a.value
    return None
